"""The head's pan (yaw, degrees) from a MediaPipe face mesh.

:func:`pan_features` measures a mesh by left/right-symmetric point *sets* only
(midline points, the whole face oval, both eyes together), so they do not
depend on which of two twin points (:mod:`facesegment.faces.mesh_twins`) carries
which name.  The first :data:`N_ODD` features change sign when the
mesh is mirrored (x flipped), the others do not.

:class:`PanModel` is a ridge regression on monomials of the features, each with
an odd number of odd features and no intercept, fitted (:func:`fit_pan_model`)
on the meshes and their mirror images: a mirrored mesh gets exactly the negated
pan.  Sign: ``+`` pan = head turned toward the image's left (FASSEG's).
"""

from dataclasses import dataclass

import numpy as np

from .mesh import FACE_OVAL, LEFT_EYE, NOSE_TIP, RIGHT_EYE

#: Names of :func:`pan_features`' values; the first ``N_ODD`` are odd in x.
FEATURE_NAMES = ("turn", "eyes", "bridge", "mouth_chin", "oval_yaw", "oval_zslope",
                 "eye_spread", "nose_depth")
N_ODD = 6
N_FEATURES = len(FEATURE_NAMES)
#: Monomials of the chosen model (feature indices multiplied): the nose tip's
#: offset, alone and times the eyes' spread (small when the head is turned far).
DEFAULT_TERMS = ((0,), (0, 6))
DEFAULT_RIDGE = 1e-4
_BRIDGE = (8, 168, 6)
_MOUTH_CHIN = (0, 13, 14, 17, 152)
_EYES = LEFT_EYE + RIGHT_EYE


def _oval_yaw(oval):
    """The yaw (degrees / 90) of the oval's plane: its least-spread direction,
    turned toward the camera (smaller z), measured from -z in the xz plane."""
    p = oval - oval.mean(axis=0)
    cov = p.T @ p
    if not np.all(np.isfinite(cov)):
        return 0.0
    normal = np.linalg.eigh(cov)[1][:, 0]
    if normal[2] > 0:
        normal = -normal
    return np.degrees(np.arctan2(normal[0], -normal[2])) / 90.0


def pan_features(mesh):
    """Scale-free, mirror-consistent features of a mesh's head turn.

    Parameters
    ----------
    mesh : float (478, 3)
        The points: x, y in pixels, z in the same scale (larger = farther).
        A (478, 2) mesh is read with z = 0.

    Returns
    -------
    float64 (N_FEATURES,)
        Named by :data:`FEATURE_NAMES`; x offsets are from the face oval's mean x,
        all lengths over the oval's x extent (its width):

        * ``turn``: the nose tip's x offset; ``eyes``: both eyes' mean x offset;
          ``bridge``, ``mouth_chin``: the mean x offsets of the midline points
          of the nose bridge and of the lips and chin;
        * ``oval_yaw``: the turn (degrees / 90) of the oval's best-fit plane;
        * ``oval_zslope``: the least-squares slope of z on x along the oval;
        * ``eye_spread``: both eyes' x extent; ``nose_depth``: how far the nose
          tip lies in front of the oval's mean depth (these two are even).

        Each is finite (0 where undefined, e.g. all points equal) and clipped
        to [-4, 4].
    """
    m = np.asarray(mesh, np.float64)
    if m.ndim != 2 or m.shape[0] <= max(FACE_OVAL + _EYES) or m.shape[1] < 2:
        raise ValueError(f"pan_features: expected a (478, 3) mesh, got shape {m.shape}")
    if m.shape[1] == 2:
        m = np.concatenate([m, np.zeros((len(m), 1))], axis=1)
    m = np.nan_to_num(m[:, :3], nan=0.0, posinf=0.0, neginf=0.0)
    oval = m[list(FACE_OVAL)]
    cx = oval[:, 0].mean()
    width = float(np.ptp(oval[:, 0]))
    if not width > 1e-9 * max(1.0, float(np.abs(m).max())):
        return np.zeros(N_FEATURES)
    dx = oval[:, 0] - cx
    dz = oval[:, 2] - oval[:, 2].mean()
    with np.errstate(all="ignore"):
        out = np.array([
            (m[NOSE_TIP, 0] - cx) / width,
            (m[list(_EYES), 0].mean() - cx) / width,
            (m[list(_BRIDGE), 0].mean() - cx) / width,
            (m[list(_MOUTH_CHIN), 0].mean() - cx) / width,
            _oval_yaw(oval / width),
            (dx @ dz) / (dx @ dx),
            np.ptp(m[list(_EYES), 0]) / width,
            (oval[:, 2].mean() - m[NOSE_TIP, 2]) / width,
        ])
    return np.clip(np.nan_to_num(out, nan=0.0, posinf=0.0, neginf=0.0), -4.0, 4.0)


def mirror_features(features):
    """The features of the mirrored mesh (x flipped): the odd ones negated.

    Parameters
    ----------
    features : float (..., N_FEATURES)
        :func:`pan_features` rows; the first ``N_ODD`` are odd in x.

    Returns
    -------
    float64 (..., N_FEATURES)
        A new array.
    """
    f = np.array(features, np.float64)
    f[..., :N_ODD] *= -1
    return f


def _columns(features, terms):
    f = np.atleast_2d(np.asarray(features, np.float64))
    return np.stack([np.prod(f[:, list(t)], axis=1) for t in terms], axis=1)


@dataclass(frozen=True)
class PanModel:
    """Pan (degrees) = sum over ``terms`` of ``weight * prod(features[term])``.

    Attributes
    ----------
    terms : tuple of tuple of int
        Monomials of :func:`pan_features`, each with an odd count of odd features.
    weights : tuple of float
        One weight per term.
    ridge : float
        The ridge strength it was fitted with (a record only).
    """

    terms: tuple
    weights: tuple
    ridge: float = DEFAULT_RIDGE

    def predict_features(self, features):
        """Pans of feature rows.

        Parameters
        ----------
        features : float (F,) or (N, F)
            :func:`pan_features` rows.

        Returns
        -------
        float64 (N,)
            Degrees, clipped to [-90, 90] (N = 1 for one row).
        """
        pred = _columns(features, self.terms) @ np.asarray(self.weights, np.float64)
        return np.clip(pred, -90.0, 90.0)

    def predict(self, mesh):
        """The head's pan for one mesh.

        Parameters
        ----------
        mesh : float (478, 3) or (478, 2)
            As for :func:`pan_features`.

        Returns
        -------
        float
            Degrees, -90..90.
        """
        return float(self.predict_features(pan_features(mesh))[0])

    def to_dict(self):
        """A JSON-able dict (see :meth:`from_dict`)."""
        return {"kind": "pan-ridge", "features": list(FEATURE_NAMES),
                "terms": [list(map(int, t)) for t in self.terms],
                "weights": [float(w) for w in self.weights], "ridge": float(self.ridge)}

    @classmethod
    def from_dict(cls, d):
        """The model of :meth:`to_dict`'s dict.

        Parameters
        ----------
        d : dict
            ``kind`` "pan-ridge", ``features`` (:data:`FEATURE_NAMES`), ``terms``,
            ``weights`` and optionally ``ridge``.

        Returns
        -------
        PanModel

        Raises
        ------
        ValueError
            When it is malformed: another kind or feature list, terms that are not
            lists of feature indices odd in x, weights that do not match the terms
            or are not finite, or a negative ridge.
        """
        if not isinstance(d, dict) or d.get("kind") != "pan-ridge":
            raise ValueError("pan model: expected a dict with kind 'pan-ridge'")
        if list(d.get("features", ())) != list(FEATURE_NAMES):
            raise ValueError(f"pan model: features must be {list(FEATURE_NAMES)}, "
                             f"got {d.get('features')!r}")
        terms, weights = d.get("terms"), d.get("weights")
        if not isinstance(terms, list) or not terms or not isinstance(weights, list):
            raise ValueError("pan model: 'terms' and 'weights' must be non-empty lists")
        if len(weights) != len(terms):
            raise ValueError(f"pan model: {len(terms)} terms but {len(weights)} weights")
        for t in terms:
            if (not isinstance(t, list) or not t
                    or not all(type(i) is int and 0 <= i < N_FEATURES for i in t)):
                raise ValueError(f"pan model: a term must be a non-empty list of feature "
                                 f"indices 0..{N_FEATURES - 1}, got {t!r}")
            if sum(i < N_ODD for i in t) % 2 != 1:
                raise ValueError(f"pan model: term {t} is not odd in x")
        w = weights + [d.get("ridge", DEFAULT_RIDGE)]
        if (not all(type(v) in (int, float) for v in w) or not np.all(np.isfinite(w))
                or w[-1] < 0):
            raise ValueError("pan model: weights must be finite numbers, ridge one >= 0")
        return cls(tuple(tuple(t) for t in terms), tuple(float(x) for x in w[:-1]),
                   float(w[-1]))


def fit_pan_model(meshes, pans, ridge=DEFAULT_RIDGE, terms=DEFAULT_TERMS):
    """Fit a :class:`PanModel` (deterministic).

    Parameters
    ----------
    meshes : sequence of float (478, 3), or float (N, N_FEATURES)
        The meshes, or their :func:`pan_features` rows.
    pans : sequence of float
        Their pans (degrees).
    ridge : float
        Ridge strength, relative to the mean square of each term over the
        (mirror-augmented) training rows.
    terms : sequence of sequence of int
        The monomials (see :class:`PanModel`).

    Returns
    -------
    PanModel
        Fitted on the rows and their mirror images (pans negated).
    """
    feats = np.asarray(meshes, np.float64)
    if not (feats.ndim == 2 and feats.shape[1] == N_FEATURES):
        feats = np.array([pan_features(m) for m in meshes]).reshape(-1, N_FEATURES)
    y = np.asarray(pans, np.float64).ravel()
    if len(y) != len(feats) or not len(y):
        raise ValueError(f"fit_pan_model: {len(feats)} meshes but {len(y)} pans")
    terms = tuple(tuple(int(i) for i in t) for t in terms)
    PanModel.from_dict({"kind": "pan-ridge", "features": list(FEATURE_NAMES),
                        "terms": [list(t) for t in terms], "weights": [0.0] * len(terms),
                        "ridge": float(ridge)})   # validates the terms
    x = _columns(np.vstack([feats, mirror_features(feats)]), terms)
    y = np.concatenate([y, -y])
    scale = np.sqrt((x ** 2).mean(axis=0))
    scale[scale < 1e-12] = 1.0
    a = np.vstack([x / scale, np.sqrt(ridge * len(x)) * np.eye(len(terms))])
    w = np.linalg.lstsq(a, np.concatenate([y, np.zeros(len(terms))]), rcond=None)[0]
    return PanModel(terms, tuple(float(v) for v in w / scale), float(ridge))
