"""Optional dependencies, named by the extra that installs them.

``pip install facesegment`` installs what segmenting photos and training and
running the forests need.  Two extras add the rest:

* ``pipeline``: Dask's distributed scheduler (``--scheduler``, the worker
  processes of ``facesegment label``) and matplotlib (``facesegment figures``,
  the research pipeline's figures);
* ``mesh``: what MediaPipe's face mesh imports at run time (the default model
  ``faces-handdrawn``; MediaPipe itself installs with ``--no-deps``, README).

:func:`require` imports a module of an extra or raises one readable line
naming the extra.
"""

import importlib

from .errors import DataError

#: The extra that installs each optional top-level module.
EXTRAS = {"distributed": "pipeline", "matplotlib": "pipeline"}


def available(module):
    """Whether ``module`` can be imported.

    Parameters
    ----------
    module : str
        A top-level module name (one of :data:`EXTRAS`).

    Returns
    -------
    bool
        True when importing it succeeds (it is imported then).
    """
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


def require(module, purpose):
    """``module`` imported, or a DataError: "``module``: is not installed, and
    ``purpose`` needs it (pip install 'facesegment[EXTRA]')".

    Parameters
    ----------
    module : str
        A top-level module named in :data:`EXTRAS`.
    purpose : str
        What needs it, as the user asked for it (e.g. "--scheduler").

    Returns
    -------
    module
    """
    try:
        return importlib.import_module(module)
    except ImportError:
        raise DataError(module, f"is not installed, and {purpose} needs it",
                        f"pip install 'facesegment[{EXTRAS[module]}]'") from None
