"""Errors that the command line reports as one readable line."""


class FaceSegmentError(Exception):
    """Base class for problems with the user's input or environment.

    The CLI prints ``facesegment: error: <message>`` and exits non-zero.  The
    message names the file (or parameter), what is wrong, and what to do.
    """


class DataError(FaceSegmentError, ValueError):
    """An input file (image, label map, landmarks, windows file, model) is bad."""

    def __init__(self, path, problem, fix=None):
        self.path = str(path) if path is not None else None
        self.problem = problem
        self.fix = fix
        where = f"{self.path}: " if self.path else ""
        tail = f" ({fix})" if fix else ""
        super().__init__(f"{where}{problem}{tail}")


class DownloadError(FaceSegmentError, OSError):
    """A download failed, could not start (offline), or had the wrong checksum."""
