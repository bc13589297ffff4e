import json
import os
from pathlib import Path

import numpy as np
import pytest

from facesegment.atomic import (atomic_path, check_writable_folder, to_jsonable,
                                write_json_atomic, write_text_atomic)
from facesegment.errors import DataError


def test_write_text_and_json(tmp_path):
    write_text_atomic(tmp_path / "a" / "b.txt", "hello")
    assert (tmp_path / "a" / "b.txt").read_text() == "hello"
    write_json_atomic(tmp_path / "c.json", {"x": 1})
    assert (tmp_path / "c.json").read_text() == '{\n "x": 1\n}\n'
    assert sorted(os.listdir(tmp_path)) == [".facesegment-outputs", "a", "c.json"]


def test_failure_in_block_leaves_nothing(tmp_path):
    target = tmp_path / "out.bin"
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            open(tmp, "wb").write(b"partial")
            raise RuntimeError("interrupted")
    assert os.listdir(tmp_path) == []


def test_unwritable_path_is_one_line_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(DataError) as err:
        write_text_atomic(blocker / "sub" / "out.txt", "x", what="report")
    msg = str(err.value)
    assert "cannot write report" in msg and "out.txt" in msg and "writable" in msg
    assert "\n" not in msg


def test_json_of_numpy_nan_and_paths(tmp_path):
    obj = {"x": np.float32("nan"), "a": np.arange(2), "i": np.int64(3), "t": (1.5, None),
           "p": Path("m/x"), np.int64(7): "k", "f": float("nan")}
    assert to_jsonable(obj) == {"x": None, "a": [0, 1], "i": 3, "t": [1.5, None],
                                "p": "m/x", 7: "k", "f": None}
    write_json_atomic(tmp_path / "a.json", obj)
    back = json.loads((tmp_path / "a.json").read_text())
    assert back["x"] is None and back["a"] == [0, 1] and back["7"] == "k"
    write_json_atomic(tmp_path / "b.json", {"b": 1, "a": 2}, sort_keys=True, indent=2)
    assert (tmp_path / "b.json").read_text() == '{\n  "a": 2,\n  "b": 1\n}\n'


def test_write_probe(tmp_path):
    check_writable_folder(tmp_path / "new" / "folder")
    assert (tmp_path / "new" / "folder").is_dir()
    assert os.listdir(tmp_path / "new" / "folder") == []
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(DataError) as err:
        check_writable_folder(blocker / "out", "cannot write here", "pick another")
    assert "cannot write here" in str(err.value) and "pick another" in str(err.value)
