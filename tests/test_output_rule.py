"""The output-path rule: every command's outputs, whatever a user has there.

A path is written only when nothing is there, a regular file facesegment
wrote is there, or the user passed --overwrite; never over a folder, a link, a
named pipe or a device.  The walk below covers every output option of every
command (checked against the parser) and every name written inside an output
folder.
"""

import argparse
import ast
import os
import re
from pathlib import Path

import numpy as np
import pytest

from facesegment.atomic import (MANIFEST, check_output_path, overwriting, write_json_atomic,
                                write_text_atomic, written_by_facesegment)
from facesegment.cli import get_parser, main
from facesegment.data.imageio import write_png_atomic
from facesegment.errors import DataError
from facesegment.modelio.model import save_model
from tests.dense.test_inference import random_model
from tests.evaluation.test_metrics import _write_faces
from tests.sandbox import KINDS, changed, plant, snapshot

ROOT = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------- the rule itself

def test_rule_on_each_kind_of_path(tmp_path):
    check_output_path(tmp_path / "new.txt")          # nothing there: fine
    write_text_atomic(tmp_path / "ours.txt", "x")
    assert written_by_facesegment(tmp_path / "ours.txt")
    check_output_path(tmp_path / "ours.txt")         # written by facesegment: fine
    write_text_atomic(tmp_path / "ours.txt", "y")    # and replaced on a rerun
    (tmp_path / "ours.txt").write_text("edited by hand")
    assert not written_by_facesegment(tmp_path / "ours.txt")
    for kind in KINDS:
        path = tmp_path / kind.replace(" ", "_")
        plant(str(path), kind, str(tmp_path / "elsewhere"))
        with pytest.raises(DataError) as err:
            write_text_atomic(path, "replaced?")
        assert str(path) in str(err.value) and "\n" not in str(err.value)
        with overwriting(), pytest.raises(DataError) if kind != "user file" else _nothing():
            write_text_atomic(path, "replaced")
    assert (tmp_path / "user_file").read_text() == "replaced"
    assert (tmp_path / "elsewhere" / "target.txt").read_text() == "the link's target\n"


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/null"])
def test_devices_are_never_written(device):
    before = os.stat(device)
    with pytest.raises(DataError, match="character device"):
        check_output_path(device, overwrite=True)
    with overwriting(), pytest.raises(DataError, match="character device"):
        write_json_atomic(device, {"a": 1})
    after = os.stat(device)
    assert (before.st_ino, before.st_rdev) == (after.st_ino, after.st_rdev)


def test_manifest_survives_torn_lines_and_copies(tmp_path):
    write_text_atomic(tmp_path / "a.txt", "a")
    with open(tmp_path / MANIFEST, "ab") as fh:
        fh.write(b'["half a line", 1')                     # a torn write
    write_text_atomic(tmp_path / "b.txt", "b")
    assert written_by_facesegment(tmp_path / "a.txt")
    assert written_by_facesegment(tmp_path / "b.txt")


# --------------------------------------------------------------- the walk

@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("world")
    model = random_model(4, kind="axis", n_trees=2, max_depth=2, kinds=("axis",))
    model.metrics["alpha"] = 0.5
    save_model(model, root / "models" / "axis-3")
    _write_faces(root / "data" / "test", n=2, size=36)
    _write_faces(root / "data" / "train", n=2, size=36)
    rng = np.random.default_rng(0)
    write_png_atomic(root / "photos" / "face.png",
                     rng.integers(0, 256, (250, 250, 3), dtype=np.uint8))
    return root


def _faces(w, out):
    return ["--data", str(w / "data"), "--out", str(out)]


#: (command, output option or folder, argv(world, sandbox), the output written there).
WALK = [
    ("segment", "OUTPUT_DIR", lambda w, s: ["segment", str(w / "photos"), str(s / "out"),
                                            "--model", str(w / "models/axis-3"), "-q"],
     "out/summary.csv"),
    ("segment", "OUTPUT_DIR", lambda w, s: ["segment", str(w / "photos"), str(s / "out"),
                                            "--model", str(w / "models/axis-3"), "-q"],
     "out/face_overlay.png"),
    ("segment", "OUTPUT_DIR", lambda w, s: ["segment", str(w / "photos"), str(s / "out"),
                                            "--model", str(w / "models/axis-3"), "-q"],
     "out/face_label.png"),
    ("segment", "OUTPUT_DIR", lambda w, s: ["segment", str(w / "photos"), str(s / "out"),
                                            "--model", str(w / "models/axis-3"), "-q",
                                            "--save-proba"],
     "out/face_proba.npz"),
    ("evaluate", "--out", lambda w, s: ["evaluate", "--model", str(w / "models/axis-3"),
                                        "-q", *_faces(w, s / "E")], "E/summary.md"),
    ("evaluate", "--out", lambda w, s: ["evaluate", "--model", str(w / "models/axis-3"),
                                        "-q", *_faces(w, s / "E")], "E/axis-3.json"),
    ("evaluate", "--out", lambda w, s: ["evaluate", "--model", str(w / "models/axis-3"),
                                        "-q", *_faces(w, s / "E")], "E/axis-3.md"),
    ("evaluate", "--landmarks-cache",
     lambda w, s: ["evaluate", "--method", "landmarks", "--split", "all", "-q",
                   "--landmarks-cache", str(s / "cache.npz"), *_faces(w, s / "E")],
     "cache.npz"),
    ("evaluate", "--out", lambda w, s: ["evaluate", "--method", "landmarks", "-q",
                                        *_faces(w, s / "E")], "E/landmarks.json"),
    ("figures", "--out", lambda w, s: ["figures", "--model", str(w / "models/axis-3"), "-q",
                                       *_faces(w, s / "F")], "F/figures.json"),
    ("figures", "--out", lambda w, s: ["figures", "--model", str(w / "models/axis-3"), "-q",
                                       *_faces(w, s / "F")], "F/figure3.png"),
    ("figures", "--out", lambda w, s: ["figures", "--model", str(w / "models/axis-3"), "-q",
                                       *_faces(w, s / "F")], "F/confusion_axis-3.png"),
    ("data splits", "--out", lambda w, s: ["data", "splits", str(w / "data"),
                                           "--validation", "1", "--out", str(s / "notes.json")],
     "notes.json"),
    ("label", "OUT_DIR", lambda w, s: ["label", str(w / "photos"), str(s / "L"), "--quiet"],
     "L/label_report.csv"),
    ("extract", "--out", lambda w, s: ["extract", str(w / "data"), "--out", str(s / "w.h5"),
                                       "--windows", "16"], "w.h5"),
    ("train", "--out", lambda w, s: ["train", "--kind", "axis", "--windows",
                                     str(s / "missing.h5"), "--out", str(s / "T")], "T"),
    ("data render", "OUT", lambda w, s: ["data", "render", str(w / "photos"), str(s / "R")],
     None),
]
#: Outputs whose rule is the command's own, tested elsewhere: the LFW download
#: (--dest: tests/data/test_download.py) and the aligned cache (--aligned-dir:
#: tests/faces/test_aligned.py, tests/test_hostile_inputs.py).
ELSEWHERE = {("data lfw", "--dest"), ("evaluate", "--aligned-dir")}
_OUTPUT_DEST = re.compile(r"out|out_dir|output_dir|dest|.*_cache|.*_dir_out|aligned_dir")


def _output_options():
    """Every (command, option or positional) of the parser that names an output."""
    found = set()

    def walk(parser, prefix):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{prefix} {name}".strip())
            elif _OUTPUT_DEST.fullmatch(action.dest) and action.nargs != 0:
                found.add((prefix, action.option_strings[0] if action.option_strings
                           else action.metavar))
    walk(get_parser(), "")
    return found


def test_the_walk_covers_every_output_option():
    walked = {(c, o) for c, o, _, _ in WALK}
    missing = _output_options() - walked - ELSEWHERE
    assert not missing, f"output options the walk does not cover: {sorted(missing)}"


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("command,option,argv,victim",
                         [w for w in WALK if w[3] is not None],
                         ids=[f"{w[0]}:{w[3]}" for w in WALK if w[3] is not None])
def test_outputs_never_replace_what_a_user_has(world, tmp_path, capsys, command, option,
                                              argv, victim, kind):
    if kind == "folder" and victim in ("T",):
        pytest.skip("train --out replaces a folder holding only a model (tests/test_cli_train.py)")
    plant(str(tmp_path / victim), kind, str(tmp_path / "elsewhere"))
    before = snapshot(tmp_path)
    rc = main(argv(world, tmp_path))
    err = capsys.readouterr().err
    assert rc == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not changed(before, snapshot(tmp_path))


def test_data_render_keeps_a_users_label_map(world, tmp_path, capsys):
    from facesegment.faces.landmarks import write_pts

    pts = np.stack([np.linspace(10, 50, 68), 30 + 10 * np.sin(np.linspace(0, 6, 68))], 1)
    write_pts(world / "photos" / "face.pts", pts)
    try:
        for kind in KINDS:
            out = tmp_path / kind.replace(" ", "_")
            plant(str(out / "face_label.png"), kind, str(tmp_path / "elsewhere"))
            before = snapshot(tmp_path)
            for extra in ([], ["--overwrite"]):
                rc = main(["data", "render", str(world / "photos"), str(out), *extra])
                cap = capsys.readouterr()
                assert rc in (0, 1, 2) and "Traceback" not in cap.err
                assert "rendered 0 label maps" in cap.out or rc == 2, cap
                assert not changed(before, snapshot(tmp_path))
    finally:
        os.remove(world / "photos" / "face.pts")


def test_reruns_replace_their_own_outputs_and_overwrite_a_users(world, tmp_path, capsys):
    seg = ["segment", str(world / "photos"), str(tmp_path / "out"), "--model",
           str(world / "models/axis-3"), "-q"]
    assert main(seg) == 0 and main(seg) == 0          # a rerun into the same folder
    ev = ["evaluate", "--model", str(world / "models/axis-3"), "-q",
          *_faces(world, tmp_path / "E")]
    assert main(ev) == 0 and main(ev) == 0
    sp = ["data", "splits", str(world / "data"), "--validation", "1", "--out",
          str(tmp_path / "notes.json")]
    assert main(sp) == 0 and main(sp) == 0
    (tmp_path / "out" / "summary.csv").write_text("mine")     # edited: now the user's
    assert main(seg) == 2
    assert "pass --overwrite" in capsys.readouterr().err
    assert main(seg + ["--overwrite"]) == 0
    assert (tmp_path / "out" / "summary.csv").read_text().startswith("name,status")
    os.remove(tmp_path / "notes.json")
    os.mkfifo(tmp_path / "notes.json")
    assert main(sp + ["--overwrite"]) == 2                      # never over a FIFO


# --------------------------------------------------------------- no writer outside the rule

#: Calls that write or rename a file.
_RENAMES = {("os", "replace"), ("os", "rename"), ("shutil", "move"), ("shutil", "copy"),
            ("shutil", "copyfile"), ("shutil", "copy2")}


def _temporaries(tree):
    """Names bound by ``with atomic_path(...) as NAME`` (the rule's temporaries)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.withitem) and isinstance(node.context_expr, ast.Call):
            f = node.context_expr.func
            if getattr(f, "id", getattr(f, "attr", None)) == "atomic_path" and \
                    isinstance(node.optional_vars, ast.Name):
                names.add(node.optional_vars.id)
    return names


def _target_ok(arg, temporaries):
    """A write's target is a temporary of the rule, an in-memory buffer or /dev/null."""
    text = ast.unparse(arg)
    return (text in temporaries or "tmp" in text.lower() or text in ("buf", "os.devnull", "fh")
            or text.startswith(("io.", "buf")))


def writers_outside_the_rule(root=ROOT / "facesegment"):
    """``path:line: call`` for every call that writes a file outside facesegment/atomic.py
    other than to a temporary of the rule (``with atomic_path(...) as tmp``)."""
    bad = []
    for path in sorted(root.rglob("*.py")):
        if path.name == "atomic.py" and path.parent == root:
            continue
        tree = ast.parse(path.read_text(), str(path))
        temporaries = _temporaries(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            where = f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)[:60]}"
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and \
                    (f.value.id, f.attr) in _RENAMES:
                bad.append(where)
            elif isinstance(f, ast.Name) and f.id == "open" or \
                    isinstance(f, ast.Attribute) and f.attr == "File":
                mode = node.args[1] if len(node.args) > 1 else next(
                    (k.value for k in node.keywords if k.arg == "mode"), None)
                writes = isinstance(mode, ast.Constant) and isinstance(mode.value, str) and \
                    any(c in mode.value for c in "wax+")
                if writes and not (node.args and _target_ok(node.args[0], temporaries)):
                    bad.append(where)
            elif isinstance(f, ast.Attribute) and f.attr in ("write_text", "write_bytes") and \
                    not _target_ok(f.value, temporaries):
                bad.append(where)
            elif isinstance(f, ast.Attribute) and f.attr in ("imwrite", "to_csv", "savefig") \
                    and node.args and not _target_ok(node.args[0], temporaries):
                bad.append(where)
    return bad


def test_no_writer_bypasses_the_rule():
    assert writers_outside_the_rule() == []


def test_the_scan_finds_a_new_writer(tmp_path):
    pkg = tmp_path / "facesegment"
    pkg.mkdir()
    (pkg / "atomic.py").write_text("import os\nos.replace('a', 'b')\n")
    (pkg / "new.py").write_text("import os\nos.replace('a', 'b')\n"
                                "open('report.txt', 'w').write('x')\n"
                                "with atomic_path('x') as tmp:\n    open(tmp, 'wb')\n")
    found = writers_outside_the_rule.__wrapped__(pkg) if hasattr(
        writers_outside_the_rule, "__wrapped__") else _scan_in(pkg, tmp_path)
    assert [w.split(": ", 1)[0].rsplit(":", 1)[1] for w in found] == ["2", "3"]


def _scan_in(pkg, root):
    global ROOT
    saved, ROOT = ROOT, root
    try:
        return writers_outside_the_rule(pkg)
    finally:
        ROOT = saved


def test_pipelines_and_benchmarks_regenerate_the_repositorys_own_files():
    """Run as scripts, the pipelines and benchmarks replace the reports, docs and
    models they wrote before (tracked files a fresh clone has no record of)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    scripts = [p for d in ("pipelines", "benchmarks") for p in sorted((root / d).glob("*.py"))
               if '__name__ == "__main__"' in p.read_text()]
    assert len(scripts) > 20
    for p in scripts:
        tail = p.read_text().split('__name__ == "__main__"', 1)[1]
        assert re.search(r"with overwriting\(\):[^\n]*\n\s+(sys\.exit\()?main\(", tail), p.name
