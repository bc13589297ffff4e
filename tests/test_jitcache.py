"""facesegment/_jitcache.py: Numba's disk cache is dropped when any source file
of the package changes (Numba itself only checks a kernel's own file)."""

import os

from facesegment import _jitcache


def _package(tmp_path):
    root = tmp_path / "pkg"
    (root / "sub" / "__pycache__").mkdir(parents=True)
    (root / "__pycache__").mkdir()
    (root / "a.py").write_text("x = 1\n")
    (root / "sub" / "b.py").write_text("y = 2\n")
    return root


def _caches(root):
    names = ["__pycache__/a.f-1.py311.nbi", "__pycache__/a.f-1.py311.1.nbc",
             "sub/__pycache__/b.g-3.py311.nbi"]
    for n in names:
        (root / n).write_bytes(b"cache")
    (root / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"pyc")   # not Numba's
    return [root / n for n in names]


def test_caches_go_when_any_source_changes_and_only_then(tmp_path):
    root = _package(tmp_path)
    files = _caches(root)
    assert _jitcache.refresh(root) == 3                     # no record yet: dropped
    assert not any(f.exists() for f in files)
    assert (root / "__pycache__" / "a.cpython-311.pyc").exists()
    stamp = root / _jitcache.STAMP
    assert stamp.read_text().strip() == _jitcache.source_digest(root)
    files = _caches(root)
    assert _jitcache.refresh(root) == 0                     # sources unchanged: kept
    assert all(f.exists() for f in files)
    (root / "sub" / "b.py").write_text("y = 3\n")          # another file changes
    assert _jitcache.refresh(root) == 3
    assert not any(f.exists() for f in files)
    assert not list(root.rglob("*.tmp"))


def test_an_unwritable_package_is_left_alone(tmp_path, monkeypatch):
    root = _package(tmp_path)
    files = _caches(root)

    def refuse(*a, **k):
        raise PermissionError("read-only")

    monkeypatch.setattr(os, "replace", refuse)
    monkeypatch.setattr(type(root), "unlink", refuse)
    assert _jitcache.refresh(root) == 0
    assert all(f.exists() for f in files)


def test_the_installed_package_is_recorded():
    """Importing facesegment records the digest of its sources (so the caches
    the tests build belong to these sources)."""
    stamp = _jitcache.ROOT / _jitcache.STAMP
    if os.access(_jitcache.ROOT, os.W_OK):
        assert stamp.read_text().strip() == _jitcache.source_digest()
