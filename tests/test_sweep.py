"""Batched sweeps: vmapped solves, resume, refusing to mix, bad input, Dask, the figure."""

import json
import math
import time
from typing import Any

import numpy as np
import pytest
import xarray as xr

import flows
from flows._cli import app as _cli
from flows._solve import batch as _batch
from flows._sweep import engine as _sweep
from flows.experiments import multistage as msx
from flows.experiments.multistage import sweep as msweep
from flows.models import TwoLayer
from flows.plugin import parse_seeds

# One tiny grid for every sweep here: one width, so one compiled batched solve (B = 2).
GRID = dict(m="20", alpha="0.75,1.0", seeds="0-1")
SETTINGS = dict(target="f2", data="assumption", n=30, n_save=41, batch_size=2)
CLI_ARGS = [
    "sweep",
    "multistage",
    "--m",
    "20",
    "--alpha",
    "0.75,1.0",
    "--seeds",
    "0-1",
    "--target",
    "f2",
    "--data",
    "assumption",
    "--n",
    "30",
    "--n-save",
    "41",
    "--batch-size",
    "2",
    "--no-plot",
]
TIMING = {"wall_s", "batch_wall_s", "compile_s"}


def _run(out, **kw):
    return msweep.descent_sweep(out, **{**GRID, **SETTINGS, "plot": False, "progress": False, **kw})


def _assert_same_results(a: xr.Dataset, b: xr.Dataset, rtol=1e-12, atol=1e-13):
    """Equal to round-off (atol: the energy residual is a difference of O(1) numbers)."""
    assert set(a.data_vars) == set(b.data_vars)
    for k in ("m", "alpha", "seed"):
        np.testing.assert_array_equal(a[k].values, b[k].values)
    for name in a.data_vars:
        if name in TIMING:
            continue
        if a[name].dtype.kind in "fiu":
            np.testing.assert_allclose(
                a[name].values, b[name].values, rtol=rtol, atol=atol, err_msg=name
            )
        else:
            np.testing.assert_array_equal(a[name].values, b[name].values, err_msg=name)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The grid run uninterrupted, in-process."""
    out = tmp_path_factory.mktemp("ref") / "sweep"
    result = _run(out, plot=True)
    return result, result.dataset()


# ---------------------------------------------------------------------------------------
# Grid parsing


def test_parse_grid_forms():
    assert msweep.parse_widths("1000,5000") == (1000, 5000)
    assert msweep.parse_widths([250, "1e3"]) == (250, 1000)
    assert msweep.parse_alphas("0.75, 1") == (0.75, 1.0)
    assert parse_seeds("0-2") == (0, 1, 2)
    assert parse_seeds("0,1,5-6") == (0, 1, 5, 6)
    assert parse_seeds(range(3)) == (0, 1, 2)
    grid = msweep.parse_grid("20,40", "0.75,1", "0-1")
    assert len(grid) == 8 and grid[0] == (20, 0.75, 0) and grid[-1] == (40, 1.0, 1)


@pytest.mark.parametrize(
    "m, alpha, seeds, match",
    [
        ("", "1", "0", "--m is empty"),
        ("1000,,5000", "1", "0", "malformed"),
        ("10x0", "1", "0", "not an integer"),
        ("1", "1", "0", "≥ 2"),
        ("1000", "0.5", "0", "α > 1/2"),
        ("1000", "nan", "0", "finite"),
        ("1000", "abc", "0", "not a number"),
        ("1000,1000", "1", "0", "duplicate grid point: m=1000 given twice"),
        ("1000", "1,1.0", "0", "duplicate grid point: alpha=1.0"),
        ("1000", "1", "0-2,1", "duplicate grid point: seed=1"),
        ("1000", "1", "2-0", "empty"),
        ("1000", "1", "-1", "negative"),
        ([], "1", "0", "empty"),
    ],
)
def test_parse_grid_errors(m, alpha, seeds, match):
    with pytest.raises(flows.ConfigError, match=match):
        msweep.parse_grid(m, alpha, seeds)


def test_make_batches_groups_by_width_and_balances():
    grid = msweep.parse_grid("20,40", "0.75,1,1.25", "0-2")
    batches = _sweep.make_batches(grid, 4, msweep.batch_key)
    assert [len(b) for b in batches] == [3, 3, 3, 3, 3, 3]
    assert all(len({p[0] for p in b}) == 1 for b in batches)
    key = msweep.batch_key
    assert _sweep._pads(_sweep.make_batches(grid[:7], 4, key), key) == [4, 4]
    assert sorted(p for b in batches for p in b) == sorted(grid)


# ---------------------------------------------------------------------------------------
# simulate_batch


def _problems(m=20, n=30, specs=((0.75, 0), (1.0, 1))):
    data = flows.assumption_data("f2", n=n)
    return [flows.make_problem(TwoLayer(m=m, d=1, alpha=a), data, key=s) for a, s in specs]


def test_simulate_batch_equals_one_by_one(reference):
    """Each vmapped member takes its own adaptive steps: same step counts, same numbers to
    round-off as `simulate` (same settings as the sweep, so the compiled solve is reused)."""
    probs = _problems()
    t1s = [5.0, 8.0]  # different horizons in one batch
    kw = dict(rtol=1e-6, atol=1e-9, observables=msx.multistage_observables)
    batch = _batch.simulate_batch(probs, t1s=t1s, n_save=41, **kw)
    for prob, t1, tr in zip(probs, t1s, batch, strict=True):
        ref = flows.simulate(prob, t1=t1, n_save=41, save_params="none", **kw)
        assert isinstance(tr, flows.Trajectory)
        assert tr.stats["steps"] == ref.stats["steps"]
        assert tr.stats["vf_evals"] == ref.stats["vf_evals"]
        np.testing.assert_array_equal(tr.times, ref.times)
        # the energy is read as (E + |L(0)|) − |L(0)| (`energy_offset`): its round-off
        # grows by up to float64's eps × |L(0)| a step, not eps × E (measured 1.2e-15 =
        # 11 eps·L(0) over 21 steps, L(0) ≈ 0.49)
        eps = np.finfo(np.float64).eps
        e_atol = 2 * ref.stats["steps"] * eps * abs(float(ref.loss[0]))
        for name in ("loss", "K_hat", "q_max", "energy", "energy_residual"):
            atol = e_atol if name.startswith("energy") else 1e-15
            np.testing.assert_allclose(
                tr.observables[name], ref.observables[name], rtol=1e-12, atol=atol, err_msg=name
            )
    assert batch[0].stats["batch_size"] == 2


@pytest.mark.e2e
def test_simulate_batch_error_norm_matches_simulate():
    """`error_norm='max'` reaches the batched solve: each member equals `simulate` with
    'max' (same steps, same numbers to round-off), takes other steps than under the
    default 'rms', and records the norm; a bad name is refused before any solve."""
    probs = _problems()
    kw: dict[str, Any] = dict(
        rtol=1e-6, atol=1e-9, observables=msx.multistage_observables, n_save=41
    )
    t1s = [5.0, 8.0]
    batch = _batch.simulate_batch(probs, t1s=t1s, error_norm="max", **kw)
    default = _batch.simulate_batch(probs, t1s=t1s, **kw)
    for prob, t1, tr, rms in zip(probs, t1s, batch, default, strict=True):
        ref = flows.simulate(prob, t1=t1, save_params="none", error_norm="max", **kw)
        assert isinstance(tr, flows.Trajectory) and isinstance(rms, flows.Trajectory)
        assert tr.config["error_norm"] == "max" and rms.config["error_norm"] == "rms"
        assert tr.stats["steps"] == ref.stats["steps"] != rms.stats["steps"]
        for name in ("loss", "K_hat", "energy"):  # vmapped vs unbatched: 2e-12 measured
            np.testing.assert_allclose(
                tr.observables[name], ref.observables[name], rtol=1e-10, atol=1e-15, err_msg=name
            )
        assert not np.array_equal(tr.observables["loss"], rms.observables["loss"])
    with pytest.raises(flows.ConfigError, match="`error_norm` must be 'rms'"):
        _batch.simulate_batch(probs, t1s=t1s, error_norm="l2", **kw)


def test_simulate_batch_failure_is_per_member():
    """One member exhausts max_steps (long horizon); the other is returned as usual."""
    probs = _problems(m=4, n=10)
    out = _batch.simulate_batch(probs, t1s=[0.2, 500.0], n_save=5, max_steps=12)
    assert isinstance(out[0], flows.Trajectory) and out[0].stats["result"] == "successful"
    assert isinstance(out[1], flows.SolverError)
    assert "max_steps" in out[1].reason and out[1].t_reached < 500.0
    assert out[1].trajectory.stats["result"] == out[1].reason


def test_simulate_batch_bad_input():
    with pytest.raises(flows.ConfigError, match="equal shape"):
        _batch.simulate_batch(_problems(m=3) + _problems(m=4)[:1], t1s=[1, 1, 1])
    with pytest.raises(flows.ConfigError, match="one final time per problem"):
        _batch.simulate_batch(_problems(m=3), t1s=[1.0])
    with pytest.raises(flows.ConfigError, match="empty"):
        _batch.simulate_batch([], t1s=[])
    with pytest.raises(flows.ConfigError, match="solver"):
        _batch.simulate_batch(_problems(m=3), t1s=[1, 1], solver="euler")


# ---------------------------------------------------------------------------------------
# The sweep


def test_sweep_results_and_layout(reference):
    result, ds = reference
    assert result.ok and result.n_points == 4 and result.n_run == 4 and result.n_skipped == 0
    assert ds.sizes == {"m": 1, "alpha": 2, "seed": 2, "save": 41}
    assert (ds["status"] == "ok").all()
    for name in ("T_p", "T_d", "loss_plateau_end", "vf_evals", "steps", "energy_residual_max"):
        assert ds[name].dims == ("m", "alpha", "seed")
    assert ds["loss"].dims == ("m", "alpha", "seed", "save")
    # T_p from Table 1, T_d measured after it and before the horizon
    np.testing.assert_allclose(ds["T_p"].sel(alpha=1.0), math.log(20) / 4)
    assert np.all(ds["T_d"] > ds["T_p"]) and np.all(ds["T_d"] < ds["tau1"])
    assert np.all(ds["energy_residual_max"] < 1e-6)
    # T_d is read off the stored curves: first τ ≥ T_p with 1 − K̂ ≤ β
    p = ds.sel(m=20, alpha=1.0, seed=0)
    td = flows.first_crossing(p["tau"], 1 - p["K_hat"], 0.1, after=float(p["T_p"]))
    assert td == pytest.approx(float(p["T_d"]), rel=1e-12)
    cfg = json.loads(ds.attrs["config"])
    assert cfg["solver"] == "tsit5" and cfg["target"] == "f2" and "jax" in ds.attrs["versions"]
    out = result.out
    assert sorted(f.name for f in (out / "points").iterdir()) == [
        "m20_alpha0.75_seed0.nc",
        "m20_alpha0.75_seed1.nc",
        "m20_alpha1.0_seed0.nc",
        "m20_alpha1.0_seed1.nc",
    ]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["experiment"] == "multistage" and manifest["machine"] == flows.machine()
    # each point records where it was computed (a resumed sweep may mix machines)
    with xr.open_dataset(out / "points" / "m20_alpha1.0_seed0.nc") as point:
        assert json.loads(point.attrs["machine"]) == flows.machine()
    assert result.figure.exists() and set(result.slopes) == {"T_d_vs_alpha", "T_d_vs_ln_m"}


def test_resume_after_crash_skips_done_points(reference, tmp_path, monkeypatch):
    _, ref = reference
    out = tmp_path / "sweep"
    real_write = _sweep._write_point
    written = []

    def crash_after_two(points_dir, rec, cfg):
        if len(written) == 2:
            raise KeyboardInterrupt  # a crash mid-sweep
        written.append(rec["id"])
        return real_write(points_dir, rec, cfg)

    monkeypatch.setattr(_sweep, "_write_point", crash_after_two)
    with pytest.raises(KeyboardInterrupt):
        _run(out)
    monkeypatch.setattr(_sweep, "_write_point", real_write)
    assert len(list((out / "points").glob("*.nc"))) == 2
    # debris of an interrupted write never counts as a completed point
    (out / "points" / ".m20_alpha1.0_seed0.nc.abc123.tmp").write_bytes(b"\x89HDF partial")
    computed = []
    real_run_points = msweep.run_points

    def counting(config, specs, pad_to=0):
        computed.extend(specs)
        return real_run_points(config, specs, pad_to)

    monkeypatch.setattr(msweep, "run_points", counting)
    result = _run(out)
    assert sorted(computed) == [(20, 1.0, 0), (20, 1.0, 1)]  # only the missing points
    assert result.n_skipped == 2 and result.n_run == 2 and result.ok
    _assert_same_results(result.dataset(), ref)
    computed.clear()
    _run(out)
    assert computed == []  # nothing left to do
    # a corrupt point file is recomputed, as is a deleted one (batched together this time:
    # the results do not depend on the batch's composition)
    (out / "points" / "m20_alpha0.75_seed1.nc").write_bytes(b"garbage")
    (out / "points" / "m20_alpha1.0_seed0.nc").unlink()
    _run(out)
    assert computed == [(20, 0.75, 1), (20, 1.0, 0)]
    _assert_same_results(xr.load_dataset(out / "sweep.nc"), ref)


def test_extending_the_grid_adds_points(reference, tmp_path, monkeypatch):
    out = tmp_path / "sweep"
    _run(out, alpha="1.0")
    result = _run(out, alpha="0.75")  # a different grid, same settings: allowed
    ds = result.dataset()
    assert list(ds["alpha"].values) == [0.75, 1.0] and (ds["status"] == "ok").all()
    _assert_same_results(ds, reference[1])


def test_refuses_to_mix_configs(reference, tmp_path):
    result, _ = reference
    out = result.out
    before = {p.name: p.stat().st_mtime_ns for p in out.rglob("*")}
    with pytest.raises(flows.ConfigError, match=r"rtol=1e-06.*rtol=1e-08.*new --out.*delete"):
        _run(out, rtol=1e-8)
    with pytest.raises(flows.ConfigError, match="target='f2'"):
        _run(out, target="f3")
    assert {p.name: p.stat().st_mtime_ns for p in out.rglob("*")} == before
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(flows.ConfigError, match="holds no sweep"):
        _run(other)
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "manifest.json").write_text(json.dumps({"experiment": "bias-plateau", "config": {}}))
    with pytest.raises(flows.ConfigError, match="experiment 'bias-plateau'"):
        _run(foreign)
    with pytest.raises(flows.ConfigError, match="experiments"):
        _run(tmp_path / "x", experiment="linear-teacher")
    assert not (tmp_path / "x").exists()


def test_failing_point_is_recorded_and_retried(reference, tmp_path, monkeypatch, capsys):
    out = tmp_path / "sweep"
    real = msweep._make_point_problem

    def broken(cfg, m, alpha, seed):
        if (alpha, seed) == (1.0, 1):
            raise RuntimeError("injected failure")
        return real(cfg, m, alpha, seed)

    monkeypatch.setattr(msweep, "_make_point_problem", broken)
    code = _cli.main(CLI_ARGS + ["--out", str(out)])
    text = capsys.readouterr().out
    assert code == 1
    assert "[4/4]" in text and "FAILED (1)" in text and "injected failure" in text
    ds = xr.load_dataset(out / "sweep.nc")
    bad = ds.sel(m=20, alpha=1.0, seed=1)
    assert str(bad["status"].values) == "failed" and "injected failure" in str(bad["error"].values)
    assert np.isnan(float(bad["T_d"]))
    assert int((ds["status"] == "ok").sum()) == 3
    monkeypatch.setattr(msweep, "_make_point_problem", real)
    # the rerun retries the failed point; with a deleted one beside it, the two make one
    # batch of the width already compiled here (a batch of one would compile anew)
    (out / "points" / "m20_alpha0.75_seed0.nc").unlink()
    code = _cli.main(CLI_ARGS + ["--out", str(out)])
    text = capsys.readouterr().out
    assert code == 0 and "1 failed before (retried)" in text and "2 to run" in text
    _assert_same_results(xr.load_dataset(out / "sweep.nc"), reference[1])


def _exit_status(argv) -> int:
    """`flows …`'s exit status, whether the error is argparse's (SystemExit) or ours."""
    try:
        return _cli.main(argv)
    except SystemExit as exc:
        return exc.code


def test_cli_bad_input_exit_2_writes_nothing(tmp_path, capsys):
    out = tmp_path / "bad"
    args = CLI_ARGS + ["--out", str(out)]
    bad_grid = list(args)
    bad_grid[bad_grid.index("--m") + 1] = "20,20"
    assert _cli.main(bad_grid) == 2
    assert "duplicate grid point: m=20 given twice" in capsys.readouterr().err
    assert _exit_status(args[:-2] + ["--solver", "nope", "--out", str(out)]) == 2
    assert "--solver" in capsys.readouterr().err
    assert _cli.main(args + ["--scheduler", "tcp://127.0.0.1:1", "--connect-timeout", "1"]) == 2
    assert "cannot reach the Dask scheduler" in capsys.readouterr().err
    # an atol above the initial weights' scale (std m^-α = 1e-10 at m = 1e5, α = 2)
    big = list(args)
    big[big.index("--m") + 1], big[big.index("--alpha") + 1] = "100000", "2.0"
    assert _cli.main(big) == 2
    assert "is not small against the initial weights" in capsys.readouterr().err
    assert not out.exists()


def test_unreachable_scheduler_writes_nothing(tmp_path):
    out = tmp_path / "never"
    start = time.perf_counter()
    with pytest.raises(flows.ConfigError, match="cannot reach the Dask scheduler.*nothing"):
        _run(out, scheduler="tcp://127.0.0.1:1", connect_timeout=2.0)
    # a hang guard (the 2 s connect timeout must be honoured), not a speed claim: generous
    # enough for any load
    assert time.perf_counter() - start < 300
    assert not out.exists()


def test_missing_dask_is_a_config_error(tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "distributed", None)  # import fails
    with pytest.raises(flows.ConfigError, match=r"pip install 'flows-theory\[dask\]'"):
        _run(tmp_path / "o", scheduler="tcp://127.0.0.1:8786")
    assert not (tmp_path / "o").exists()


@pytest.mark.e2e  # starts a local Dask cluster: ~14 s
def test_dask_local_cluster_matches_in_process(reference, tmp_path):
    """A local cluster of two worker processes; the client writes the point files as
    batches complete. The grid goes as one batch of four (one task): every worker process
    imports JAX and compiles its own solve (≈ 10–25 s on a loaded 2-core machine), and the
    results do not depend on how points are batched (checked against batches of two)."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        result = _run(tmp_path / "dask", scheduler=cluster.scheduler_address, batch_size=4)
    assert result.ok and result.backend.startswith("Dask") and "2 workers" in result.backend
    with xr.open_dataset(result.out / "points" / "m20_alpha1.0_seed0.nc") as point:
        assert json.loads(point.attrs["machine"])["cpu_cores"] >= 1  # a worker's
    ds = result.dataset()
    assert (ds["batch_size"] == 4).all()
    _assert_same_results(ds.drop_vars("batch_size"), reference[1].drop_vars("batch_size"))


def test_plot_descent_sweep_recovers_slopes(tmp_path):
    cfg = msweep.SweepConfig(n_save=3)
    rng = np.random.default_rng(0)
    recs = []
    for m in (100, 1000, 10000):
        for a in (0.75, 1.0, 1.5):
            for s in (0, 1):
                rec = msweep._blank_record(cfg, m, a, s)
                rec.update(status="ok", T_d=(2 * a - 1) / 2 * math.log(m) + 1.0)
                rec["T_d"] += 0.01 * rng.standard_normal() * (s - 0.5)
                recs.append(rec)
    recs[-1].update(status="failed", T_d=float("nan"), error="x")  # left out of the mean
    path = _sweep._write_netcdf_atomic(msweep.combined_dataset(recs, cfg), tmp_path / "s.nc")
    slopes = msweep.plot_descent_sweep(path, tmp_path / "fig.png")
    assert (tmp_path / "fig.png").stat().st_size > 10_000
    for a, s in slopes["T_d_vs_ln_m"].items():
        assert s["theory"] == (2 * a - 1) / 2
        assert s["fit"] == pytest.approx(s["theory"], abs=0.01)
    for m, s in slopes["T_d_vs_alpha"].items():
        assert s["fit"] == pytest.approx(math.log(m), abs=0.05)


@pytest.mark.e2e
def test_float32_sweep_tracks_float64_and_is_its_own_config(reference, tmp_path):
    """dtype='float32' runs the points in single precision (T_d within 1e-3 of float64's),
    is a setting a folder cannot mix, and a folder written before `dtype` existed reads as
    float64. Likewise `solver_method`: a folder written before it existed resumes with
    'tsit5' (same algorithm) but is refused with 'rkc' (then RKC2 without non-stiff
    steps)."""
    result, ds64 = reference
    out = tmp_path / "f32"
    ds32 = _run(out, dtype="float32").dataset()
    assert (ds32["status"] == "ok").all()
    td64, td32 = ds64["T_d"].values, ds32["T_d"].values
    assert np.all(np.isfinite(td64)) and np.all(np.isfinite(td32))
    np.testing.assert_allclose(td32, td64, rtol=1e-3)
    with pytest.raises(flows.ConfigError, match="dtype='float64'.*dtype='float32'"):
        _run(result.out, dtype="float32")
    # an old manifest (no dtype key) is the float64 config
    old = tmp_path / "old"
    _run(old, alpha="1.0", seeds="0")
    man = json.loads((old / "manifest.json").read_text())
    del man["config"]["dtype"], man["config"]["solver_method"]
    (old / "manifest.json").write_text(json.dumps(man))
    (point,) = (old / "points").glob("*.nc")  # the point's own copy of the config, too
    ds = xr.load_dataset(point, engine="h5netcdf")
    cfg = json.loads(ds.attrs["config"])
    del cfg["dtype"], cfg["solver_method"]
    ds.attrs["config"] = json.dumps(cfg)
    ds.to_netcdf(point, engine="h5netcdf")
    res = _run(old, alpha="1.0", seeds="0")
    assert res.n_skipped == 1 and res.n_run == 0
    old_rkc = tmp_path / "old_rkc"
    _run(old_rkc, alpha="1.0", seeds="0", solver="rkc", rtol=1e-5)
    man = json.loads((old_rkc / "manifest.json").read_text())
    del man["config"]["solver_method"]
    (old_rkc / "manifest.json").write_text(json.dumps(man))
    with pytest.raises(flows.ConfigError, match="solver_method='RKC2'"):
        _run(old_rkc, alpha="1.0", seeds="0", solver="rkc", rtol=1e-5)
    with pytest.raises(flows.ConfigError, match="dtype"):
        _run(old, alpha="1.0", seeds="0", dtype="float32")
    with pytest.raises(flows.ConfigError, match="`dtype` must be"):
        _run(tmp_path / "bad", dtype="float16")


def test_config_round_trip_and_solver_method_refusal():
    """`SweepConfig.from_dict(cfg.to_dict())` is `cfg`; the dict carries the algorithm behind
    the solver's name, and a dict naming another algorithm for it (a worker or folder from
    another version) is refused."""
    for solver in ("tsit5", "rkc"):
        cfg = msweep.SweepConfig(solver=solver, rtol=1e-5, dtype="float32")
        d = cfg.to_dict()
        assert d["solver_method"] == flows._solvers.SOLVER_METHODS.get(solver, solver)
        assert msweep.SweepConfig.from_dict(d) == cfg
    with pytest.raises(flows.ConfigError, match="asks for 'RKC2'"):
        msweep.SweepConfig.from_dict({**d, "solver_method": "RKC2"})


@pytest.mark.e2e  # a sweep per error norm: ~12 s cold
def test_error_norm_is_a_sweep_setting(reference, tmp_path):
    """`error_norm` reaches every point (its config, the combined attributes), is part of
    the manifest: a folder computed with 'rms' is refused with 'max' and vice versa, and a
    folder written before the setting existed reads as 'rms' (diffrax's norm, the only one
    then)."""
    result, ds_rms = reference
    before = {p.name: p.stat().st_mtime_ns for p in result.out.rglob("*")}
    with pytest.raises(flows.ConfigError, match="error_norm='rms'.*error_norm='max'"):
        _run(result.out, error_norm="max")
    assert {p.name: p.stat().st_mtime_ns for p in result.out.rglob("*")} == before
    out = tmp_path / "max"
    res = _run(out, alpha="1.0", error_norm="max")
    ds = res.dataset()
    assert (ds["status"] == "ok").all() and ds.attrs["error_norm"] == "max"
    assert json.loads((out / "manifest.json").read_text())["config"]["error_norm"] == "max"
    # the max-norm points took other steps than the default's (same points, α = 1)
    assert not np.array_equal(ds["steps"].values, ds_rms["steps"].sel(alpha=[1.0]).values)
    with pytest.raises(flows.ConfigError, match="error_norm='max'.*error_norm='rms'"):
        _run(out, alpha="1.0")
    with pytest.raises(flows.ConfigError, match="`error_norm` must be"):
        _run(tmp_path / "bad", error_norm="L2")
    assert not (tmp_path / "bad").exists()
    # a folder from before the setting: no error_norm in its manifest or points
    old = tmp_path / "old"
    _run(old, alpha="1.0", seeds="0")
    man = json.loads((old / "manifest.json").read_text())
    del man["config"]["error_norm"]
    (old / "manifest.json").write_text(json.dumps(man))
    (point,) = (old / "points").glob("*.nc")
    pds = xr.load_dataset(point, engine="h5netcdf")
    cfg = json.loads(pds.attrs["config"])
    del cfg["error_norm"]
    pds.attrs["config"] = json.dumps(cfg)
    pds.to_netcdf(point, engine="h5netcdf")
    res = _run(old, alpha="1.0", seeds="0")
    assert res.n_skipped == 1 and res.n_run == 0
    with pytest.raises(flows.ConfigError, match="error_norm='max'"):
        _run(old, alpha="1.0", seeds="0", error_norm="max")
