"""How the forest stages read a crop (facesegment.faces.mesh_read): the coarse
reading, against its naive twin and the full reading."""

import numpy as np
import pytest

from facesegment.faces.mesh_read import (Reading, coarse_fill, coarse_grid, predict_stage,
                                         read_region, stage_probas)
from facesegment.faces.mesh_train import fit_stages
from facesegment.forest import AxisAlignedForest

from ..naive import naive_coarse_fill
from .test_mesh_model import _faces, mesh, synthetic  # noqa: F401  (mesh: a fixture)


@pytest.mark.parametrize("size, seed, gap", [(9, 0, 0.0), (16, 1, 0.0), (31, 2, 0.3),
                                            (16, 3, 0.5)])
def test_coarse_fill_matches_its_naive_twin(size, seed, gap):
    rng = np.random.default_rng(seed)
    proba = rng.dirichlet(np.ones(4) * 0.3, (size, size)).astype(np.float32)
    proba[: size // 2] = [0.7, 0.1, 0.1, 0.1]              # a calm half: neighbours agree
    grid = coarse_grid(size) & (rng.random((size, size)) < 0.9)
    filled, values = coarse_fill(proba, grid, gap)
    want_filled, want_values = naive_coarse_fill(proba, grid, gap)
    np.testing.assert_array_equal(filled, want_filled)
    assert 0 < filled.sum() < (~coarse_grid(size)).sum()
    np.testing.assert_allclose(values[filled], want_values[filled], rtol=0, atol=1e-6)
    assert not (filled & grid).any()


def test_coarse_grid_is_even_rows_and_columns():
    g = coarse_grid(5)
    assert g.sum() == 9 and g[0, 0] and g[4, 4] and not g[1, 0] and not g.flags.writeable


class CountingForest:
    """A fitted forest that counts the rows it is asked about."""

    def __init__(self, forest):
        self.forest, self.classes_, self.rows = forest, forest.classes_, 0

    def predict_proba(self, X, **kw):
        self.rows += len(X)
        return self.forest.predict_proba(X, **kw)


def test_a_coarse_stage_reads_fewer_pixels_and_agrees_where_it_reads(mesh):
    """Every pixel the coarse reading asks the forest about gets the full
    reading's value; every other pixel of the region gets the mean of its
    neighbours, which agree on the class; outside the region it is background."""
    f = _faces(mesh)[0]
    forest = fit_stages(_faces(mesh), lambda: AxisAlignedForest(4, random_state=1), 1, 400,
                        0)[0]
    region = read_region(f.planes, 4)
    full = predict_stage(forest, f.planes, region)
    counting = CountingForest(forest)
    got = predict_stage(counting, f.planes, region, coarse=0.0)
    assert counting.rows < 0.6 * region.sum()
    grid = region & coarse_grid(region.shape[0])
    filled, values = coarse_fill(full, grid)
    filled &= region
    np.testing.assert_array_equal(got[~filled], full[~filled])
    np.testing.assert_allclose(got[filled], values[filled], rtol=0, atol=1e-6)
    assert filled.sum() > 0.3 * region.sum()
    assert np.all(got[~region][:, 0] == 1)
    np.testing.assert_allclose(got.sum(axis=-1), 1.0, atol=1e-5)
    assert (got.argmax(-1) == full.argmax(-1)).mean() > 0.97
    unsure = CountingForest(forest)
    wider = predict_stage(unsure, f.planes, region, coarse=0.3)
    assert counting.rows < unsure.rows < region.sum()     # a gap reads more pixels
    assert (wider.argmax(-1) == full.argmax(-1)).mean() >= (got.argmax(-1)
                                                           == full.argmax(-1)).mean()
    gap_filled = coarse_fill(full, grid, 0.3)[0] & region
    np.testing.assert_array_equal(wider[~gap_filled], full[~gap_filled])


def test_coarse_stages_feed_their_coarse_output_forward(mesh):
    """The second stage reads the first stage's coarse output as its context."""
    faces = _faces(mesh)
    forests = fit_stages(faces, lambda: AxisAlignedForest(3, random_state=3), 2, 400, 0,
                         reading=Reading(4))
    f = faces[0]
    first, second = stage_probas(forests, f.planes, Reading(4, coarse=0.1))
    np.testing.assert_array_equal(first, predict_stage(forests[0], f.planes,
                                                       read_region(f.planes, 4), coarse=0.1))
    from facesegment.faces.mesh_stages import context_planes
    np.testing.assert_array_equal(second, predict_stage(
        forests[1], (f.planes, context_planes(first)), read_region(f.planes, 4), coarse=0.1))


def test_a_coarse_model_round_trips_and_refuses_a_bad_gap(mesh, tmp_path):
    from facesegment.models import load_model
    from facesegment.models.mesh import MeshModel
    from facesegment.models.mesh_folder import save_mesh_model

    forests = fit_stages(_faces(mesh), lambda: AxisAlignedForest(3, random_state=3), 1, 400, 0)
    image, _ = synthetic(mesh)
    plain, coarse = MeshModel(forests, margin=4), MeshModel(forests, margin=4, coarse=0.1)
    save_mesh_model(coarse, tmp_path / "m")
    back = load_model(tmp_path / "m")
    assert back.coarse == 0.1 and "coarse=0.1" in repr(back)
    assert MeshModel(forests).coarse is None and MeshModel(forests, coarse=0).coarse == 0.0
    _, a, _ = plain.face_proba(image, mesh)
    _, b, _ = back.face_proba(image, mesh)
    assert not np.array_equal(a, b) and (a.argmax(-1) == b.argmax(-1)).mean() > 0.97
    for bad in (1, -0.1, True, "0.1", [0.1], float("nan")):
        with pytest.raises(ValueError, match="coarse"):
            MeshModel(forests, coarse=bad)
    import json

    from facesegment.errors import DataError
    from facesegment.models.mesh_folder import MESH_FILE

    doc = json.loads((tmp_path / "m" / MESH_FILE).read_text())
    for bad in (1.5, "0.1", [0.1]):
        (tmp_path / "m" / MESH_FILE).write_text(json.dumps({**doc, "coarse": bad}))
        with pytest.raises(DataError, match=r"mesh-model\.json.*is malformed.*coarse"):
            load_model(tmp_path / "m")


def test_a_reading_is_checked_once_for_the_model_it_belongs_to(mesh):
    """Reading.checked validates every field for its number of stages; the model
    keeps the checked reading and gives its fields by name."""
    from facesegment.models.mesh import MeshModel

    assert Reading(4, [3, 1], 0).checked(2) == Reading(4.0, [3, 1.0], 0.0)
    assert Reading([6, 3]).checked(2).margins(2) == [6.0, 3.0]
    assert Reading().margins(3) == [None, None, None]
    for bad, word in ((Reading([6]), "margin"), (Reading(early=[0, 0.5]), "early"),
                      (Reading(coarse=1), "coarse")):
        with pytest.raises(ValueError, match=word):
            bad.checked(2)
    forests = fit_stages(_faces(mesh), lambda: AxisAlignedForest(3, random_state=3), 2, 400, 0)
    model = MeshModel(forests, margin=[6, 3], early=[2, 0.9], coarse=0.1)
    assert model.reading == Reading([6.0, 3.0], [2, 0.9], 0.1)
    assert (model.margin, model.early, model.coarse) == ([6.0, 3.0], [2, 0.9], 0.1)
