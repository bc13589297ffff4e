"""The ``facesegment`` command line: ``get_parser()`` and ``main(argv)``."""

import argparse
import contextlib
import importlib
import os
import signal
import sys
import threading

from . import __version__
from .atomic import overwriting
from .commands import COMMANDS
from .errors import (FaceSegmentError, Terminated, forget_swallowed_terminated,
                     terminated_was_swallowed)
from .limits import max_image_pixels

#: Exit statuses of every command (also in ``facesegment --help``).
EXIT_OK, EXIT_SKIPPED, EXIT_ERROR = 0, 1, 2
EXIT_INTERRUPTED = 130   # Ctrl-C (SIGINT): 128 + 2
EXIT_PIPE = 141          # stdout closed early (`... | head -1`): 128 + SIGPIPE (13)
EXIT_TERMINATED = 143    # SIGTERM (e.g. a job scheduler's time limit): 128 + 15

EXIT_STATUS_HELP = """\
exit status:
  0    done
  1    done, but some inputs were skipped (each one is named on stderr)
  2    error: one line `facesegment: error: ...` naming the file and the fix
  130  interrupted by Ctrl-C (SIGINT)
  141  the output pipe was closed early (e.g. `facesegment ... | head -1`)
  143  terminated by SIGTERM (e.g. a job scheduler)
On 130 and 143 finished outputs are kept and partial ones removed, as on errors.
"""


def _command_modules(command=None):
    """``{name: module}`` of the subcommands (``command``: that one only)."""
    mods = {}
    for name in COMMANDS:
        if command is None or name == command:
            # lazy: CLI start-up, a command's module imports the library it runs
            mods[name] = importlib.import_module(f"facesegment.commands.{name}")
    return mods


def _command_of(argv):
    """The subcommand ``argv`` runs when it is its first word, else None (no command,
    or options first: the whole parser is needed, e.g. for ``--help``)."""
    words = sys.argv[1:] if argv is None else list(argv)
    return words[0] if words and words[0] in COMMANDS else None


def get_parser(command=None):
    """Build the argument parser, with one sub-parser per subcommand.

    Parameters
    ----------
    command : str, optional
        Build the arguments of this subcommand only (importing only its module);
        the others are named without arguments.  None: every subcommand's
        arguments (e.g. for ``--help``).

    Returns
    -------
    argparse.ArgumentParser
        The ``facesegment`` parser; each sub-parser built in full sets ``_run``
        to its command's ``run`` function.
    """
    parser = argparse.ArgumentParser(
        prog="facesegment",
        description=(
            "Segment faces into 8 parts (background, lower face, nose, mouth, "
            "left/right eye, left/right eyebrow) with decision forests over the "
            "window around each pixel (31x31 RGB by default): axis-aligned, two-probe, "
            "CO2 (oblique), extra-trees, ferns and rotation forests. "
            "Typical flow: data -> label -> extract -> train -> evaluate -> "
            "segment / figures."
        ),
        epilog=EXIT_STATUS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"facesegment {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    mods = _command_modules(command)
    for name in COMMANDS:
        if name not in mods:
            sub.add_parser(name)
            continue
        mod = mods[name]
        p = sub.add_parser(
            name, help=mod.HELP, description=getattr(mod, "DESCRIPTION", mod.HELP),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv=None):
    """Run the CLI; return the exit status (see ``EXIT_STATUS_HELP``).

    User mistakes are raised as :class:`FaceSegmentError` where they are found
    and printed as one line (status 2).  As a safety net, an ``OSError`` about
    a named file (permissions, missing folder, full disk) is printed as one
    line too; any other exception is a bug and keeps its traceback.  SIGTERM
    raises :class:`~facesegment.errors.Terminated` (a ``KeyboardInterrupt``) in
    the main thread, so it unwinds like Ctrl-C (status 143 instead of 130).  A
    closed standard output (``| head``) ends the command quietly (status 141),
    as Python's documentation on SIGPIPE recommends.

    Parameters
    ----------
    argv : list of str, optional
        The arguments, without the program name.  None: ``sys.argv[1:]``, and the
        run is the program's own (after a signal, further SIGINT/SIGTERM are
        ignored until exit).

    Returns
    -------
    int
        The exit status: 0 done, 1 some inputs skipped, 2 error (or no command
        given), 130 interrupted, 141 output pipe closed, 143 terminated.
        ``--help``, ``--version`` and usage errors raise ``SystemExit`` (argparse).
    """
    _print_any_file_name()
    with sigterm_raises():
        try:
            try:
                status = _run(argv)
            finally:
                sys.stdout.flush()  # a closed pipe shows up here, not at exit
            return status
        except BrokenPipeError as exc:
            if exc.filename is not None:  # a file, not our standard output
                print(f"facesegment: error: {exc.filename}: {exc.strerror or exc}",
                      file=sys.stderr)
                return EXIT_ERROR
            _silence_stdout()
            return EXIT_PIPE
        except Terminated:
            _ending(argv)
            print("facesegment: terminated (SIGTERM); finished outputs were kept, partial "
                  "ones removed", file=sys.stderr)
            return EXIT_TERMINATED
        except KeyboardInterrupt:
            _ending(argv)
            print("facesegment: interrupted; finished outputs were kept, partial ones removed",
                  file=sys.stderr)
            return EXIT_INTERRUPTED


def _ending(argv):
    """The program is ending on a signal: further SIGINT/SIGTERM (a job scheduler's
    repeated signals, an impatient Ctrl-C) are ignored from now on, so that none
    lands in the final message or the interpreter's exit as a traceback.  Only
    when run as the program (``argv`` None, the console script and ``python -m``);
    a caller of ``main(argv)`` keeps its handlers."""
    if argv is not None or threading.current_thread() is not threading.main_thread():
        return
    for signum in (signal.SIGINT, signal.SIGTERM):
        try:
            signal.signal(signum, signal.SIG_IGN)
        except (ValueError, OSError):  # pragma: no cover
            pass


def _run(argv):
    parser = get_parser(_command_of(argv))
    args = parser.parse_args(argv)  # SystemExit for --help, --version and usage errors
    if not getattr(args, "_run", None):
        parser.print_help()
        return EXIT_ERROR

    try:
        max_image_pixels()  # a bad setting is one error line before any work
        with overwriting(bool(getattr(args, "overwrite", False))):
            return int(args._run(args) or 0)
    except FaceSegmentError as exc:
        # one line, whatever a library put in the message (HDF5's have newlines)
        print(f"facesegment: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:
        raise
    except OSError as exc:
        if exc.filename is None:
            raise
        print(f"facesegment: error: {exc.filename}: {exc.strerror or exc} (check the path, "
              "its permissions and the free disk space)", file=sys.stderr)
        return EXIT_ERROR


@contextlib.contextmanager
def sigterm_raises():
    """While the command runs, SIGTERM raises :class:`Terminated` in the main
    thread (once: a repeated SIGTERM during the clean-up is ignored).  The
    previous handler is restored afterwards.  Outside the main thread (an
    embedding application) nothing is changed.

    A signal that arrives while a destructor or a weakref callback runs raises
    there, where Python cannot propagate it (it would print it and go on): the
    ``sys.unraisablehook`` installed meanwhile records it instead
    (:func:`facesegment.errors.terminated_was_swallowed`), and the run's next
    progress update raises it again."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    state = {"raised": False}

    def handler(signum, frame):
        """Raise :class:`Terminated` on the first SIGTERM; ignore later ones.

        Parameters
        ----------
        signum : int
            The signal number (SIGTERM).
        frame : frame or None
            The interrupted stack frame (unused).

        Raises
        ------
        Terminated
            On the first call.
        """
        if state["raised"]:
            return
        state["raised"] = True
        raise Terminated()

    def unraisable(info):
        """Record a swallowed :class:`Terminated`; anything else as before.

        Parameters
        ----------
        info : object
            ``sys.unraisablehook``'s argument (``exc_value`` is the exception).
        """
        if isinstance(info.exc_value, Terminated):
            terminated_was_swallowed()
        else:
            previous_hook(info)

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except (ValueError, OSError):  # pragma: no cover - no signals here
        yield
        return
    previous_hook, sys.unraisablehook = sys.unraisablehook, unraisable
    try:
        yield
    finally:
        sys.unraisablehook = previous_hook
        forget_swallowed_terminated()
        if signal.getsignal(signal.SIGTERM) is handler:  # not if _ending ignored it
            signal.signal(signal.SIGTERM, previous)


def _print_any_file_name():
    """Let standard output print any file name the OS allows (a name that is not
    UTF-8 prints as its own bytes, as `ls` does) instead of failing on it."""
    try:
        if getattr(sys.stdout, "errors", None) == "strict":
            sys.stdout.reconfigure(errors="surrogateescape")
    except (AttributeError, ValueError, OSError):  # a stream that cannot be reconfigured
        pass


def _silence_stdout():
    """Point standard output (and error: it may be the same closed pipe, as in
    ``2>&1 | head``) at /dev/null so that the interpreter's final flush does not
    fail again (Python docs, "Note on SIGPIPE")."""
    for stream in (sys.stdout, sys.stderr):
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, stream.fileno())
            os.close(devnull)
        except (OSError, ValueError, AttributeError):  # a stream without a file descriptor
            pass


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
