"""Photos and faces: finding faces, cropping them, landmarks, and the face mesh.

Modules
-------
``crops``           face detection, LFW-style crop boxes, crops and mapping back
``segment``         segmenting one face photo: its faces (``photo_faces``), labels and overlay
``photo``           ``PhotoFace``; dlib's faces cropped and pasted back (the models' shared parts)
``forest_face``     a crop and a photo under a forest or a cascade (their ``predict_face``)
``folder``          segmenting folders of photos: output files and the summary CSV
``video``           segmenting videos frame by frame: faces tracked and smoothed
``aligned``         detector-aligned test faces: labelled faces re-cropped the way ``segment`` does
``label``           labelling unlabelled faces with dlib's 68 landmarks
``landmarks``       ``.pts`` I/O and 8-class label maps drawn from 68 landmarks
``renderer``        the landmark renderer: dlib's predicted landmarks drawn as label polygons
``votes``           landmark votes: dlib's predictor from many boxes, the maps averaged
``landmark_fit``    fitting and scoring landmark models
``shape_prior``     the landmark-conditioned shape prior
``shape_frame``     its canonical face frame and the piecewise-affine warps in and out of it

The model kinds that read faces themselves (landmark votes, the face mesh) are in
:mod:`facesegment.models`.  The names below are loaded on first use (importing
the package loads none of its modules).
"""

from .._lazy import lazy_exports

#: Public names and the module of each, imported on first use.
_LAZY = {"segment_image": "segment", "photo_faces": "segment", "segment_folder": "folder", "SegmentResult": "folder",
         "segment_video": "video", "segment_frames": "video",
         "detect_faces": "crops", "find_crops": "crops", "crop_face": "crops",
         "label_folder": "label", "read_pts": "landmarks", "write_pts": "landmarks",
         "render_labels": "landmarks", "ShapePrior": "shape_prior", "fit_shape_prior": "shape_prior"}

__all__ = sorted(_LAZY)
__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
