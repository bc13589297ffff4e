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
