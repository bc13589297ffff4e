"""facesegment: face-part segmentation with decision forests.

Every pixel of a face image gets one of 8 classes (see :mod:`facesegment.classes`).
A forest looks at the 31x31 RGB window around the pixel (2883 uint8 values) and
predicts its class.  Three split families are provided: axis-aligned (random
forest), two-probe (``x[a] - x[b] <= t``) and CO2 (continuously optimised oblique
splits, Norouzi et al. 2015).
"""

__version__ = "0.1.0"
