"""Datasets and windows: labelled faces on disk, splits, and the training windows file.

Modules
-------
``imageio``          reading images and label maps (RGB uint8, 8-class uint8 labels)
``datasets``         finding image/label pairs and loading labelled faces
``splits``           train / validation / test splits (deterministic given the seed)
``download``         LFW download with resume and a SHA-256 check, safe extraction
``extract``          class-balanced window extraction (a two-pass Dask pipeline)
``sampling``         its pieces: the window-cutting kernel, the tasks, the class allocation
``windows``          the windows file (HDF5): format and readers
``_windows_writer``  writing windows files atomically, in order, from many workers
``_h5check``         HDF5 hygiene shared by windows files and model folders

The names below are loaded on first use (importing the package loads none of its modules).
"""

from .._lazy import lazy_exports

#: Public names and the module of each, imported on first use.
_LAZY = {"read_image": "imageio", "read_label": "imageio", "write_label_png": "imageio",
         "FaceRecord": "datasets", "find_faces": "datasets", "load_face": "datasets",
         "Splits": "splits", "split_dataset": "splits", "fetch_lfw": "download",
         "extract_windows": "extract", "WindowSet": "windows", "WindowsMeta": "windows",
         "read_windows": "windows"}

__all__ = sorted(_LAZY)
__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
