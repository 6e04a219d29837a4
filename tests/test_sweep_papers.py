"""`flows sweep bias-plateau` and `flows sweep linear-teacher` through the generic engine,
and the engine with a spec written here (a paper the toolkit never saw): tiny grids, resume,
records equal to a direct call of the experiment's own functions, bad grid values refused
by flag before anything is written."""

import ast
import dataclasses
import inspect
import json

import numpy as np
import pytest
import xarray as xr

import flows
from flows._cli import app as _cli
from flows._sweep import engine as _sweep
from flows.experiments.bias_plateau import sweep as bps
from flows.experiments.linear_teacher import sweep as lts

# ---------------------------------------------------------------------------------------
# The engine knows no paper


def test_engine_imports_no_experiment_and_names_no_paper():
    source = inspect.getsource(_sweep)
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom | ast.Import):
            names = [getattr(node, "module", None) or ""] + [a.name for a in node.names]
            assert not any("experiments" in n for n in names), ast.dump(node)
    for word in ("T_p", "T_d", "K_hat", "K̂", "descent", "multistage", "horizon", "alpha"):
        assert word not in source, word


@dataclasses.dataclass(frozen=True)
class ToySpec(_sweep.AbstractSweepSpec):
    """A sweep the toolkit never saw: y_i = a·b·i on a grid a × b (points of one a batched)."""

    scale: float = 1.0
    batch_size: int = 2

    experiment = "toy"
    axes = (
        _sweep.Axis("a", int, lambda v: tuple(_sweep.to_int(x, "--a") for x in v), "--a"),
        _sweep.Axis("b", float, lambda v: tuple(_sweep.to_float(x, "--b") for x in v), "--b"),
    )
    calls = []  # noqa: RUF012 - the batches computed, for the test

    def settings(self):
        return {"scale": self.scale}

    def dims(self):
        return {"i": 3}

    def variables(self):
        return {"y": ("i",), "total": ()}

    def batch_key(self, point):
        return point[0]

    def run_batch(self, points, pad_to=0):
        ToySpec.calls.append(list(points))
        recs = []
        for p in points:
            rec = self.blank_record(p)
            y = self.scale * p[0] * p[1] * np.arange(3.0)
            rec.update(y=y, total=float(y.sum()), status="ok" if p[1] >= 0 else "failed")
            recs.append(rec)
        return recs


def test_a_new_spec_runs_resumes_and_refuses_mixing(tmp_path):
    out = tmp_path / "toy"
    ToySpec.calls.clear()
    res = flows.sweep(ToySpec(), out, {"a": [1, 2], "b": [0.5, -1.0, 2.0]}, progress=False)
    assert not res.ok and [f["id"] for f in res.failed] == ["a1_b-1.0", "a2_b-1.0"]
    assert [len(b) for b in ToySpec.calls] == [2, 1, 2, 1]  # batches of one a, at most 2
    ds = res.dataset()
    assert ds["y"].dims == ("a", "b", "i") and ds["total"].dims == ("a", "b")
    np.testing.assert_allclose(ds["total"].sel(a=2, b=2.0), 2 * 2.0 * 3)
    assert sorted(p.name for p in (out / "points").iterdir()) == [
        f"a{a}_b{b!r}.nc" for a in (1, 2) for b in (-1.0, 0.5, 2.0)
    ]
    ToySpec.calls.clear()
    res = flows.sweep(ToySpec(), out, {"a": [1, 2, 3], "b": [0.5]}, progress=False)
    assert ToySpec.calls == [[(3, 0.5)]] and res.n_skipped == 2  # only the new point
    assert list(res.dataset()["a"].values) == [1, 2, 3]
    with pytest.raises(flows.ConfigError, match=r"scale=1.0.*scale=2.0.*\(--a, --b\)"):
        flows.sweep(ToySpec(scale=2.0), out, {"a": [1], "b": [0.5]}, progress=False)
    with pytest.raises(flows.ConfigError, match="--b: 'x' is not a number"):
        flows.sweep(ToySpec(), tmp_path / "new", {"a": [1], "b": ["x"]}, progress=False)
    assert not (tmp_path / "new").exists()


# ---------------------------------------------------------------------------------------
# bias-plateau: depth × δ × seed

BP_GRID = dict(depth="3", delta="1e-3,1e-2", seeds="0")
BP_SETTINGS = dict(t1=20.0, width=8, n_per_class=5, n_alpha=11)


@pytest.fixture(scope="module")
def bp_sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("bp") / "sweep"
    return bps.plateau_sweep(out, **BP_GRID, **BP_SETTINGS, progress=False)


@pytest.mark.e2e  # a paper sweep, interrupted and resumed: ~9 s cold
def test_bias_plateau_sweep_layout_and_resume(bp_sweep, monkeypatch, capsys):
    res = bp_sweep
    assert res.ok and res.n_run == 2 and res.figure.stat().st_size > 10_000
    out = res.out
    assert sorted(p.name for p in (out / "points").iterdir()) == [
        "depth3_delta0.001_seed0.nc",
        "depth3_delta0.01_seed0.nc",
    ]
    ds = res.dataset()
    assert ds.sizes == {"depth": 1, "delta": 2, "seed": 1, "interp": 11}
    assert (ds["status"] == "ok").all() and ds["error_curve"].dims[-1] == "interp"
    assert np.all(ds["plateau_length"] >= 0) and np.all(ds["bias_gap"] > 0)
    cfg = json.loads(ds.attrs["config"])
    assert cfg["method"] == "gd" and cfg["lr"] == 0.05 and "rtol" not in cfg
    assert json.loads((out / "manifest.json").read_text())["experiment"] == "bias-plateau"

    computed = []
    real = bps.run_point

    def counting(cfg, *point):
        computed.append(point)
        return real(cfg, *point)

    monkeypatch.setattr(bps, "run_point", counting)
    again = bps.plateau_sweep(out, **BP_GRID, **BP_SETTINGS, progress=False)
    assert computed == [] and again.n_skipped == 2
    (out / "points" / "depth3_delta0.01_seed0.nc").write_bytes(b"garbage")
    again = bps.plateau_sweep(out, **BP_GRID, **BP_SETTINGS, progress=False)
    assert computed == [(3, 0.01, 0)] and again.rejected and again.ok
    xr.testing.assert_allclose(
        again.dataset().drop_vars(["wall_s", "compile_s"]),
        ds.drop_vars(["wall_s", "compile_s"]),
    )
    # the CLI on the same folder: nothing to compute, the summary on --quiet
    argv = ["sweep", "bias-plateau", "--depth", "3", "--delta", "1e-3,1e-2", "--t1", "20"]
    argv += ["--width", "8", "--n-per-class", "5", "--n-alpha", "11", "--quiet"]
    assert _cli.main(argv + ["--out", str(out)]) == 0
    assert "2 skipped" in capsys.readouterr().out and computed == [(3, 0.01, 0)]


def test_bias_plateau_record_equals_a_direct_run(bp_sweep):
    """The point (r = 3, δ = 1e-2, seed 0) against `train_deep` and `plateau` called as
    `flows check bias-plateau`'s trends call them."""
    from flows.experiments import bias_plateau as bpx
    from flows.experiments.bias_plateau.interpolation import plateau
    from flows.models.deep import DeepFCN

    cfg = bps.PlateauSweepConfig(**BP_SETTINGS).experiment_config()
    data = bpx.synthetic_deep_data(cfg, 0)
    model = DeepFCN(d=data.d, k=cfg.k, depth=3, width=8, activation="relu", delta=1e-2)
    run = bpx.train_deep(model, data, seed=0, t1=20.0, method="gd", cfg=cfg)
    pl = plateau(run.curve, kind="error", tol=cfg.plateau_tol)
    th = bpx.theorem1_of(run)
    p = bp_sweep.dataset().sel(depth=3, delta=1e-2, seed=0)
    np.testing.assert_allclose(p["error_curve"], run.curve.error, rtol=1e-12)
    np.testing.assert_allclose(p["loss_curve"], run.curve.loss, rtol=1e-12)
    assert float(p["plateau_length"]) == pytest.approx(pl.length, rel=1e-12, abs=1e-15)
    assert float(p["plateau_start"]) == pytest.approx(pl.start, rel=1e-12)
    o = run.traj.observables
    assert float(p["train_error_final"]) == pytest.approx(float(o["train_error"][-1]))
    assert float(p["loss_final"]) == pytest.approx(float(o["loss"][-1]), rel=1e-12)
    assert float(p["bias_gap"]) == pytest.approx(th.delta_min, rel=1e-12)
    assert float(p["steps"]) == run.traj.stats["steps"]


@pytest.mark.parametrize(
    "kw, flag",
    [
        (dict(depth="0"), "--depth"),
        (dict(depth="2.5"), "--depth"),
        (dict(depth="3,3"), "--depth"),
        (dict(depth=""), "--depth"),
        (dict(delta="0"), "--delta"),
        (dict(delta="2"), "--delta"),
        (dict(delta="nan"), "--delta"),
        (dict(delta="abc"), "--delta"),
        (dict(seeds="-1"), "--seeds"),
        (dict(seeds="2-0"), "--seeds"),
        (dict(seeds=str(2**63)), "--seeds"),
        (dict(rtol=1e-3), "--rtol"),
        (dict(method="flow", lr=0.1), "--lr"),
        (dict(k=17), "--k"),
        (dict(lr=-1.0), "--lr"),
        (dict(t1=float("inf")), "--t1"),
    ],
)
def test_bias_plateau_bad_input_names_the_flag(tmp_path, kw, flag):
    out = tmp_path / "never"
    with pytest.raises(flows.ConfigError, match=flag):
        bps.plateau_sweep(out, **{**BP_GRID, **BP_SETTINGS, **kw}, progress=False)
    assert not out.exists()


# ---------------------------------------------------------------------------------------
# linear-teacher: init × slope × seed

LT_GRID = dict(init="1e-3,1", slope="0.1", seeds="0")
LT_SETTINGS = dict(k=3, n=20, t1=1e3, n_save=11)


@pytest.fixture(scope="module")
def lt_sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("lt") / "sweep"
    return lts.teacher_sweep(out, **LT_GRID, **LT_SETTINGS, progress=False)


@pytest.mark.e2e
def test_linear_teacher_sweep_layout_and_resume(lt_sweep, monkeypatch, capsys):
    res = lt_sweep
    assert res.ok and res.n_run == 2 and res.figure.stat().st_size > 10_000
    ds = res.dataset()
    assert ds.sizes == {"init": 2, "slope": 1, "seed": 1, "save": 11}
    assert (ds["status"] == "ok").all() and ds["r_rel"].dims == ("init", "slope", "seed", "save")
    # small init clusters the neurons, large init much less (the paper's §5.1)
    r_small, r_large = (float(ds["r_rel_final"].sel(init=i, slope=0.1, seed=0)) for i in (1e-3, 1))
    assert r_small < 1e-2 < r_large
    assert float(ds["thm51_violations_total"].max()) == 0
    assert np.all(ds["energy_residual_max"] < 1e-3)
    computed = []
    monkeypatch.setattr(lts, "run_point", lambda *a: computed.append(a))
    again = lts.teacher_sweep(res.out, **LT_GRID, **LT_SETTINGS, progress=False)
    assert computed == [] and again.n_skipped == 2 and again.ok
    argv = ["sweep", "linear-teacher", "--init", "1e-3,1", "--slope", "0.1", "--k", "3"]
    argv += ["--n", "20", "--t1", "1e3", "--n-save", "11", "--quiet", "--out", str(res.out)]
    assert _cli.main(argv) == 0 and computed == []
    assert "2 skipped" in capsys.readouterr().out
    with pytest.raises(flows.ConfigError, match=r"t1=1000.0.*t1=2000.0"):
        lts.teacher_sweep(res.out, **LT_GRID, **{**LT_SETTINGS, "t1": 2e3}, progress=False)


@pytest.mark.e2e
def test_linear_teacher_record_equals_a_direct_run(lt_sweep):
    """The point (init 1e-3, α = 0.1, seed 0) against `run_flow` as `flows simulate
    linear-teacher` calls it."""
    from flows.experiments.linear_teacher.config import Config
    from flows.experiments.linear_teacher.data import symmetric_gaussians
    from flows.experiments.linear_teacher.observables import teacher_observables
    from flows.experiments.linear_teacher.runs import run_flow

    cfg = dataclasses.replace(Config(), k=3, n=20, t1=1e3, n_save=11, slope=0.1, seed=0)
    data = symmetric_gaussians(cfg.n, 2, mean=cfg.mean, seed=cfg.seed)
    traj = run_flow(cfg, data, 1e-3, teacher_observables(teacher=data.teacher, beta=0.0))
    p = lt_sweep.dataset().sel(init=1e-3, slope=0.1, seed=0)
    o = traj.observables
    np.testing.assert_allclose(p["t"], traj.times, rtol=1e-14)
    for name in ("loss", "r_rel", "par_share", "margin"):
        np.testing.assert_allclose(p[name], o[name], rtol=1e-12, err_msg=name)
    for name in ("r_rel", "par_share", "margin", "frac_outside", "max_disagree"):
        assert float(p[f"{name}_final"]) == pytest.approx(float(o[name][-1]), rel=1e-12)
    assert float(p["steps"]) == traj.stats["steps"]


@pytest.mark.parametrize(
    "kw, flag",
    [
        (dict(init="0"), "--init"),
        (dict(init="2e6"), "--init"),
        (dict(init="nan"), "--init"),
        (dict(init="1e-3,0.001"), "--init"),
        (dict(slope="1"), "--slope"),
        (dict(slope="-0.1"), "--slope"),
        (dict(slope="abc"), "--slope"),
        (dict(seeds="x"), "--seeds"),
        (dict(n=21), "--n"),
        (dict(t1=1.0), "--t1"),
        (dict(rtol=2.0), "--rtol"),
        (dict(n_save=2), "--n-save"),
    ],
)
def test_linear_teacher_bad_input_names_the_flag(tmp_path, kw, flag):
    out = tmp_path / "never"
    with pytest.raises(flows.ConfigError, match=flag):
        lts.teacher_sweep(out, **{**LT_GRID, **LT_SETTINGS, **kw}, progress=False)
    assert not out.exists()


def test_cli_grid_flags_are_refused_by_argparse(tmp_path, capsys):
    for argv in (
        ["sweep", "bias-plateau", "--depth", "1e3", "--delta", "1e-3"],
        ["sweep", "bias-plateau", "--depth", "3", "--delta", "1e-3", "--seeds", "0,0"],
        ["sweep", "linear-teacher", "--init", "1e-3", "--slope", "0.1,1"],
    ):
        try:
            code = _cli.main([*argv, "--out", str(tmp_path / "o")])
        except SystemExit as exc:
            code = exc.code
        err = capsys.readouterr().err
        assert code == 2 and "argument --" in err, err
    assert list(tmp_path.iterdir()) == []


@dataclasses.dataclass(frozen=True)
class PointSpec(ToySpec):
    """The toy grid computed one point at a time (the default `run_batch`); b < 0 raises."""

    run_batch = _sweep.AbstractSweepSpec.run_batch

    def run_point(self, a, b):
        if b < 0:
            raise ValueError(f"b = {b} < 0")
        y = self.scale * a * b * np.arange(3.0)
        return {"y": y, "total": float(y.sum())}


def test_a_spec_of_single_points_records_each_failure(tmp_path):
    res = flows.sweep(PointSpec(), tmp_path / "p", {"a": [1, 2], "b": [0.5, -1.0]}, progress=False)
    assert [f["id"] for f in res.failed] == ["a1_b-1.0", "a2_b-1.0"]
    assert all("ValueError: b = -1.0 < 0" in f["error"] for f in res.failed)
    ds = res.dataset().sel(a=2, b=0.5)
    assert float(ds["total"]) == pytest.approx(2 * 0.5 * 3.0)


def test_a_spec_that_computes_nothing_is_refused_before_writing(tmp_path):
    @dataclasses.dataclass(frozen=True)
    class Empty(PointSpec):
        run_point = _sweep.AbstractSweepSpec.run_point

    with pytest.raises(flows.ConfigError, match="implement `run_point"):
        flows.sweep(Empty(), tmp_path / "e", {"a": [1], "b": [0.5]}, progress=False)
    assert not (tmp_path / "e").exists()
