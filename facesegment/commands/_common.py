"""Argument helpers shared by the subcommands."""

import argparse


def positive_int(text):
    """argparse type: a positive integer (``_`` and ``,`` separators allowed)."""
    try:
        v = int(text.replace("_", "").replace(",", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return v


def add_parallel_arguments(p, workers_help="local worker threads (default: all cores)",
                           quiet_help="no progress line"):
    """Add ``--workers N``, ``--scheduler ADDRESS`` and ``--quiet/-q``."""
    p.add_argument("--workers", type=positive_int, default=None, metavar="N", help=workers_help)
    p.add_argument("--scheduler", metavar="ADDRESS", default=None,
                   help="address of a Dask distributed scheduler (e.g. tcp://host:8786); "
                        "default: local threads")
    p.add_argument("--quiet", "-q", action="store_true", help=quiet_help)


def add_test_face_arguments(p, model_help, split_help, seed_help):
    """Add ``--model M...``, ``--data DIR``, ``--labels DIR``, ``--split``, ``--seed``.

    The options that name the models and the labelled test faces (resolved by
    ``facesegment.commands.evaluate.test_records``) for `evaluate` and `figures`.
    """
    p.add_argument("--model", "-m", nargs="+", required=True, metavar="MODEL", help=model_help)
    p.add_argument("--data", "-d", required=True, metavar="DIR",
                   help="dataset folder (with test/) or a folder of labelled faces")
    p.add_argument("--labels", metavar="DIR", default=None,
                   help="parallel tree of NAME_label.png (default: beside the images)")
    p.add_argument("--split", choices=("auto", "test", "all"), default="auto", help=split_help)
    p.add_argument("--seed", type=int, default=0, help=seed_help)
