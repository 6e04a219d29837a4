"""The work-precision benchmark (`benchmarks/bench_work_precision.py`, the package
`benchmarks/work_precision/`) runs at `--quick` size and writes complete, reproducible
outputs; its scipy and torch vector fields are the JAX one (no timing assertions)."""

import importlib
import importlib.util
import json
import math
import sys
from pathlib import Path

import jax
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

BENCH = Path(__file__).parent.parent / "benchmarks"


def _load(name):
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses need the module registered
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def wp():
    return _load("bench_work_precision")  # puts benchmarks/ on sys.path for its package


def _torch_port(wp):
    return importlib.import_module("work_precision.torch_port")


def _table_rows(md: str) -> list[list[str]]:
    lines = md.split("## Rows", 1)[1].strip().splitlines()
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in lines[2:] if ln.startswith("|")]


@pytest.mark.parametrize(
    "case",
    # the multistage quick run (~60 s) exercises the same code as the linear-teacher one
    # (~35 s cold, so in .ci/run's e2e stage)
    [
        pytest.param("multistage", marks=pytest.mark.slow),
        pytest.param("linear-teacher", marks=pytest.mark.e2e),
        pytest.param("bias-plateau", marks=pytest.mark.slow),
    ],
)
def test_quick_run_writes_complete_outputs(wp, tmp_path, case):
    # one torch thread: with 2 OpenMP threads on a busy 2-core machine each torch call can be
    # ~100× slower (barrier waits); the threads only change timings, not results
    args = ["--case", case, "--quick", "--out", str(tmp_path), "--torch-threads", "1"]
    (res,) = wp.main(args)
    stem = f"work_precision_{case}_quick"
    md, js, png = (tmp_path / f"{stem}.{ext}" for ext in ("md", "json", "png"))
    assert md.exists() and js.exists() and png.exists() and png.stat().st_size > 1000
    assert not list(tmp_path.glob(".*")), "temporary files left behind"

    text = md.read_text()
    assert "## Headline" in text
    table = _table_rows(text)
    labels = [r[0] for r in table]
    assert labels == [r["label"] for r in res["rows"]]  # a row per method, in order
    families = {r["family"] for r in res["rows"]}
    assert {"gradient descent", "scipy RK45", "torchdiffeq dopri5"} <= families
    assert any(f.startswith("flows tsit5") for f in families)
    ran = [r for r in res["rows"] if r["status"] == "ok"]
    assert len(ran) >= 6
    for r in ran:
        assert r["vf_evals"] > 0 and math.isfinite(r["wall_s"]) and r["wall_s"] > 0
        assert math.isfinite(r["err_max"]) and math.isfinite(r["err_rel"])
    for cells, r in zip(table, res["rows"], strict=True):
        if r["status"] == "ok":
            for c in cells[2:7]:  # evals, wall, compile, error, relative error
                assert math.isfinite(float(c)), cells
        else:
            assert r["status"] in ("skipped", "failed") and r.get("reason"), r
    # every toolkit solver is listed (run or skipped with a reason)
    import flows

    for solver in flows.SOLVERS:
        assert any(lab.startswith(f"flows {solver}") for lab in labels), solver
    # the exact flow at rtol 1e-6 is far closer to the reference than GD at η = 1e-3
    base = next(r for r in ran if r["settings"].get("learning_rate") == 1e-3)
    tsit = next(
        r for r in ran if r["settings"].get("solver") == "tsit5" and r["settings"]["rtol"] == 1e-6
    )
    assert tsit["err_max"] < 0.1 * base["err_max"]
    head = res["headline"]
    assert head["baseline"] == base["label"]
    assert head["wall_vs_gd"]["ratio"] > 0 and head["evals_vs_gd"]["ratio"] > 0
    assert "vs_scipy_rk45" in head
    # the toolkit's defaults (Tsit5, rtol 1e-6, atol 1e-9) against GD: the ratios the former
    # bench_multistage.py reported
    default = next(
        r
        for r in ran
        if r["settings"].get("solver") == "tsit5"
        and r["settings"]["rtol"] == 1e-6
        and r["settings"]["clock"] == "physical"
        and r["settings"]["variant"] == "autodiff"
    )
    d = head["default_vs_gd"]
    assert d["row"] == default["label"]
    assert d["err_ratio"] > 10 and d["wall_ratio"] > 0 and d["evals_ratio"] > 0
    assert d["evals_ratio"] == pytest.approx(base["vf_evals"] / default["vf_evals"])
    assert f"6. **The toolkit's defaults vs GD η = 1e-3** ({default['label']}" in text

    payload = json.loads(js.read_text())
    cfg = payload["config"]
    assert cfg["problem"] and cfg["reference"]["rtol"] == 1e-11 and cfg["quick"] is True
    assert cfg["tolerance_grid"] and cfg["gd_learning_rates"] and cfg["torch_threads"] == 1
    for pkg in ("jax", "diffrax", "scipy", "numpy", "torch", "python", "git_commit"):
        assert pkg in payload["versions"]
    assert payload["machine"]["cores_available"] >= 1
    assert len(payload["rows"]) == len(res["rows"])
    for r in payload["rows"]:
        assert r["settings"] is not None and "status" in r


@pytest.fixture(scope="module")
def problems(wp):
    """Small versions of the cases' problems (θ(0) and a random point)."""
    import flows
    from flows.models import TwoLayer

    ms = flows.make_problem(TwoLayer(m=50, d=1, alpha=1.0), flows.paper_data("f1"), key=0)
    lt = wp.cases.linear_teacher_case(True).build()
    bp = wp.cases.bias_plateau_case(True).build()
    return {"multistage": ms, "linear-teacher": lt, "bias-plateau": bp}


def _points(problem):
    flat0, _ = ravel_pytree(problem.theta0)
    rng = np.random.default_rng(1)
    return [np.asarray(flat0), np.asarray(flat0) + 0.3 * rng.standard_normal(flat0.shape)]


@pytest.mark.parametrize("case", ["multistage", "linear-teacher", "bias-plateau"])
def test_scipy_vector_field_is_the_jax_one(wp, problems, case):
    problem = problems[case]
    y0, vf = wp.methods.jax_flat_field(problem)
    flat0, unravel = ravel_pytree(problem.theta0)
    np.testing.assert_array_equal(y0, np.asarray(flat0))
    assert np.array_equal(wp.methods.flat(problem.theta0), y0)  # the benchmark's θ layout
    for y in _points(problem):
        expected = -ravel_pytree(problem.grad(unravel(jax.numpy.asarray(y))))[0]
        np.testing.assert_allclose(np.asarray(vf(y)), np.asarray(expected), rtol=1e-14, atol=0)


@pytest.mark.parametrize("case", ["multistage", "linear-teacher", "bias-plateau"])
def test_torch_port_gradient_equals_jax(wp, problems, case):
    pytest.importorskip("torch")
    port = _torch_port(wp)
    problem = problems[case]
    obj = port.port_problem(problem)
    flat0, unravel = ravel_pytree(problem.theta0)
    np.testing.assert_array_equal(obj.theta0.numpy(), np.asarray(flat0))
    np.testing.assert_allclose(
        float(obj.loss(obj.theta0)), float(problem.loss(problem.theta0)), rtol=1e-13
    )
    for y in _points(problem):
        g_jax = np.asarray(ravel_pytree(problem.grad(unravel(jax.numpy.asarray(y))))[0])
        g_torch = obj.grad_numpy(y)
        scale = np.max(np.abs(g_jax))
        assert np.max(np.abs(g_torch - g_jax)) <= 1e-12 * scale, case


def test_torch_port_rejects_other_models(wp):
    pytest.importorskip("torch")
    port = _torch_port(wp)
    import flows
    from flows.models import TwoLayer

    p = flows.make_problem(TwoLayer(m=5, d=1, alpha=1.0, activation="sin"), flows.paper_data())
    with pytest.raises(NotImplementedError):
        port.port_problem(p)


def test_ratios_are_read_off_the_curve_at_gd_error(wp):
    """The headline's work-precision ratio is read off a solver's curve at GD's error (log–
    log interpolation between the two tolerances whose errors bracket it), on GD's own
    field, not taken from the single luckiest row of any field."""
    report = importlib.import_module("work_precision.report")

    def row(solver, err, wall, evals, variant="autodiff"):
        st = {"solver": solver, "variant": variant, "clock": "physical"}
        return dict(
            label=f"flows {solver} {err:g} {variant}",
            family=f"flows {solver}",
            settings=st,
            status="ok",
            err_max=err,
            wall_s=wall,
            vf_evals=evals,
            extra={},
        )

    gd = row("gd", 1e-4, 100.0, 20000)
    gd["family"] = "gradient descent"
    gd["settings"] = {"learning_rate": 1e-3, "variant": "autodiff"}
    rkc = [row("rkc", 1e-3, 1.0, 400), row("rkc", 1e-5, 4.0, 1600)]
    lucky = row("rkc", 5e-5, 0.1, 300, variant="float32")  # another field: not counted
    # the geometric midpoint of the errors: geometric mean of walls and evaluations
    assert report.read_off_curve(rkc, 1e-4, "wall_s") == pytest.approx(2.0)
    assert report.read_off_curve(rkc, 1e-4, "vf_evals") == pytest.approx(800.0)
    assert report.read_off_curve(rkc, 1e-6, "wall_s") is None  # no extrapolation
    # a family entirely below GD's error gets no ratio (no extrapolation), but is named
    rock = [row("rock4", 1e-6, 3.0, 900), row("rock4", 1e-8, 6.0, 1800)]
    head = report.headline([gd, *rkc, lucky, *rock])
    c = head["curve_vs_gd"]["solvers"]
    assert list(c) == ["rkc", "rock4"]
    assert c["rkc"]["wall_ratio"] == pytest.approx(50.0)
    assert c["rkc"]["evals_ratio"] == pytest.approx(25.0)
    assert "wall_ratio" not in c["rock4"] and c["rock4"]["outside"] == "more accurate"
    assert c["rock4"]["cheapest"]["vf_evals"] == 900
    assert head["wall_vs_gd"]["ratio"] == pytest.approx(1000.0)  # the lucky-row figure
    first = report.format_headline(head)[0]
    assert "Read off the work-precision curves" in first and "best rkc" in first
    assert "rock4, every row more accurate" in first and "cheapest 900 evaluations" in first


def test_nonstiff_controls_write_their_own_files_with_step_counts(wp, tmp_path):
    """`--nonstiff`: the mild versions of the flows go to `work_precision_nonstiff.*`
    (never over the stiff set's files), with the accepted-step column that tells an
    accuracy-limited solver (steps grow as rtol shrinks) from a stability-limited one."""
    stiff = importlib.import_module("work_precision.stiff")
    res = stiff.run_all(
        tmp_path, nonstiff=True, solvers=("tsit5",), rtols=(1e-3, 1e-6), problems=["heat"]
    )
    (row_lo, row_hi) = res["heat N=10"]["rows"]["tsit5"]
    assert row_hi["steps"] > row_lo["steps"]  # accuracy-limited on the mild problem
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        f"work_precision_nonstiff_heat.{ext}" for ext in ("json", "md", "png")
    ]
    md = (tmp_path / "work_precision_nonstiff_heat.md").read_text()
    assert md.startswith("# Tolerance proportionality and work-precision on non-stiff")
    assert "--nonstiff" in md
    assert f"| {row_lo['steps']} → {row_hi['steps']} |" in md
    saved = json.loads((tmp_path / "work_precision_nonstiff_heat.json").read_text())
    assert saved["nonstiff"] is True and saved["rtols"] == [1e-3, 1e-6]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--stiff", "--nonstiff"], "--stiff and --nonstiff"),
        (["--nonstiff", "--quick"], "--nonstiff has no --quick"),
        (["--nonstiff", "--problems", "brusselator"], "choose from heat,quartic,multistage"),
    ],
)
def test_nonstiff_flag_combinations_are_refused_not_ignored(wp, capsys, argv, message):
    with pytest.raises(SystemExit) as exc:
        wp.main(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_chunked_jacobian_equals_jacfwd(wp):
    """The benchmark's dense Jacobian for scipy's LSODA/BDF (`chunked_jacobian`, tangents in
    chunks) against `jax.jacfwd` of the same field, at a size that is not a multiple of
    the chunk (the padded columns must be cut)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    methods = importlib.import_module("work_precision.methods")
    rng = np.random.default_rng(0)
    a = jnp.asarray(rng.normal(size=(37, 37)))

    def field(y):
        return jnp.tanh(a @ y) * y

    y = jnp.asarray(rng.normal(size=37))
    got = methods.chunked_jacobian(field, y, chunk=8)
    assert got.shape == (37, 37)
    np.testing.assert_allclose(
        np.asarray(got), np.asarray(jax.jacfwd(field)(y)), rtol=0, atol=1e-14
    )
