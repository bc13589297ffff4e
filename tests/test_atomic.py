import os

import pytest

from facesegment.atomic import atomic_path, write_json_atomic, write_text_atomic
from facesegment.errors import DataError


def test_write_text_and_json(tmp_path):
    write_text_atomic(tmp_path / "a" / "b.txt", "hello")
    assert (tmp_path / "a" / "b.txt").read_text() == "hello"
    write_json_atomic(tmp_path / "c.json", {"x": 1})
    assert (tmp_path / "c.json").read_text() == '{\n "x": 1\n}\n'
    assert sorted(os.listdir(tmp_path)) == ["a", "c.json"]


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
