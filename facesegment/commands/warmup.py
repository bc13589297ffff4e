"""``facesegment warmup``: compile and cache the kernels ``segment`` uses, ahead of time."""

from .. import _jit, warmup
from ..warmup import default_steps, model_step
from ._common import load_image_model

HELP = "compile and cache the dense-inference kernels ahead of the first `segment`"
DESCRIPTION = """\
Compile the Numba kernels that `facesegment segment` (and `evaluate`,
`figures`) use, and keep them in Numba's disk cache, so that the first
segment of a fresh install starts at once instead of compiling for a few
seconds. Without --model: one small forest of every kernel family on the
paper's 31x31 RGB layout (axis-aligned and two-probe forests, float32 CO2
rows, sparse rows, the pooled layout's int8/int16/float32 rows). With
--model: exactly what segmenting with those models runs (any layout,
cascades included). Progress: steps done/total, elapsed, ETA.

The cache lives beside the package's sources (in Numba's user cache folder,
~/.cache/numba, when they are read-only; under NUMBA_CACHE_DIR when set); every kernel's name carries a digest of the package's sources, so an
edited or upgraded package compiles anew instead of using an older kernel.
--prune also deletes the cache files of other source versions from the
package's folders (never done at import). Run it once per install and per
CPU type (a cache compiled on one CPU is not used on another); Dask workers
sharing the install's disk then load the kernels instead of compiling them.

examples:
  facesegment warmup
  facesegment warmup --model models/co2-pooled-32 --prune
"""


def add_arguments(p):
    """Add the options of ``facesegment warmup`` to its sub-parser.

    Parameters
    ----------
    p : argparse.ArgumentParser
        The sub-parser of ``warmup``.
    """
    p.add_argument("--model", "-m", nargs="+", default=(), metavar="MODEL",
                   help="model folders to prepare exactly (default: every kernel family of "
                        "the 31x31 RGB layout)")
    p.add_argument("--prune", action="store_true",
                   help="also delete the package's Numba cache files of other source versions")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress line")


def run(args):
    """Compile (or load from Numba's cache) the kernels ``segment`` uses.

    With ``--model``, one step per model (what segmenting with it runs);
    otherwise one per kernel family.  ``--prune`` then deletes the stale cache
    files (:func:`facesegment._jit.stale_cache_files`).  Prints one summary line.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``facesegment warmup`` (see :func:`add_arguments`).

    Returns
    -------
    int
        The exit status: 0.

    Raises
    ------
    DataError
        When a ``--model`` cannot be loaded or cannot segment images.
    """
    import time

    t0 = time.perf_counter()
    if args.model:
        steps = [model_step(load_image_model(path), label=str(path)) for path in args.model]
    else:
        steps = default_steps()
    done = warmup.warm(steps, progress=not args.quiet)
    pruned = 0
    if args.prune:
        for path in _jit.stale_cache_files():
            try:
                path.unlink()
                pruned += 1
            except FileNotFoundError:   # another process got there first
                pass
    print(f"kernels ready: {len(done)} steps in {time.perf_counter() - t0:.1f} s "
          f"(source tag {_jit.source_tag()})"
          + (f"; deleted {pruned} stale cache files" if args.prune else ""))
    return 0
