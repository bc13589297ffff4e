"""facesegment: face-part segmentation with decision forests.

Every pixel of a face image gets one of 8 classes (see :mod:`facesegment.classes`).
A forest looks at the window around the pixel (31x31 RGB, 2883 uint8 values, by
default; the layout is data: :mod:`facesegment.layout`) and predicts its class.
The forests are scikit-learn estimators, one row each in the table of kinds
(:mod:`facesegment.forest.registry`): axis-aligned (random forest), two-probe
(``x[a] - x[b] <= t``), CO2 (continuously optimised oblique splits, Norouzi et
al. 2015) and our variant of it, extremely randomized trees, random ferns and
rotation forests.
"""

__version__ = "0.2.0"
