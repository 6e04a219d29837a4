"""Crashes and misleading messages, each as a new user met it: the command
either works or exits 2 with one line (no traceback) before anything is written; a
failure is described by what happened, not by a guess."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import flows
from flows import Check
from flows._cli import app as _cli
from flows._cli.check import MAX_WIDTH, terminal_width
from flows._cli.output import path_refusal
from flows._solve.stats import Result, advice
from flows.experiments import EXPERIMENTS
from flows.experiments.deep_linear import teacher_data
from flows.experiments.deep_linear.model import TwoLayerLinear
from flows.plugin import Report

ROOT = Path(__file__).resolve().parents[1]
SMALL = ["--m", "5", "--n", "10", "--t1", "0.2", "--n-save", "3"]


def simulate(out, *extra: str) -> list[str]:
    return ["--no-cache", "simulate", "multistage", *SMALL, "--out", str(out), *extra]


class ComputationStarted(Exception):
    pass


@pytest.fixture
def no_computation(monkeypatch):
    """Every experiment's computations replaced by a sentinel: a refusal must come first."""

    def refuse(*args, **kwargs):
        raise ComputationStarted

    for exp in EXPERIMENTS.values():
        for name in ("run", "simulate", "sweep"):
            monkeypatch.setattr(exp, name, refuse)


def one_error_line(err: str) -> str:
    """The one error line of `err` (progress lines and argparse's usage lines aside)."""
    lines = [x for x in err.splitlines() if x.strip() and not x.startswith("flows sweep: ")]
    lines = [x for x in lines if not x.startswith(("flows check: ", "usage: ", " "))]
    assert len(lines) == 1, err
    assert lines[0].startswith("flows") and "Traceback" not in err
    return lines[0]


# --- crashes ---------------------------------------------------------------------------


@pytest.mark.e2e  # a whole simulate traced with jit disabled: about a minute
def test_jit_disabled_runs_compiled_with_one_warning(tmp_path, capsys):
    """`JAX_DISABLE_JIT=1 flows simulate …` ended in "Disable jit is not supported in the
    AOT path"; it runs (compiled: the command line runs no user code to debug)."""
    with jax.disable_jit():  # what JAX_DISABLE_JIT=1 sets
        assert _cli.main(simulate(tmp_path / "o")) == 0
        assert jax.config.jax_disable_jit  # the caller's setting is left as it was
    err = capsys.readouterr().err
    assert "JAX_DISABLE_JIT" in err and "Traceback" not in err
    assert (tmp_path / "o" / "trajectory.nc").is_file()


@pytest.mark.e2e  # compiles a program of its own (--no-cache)
def test_deep_linear_with_one_output_runs(tmp_path, capsys):
    """`--d-in 1 --d-out 1 --h 1 --n 2` crashed ("not enough values to unpack"): the
    teacher's (n, 1) targets were flattened to (n,), and ŷ − y would broadcast to n × n."""
    argv = ["--no-cache", "simulate", "deep-linear", "--d-in", "1", "--d-out", "1"]
    argv += ["--h", "1", "--n", "2", "--t1", "1", "--n-save", "3", "--out", str(tmp_path / "o")]
    assert _cli.main(argv) == 0
    assert (tmp_path / "o" / "trajectory.nc").is_file()
    data = teacher_data(2, 1, 5, [1.5], noise=0.1, seed=0)
    assert data.y.shape == (5, 1)
    w = {"W1": np.array([[0.3, -0.2]]), "W2": np.array([[0.7]])}
    problem = flows.make_problem(TwoLayerLinear(d_in=2, h=1, d_out=1), data, theta0=w)
    residual = data.x @ w["W1"].T @ w["W2"].T - data.y  # (n, 1): no n × n broadcast
    assert float(problem.loss(w)) == pytest.approx(0.5 * np.mean(residual[:, 0] ** 2))


def _long_outs(base) -> list[str]:
    name = str(base / ("a" * 256))  # one name over 255 bytes
    deep = str(base / "/".join(["b" * 200] * 21))  # a path over 4096 bytes
    return [name, deep]


@pytest.mark.parametrize("which", [0, 1], ids=["name-256-bytes", "path-4225-bytes"])
@pytest.mark.parametrize("cmd", ["simulate", "sweep", "check"])
def test_paths_the_os_refuses_are_one_line_exit_2(cmd, which, tmp_path, capsys, no_computation):
    """Errno 36 (a name over 255 bytes, a path over 4095) was a traceback."""
    out = _long_outs(tmp_path)[which]
    argv = {
        "simulate": simulate(out),
        "sweep": ["sweep", "multistage", "--m", "5", "--alpha", "1", "--out", out],
        "check": ["check", "deep-linear", "--quick", "--out", out],
    }[cmd]
    assert _cli.main(argv) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "File name too long" in line and "--out" in line and "bytes" in line
    assert len(line) < 400  # the path is shown by its ends, not whole
    assert os.listdir(tmp_path) == []


def test_a_refused_path_is_named_with_its_cause():
    loop = OSError(errno.ELOOP, os.strerror(errno.ELOOP), "/tmp/loop/x")
    assert "'/tmp/loop/x'" in path_refusal(loop) and "symbolic links" in path_refusal(loop)
    assert path_refusal(OSError(errno.ENOSPC, "No space left", "/x")) is None
    assert path_refusal(OSError(errno.ENAMETOOLONG, "too long")) is None  # no path: no claim


_UNDECODABLE = (b"run\xff\xfe", {}, "run\ufffd\ufffd")  # bytes no locale decodes
_C_LOCALE = ("café".encode(), {"LC_ALL": "C", "PYTHONUTF8": "0"}, "café")  # read as ASCII


@pytest.mark.parametrize(
    "name, env, shown",
    [_UNDECODABLE, _C_LOCALE],
    ids=["undecodable", "c-locale"],
)
@pytest.mark.e2e  # a real process importing JAX and solving: ~60 s each on a loaded machine
def test_an_out_with_undecodable_bytes_writes_both_files(name, env, shown, tmp_path):
    """trajectory.nc was written, then report.html crashed on the surrogates (a real
    process: its argv decoded by its locale, its output through the command's guard)."""
    out = os.fsencode(tmp_path) + b"/" + name
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONIOENCODING"}, **env}
    argv = [sys.executable, "-m", "flows", *simulate("OUT")]
    argv[argv.index("OUT")] = out
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    assert b"Traceback" not in done.stderr
    assert {b"report.html", b"trajectory.nc"} <= set(os.listdir(out))
    with open(os.path.join(out, b"report.html"), encoding="utf-8") as f:
        assert shown in f.read()


@pytest.fixture
def fake_check(monkeypatch):
    def run(cfg, out, **kw):
        return Report("deep-linear", [Check("a claim " * 30, "s", "1", "1", "holds")], [], {})

    monkeypatch.setattr(EXPERIMENTS["deep-linear"], "run", run)


@pytest.mark.parametrize("how", ["COLUMNS", "--width"])
def test_a_huge_width_draws_the_widest_table(how, tmp_path, monkeypatch, capsys, fake_check):
    """`COLUMNS=10²⁰ flows check …` crashed (OverflowError) after the results were
    written."""
    huge = str(10**20)
    argv = ["check", "deep-linear", "--quick", "--no-report", "--out", str(tmp_path / "o")]
    if how == "COLUMNS":
        monkeypatch.setenv("COLUMNS", huge)
        assert terminal_width() == MAX_WIDTH
    else:
        argv += ["--width", huge]
    assert _cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "a claim a claim" in out
    assert max(len(x) for x in out.splitlines()) <= MAX_WIDTH


# --- misleading messages ---------------------------------------------------------------


def _escaping_problem():
    """L = −c₀⁴/4 (θ = (c₀, c₁), c₁ = 1000 idle): c₀ = 1/√(1 − 2t) escapes at t = ½ while
    ‖θ‖ grows only ~10⁴-fold, below the ‖θ‖ test of a blow-up."""
    data = flows.from_arrays(np.ones((4, 1)), np.zeros(4))
    return flows.make_problem(
        lambda p, x: x[:, 0] * p["c"][0],
        data,
        theta0={"c": jnp.asarray([1.0, 1000.0])},
        loss_fn=lambda pred, y: -jnp.mean(pred**4) / 4,
    )


@pytest.mark.parametrize("solver", ["tsit5", "kvaerno5"])
def test_a_finite_time_blow_up_is_called_one(solver):
    """It was "step size collapsed … The flow is stiff here: try solver='kvaerno5'" (also
    said to a kvaerno5 run)."""
    with pytest.raises(flows.SolverError) as info:
        flows.simulate(_escaping_problem(), t1=2.0, solver=solver, max_steps=2000)
    text = str(info.value)
    assert "blow-up" in text and "the loss fell" in text, text
    assert "stiff" not in text and "kvaerno5" not in text
    assert info.value.t_reached == pytest.approx(0.5, abs=1e-3)


def test_an_implicit_solver_is_not_told_to_try_an_implicit_solver():
    assert "kvaerno5" not in advice(Result.step_size_collapsed, implicit=True)
    assert "kvaerno5" in advice(Result.step_size_collapsed, implicit=False)


@pytest.mark.parametrize("cmd", ["simulate", "sweep"])
def test_rtol_below_roundoff_is_refused_up_front_by_both(cmd, tmp_path, capsys, no_computation):
    """`flows sweep … --rtol 1e-320` was accepted, then every point failed on it."""
    out = str(tmp_path / "o")
    argv = (
        simulate(out, "--rtol", "1e-320")
        if cmd == "simulate"
        else ["sweep", "multistage", "--m", "5", "--alpha", "1", "--rtol", "1e-320", "--out", out]
    )
    assert _cli.main(argv) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "--rtol" in line and "1e-320" in line and "unit roundoff" in line
    assert not (tmp_path / "o").exists()


def test_connect_timeout_without_scheduler_is_refused(tmp_path, capsys, no_computation):
    """`--connect-timeout` without `--scheduler` was silently ignored."""
    argv = ["sweep", "multistage", "--m", "5", "--alpha", "1", "--out", str(tmp_path / "o")]
    assert _cli.main([*argv, "--connect-timeout", "5"]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "--connect-timeout" in line and "--scheduler" in line
    assert not (tmp_path / "o").exists()
    with pytest.raises(ComputationStarted):  # with a scheduler it acts: accepted
        _cli.main([*argv, "--connect-timeout", "5", "--scheduler", "tcp://127.0.0.1:1"])


def test_a_negative_loss_on_the_loss_clock_is_not_called_an_underflow():
    """L = −9.83 was "The loss underflowed (margins beyond ~700)"."""
    data = flows.from_arrays(np.ones((4, 1)), np.zeros(4))
    problem = flows.make_problem(
        lambda p, x: x[:, 0] * p["c"],
        data,
        theta0={"c": jnp.asarray(0.17)},
        loss_fn=lambda pred, y: jnp.mean(pred) - 10.0,
    )
    with pytest.raises(flows.SolverError) as info:
        flows.simulate(problem, t1=1.0, clock="loss")
    text = str(info.value)
    assert "negative" in text and "-9.83" in text and "underflow" not in text


def test_a_tanh_net_is_not_blamed_on_a_kink():
    from flows._solve.loss_clock import _advice
    from flows._solve.stats import Result

    tanh = flows.make_problem(
        flows.models.TwoLayer(m=3, d=1, alpha=0.75), flows.paper_data("f1", n=10), 0
    )
    assert "kink" not in _advice(Result.step_size_collapsed, "", tanh)


def test_a_seed_too_big_is_named_by_its_flag(tmp_path, capsys):
    argv = ["sweep", "multistage", "--m", "5", "--alpha", "1", "--seeds", str(10**20)]
    assert _cli.main([*argv, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "--seeds" in err and "`key`" not in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()


def test_the_api_runs_compiled_inside_disable_jit():
    """`with jax.disable_jit(): flows.simulate(…)` raised "Disable jit is not supported in
    the AOT path"; the toolkit's solves now run compiled there, bit for bit the same."""
    from flows.models import TwoLayer

    problem = flows.make_problem(
        TwoLayer(m=8, d=1, alpha=0.75), flows.assumption_data("f2", n=16), key=3
    )
    plain = flows.simulate(problem, t1=1.0, n_save=5)
    with jax.disable_jit():
        inside = flows.simulate(problem, t1=1.0, n_save=5)
        assert jax.config.jax_disable_jit  # the user's setting is left as it was
    np.testing.assert_array_equal(inside.loss, plain.loss)
