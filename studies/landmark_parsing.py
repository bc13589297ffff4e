"""Landmark-aware face parsing on faces300w: the renderer, the shape prior and
forests that use them, chosen on the validation images, scored on the test crops.

Methods (every one scored with ``facesegment evaluate``'s protocol: strict
mode, every pixel, one confusion matrix over the images):

* renderer: dlib's 68 predicted landmarks drawn as the label polygons
  (``facesegment evaluate --method landmarks``), and the same one-hot maps
  blurred with a Gaussian before the argmax (sigma chosen on validation);
* shape prior alone: ``argmax_c shape_c * pi_c**-g`` (facesegment.faces.shape_prior,
  fitted on the training split's label maps through their predicted landmarks);
* forest alone: ``p * s**-alpha`` of a trained model (``--model``);
* forest x shape prior: ``p * s**-alpha * (shape / pi)**gamma``;
* forest x smoothed renderer: ``p * s**-alpha * (blur(rendered) + eps)**gamma``;
* tempered forest x shape prior: ``(p * s**-alpha)**tau * shape`` (the forest's
  maps flattened by ``tau`` < 1, the prior's frequencies as they are);
* tempered forest x renderer: ``(p * s**-alpha)**tau * (blur(rendered) + eps)``.

A face without predicted landmarks takes the landmark-free path: the forest
alone (renderer and prior alone: all background).  Settings are chosen on the
pipeline's validation split of the training crops (``facesegment.data.splits``,
seed 0, 100 images), then the test crops are scored once.

Caches (ignored folder ``data/landmarks/``): predicted landmarks, the shape
prior, the forest's raw probabilities.

    python -m studies.landmark_parsing --model models/lm-tp16 --out reports/landmarks
"""

import argparse
import json
import os
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from facesegment.atomic import write_json_atomic, write_text_atomic
from facesegment.classes import CLASS_NAMES, N_CLASSES
from facesegment.dense import predict_image, smooth
from facesegment.evaluation.scoring import scored_label
from facesegment.data.imageio import read_image, read_label
from facesegment.layout import DEFAULT_LAYOUT
from facesegment.evaluation.metrics import confusion_matrix, summarize
from facesegment.models import load_model
from facesegment.progress import Progress
from facesegment.faces.renderer import landmark_table, render_proba
from facesegment.faces import shape_prior as sp
from facesegment.data.splits import split_dataset

DATA = os.path.join(ROOT, "..", "shared", "data", "faces300w")
CACHE = os.path.join(ROOT, "data", "landmarks")
ALPHAS = [0.5, 0.75, 1.0]
GAMMAS = [0.25, 0.5, 1.0, 2.0, 4.0]
PRIOR_G = [-0.2, 0.0, 0.2]
RENDER_SIGMAS = [1.0, 2.0, 4.0]
TAUS = [0.05, 0.1, 0.2, 0.35]
EPS = 0.02


def forest_proba(model, records, name):
    """Raw forest probabilities (alpha 0, full mode) of ``records``, cached."""
    path = os.path.join(CACHE, f"proba-{name}.npz")
    key = json.dumps([os.path.abspath(r.image) for r in records]
                     + [model.arrays.n_nodes, model.kind])
    if os.path.isfile(path):
        with np.load(path, allow_pickle=False) as z:
            if str(z["key"]) == key:
                return z["proba"]
    out = np.empty((len(records), 250, 250, N_CLASSES), np.float16)
    with Progress(len(records), f"forest {name}", "images") as bar:
        for i, r in enumerate(records):
            out[i] = predict_image(model, read_image(r.image), mode="full", alpha=0.0)[0]
            bar.update(1)
    np.savez(path, proba=out, key=key)
    return out


def _summary(total):
    s = summarize(total, CLASS_NAMES)
    return {"mean_jaccard": round(s["class_average_jaccard"], 2),
            "jaccard": [round(v, 1) for v in s["jaccard"].values()]}


def _argmax(logs):
    return np.argmax(logs, axis=-1).astype(np.uint8)


def methods(settings=None):
    """The (method name, parameters) scored: every grid point (``settings`` None,
    validation) or the settings chosen on validation (test)."""
    if settings is not None:
        c = settings
        return [("renderer", {}),
                (f"renderer smoothed, sigma={c['render_sigma']:g}", {"sigma": c["render_sigma"]}),
                (f"shape prior alone, g={c['prior_g']:g}", {"g": c["prior_g"]}),
                (f"forest alone, alpha={c['alpha']:g}", {"alpha": c["alpha"]}),
                (f"forest x shape prior, alpha={c['fp_alpha']:g}, gamma={c['fp_gamma']:g}",
                 {"alpha": c["fp_alpha"], "gamma": c["fp_gamma"]}),
                (f"forest x smoothed renderer, sigma={c['rf_sigma']:g}, alpha={c['rf_alpha']:g}, "
                 f"gamma={c['rf_gamma']:g}", {"sigma": c["rf_sigma"], "alpha": c["rf_alpha"],
                                               "gamma": c["rf_gamma"]}),
                (f"tempered forest x shape prior, alpha={c['tp_alpha']:g}, tau={c['tp_tau']:g}",
                 {"alpha": c["tp_alpha"], "tau": c["tp_tau"]}),
                (f"tempered forest x renderer, sigma={c['tr_sigma']:g}, alpha={c['tr_alpha']:g}, "
                 f"tau={c['tr_tau']:g}", {"sigma": c["tr_sigma"], "alpha": c["tr_alpha"],
                                         "tau": c["tr_tau"]})]
    out = [("renderer", {})]
    out += [(f"renderer smoothed, sigma={sg:g}", {"sigma": sg}) for sg in RENDER_SIGMAS]
    out += [(f"shape prior alone, g={g:g}", {"g": g}) for g in PRIOR_G]
    out += [(f"forest alone, alpha={a:g}", {"alpha": a}) for a in ALPHAS]
    out += [(f"forest x shape prior, alpha={a:g}, gamma={gm:g}", {"alpha": a, "gamma": gm})
            for a in ALPHAS for gm in GAMMAS]
    out += [(f"forest x smoothed renderer, sigma={sg:g}, alpha={a:g}, gamma={gm:g}",
             {"sigma": sg, "alpha": a, "gamma": gm})
            for sg in RENDER_SIGMAS for a in ALPHAS for gm in GAMMAS]
    out += [(f"tempered forest x shape prior, alpha={a:g}, tau={t:g}", {"alpha": a, "tau": t})
            for a in ALPHAS for t in TAUS]
    out += [(f"tempered forest x renderer, sigma={sg:g}, alpha={a:g}, tau={t:g}",
             {"sigma": sg, "alpha": a, "tau": t})
            for sg in RENDER_SIGMAS[:2] for a in ALPHAS for t in TAUS]
    return out


def study_split(records, table, prior, proba, s, settings=None, desc="score"):
    """Scores of every method on ``records`` (one pass over the images; every
    decision is an argmax of summed logarithms: ``log p - alpha log s + gamma
    log f``, the same argmax as the renormalised products)."""
    todo = methods(settings)
    totals = {name: np.zeros((N_CLASSES, N_CLASSES), np.int64) for name, _ in todo}
    logs_s = np.log(np.asarray(s, np.float32))
    logpi = np.log(prior.class_prior).astype(np.float32)
    with Progress(len(records), desc, "images") as bar:
        for i, r in enumerate(records):
            truth = scored_label(read_label(r.label), 1, "strict", DEFAULT_LAYOUT)
            pts = table.get(r.name)
            rend = render_proba(pts, (250, 250))
            logp = np.log(np.maximum(proba[i].astype(np.float32), 1e-30))
            shape = None if pts is None else np.log(np.maximum(
                sp.shape_maps(prior, pts, (250, 250)), 1e-30))
            soft = {}
            for name, k in todo:
                if name == "renderer":
                    pred = _argmax(rend)
                elif name.startswith("renderer smoothed"):
                    pred = _argmax(smooth(rend, k["sigma"]))
                elif name.startswith("shape prior alone"):
                    pred = np.zeros((250, 250), np.uint8) if shape is None else \
                        _argmax(shape - k["g"] * logpi)
                else:
                    base = logp - k["alpha"] * logs_s
                    if name.startswith("forest alone") or pts is None:   # landmark-free
                        pred = _argmax(base)
                    elif name.startswith("tempered forest x shape prior"):
                        pred = _argmax(k["tau"] * base + shape)
                    elif name.startswith("tempered forest x renderer"):
                        if k["sigma"] not in soft:
                            soft[k["sigma"]] = np.log(smooth(rend, k["sigma"]) + EPS)
                        pred = _argmax(k["tau"] * base + soft[k["sigma"]])
                    elif name.startswith("forest x shape prior"):
                        pred = _argmax(base + k["gamma"] * (shape - logpi))
                    else:
                        if k["sigma"] not in soft:
                            soft[k["sigma"]] = np.log(smooth(rend, k["sigma"]) + EPS)
                        pred = _argmax(base + k["gamma"] * soft[k["sigma"]])
                totals[name] += confusion_matrix(truth, pred, N_CLASSES)
            bar.update(1)
    return {name: _summary(t) for name, t in totals.items()}


def best(scores, prefix):
    keys = [k for k in scores if k.startswith(prefix)]
    return max(keys, key=lambda k: scores[k]["mean_jaccard"])


def params_of(key):
    return {kv.split("=")[0].strip(): float(kv.split("=")[1]) for kv in key.split(", ")[1:]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="a trained forest (facesegment train)")
    ap.add_argument("--data", default=DATA)
    ap.add_argument("--out", default=os.path.join(ROOT, "reports", "landmarks"))
    args = ap.parse_args(argv)
    t0 = time.time()
    splits = split_dataset(args.data, seed=0, n_validation=100)
    os.makedirs(CACHE, exist_ok=True)
    train_tab = landmark_table(splits.train_all, os.path.join(CACHE, "faces300w-train.npz"))
    test_tab = landmark_table(splits.test, os.path.join(CACHE, "faces300w-test.npz"))
    prior_path = os.path.join(CACHE, "shape-prior-train.npz")
    if os.path.isfile(prior_path):
        with np.load(prior_path, allow_pickle=False) as z:
            prior = sp.from_arrays(dict(z))
    else:
        prior = sp.fit_shape_prior([read_label(r.label) for r in splits.train],
                                   [train_tab.get(r.name) for r in splits.train], N_CLASSES,
                                   progress=True)
        np.savez(prior_path, **sp.save_arrays(prior))
    model = load_model(args.model)
    s = model.sampling_factors
    val = splits.validation
    val_scores = study_split(val, train_tab, prior, forest_proba(model, val, "validation"), s,
                             desc="validation")
    chosen = {}
    k = best(val_scores, "renderer smoothed")
    chosen["render_sigma"] = params_of(k)["sigma"]
    chosen["prior_g"] = params_of(best(val_scores, "shape prior alone"))["g"]
    chosen["alpha"] = params_of(best(val_scores, "forest alone"))["alpha"]
    p = params_of(best(val_scores, "forest x shape prior"))
    chosen["fp_alpha"], chosen["fp_gamma"] = p["alpha"], p["gamma"]
    p = params_of(best(val_scores, "forest x smoothed renderer"))
    chosen["rf_sigma"], chosen["rf_alpha"], chosen["rf_gamma"] = p["sigma"], p["alpha"], p["gamma"]
    p = params_of(best(val_scores, "tempered forest x shape prior"))
    chosen["tp_alpha"], chosen["tp_tau"] = p["alpha"], p["tau"]
    p = params_of(best(val_scores, "tempered forest x renderer"))
    chosen["tr_sigma"], chosen["tr_alpha"], chosen["tr_tau"] = p["sigma"], p["alpha"], p["tau"]
    test = splits.test
    test_scores = study_split(test, test_tab, prior, forest_proba(model, test, "test"), s,
                              chosen, desc="test")
    res = {"model": os.path.relpath(os.path.abspath(args.model), ROOT), "chosen": chosen,
           "validation": val_scores, "test": test_scores, "n_validation": len(val),
           "n_test": len(test), "landmarks_found": {"validation": sum(
               train_tab.get(r.name) is not None for r in val), "test": test_tab.found()},
           "shape_prior": prior.describe(), "seconds": round(time.time() - t0, 1)}
    os.makedirs(args.out, exist_ok=True)
    write_json_atomic(os.path.join(args.out, "study.json"), res, indent=1)
    lines = ["| method (settings chosen on validation) | validation | test | "
             + " | ".join(CLASS_NAMES) + " |", "|---|---:|---:|" + "---:|" * N_CLASSES]
    for key, v in test_scores.items():
        vv = val_scores.get(key, {}).get("mean_jaccard", "")
        lines.append(f"| {key} | {vv} | {v['mean_jaccard']} | "
                     + " | ".join(f"{x}" for x in v["jaccard"]) + " |")
    text = "\n".join(lines) + "\n"
    write_text_atomic(os.path.join(args.out, "study.md"), text)
    print(text)


if __name__ == "__main__":
    main()
