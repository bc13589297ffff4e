"""Execute the walkthrough notebook and save it with its outputs.

``python -m pipelines.notebook [--run RUN] [--model DIR] [--test DIR]``
(``make notebook``) runs notebooks/walkthrough.ipynb top to bottom with the
kernel of the current interpreter and writes the outputs into the file.
Settings reach the notebook as environment variables (FACESEGMENT_MODEL,
FACESEGMENT_TEST, FACESEGMENT_RUN, FACESEGMENT_N_FACES).
"""

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "walkthrough.ipynb"


def execute_notebook(src=NOTEBOOK, dst=None, env=None, timeout=600, cwd=None):
    """Run ``src`` in a fresh ``python3`` kernel (this interpreter's ipykernel)
    with ``env`` added to the environment, in the folder ``cwd`` (default: the
    notebook's); write the result to ``dst`` (atomically) when given; return
    the executed notebook."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(src, as_version=4)
    old = {k: os.environ.get(k) for k in (env or {})}
    os.environ.update({k: str(v) for k, v in (env or {}).items()})
    try:
        client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                                resources={"metadata": {"path": str(cwd or Path(src).parent)}})
        client.execute()
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    if dst is not None:
        tmp = f"{dst}.tmp{os.getpid()}"
        nbformat.write(nb, tmp)
        os.replace(tmp, dst)
    return nb


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m pipelines.notebook",
                                description="Execute notebooks/walkthrough.ipynb and save "
                                            "its outputs in place.")
    p.add_argument("--run", default="faces300w-default",
                   help="run folder under reports/runs/ whose results and figures are shown "
                        "(default: %(default)s)")
    p.add_argument("--model", default=None,
                   help="model folder or shipped model name (default: the shipped model)")
    p.add_argument("--test", default="../shared/data/faces300w/test",
                   help="folder of labelled test faces (default: %(default)s)")
    p.add_argument("--faces", type=int, default=4, help="faces to segment (default: 4)")
    args = p.parse_args(argv)
    from facesegment.api import load_model
    from facesegment.errors import DataError

    try:
        load_model(args.model)
    except DataError as exc:
        print(f"notebook: error: {exc}", file=sys.stderr)
        return 2
    model = args.model if args.model is None or not Path(args.model).exists() \
        else Path(args.model).resolve()
    env = {"FACESEGMENT_MODEL": model or "", "FACESEGMENT_ROOT": ROOT,
           "FACESEGMENT_TEST": Path(args.test).resolve(),
           "FACESEGMENT_RUN": (ROOT / "reports" / "runs" / args.run).resolve(),
           "FACESEGMENT_N_FACES": args.faces}
    execute_notebook(NOTEBOOK, NOTEBOOK, env)
    print(f"notebook: executed and saved {NOTEBOOK}", file=sys.stderr)
    return 0


if __name__ == "__main__":  # pragma: no cover
    from facesegment.atomic import overwriting

    with overwriting():   # the repository\'s own reports and models are regenerated
        sys.exit(main())
