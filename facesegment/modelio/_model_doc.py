"""Types and values of a ``model.json`` document, checked before anything uses them.

``model.json`` is untrusted input like ``forest.h5``: every field the loader
or inference reads is checked for its JSON type and range here, so a wrong
type is one :class:`~facesegment.errors.DataError` line naming the file and
the field, never a traceback later.  The format's names and version live here
too, at the bottom of the model format's modules.  Private: used by
:mod:`facesegment.modelio._model_files`, :mod:`facesegment.modelio._model_class`,
:mod:`facesegment.modelio.model` and :mod:`facesegment.autocontext.cascade`.
"""

import json
import math

import numpy as np

from ..bounds import BOUNDS
from ..errors import DataError
from ..forest import registry
from ..limits import MAX_JSON_BYTES, read_regular_file

#: ``model.json``'s ``format``; ``forest.h5``'s ``format`` attribute.
MODEL_FORMAT = "facesegment-model"
FOREST_FORMAT = "facesegment-forest"
#: Version 2 records classes (with dtype), the layout and the package version.
MODEL_FORMAT_VERSION = 2
#: Most classes a model may name (the face models have 8).
MAX_CLASSES = 65536
#: The exponents and scales of ``metrics`` (and ``params``) that inference reads.
NUMBERS = (("metrics", "alpha"), ("metrics", "beta"), ("metrics", "sigma"),
           ("metrics", "alpha_no_prior"), ("params", "alpha"))
#: ``classes_dtype`` kinds a model may record (bool, integers, floats, strings, objects).
CLASS_KINDS = "biufUSO"
_FIX = "re-copy the model folder or retrain it with `facesegment train`"


def kinds():
    """The registry's kinds (``{name: ForestKind}``): the values ``model.json``'s
    ``kind`` may take."""
    return registry.KINDS


def parse(text, js):
    """The JSON document of ``text`` (the file ``js``); DataError when it is not JSON
    (a nesting too deep for the parser included).

    Parameters
    ----------
    text : str
        The file's text.
    js : str or Path
        The file, named in the error.

    Returns
    -------
    object
        The parsed JSON value (any type: callers check it is an object).

    Raises
    ------
    DataError
        When ``text`` is not valid JSON or is nested too deeply.
    """
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        what = "is nested too deeply" if isinstance(exc, RecursionError) else \
            f"is not valid JSON ({exc.__class__.__name__}: {exc})"
        raise DataError(js, what, _FIX) from None


def read_json_text(js, fix=_FIX):
    """The text of the model JSON file ``js``: a regular file of at most
    :data:`facesegment.limits.MAX_JSON_BYTES` bytes, UTF-8 (DataError naming ``js``
    otherwise: a 1 GB model.json is refused before it is read).

    Parameters
    ----------
    js : str or Path
        The JSON file.
    fix : str, optional
        The fix named in an error (default: re-copy or retrain the model).

    Returns
    -------
    str

    Raises
    ------
    DataError
        When ``js`` is not a regular file, is larger than
        :data:`~facesegment.limits.MAX_JSON_BYTES`, cannot be read, or is not
        UTF-8.
    """
    data = read_regular_file(js, "model file", MAX_JSON_BYTES,
                             f"{fix}; a model's JSON file is a few kB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(js, f"is not valid JSON ({exc.__class__.__name__}: {exc})",
                        fix) from None


def read_format_doc(js, fmt, versions, what, fix):
    """The JSON object of the file ``js`` whose ``format`` is ``fmt`` and whose
    ``format_version`` is one of ``versions`` (a landmark or mesh model's own file);
    DataError naming ``js`` and ``fix`` otherwise.

    Parameters
    ----------
    js : str or Path
        The JSON file.
    fmt : str
        The ``format`` the file must have.
    versions : tuple of int
        The ``format_version`` values read.
    what : str
        What the file is, in the error (``"... is not a facesegment WHAT file"``).
    fix : str
        The fix named in an error.

    Returns
    -------
    dict

    Raises
    ------
    DataError
        When the file cannot be read or parsed, is not a JSON object of format
        ``fmt``, or has another format version.
    """
    try:
        doc = parse(read_json_text(js, fix), js)
    except DataError:
        raise
    except (OSError, ValueError) as exc:
        raise DataError(js, f"cannot be read ({exc})", fix) from None
    if not isinstance(doc, dict) or doc.get("format") != fmt:
        raise DataError(js, f"is not a facesegment {what} file", fix)
    if doc.get("format_version") not in versions:
        raise DataError(js, f"has format version {doc.get('format_version')}, this facesegment "
                        f"reads {' and '.join(map(str, versions))}", fix)
    return doc


def _is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _bad(js, field, problem):
    raise DataError(js, f"field {field} {problem}", _FIX)


def check_document(doc, js):
    """Check the types of the fields of a model document (``js`` names the file).

    Checks ``params``, ``files``, ``class_names``, ``sampling_factors`` (one
    per class name, each within its bounds), ``metrics``, ``provenance``, the
    rule's numbers in ``metrics`` and ``params`` and, for format version 2,
    ``classes``, ``classes_dtype`` and ``layout``.

    Parameters
    ----------
    doc : dict
        The parsed ``model.json``.
    js : str or Path
        The file, named in the error.

    Raises
    ------
    DataError
        Naming the first field of the wrong type or out of range.
    """
    for key, kind in (("params", dict), ("files", dict), ("class_names", list),
                      ("sampling_factors", list)):
        if not isinstance(doc.get(key), kind):
            _bad(js, key, f"is {_type(doc.get(key))}, expected a JSON "
                 f"{'object' if kind is dict else 'array'}")
    for key in ("metrics", "provenance"):
        if doc.get(key) is not None and not isinstance(doc[key], dict):
            _bad(js, key, f"is {_type(doc[key])}, expected a JSON object")
    names = doc["class_names"]
    if not 1 <= len(names) <= MAX_CLASSES or not all(isinstance(c, str) for c in names):
        _bad(js, "class_names", f"must be 1 to {MAX_CLASSES} strings")
    factors = doc["sampling_factors"]
    if len(factors) != len(names) or not all(_is_number(s) and s > 0 for s in factors):
        _bad(js, "sampling_factors", f"must be {len(names)} finite numbers > 0 (one per class)")

    fb = BOUNDS["sampling_factors"]
    if not all(fb.low <= s <= fb.high for s in factors):
        _bad(js, "sampling_factors", f"must each be {fb.describe()} ({fb.reason})")
    rec = doc["files"].get("forest.h5", {})
    if not isinstance(rec, dict) or ("bytes" in rec and not _is_int(rec["bytes"])) or \
            ("sha256" in rec and not isinstance(rec["sha256"], str)):
        _bad(js, "files", "must map forest.h5 to {bytes: integer, sha256: string}")
    for section, key in NUMBERS:
        value = (doc.get(section) or {}).get(key)
        if value is not None and not (_is_number(value) and value >= 0):
            _bad(js, f"{section}.{key}", f"is {value!r}; expected a finite number >= 0")
        bound = BOUNDS["alpha" if key.startswith("alpha") else key]
        if value is not None and value > bound.high:
            _bad(js, f"{section}.{key}", f"is {value!r}; expected {bound.describe()} "
                 f"({bound.reason})")
    sel = (doc.get("metrics") or {}).get("selection")
    if sel is not None and not isinstance(sel, dict):
        _bad(js, "metrics.selection", f"is {_type(sel)}, expected a JSON object")
    if isinstance(sel, dict) and sel.get("alpha") is not None and \
            not (_is_number(sel["alpha"]) and sel["alpha"] >= 0):
        _bad(js, "metrics.selection.alpha", f"is {sel['alpha']!r}; expected a finite number >= 0")
    if doc.get("format_version") != 1:
        _check_classes(doc, js, len(names))


def _check_classes(doc, js, n):
    dt = doc.get("classes_dtype")
    try:
        dtype = np.dtype(object if dt == "object" else dt) if isinstance(dt, str) else None
    except (TypeError, ValueError, OverflowError):
        dtype = None
    if dtype is None or dtype.kind not in CLASS_KINDS or dtype.itemsize > 1024:
        _bad(js, "classes_dtype", f"is {dt!r}; expected a NumPy dtype of booleans, numbers "
             "or strings")
    if not isinstance(doc.get("classes"), list) or len(doc["classes"]) != n:
        _bad(js, "classes", f"must be a JSON array of {n} classes (one per class name)")
    if not (doc.get("layout") is None or isinstance(doc["layout"], dict)):
        _bad(js, "layout", f"is {_type(doc['layout'])}, expected a JSON object or null")


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _type(v):
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
            type(None): "null", int: "a number", float: "a number"}.get(type(v), type(v).__name__)


__all__ = ["parse", "check_document"]
