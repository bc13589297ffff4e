"""The walkthrough notebook runs top to bottom on a tiny model."""

import pytest

from tests.test_pipelines import make_dataset

pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    """A 2-tree axis-aligned model trained on windows of synthetic faces."""
    from facesegment.datasets import find_faces
    from facesegment.extract import extract_windows
    from facesegment.forest import AxisAlignedForest
    from facesegment.model import Model, save_model
    from facesegment.windows import read_windows

    tmp = tmp_path_factory.mktemp("nb")
    data = make_dataset(tmp / "faces", n_train=4, n_test=2)
    extract_windows(find_faces(data / "train"), tmp / "w.h5", n_windows=400, seed=0,
                    progress=False)
    ws = read_windows(tmp / "w.h5")
    est = AxisAlignedForest(2, max_features=50, max_depth=6, random_state=0)
    est.fit(ws.X, ws.y)
    model = Model.from_estimator(est, "axis", ws.meta)
    model.metrics["alpha"] = 0.5
    save_model(model, tmp / "model")
    return tmp / "model", data / "test", tmp


@pytest.mark.slow
def test_notebook_runs_top_to_bottom(tiny_model):
    from pipelines.notebook import NOTEBOOK, execute_notebook

    model, test, tmp = tiny_model
    elsewhere = tmp / "elsewhere"  # the notebook runs from any working directory
    elsewhere.mkdir()
    nb = execute_notebook(NOTEBOOK, tmp / "out.ipynb", {
        "FACESEGMENT_MODEL": model, "FACESEGMENT_TEST": test,
        "FACESEGMENT_RUN": tmp / "no-run", "FACESEGMENT_N_FACES": 2}, cwd=elsewhere)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    text = "".join(o.get("text", "") for o in outputs)
    assert "kind: axis; 2 trees" in text
    from pipelines.notebook import ROOT

    assert f"repository: {ROOT}" in text
    assert "alpha = 0.5" in text
    assert "does not exist yet" in text            # no run folder: says how to make one
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert images                                   # the segmentations were drawn
    assert (tmp / "out.ipynb").stat().st_size > 10_000
