"""The stages of the UCI harness for one dataset: ``select``, ``test`` and ``big``
(:class:`DatasetRun`; the protocol is described in :mod:`pipelines.uci` and
docs/uci.md).

Each stage writes ``OUT/NAME/<stage>-<kind>.json`` (sorted keys, no measured
time) with a ``key`` hashed from everything its result depends on: the layout
version :data:`LAYOUT`, the sha256 of train.npz and test.npz, the settings and
the seed.  A stage whose file holds the key it would compute is skipped.
Measured times go to ``OUT/timings.json`` (:class:`Timings`).
"""

import hashlib
import json
import os
import time
from pathlib import Path

from facesegment.atomic import write_json_atomic
from facesegment.progress import Progress

from .runner import keyed_result
from .uci_config import (CART_KINDS, dataset_config, fit_forest, grid, label, make_forest,
                         n_errors, proba_sums)
from .uci_data import apply_scaler, fit_scaler, stratified_split, stratified_subsample

#: Version of what the stages write (part of every key): bump it to redo them.
LAYOUT = 1
DEFAULT_SCALE = "standard"


def seed_for(base, *names):
    """A seed in [0, 2**31) from the base seed and names (stable across runs)."""
    h = hashlib.sha256("/".join(map(str, (base,) + names)).encode()).digest()
    return int.from_bytes(h[:4], "little") & 0x7FFFFFFF


def key_of(spec):
    return hashlib.sha256(json.dumps(spec, sort_keys=True, default=str).encode()).hexdigest()[:24]


def read_json(path):
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def pct(errors, n):
    return round(100.0 * errors / n, 4) if n else None


def params_text(params):
    return " ".join(f"{k}={v}" for k, v in params.items()) or "defaults"


class Timings:
    """``OUT/timings.json``: every measured time, keyed ``dataset/kind/stage``."""

    def __init__(self, out):
        self.path = Path(out) / "timings.json"
        self.data = read_json(self.path) or {}
        self.data.setdefault("stages", {})

    def get(self, name, key):
        entry = self.data["stages"].get(name)
        return entry if entry and entry.get("key") == key else None

    def put(self, name, entry):
        self.data["stages"][name] = entry
        self.data["machine"] = {"cpu_count": os.cpu_count(),
                                "date": time.strftime("%Y-%m-%d", time.gmtime())}
        write_json_atomic(self.path, self.data, sort_keys=True)


def _load_avg():
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:  # pragma: no cover
        return None


class DatasetRun:
    """The stages of one dataset (its data, split and scaled copies in memory)."""

    def __init__(self, ds, cfg, out, workers, timings, log):
        self.ds, self.out, self.log = ds, Path(out) / ds.name, log
        self.run, self.kinds, self.large = dataset_config(cfg, ds.X.shape[0] * ds.n_features)
        self.workers = workers or self.run["workers"]
        self.timings = timings
        self.seed = self.run["seed"]
        self.chosen = {}
        self.current = "loading"
        self._cache = {}
        self.info = ds.info()

    # --------------------------------------------------------------- data
    def split(self):
        if "split" not in self._cache:
            fit, val = stratified_split(self.ds.y, self.run["validation"],
                                        seed_for(self.seed, self.ds.name, "split"))
            fit = stratified_subsample(fit, self.ds.y, self.run["select_max_rows"],
                                       seed_for(self.seed, self.ds.name, "subsample"))
            self._cache["split"] = (fit, val)
        return self._cache["split"]

    def scaled(self, part, scale):
        """``(X_fit, y_fit, X_eval, y_eval)``: "select" (validation split) or "test"."""
        key = (part, scale)
        if key not in self._cache:
            self._cache = {k: v for k, v in self._cache.items() if k == "split" or k[0] == part}
            ds = self.ds
            if part == "select":
                fit, val = self.split()
                Xf, yf, Xe, ye = ds.X[fit], ds.y[fit], ds.X[val], ds.y[val]
            else:
                Xf, yf, Xe, ye = ds.X, ds.y, ds.X_test, ds.y_test
            sc = fit_scaler(Xf, scale)
            self._cache[key] = (apply_scaler(Xf, sc), yf, apply_scaler(Xe, sc), ye)
        return self._cache[key]

    # ------------------------------------------------------------- stages
    def _settings(self, kind):
        table = self.kinds.get(kind, {})
        inherited = {p: self.chosen[src][p] for p, src in table.get("inherit", {}).items()}
        fixed = dict(table.get("fixed", {}))
        return inherited, fixed, grid(table)

    def _done(self, stage, kind, key):
        """The stage's file when it holds ``key``, else None (the runner's skip test)."""
        self.current = f"{kind} {stage}"
        old = keyed_result(self.out / f"{stage}-{kind}.json", key)
        if old is not None:
            old["_skipped"] = True
        return old

    def _select_spec(self, kind):
        inherited, fixed, settings = self._settings(kind)
        r = self.run
        spec = {"layout": LAYOUT, "stage": "select", "data": self.ds.sha256, "kind": kind,
                "inherited": inherited, "fixed": fixed, "settings": settings, "seed": self.seed,
                "validation": r["validation"], "trees": r["select_trees"],
                "max_rows": r["select_max_rows"]}
        return key_of(spec), inherited, fixed, settings

    def select_fresh(self, kind):
        """The up-to-date result of ``select`` (its choice taken), else None."""
        old = self._done("select", kind, self._select_spec(kind)[0])
        if old is not None:
            self.chosen[kind] = old["chosen"]
        return old

    def select(self, kind):
        """Search the grid of ``kind`` on the validation split; write select-KIND.json."""
        self.current = f"{kind} select"
        key, inherited, fixed, settings = self._select_spec(kind)
        res = self._select(kind, key, inherited, fixed, settings,
                           self.out / f"select-{kind}.json")
        self.chosen[kind] = res["chosen"]
        return res

    def _select(self, kind, key, inherited, fixed, settings, path):
        name = f"{self.ds.name} {kind} select"
        base = {"scale": inherited.get("scale", DEFAULT_SCALE), **inherited, **fixed}
        rows, n_fit, n_val = [], 0, 0
        t0, c0 = time.perf_counter(), time.process_time()
        if len(settings) > 1:
            self.log(f"[{name}] {len(settings)} settings of {self.run['select_trees']} trees")
            seed = seed_for(self.seed, self.ds.name, kind, "select")
            with Progress(len(settings), desc=name, unit="settings") as bar:
                for setting in settings:
                    params = {**base, **setting}
                    Xf, yf, Xv, yv = self.scaled("select", params["scale"])
                    est = make_forest(kind, params, self.run["select_trees"], seed, self.workers,
                                      Xf.shape[1])
                    fit_forest(est, Xf, yf)
                    sums = proba_sums(est, Xv, [self.run["select_trees"]])
                    err = n_errors(est.classes_, sums[self.run["select_trees"]], yv)
                    n_fit, n_val = len(yf), len(yv)
                    rows.append({"params": params, "val_errors": err,
                                 "val_error": pct(err, n_val)})
                    bar.update(1, f"{params_text(setting)}: {pct(err, n_val)} %")
            best = min(range(len(rows)), key=lambda i: (rows[i]["val_errors"], i))
            chosen = rows[best]["params"]
        else:
            chosen = {**base, **(settings[0] if settings else {})}
        res = {"dataset": self.ds.name, "kind": kind, "label": label(kind), "stage": "select",
               "key": key, "data": self.info, "large": self.large,
               "trees": self.run["select_trees"], "n_fit": n_fit, "n_validation": n_val,
               "searched": len(settings) > 1, "inherited": inherited, "fixed": fixed,
               "settings": rows, "chosen": chosen}
        write_json_atomic(path, res, sort_keys=True)
        secs = time.perf_counter() - t0
        self.timings.put(f"{self.ds.name}/{kind}/select", {
            "key": key, "seconds": round(secs, 3),
            "cpu_seconds": round(time.process_time() - c0, 3), "settings": len(rows),
            "load_avg": _load_avg(), "workers": self.workers})
        return res

    def test_spec(self, kind):
        r = self.run
        spec = {"layout": LAYOUT, "stage": "test", "data": self.ds.sha256, "kind": kind,
                "params": self.chosen[kind], "trees": r["trees"], "curve": r["curve"],
                "columns": r["columns"], "seed": self.seed}
        if kind in CART_KINDS:
            spec["cart"] = 1  # with the OOB error and the Gini twin
        return spec

    def test_fresh(self, kind):
        """The up-to-date result of ``test``, else None."""
        return self._done("test", kind, key_of(self.test_spec(kind)))

    def test(self, kind):
        """The test forest of ``kind``: its error curve; write test-KIND.json."""
        self.current = f"{kind} test"
        key, path = key_of(self.test_spec(kind)), self.out / f"test-{kind}.json"
        params, n = self.chosen[kind], self.run["trees"]
        Xf, yf, Xt, yt = self.scaled("test", params["scale"])
        self.log(f"[{self.ds.name} {kind} test] {n} trees on {len(yf)} rows: "
                 f"{params_text(params)}")
        cart = {"oob_score": True} if kind in CART_KINDS else {}
        est = make_forest(kind, params, n, seed_for(self.seed, self.ds.name, kind, "test"),
                          self.workers, Xf.shape[1], **cart)
        t0, c0 = time.perf_counter(), time.process_time()
        fit_forest(est, Xf, yf)
        fit_s, fit_cpu = time.perf_counter() - t0, time.process_time() - c0
        t1 = time.perf_counter()
        est.predict_proba(Xt)
        pred_s = time.perf_counter() - t1
        t2 = time.perf_counter()
        points = sorted(set(self.run["curve"]) | set(self.run["columns"]) | {n})
        sums = proba_sums(est, Xt, points)
        curve = {str(k): n_errors(est.classes_, sums[k], yt) for k in points}
        eval_s = time.perf_counter() - t2
        res = {"dataset": self.ds.name, "kind": kind, "label": label(kind), "stage": "test",
               "key": key, "data": self.info, "params": params, "trees": n, "n_test": len(yt),
               "columns": self.run["columns"],
               "curve_errors": curve, "curve": {k: pct(v, len(yt)) for k, v in curve.items()},
               "nodes": _nodes(est)}
        if cart:
            res["cart"] = self._cart(kind, params, n, est, Xf, yf, Xt, yt)
        if hasattr(est, "predict_proba_product"):  # random ferns: the product rule too
            res["product_rule"] = {
                str(k): pct(n_errors(est.classes_, est.predict_proba_product(Xt, n_trees=k), yt),
                            len(yt)) for k in self.run["columns"]}
        write_json_atomic(path, res, sort_keys=True)
        self.timings.put(f"{self.ds.name}/{kind}/test", {
            "key": key, "trees": n, "n_train": len(yf), "n_test": len(yt),
            "fit_s": round(fit_s, 4), "fit_cpu_s": round(fit_cpu, 4),
            "predict_s": round(pred_s, 4), "eval_s": round(eval_s, 4),
            "load_avg": _load_avg(), "workers": self.workers})
        return res

    def _cart(self, kind, params, n, est, Xf, yf, Xt, yt):
        """The OOB error (%) of the test forest ``est`` and the test and OOB errors of
        its Gini twin (same settings and seed), at ``n`` trees."""
        twin = make_forest(kind, params, n, seed_for(self.seed, self.ds.name, kind, "test"),
                           self.workers, Xf.shape[1], oob_score=True, criterion="gini")
        fit_forest(twin, Xf, yf)
        wrong = n_errors(twin.classes_, twin.predict_proba(Xt), yt)
        return {"oob": round(100.0 * (1.0 - est.oob_score_), 4),
                "gini": pct(wrong, len(yt)),
                "gini_oob": round(100.0 * (1.0 - twin.oob_score_), 4)}

    def big_key(self, kind):
        r = self.run
        spec = {k: v for k, v in self.test_spec(kind).items() if k != "cart"}
        return key_of({**spec, "stage": "big", "big_trees": r["big_trees"],
                       "big_curve": r["big_curve"], "big_chunk": r["big_chunk"]})

    def big_fresh(self, kind):
        """The up-to-date result of ``big``, else None."""
        return self._done("big", kind, self.big_key(kind))

    def big(self, kind):
        """The ``big_trees`` forest in chunks; chunk 0 is the test forest."""
        self.current = f"{kind} big"
        r, key = self.run, self.big_key(kind)
        path = self.out / f"big-{kind}.json"
        params, total = self.chosen[kind], r["big_trees"]
        Xf, yf, Xt, yt = self.scaled("test", params["scale"])
        points = sorted(set(r["curve"]) | set(r["big_curve"]) | {r["trees"], total})
        acc, curve, done, chunk = None, {}, 0, 0
        fit_s = fit_cpu = 0.0
        with Progress(total, desc=f"{self.ds.name} {kind} big", unit="trees") as bar:
            while done < total:
                n = min(r["trees"] if chunk == 0 else r["big_chunk"], total - done)
                seed = seed_for(self.seed, self.ds.name, kind,
                                "test" if chunk == 0 else f"big{chunk}")
                est = make_forest(kind, params, n, seed, self.workers, Xf.shape[1])
                t0, c0 = time.perf_counter(), time.process_time()
                fit_forest(est, Xf, yf)
                fit_s += time.perf_counter() - t0
                fit_cpu += time.process_time() - c0
                local = [k - done for k in points if done < k <= done + n]
                sums = proba_sums(est, Xt, sorted(set(local) | {n}))
                base = 0 if acc is None else acc
                for k in local:
                    curve[str(done + k)] = n_errors(est.classes_, base + sums[k], yt)
                acc = base + sums[n]
                done, chunk = done + n, chunk + 1
                del est, sums
                bar.update(n)
        res = {"dataset": self.ds.name, "kind": kind, "label": label(kind), "stage": "big",
               "key": key, "data": self.info, "params": params, "trees": total,
               "n_test": len(yt), "curve_errors": curve,
               "curve": {k: pct(v, len(yt)) for k, v in curve.items()}}
        write_json_atomic(path, res, sort_keys=True)
        self.timings.put(f"{self.ds.name}/{kind}/big", {
            "key": key, "trees": total, "fit_s": round(fit_s, 3), "fit_cpu_s": round(fit_cpu, 3),
            "load_avg": _load_avg(), "workers": self.workers})
        return res


def _nodes(est):
    if hasattr(est, "forest_"):
        return int(est.forest_.n_nodes)
    return int(sum(t.tree_.node_count for t in est.estimators_))


def kinds_to_run(cfg_kinds, tables, wanted):
    """``(select order, kinds to test)``: ``wanted`` plus what they inherit from."""
    if not wanted:
        return list(cfg_kinds), list(cfg_kinds)
    need, todo = set(), list(wanted)
    while todo:
        k = todo.pop()
        if k not in need:
            need.add(k)
            todo += list(tables.get(k, {}).get("inherit", {}).values())
    return [k for k in cfg_kinds if k in need], [k for k in cfg_kinds if k in wanted]


def summary(res):
    """One line about a stage's result (the progress line's tail)."""
    what = f"{res['dataset']} {res['kind']} {res['stage']}"
    if res["stage"] == "select":
        tail = params_text(res["chosen"])
        best = [x["val_error"] for x in res["settings"] if x["params"] == res["chosen"]]
        tail += f", validation error {best[0]} %" if best else ""
    else:
        cols = res.get("columns") or [res["trees"]]
        tail = "test error " + ", ".join(f"{c} trees {res['curve'][str(c)]} %" for c in cols)
    return f"{what}: {tail}" + (" (up to date)" if res.get("_skipped") else "")
