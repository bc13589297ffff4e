"""Plain NumPy/Python references for every Numba kernel (slow, obviously right).

Tests compare each kernel with its reference here on small random inputs.
Sections are grouped by the module whose kernels they mirror.
"""

import numpy as np  # noqa: F401

# ----------------------------------------------------------------- extraction

# ------------------------------------------------- forest: axis and two-probe

# ------------------------------------------------------------------ forest: co2

# ------------------------------------------------------- inference and metrics
