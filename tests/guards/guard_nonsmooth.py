"""The event flow's refactor guard (not a benchmark): records every array a set of
`flows.simulate_nonsmooth` runs returns, and the optimized HLO of every program it
compiles, so that two checkouts can be compared bit for bit in one environment.

Ten runs cover every path of the event loop: transversal crossings (RMS and max error
norm), an event storm, Filippov sliding (physical and log clock), a deep ReLU net, the
bias-plateau deep net from its stored states at t = 10.86 (multi-layer sliding exit) and
t = 58 (coupled kinks: the complementarity solve), a sample dead in one layer (slaved
pairs), and slot growth on the loss clock.

    PYTHONPATH=/path/to/old/checkout python tests/guards/guard_nonsmooth.py record old.pkl
    python tests/guards/guard_nonsmooth.py record new.pkl
    python tests/guards/guard_nonsmooth.py compare old.pkl new.pkl

`compare` prints, per run, whether every array is identical and whether each compiled
program's HLO is (source locations stripped); it exits 1 on any difference. Library
versions change both, so compare records made in the same environment only.
(Used for the split of `flows/_nonsmooth.py` into a package, 2026-12-04: all identical.)
"""

from __future__ import annotations

import json
import pickle
import re
import sys
from pathlib import Path

import jax.numpy as jnp
import numpy as np

import flows
from flows import logistic, simulate_nonsmooth
from flows.experiments.bias_plateau.data import (
    class_sum_cross_entropy,
    orthogonal_data,
    scale_to_unit_ball,
)
from flows.experiments.linear_teacher.data import antipodal_with_outlier, symmetric_gaussians
from flows.models.deep import DeepFCN
from flows.models.leaky import LeakyReLUNet

TD = Path(__file__).resolve().parents[1] / "data"


def stored(t):
    s = np.load(TD / f"deep_relu_theta_t{t}.npz")
    theta0 = {n: jnp.asarray(s[n]) for n in s.files}
    data = scale_to_unit_ball(orthogonal_data(k=4, n_per_class=10, d=16, sigma=0.1, seed=0))
    model = DeepFCN(d=16, k=4, depth=4, width=16, activation="relu", delta=1e-3)
    return flows.make_problem(model, data, theta0=theta0, loss_fn=class_sum_cross_entropy)


def cases():
    d = symmetric_gaussians(40, 2, mean=1.0, seed=0)
    pb = flows.make_problem(
        LeakyReLUNet(k=4, d=2, slope=0.1, init_scale=1.0), d.train, key=0, loss_fn=logistic
    )
    yield "crossing", pb, dict(t1=5.0, n_save=6)
    yield "crossing_max", pb, dict(t1=5.0, n_save=6, error_norm="max")
    yield "storm", pb, dict(t1=5.0, storm_window=2, storm_span=1e9, throw=False)
    d = antipodal_with_outlier(20, 2, outlier=np.asarray((-1.0, 3.0)))
    pb = flows.make_problem(
        LeakyReLUNet(k=3, d=2, slope=0.1, init_scale=1e-4), d.train, key=0, loss_fn=logistic
    )
    yield "sliding", pb, dict(t1=12.0, n_save=13, rtol=1e-10, atol=1e-13, save_params="all")
    yield "sliding_log", pb, dict(t1=100.0, n_save=5, clock="log")
    rng = np.random.default_rng(0)
    data = flows.from_arrays(rng.standard_normal((12, 3)), np.arange(12) % 3)
    pb = flows.make_problem(
        DeepFCN(d=3, k=3, depth=3, width=4, activation="relu", delta=1.0),
        data,
        key=0,
        loss_fn=flows.cross_entropy,
    )
    yield "deep_small", pb, dict(t1=4.0, n_save=5)
    yield "deep_10.86", stored("10.86"), dict(t1=1.5, n_save=4, rtol=1e-8, atol=1e-11)
    yield (
        "deep_58_mcp",
        stored("58"),
        dict(t1=0.5, n_save=3, rtol=1e-8, atol=1e-11, save_params="ends"),
    )
    data = scale_to_unit_ball(orthogonal_data(k=3, n_per_class=3, d=4, sigma=0.1, seed=0))
    pb = flows.make_problem(
        DeepFCN(d=4, k=3, depth=3, width=6, activation="relu", delta=1e-3),
        data,
        key=0,
        loss_fn=class_sum_cross_entropy,
    )
    yield (
        "dead_sample",
        pb,
        dict(t1=20.0, n_save=3, save_params="ends", max_sliding=32, max_candidates=32),
    )
    d = antipodal_with_outlier(60, 2, outlier=np.asarray((-1.0, 3.0)))
    pb = flows.make_problem(
        LeakyReLUNet(k=10, d=2, slope=0.1, init_scale=1e-4), d.train, key=0, loss_fn=logistic
    )
    yield (
        "slot_growth",
        pb,
        dict(t1=1e4, ts=flows.log_save_times(1e4, 9, first=0.1), clock="loss", slots=8),
    )


def _hlo(compiled) -> list[str]:
    """The optimized HLO without its source-location tables and metadata."""
    out = []
    for line in compiled.as_text().splitlines():
        if re.match(r"^\s*\d+ ", line) or re.match(
            r"^(FileNames|FunctionNames|FileLocations|StackFrames)", line
        ):
            continue
        line = re.sub(r", metadata=\{[^}]*\}", "", line)
        out.append(re.sub(r",? ?stack_frame_id=\d+", "", line))
    return out


def record(path: str) -> None:
    from flows import _nonsmooth

    out = {}
    for name, pb, kw in cases():
        _nonsmooth._CACHE.clear()
        tr = simulate_nonsmooth(pb, **kw)
        out[name] = {
            "obs": {k: np.asarray(v) for k, v in tr.observables.items()},
            "params": {k: np.asarray(v) for k, v in tr.params.items()},
            "times": np.asarray(tr.times),
            "extra": json.dumps(dict(tr.stats.extra), sort_keys=True, default=str),
            "steps": tr.stats.steps,
            "rejected": tr.stats.rejected_steps,
            "reason": tr.stats.reason,
            "hlo": [_hlo(c) for c in _nonsmooth._CACHE.values()],
        }
        print(f"{name}: {tr.stats.reason[:40]}, {tr.stats.steps} steps", file=sys.stderr)
    with open(path, "wb") as f:
        pickle.dump(out, f)


def compare(path_a: str, path_b: str) -> int:
    with open(path_a, "rb") as f:
        a = pickle.load(f)
    with open(path_b, "rb") as f:
        b = pickle.load(f)
    failed = 0
    for name, ra in a.items():
        rb = b.get(name)
        if rb is None:
            print(f"{name:14s} missing")
            failed += 1
            continue
        bad = [
            f"{grp}:{k}"
            for grp in ("obs", "params")
            for k, x in ra[grp].items()
            if not np.array_equal(x, rb[grp].get(k), equal_nan=True)
        ]
        bad += [k for k in ("times", "extra", "steps", "rejected", "reason")
                if not np.array_equal(np.asarray(ra[k]), np.asarray(rb[k]))]  # fmt: skip
        same_hlo = [x == y for x, y in zip(ra["hlo"], rb["hlo"], strict=False)]
        same_hlo += [False] * abs(len(ra["hlo"]) - len(rb["hlo"]))
        failed += bool(bad) or not all(same_hlo)
        print(f"{name:14s} arrays: {'identical' if not bad else bad}; HLO identical: {same_hlo}")
        if bad:
            print(f"{'':14s} largest relative differences: {_differences(ra, rb)}")
    return int(failed > 0)


def _differences(ra: dict, rb: dict) -> dict:
    """Per differing array of two records of one run: max |a − b| / max |a| (arrays of
    different shapes: 'shape'), and the step counts and reasons side by side."""
    out = {}
    for grp in ("obs", "params"):
        for k, x in ra[grp].items():
            y = rb[grp].get(k)
            if np.array_equal(x, y, equal_nan=True):
                continue
            x, y = np.asarray(x, float), np.asarray(y, float)
            if x.shape != y.shape:
                out[f"{grp}:{k}"] = "shape"
                continue
            both = np.isfinite(x) & np.isfinite(y)
            scale = np.max(np.abs(x[both]), initial=0.0) or 1.0
            out[f"{grp}:{k}"] = float(f"{np.max(np.abs(x - y)[both], initial=0.0) / scale:.2g}")
    ea, eb = json.loads(ra["extra"]), json.loads(rb["extra"])
    for k in sorted(set(ea) | set(eb)):
        if ea.get(k) != eb.get(k):
            out[f"extra:{k}"] = (ea.get(k), eb.get(k))
    for k in ("times", "steps", "rejected", "reason"):
        if not np.array_equal(np.asarray(ra[k]), np.asarray(rb[k])):
            out[k] = (ra[k], rb[k]) if k != "times" else "differ"
    return out


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "record":
        record(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "compare":
        sys.exit(compare(sys.argv[2], sys.argv[3]))
    else:
        print(__doc__)
        sys.exit(2)
