"""The mesh's left/right twin table (facesegment.faces.mesh_twins)."""

from pathlib import Path

import numpy as np

from facesegment.faces.mesh import (FACE_OVAL, LEFT_BROW, LEFT_EYE, LIPS, NOSE, N_POINTS,
                                    RIGHT_BROW, RIGHT_EYE, _mirror_x)
from facesegment.faces.mesh_twins import TWINS

TEMPLATE = Path(__file__).parent / "data" / "pan0_mesh_template.npy"


def test_twins_are_derived_again_from_the_mean_frontal_mesh():
    from scipy.optimize import linear_sum_assignment

    t = np.load(TEMPLATE)[:, :2]
    centre = t[list(FACE_OVAL)].mean(axis=0)
    mirrored = t.copy()
    mirrored[:, 0] = 2 * centre[0] - mirrored[:, 0]
    cost = ((t[:, None, :] - mirrored[None, :, :]) ** 2).sum(-1)
    assert tuple(linear_sum_assignment(cost)[1].tolist()) == TWINS


def test_twins_swap_the_sides_and_keep_the_midline():
    tw = np.array(TWINS)
    assert len(tw) == N_POINTS and np.array_equal(tw[tw], np.arange(N_POINTS))
    assert sorted(tw[list(LEFT_EYE)]) == sorted(RIGHT_EYE)
    assert sorted(tw[list(LEFT_BROW)]) == sorted(RIGHT_BROW)
    for part in (NOSE, LIPS, FACE_OVAL):
        assert sorted(tw[list(part)]) == sorted(part)
    assert tw[4] == 4 and tw[33] == 263 and tw[61] == 291


def test_a_mesh_mirrored_twice_and_renamed_is_itself():
    from facesegment.faces.mesh import _unmirror

    mesh = np.load(TEMPLATE).astype(np.float64) * 100 + 50
    back = _unmirror(_unmirror(mesh, 300), 300)
    assert np.allclose(back, mesh)
    once = _unmirror(mesh, 300)
    # renamed, the mirror image is a face mesh: its right eye on the image's left
    assert (once[list(RIGHT_EYE), 0].mean() < once[4, 0]) == (mesh[list(RIGHT_EYE), 0].mean()
                                                           < mesh[4, 0])
    assert np.allclose(_mirror_x(once, 300)[list(TWINS)], mesh)
