"""The brow-refinement study's frame, features and refinement step."""

from types import SimpleNamespace

import numpy as np

from studies import brow_refine as br


def _face(rng, angle=0.3, scale=1.7):
    base = rng.uniform(60, 190, (68, 2))
    c, s = np.cos(angle), np.sin(angle)
    turned = (base - 125) @ np.array([[c, s], [-s, c]]) * scale + 125
    return base, turned


def test_frame_coordinates_survive_rotation_and_scale():
    rng = np.random.default_rng(0)
    base, turned = _face(rng)
    for pts in (base, turned):
        pts[36:42] = pts[36:42].mean(0)   # keep the eye centres apart for the check
    o1, r1, i1 = br.frames(base[None])
    o2, r2, i2 = br.frames(turned[None])
    a = br.to_frame(base[None, br.BROWS] - o1[:, None], r1, i1)
    b = br.to_frame(turned[None, br.BROWS] - o2[:, None], r2, i2)
    np.testing.assert_allclose(a, b, atol=1e-9)
    back = br.from_frame(a, r1, i1) + o1[:, None]
    np.testing.assert_allclose(back, base[None, br.BROWS], atol=1e-9)


def test_target_moves_the_current_points_onto_the_human_ones():
    rng = np.random.default_rng(1)
    human = rng.uniform(60, 190, (68, 2))
    sets = human[None] + rng.normal(0, 2, (4, 68, 2))
    y = br.target(sets, sets[:, br.BROWS], human)
    _, rot, iod = br.frames(sets)
    moved = sets[:, br.BROWS] + br.from_frame(y.reshape(-1, 10, 2), rot, iod)
    np.testing.assert_allclose(moved, np.broadcast_to(human[br.BROWS], moved.shape), atol=1e-9)


class _Up:
    """A regressor that asks every brow point to move 0.1 IOD along the frame's y."""

    def predict(self, X):
        out = np.zeros((len(X), 20))
        out[:, 1::2] = 0.1
        return out


def test_refine_moves_each_set_or_every_set_by_the_median_sets_move():
    rng = np.random.default_rng(2)
    human = rng.uniform(60, 190, (68, 2))
    sets = human[None] + rng.normal(0, 1, (5, 68, 2))
    grey = rng.uniform(0, 255, (250, 250)).astype(np.float32)
    faces = SimpleNamespace(sets=sets[None], grey=[grey])
    sampler = br.Sampler()
    assert sampler.features(grey, sets, diffs=True).shape == (5, 10 * br.N_OFF + 20 + 410
                                                              + br.N_PAIRS)
    moved = br.refine([_Up()], faces, sampler, 0, True)
    _, rot, iod = br.frames(sets)
    step = moved - sets[:, br.BROWS]
    np.testing.assert_allclose(np.linalg.norm(step, axis=-1), np.repeat(0.1 * iod[:, None], 10, 1))
    np.testing.assert_allclose((step[:, 0] * rot[:, :, 1]).sum(-1), 0.1 * iod)   # along y
    at_median = br.refine([_Up()], faces, sampler, 0, True, at_median=True)
    shift = at_median - sets[:, br.BROWS]
    np.testing.assert_allclose(shift, np.broadcast_to(shift[:1], shift.shape), atol=1e-9)
