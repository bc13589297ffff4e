"""Re-score one kind's rows of a finished run's model selection with today's code.

The selection stage (``pipelines/selection.py``) trains each candidate setting
and scores it by dense inference on the validation images.  After a change of
the dense-inference kernels that may round differently (e.g. the pooled
level kernels, ``facesegment/dense/_pooled_oblique.py``), this script redoes those rows
for one kind -- same seed, windows, settings and images -- and compares the
validation Jaccards with the run's ``selection.json``, so one can tell whether
a fresh ``make all`` still reproduces the selection without rerunning it all.

    python -m studies.pooled_selection_check [--run faces300w-default] [--kind co2-pooled]
"""

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from pipelines import backend, scoring, selection
from pipelines.common import validation_records
from pipelines.stages import Context


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run", default="faces300w-default")
    p.add_argument("--kind", default="co2-pooled")
    args = p.parse_args(argv)
    rdir = ROOT / "reports" / "runs" / args.run
    cfg = json.loads((rdir / "config.json").read_text())
    cfg.setdefault("_preset", args.run.rsplit("-", 1)[1])   # run = NAME-PRESET
    ctx = Context(cfg, root=ROOT)
    old = json.loads((rdir / "selection.json").read_text())
    ws, val = ctx.windows_set(), validation_records(ctx)
    n, seed, same = old["n_trees"], cfg["run"]["seed"], True
    for row in [r for r in old["settings"] if r["kind"] == args.kind]:
        setting = row["setting"]
        params = selection.selection_params(cfg, args.kind, setting, len(ws.y), ws.meta.layout)
        est = backend.make_estimator(args.kind, params, n, seed, None, None)
        layout = selection.kind_layout(cfg, args.kind, setting, ws.meta.layout)
        backend.fit(est, ws, layout)
        model = backend.to_model(est, args.kind, ws.meta, {"purpose": "selection"}, layout)
        res = scoring.score_model(model, val, [n], old["alphas"], mode=cfg["evaluate"]["mode"],
                                  pixel_stride=old["pixel_stride"])
        new = {k: v["mean_jaccard"] for k, v in res["trees"][str(n)]["alpha"].items()}
        diff = max(abs(new[k] - row["jaccard_by_alpha"][k]) for k in new)
        same &= diff == 0
        print(f"{args.kind} {setting}: largest change of a validation Jaccard {diff:.2e}",
              flush=True)
    print("identical" if same else "DIFFERENT")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
