"""The radix argsort of the float split searches gives NumPy's stable order."""

import numpy as np
import pytest

from facesegment.forest._sort import RADIX_MIN, argsort_f32, sort_scratch, stable_argsort


def _values(rng, m, kind):
    if kind == "uint8":
        return rng.integers(0, 256, m).astype(np.uint8)
    if kind == "ties":      # few distinct values: long runs of equal keys
        return rng.choice(np.float32([-2.5, -0.0, 0.0, 1e-30, 3.0]), m)
    v = rng.standard_normal(m).astype(np.float32) * np.float32(10.0) ** rng.integers(
        -30, 30, m).astype(np.float32)
    if kind == "special":   # signed zeros, infinities, NaN, denormals
        pick = rng.random(m)
        v[pick < 0.1] = np.nan
        v[(pick >= 0.1) & (pick < 0.15)] = -np.inf
        v[(pick >= 0.15) & (pick < 0.2)] = np.inf
        v[(pick >= 0.2) & (pick < 0.3)] = -0.0
        v[(pick >= 0.3) & (pick < 0.4)] = 0.0
        v[(pick >= 0.4) & (pick < 0.45)] = np.float32(1e-45)
    return v


@pytest.mark.parametrize("kind", ["normal", "ties", "special", "uint8"])
@pytest.mark.parametrize("m", [1, 2, RADIX_MIN - 1, RADIX_MIN, 1000, 20000])
def test_order_is_numpys_stable_order(kind, m):
    rng = np.random.default_rng(m)
    v = _values(rng, m, kind)
    np.testing.assert_array_equal(stable_argsort(v), np.argsort(v, kind="stable"))


def test_scratch_is_reused_for_shorter_prefixes():
    rng = np.random.default_rng(3)
    scratch = sort_scratch(5000)
    for m in (5000, 300, 4000, 130):
        v = _values(rng, 6000, "special")
        argsort_f32(v, m, *scratch)
        np.testing.assert_array_equal(scratch[0][:m], np.argsort(v[:m], kind="stable"))
