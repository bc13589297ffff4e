"""The ``facesegment`` command line: ``get_parser()`` and ``main(argv)``."""

import argparse
import importlib
import sys

from . import __version__
from .commands import COMMANDS
from .errors import FaceSegmentError


def _command_modules():
    mods = {}
    for name in COMMANDS:
        mods[name] = importlib.import_module(f"facesegment.commands.{name}")
    return mods


def get_parser():
    """Build the argument parser with one sub-parser per subcommand."""
    parser = argparse.ArgumentParser(
        prog="facesegment",
        description=(
            "Segment faces into 8 parts (background, lower face, nose, mouth, "
            "left/right eye, left/right eyebrow) with decision forests over 31x31 "
            "RGB windows: axis-aligned, two-probe and CO2 (oblique) forests. "
            "Typical flow: data -> label -> extract -> train -> evaluate -> "
            "segment / figures."
        ),
    )
    parser.add_argument("--version", action="version", version=f"facesegment {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, mod in _command_modules().items():
        p = sub.add_parser(
            name, help=mod.HELP, description=getattr(mod, "DESCRIPTION", mod.HELP),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv=None):
    """Run the CLI; return the exit status (0 ok, 1 some inputs skipped, 2 error).

    User mistakes are raised as :class:`FaceSegmentError` where they are found
    and printed as one line.  As a safety net, an ``OSError`` about a named
    file (permissions, missing folder, full disk) is printed as one line too;
    any other exception is a bug and keeps its traceback.
    """
    parser = get_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    try:
        return int(args._run(args) or 0)
    except FaceSegmentError as exc:
        print(f"facesegment: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        if exc.filename is None:
            raise
        print(f"facesegment: error: {exc.filename}: {exc.strerror or exc} (check the path, "
              "its permissions and the free disk space)", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("facesegment: interrupted; finished outputs were kept, partial ones removed",
              file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
