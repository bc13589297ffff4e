"""The walkthrough notebook runs top to bottom from any working directory on the
shipped model (as on a fresh clone: no trained model, no run folder)."""

import pytest

from tests.test_pipelines import make_dataset

pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")


@pytest.mark.slow
def test_notebook_runs_top_to_bottom_on_the_shipped_model(tmp_path):
    from facesegment import models
    from facesegment.api import load_model
    from facesegment.rule import rule_of
    from pipelines.notebook import NOTEBOOK, execute_notebook

    data = make_dataset(tmp_path / "faces", n_train=1, n_test=2)
    elsewhere = tmp_path / "elsewhere"  # the notebook runs from any working directory
    elsewhere.mkdir()
    env = {"FACESEGMENT_MODEL": "", "FACESEGMENT_TEST": data / "test",
           "FACESEGMENT_RUN": tmp_path / "no-run", "FACESEGMENT_N_FACES": 2,
           "FACESEGMENT_ROOT": ""}
    nb = execute_notebook(NOTEBOOK, tmp_path / "out.ipynb", env, cwd=elsewhere)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    text = "".join(o.get("text", "") for o in outputs)
    model = load_model(models.FOREST)
    assert f"kind: {model.kind}; {model.arrays.n_trees} trees" in text
    assert f"the shipped forest {models.FOREST!r}" in text
    assert f"the shipped model {models.DEFAULT!r}" in text
    assert f"decision rule: {rule_of(model)}" in text
    assert f"alpha = {rule_of(model).alpha:g}" in text
    # the repository is found from the package (the kernel's folder is elsewhere)
    assert "repository: found" in text
    assert "does not exist yet" in text            # no run folder: says how to make one
    assert "1 face(s) found" in text               # the one-call API on a bundled photo
    images = [o for o in outputs if {"image/png", "image/jpeg"} & set(o.get("data", {}))]
    assert len(images) >= 2                         # the segmentations were drawn

