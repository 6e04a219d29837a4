"""Compilation paid once: tolerances are run-time values (one compiled program across a
sweep over rtol), the solves carry no host callbacks and so are written to JAX's persistent
cache and read back by the next process, and a cache that is corrupt, unusable or shared by
concurrent processes never changes a result."""

import dataclasses
import json
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _matrix import default_and_ci

import flows
from flows import _compile, _solvers
from flows.models import TwoLayer


def _problem(dtype="float64", m=6):
    rng = np.random.default_rng(3)
    x = rng.normal(size=(12, 3))
    y = np.tanh(x @ np.array([1.0, -0.5, 0.25]))[:, None]
    return flows.make_problem(
        TwoLayer(m=m, d=3, alpha=0.5), flows.from_arrays(x, y), 1, dtype=dtype
    )


def _flow_programs() -> int:
    return sum(1 for k in _solvers.cache._COMPILED if isinstance(k, tuple) and k[0] == "flow")


@pytest.mark.parametrize("solver", ["tsit5", "rkc", "kvaerno5"])
def test_a_sweep_over_rtol_compiles_once(solver):
    problem = _problem()
    before = _flow_programs()
    runs = [  # few saves: Kvaerno5 steps to its saves (`flows.STEP_TO_SAVES`)
        flows.simulate(problem, t1=2.0, rtol=r, atol=r * 1e-3, solver=solver, n_save=3)
        for r in (1e-4, 1e-6, 1e-7)
    ]
    assert _flow_programs() == before + 1
    # the tolerances act: tighter rtol, more steps
    steps = [t.stats.steps for t in runs]
    assert steps[0] < steps[1] < steps[2], steps


def test_a_loss_clock_sweep_over_rtol_compiles_once():
    problem = _problem()

    def programs():
        return sum(
            1 for k in _solvers.cache._COMPILED if isinstance(k, tuple) and k[0] == "loss clock"
        )

    before = programs()
    ts = flows.log_save_times(1e3, 8)
    runs = [
        flows.simulate(problem, t1=1e3, ts=ts, clock="loss", rtol=r, atol=r * 1e-3)
        for r in (1e-4, 1e-6, 1e-8)
    ]
    assert programs() == before + 1
    steps = [t.stats.steps for t in runs]
    assert steps[0] < steps[1] < steps[2], steps


def test_a_reused_program_gives_what_a_fresh_one_gives():
    """A program compiled at rtol 1e-4 and run at 1e-7 gives bit for bit what a program
    compiled for 1e-7 gives: no tolerance is left baked in."""
    problem = _problem()
    flows.simulate(problem, t1=2.0, rtol=1e-4, atol=1e-7, save_params="all")
    reused = flows.simulate(problem, t1=2.0, rtol=1e-7, atol=1e-10, save_params="all")
    _solvers.cache._COMPILED.clear()
    fresh = flows.simulate(problem, t1=2.0, rtol=1e-7, atol=1e-10, save_params="all")
    assert reused.stats.steps == fresh.stats.steps
    for a, b in zip(
        (reused.loss, *reused.to_dataset().data_vars.values()),
        (fresh.loss, *fresh.to_dataset().data_vars.values()),
        strict=True,
    ):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_float32_tolerances_stay_float32():
    """The run-time tolerances are weakly typed: a float32 solve stays float32."""
    traj = flows.simulate(_problem("float32"), t1=1.0, rtol=1e-5, atol=1e-8, save_params="ends")
    assert traj.loss.dtype == np.float32  # the solve's state: float32 throughout
    assert np.asarray(traj.to_dataset()["energy"]).dtype == np.float32


def test_callback_free_leaves_users_checks_raising():
    """Inside `callback_free` equinox's checks trace without a host callback; outside it a
    user's own `eqx.error_if` still raises — also after the toolkit traced the same check."""

    def f(x):
        return eqx.error_if(x, x < 0, "negative")

    with _compile.callback_free():
        text = jax.jit(lambda x: f(x) + 1).lower(1.0).as_text()
        assert "callback" not in text
        assert np.isnan(jax.jit(lambda x: f(x) + 1)(-1.0))
    assert "callback" in jax.jit(lambda x: f(x) * 2).lower(1.0).as_text()
    with pytest.raises(Exception, match="negative"):
        jax.block_until_ready(jax.jit(lambda x: f(x) * 3)(-1.0))


def test_the_solve_program_has_no_host_callback():
    problem = _problem()
    from flows._solve.flow import FlowSettings, solve_flow
    from flows._solvers import runtime_solver

    settings = FlowSettings(
        rtol=1e-6,
        atol=1e-9,
        max_steps=1000,
        dt0=None,
        count_evals=False,
        progress=False,
        observables=lambda p, th, t: {},
    )
    solver, _ = runtime_solver(
        _solvers.resolve_solver("tsit5", 1e-6, 1e-9, problem.n_params).solver
    )
    ts = jnp.linspace(0.0, 1.0, 5)
    args = (problem, ts, ts[:0], jnp.asarray(0.0), jnp.asarray(1.0), settings.tol())
    with _compile.callback_free():
        text = (
            eqx.filter_jit(solve_flow).lower(settings.compile_settings(), solver, *args).as_text()
        )
    assert "callback" not in text
    # and the reason it matters: without the context diffrax's checks are callbacks (a new
    # function, so that JAX traces it afresh rather than serving the trace above)
    plain = (
        eqx.filter_jit(lambda *a: solve_flow(*a))
        .lower(settings.compile_settings(), solver, *args)
        .as_text()
    )
    assert "callback" in plain


def test_the_reduced_bias_solve_is_cacheable_and_still_fails_loudly():
    """bias-plateau's reduced tensor-power solve: under `callback_free` (as the paper calls
    it) its program has no host callback, so the persistent cache keeps it (before, every
    run compiled it again: 'Not writing persistent cache entry … host callbacks'); a failed
    solve is still an error, not a silent NaN; a good one gives the same numbers."""
    from flows.experiments.bias_plateau import runs
    from reduced import bias_plateau as rbp

    w0, ts = jnp.asarray([0.5, 0.4, 0.3]), jnp.linspace(0.0, 2.0, 9)
    with _compile.callback_free():
        text = jax.jit(lambda *a: rbp.reduced_solve(*a, 4, 3)).lower(w0, jnp.zeros(3), ts)
    assert "callback" not in text.as_text()
    good = runs.reduced_trajectory(w0, 4, 3, ts)
    plain = rbp.reduced_trajectory(w0, 4, 3, ts)
    np.testing.assert_array_equal(good[0], plain[0])
    np.testing.assert_array_equal(good[1], plain[1])
    for solve in (runs.reduced_trajectory, rbp.reduced_trajectory):
        with pytest.raises(RuntimeError, match="reduced tensor-power solve"):
            solve(jnp.asarray([jnp.nan, 0.4, 0.3]), 4, 3, ts)


_RUN = textwrap.dedent(
    """
    import json, logging, sys, warnings
    import numpy as np
    hits = []
    class H(logging.Handler):
        def emit(self, rec):
            msg = rec.getMessage()
            if "cache hit" in msg and "jit_flow_program" in msg:
                hits.append(msg)
    logging.getLogger("jax._src.compiler").addHandler(H())
    logging.getLogger("jax._src.compiler").setLevel(logging.DEBUG)
    import flows
    from flows import _compile
    from flows.models import TwoLayer
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        folder = _compile.enable_compilation_cache(sys.argv[1])
        rng = np.random.default_rng(3)
        x = rng.normal(size=(12, 3)); y = np.tanh(x @ np.array([1.0, -0.5, 0.25]))[:, None]
        p = flows.make_problem(TwoLayer(m=6, d=3, alpha=0.5), flows.from_arrays(x, y), 1)
        t = flows.simulate(p, t1=2.0, rtol=1e-7, atol=1e-10)
    print(json.dumps({"folder": str(folder) if folder else None, "hits": len(hits),
                      "loss": np.asarray(t.loss).tolist(), "steps": t.stats.steps,
                      "warnings": [str(w.message).splitlines()[0] for w in caught]}))
    """
)


def _run(folder, env_extra=None):
    env = {**os.environ, **(env_extra or {})}
    env.pop("FLOWS_CACHE_DIR", None)
    out = subprocess.run(
        [sys.executable, "-c", _RUN, str(folder)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _entries(folder):
    return sorted(
        p for p in os.listdir(folder) if p.startswith("jit_flow_program-") and p.endswith("-cache")
    )


@pytest.mark.e2e  # three fresh processes, each importing JAX and compiling: ~21 s
def test_processes_share_the_cache_and_a_corrupt_entry_is_compiled_again(tmp_path):
    """One sequence of processes over one folder (each start costs seconds): two at once on
    an empty folder, then a third that reads their entry, then one after the entry was
    damaged."""
    env = {**os.environ}
    env.pop("FLOWS_CACHE_DIR", None)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _RUN, str(tmp_path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=600) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e[-2000:] for _, e in outs]
    cold = [json.loads(o.strip().splitlines()[-1]) for o, _ in outs]
    assert cold[0]["folder"] == str(tmp_path) and cold[0]["loss"] == cold[1]["loss"]
    # written once (no host callback kept it out; the second writer found it there)
    assert len(_entries(tmp_path)) == 1

    warm = _run(tmp_path)
    assert warm["hits"] == 1
    assert warm["loss"] == cold[0]["loss"] and warm["steps"] == cold[0]["steps"]

    (entry,) = _entries(tmp_path)
    data = (tmp_path / entry).read_bytes()
    (tmp_path / entry).write_bytes(data[: len(data) // 2] + b"\x00garbage" * 8)
    again = _run(tmp_path)
    assert again["hits"] == 0
    assert any("persistent compilation cache" in w for w in again["warnings"]), again["warnings"]
    assert again["loss"] == cold[0]["loss"] and again["steps"] == cold[0]["steps"]


def test_an_unusable_folder_turns_the_cache_off_with_one_warning(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert _compile.enable_compilation_cache(blocker / "cache") is None
    (w,) = caught
    assert "compilation cache off" in str(w.message) and str(blocker / "cache") in str(w.message)
    assert "FLOWS_NO_CACHE" in str(w.message)


@pytest.mark.e2e  # a fresh process: ~7 s
def test_cli_warns_in_one_line_and_runs_on_when_the_cache_folder_is_unusable(
    tmp_path, monkeypatch, capsys
):
    from flows._cli.app import main

    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("FLOWS_CACHE_DIR", str(blocker / "cache"))
    before = _compile.compilation_cache_dir()
    argv = ["simulate", "multistage", "--m", "5", "--n", "10", "--t1", "0.5"]
    rc = main([*argv, "--out", str(tmp_path / "o"), "--no-report"])
    err = capsys.readouterr().err
    assert rc == 0, err
    lines = [ln for ln in err.splitlines() if "cache" in ln]
    assert len(lines) == 1 and lines[0].startswith("flows: warning: compilation cache off"), err
    assert (tmp_path / "o" / "trajectory.nc").is_file()
    assert _compile.compilation_cache_dir() == before  # the cache in use was left alone


def test_no_cache_flag_and_environment_variable(monkeypatch):
    from flows._cli.app import build_parser

    parser = build_parser()
    assert parser.parse_args(["--no-cache", "derive"]).no_cache is True
    assert parser.parse_args(["derive"]).no_cache is False
    for value, off in (("1", True), ("yes", True), ("0", False), ("", False)):
        monkeypatch.setenv("FLOWS_NO_CACHE", value)
        assert _compile.cache_disabled_by_env() is off


def _jax_entry(i: int) -> str:
    """A name JAX's cache gives an entry (`<function>-<64 hex>-cache`)."""
    return f"jit_f{i}-{str(i) * 64}"


def test_trim_removes_the_oldest_entries_and_nothing_else(tmp_path):
    for i in range(6):
        (tmp_path / f"{_jax_entry(i)}-cache").write_bytes(b"\x78\x9c" + b"x" * 98)  # zlib
        (tmp_path / f"{_jax_entry(i)}-atime").write_bytes(b"t" * 8)  # JAX: a timestamp
        os.utime(tmp_path / f"{_jax_entry(i)}-cache", (1000 + i, 1000 + i))
    (tmp_path / "notes-cache.txt").write_text("a user's file")
    (tmp_path / "jit_mine-k0-cache").write_bytes(b"a user's file named like an entry")
    (tmp_path / "sub-cache").mkdir()
    assert _compile.trim_cache(tmp_path, 700) == 0  # at the bound: nothing removed
    assert _compile.trim_cache(tmp_path, 500) == 3  # down to 3/4 of 500: 3 entries left
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted(
        [f"{_jax_entry(i)}-{s}" for i in (3, 4, 5) for s in ("cache", "atime")]
        + ["notes-cache.txt", "jit_mine-k0-cache", "sub-cache"]
    )


# --- programs kept traced (jax.export entries beside JAX's cache) ----------------------


def _flow_args(problem=None, max_steps=10_000, observables=None):
    from flows._solve.flow import FlowSettings
    from flows._solvers import runtime_solver

    problem = _problem() if problem is None else problem
    settings = FlowSettings(
        rtol=1e-7,
        atol=1e-10,
        max_steps=max_steps,
        dt0=None,
        count_evals=False,
        progress=False,
        observables=observables or _no_observables(),
    )
    solver, _ = runtime_solver(
        _solvers.resolve_solver("tsit5", 1e-7, 1e-10, problem.n_params).solver
    )
    ts = jnp.linspace(0.0, 2.0, 9)
    return (
        settings.compile_settings(),
        solver,
        problem,
        ts,
        ts[jnp.array([0, -1])],
        jnp.asarray(0.0),
        jnp.asarray(2.0),
        settings.tol(),
    )


def _no_observables():
    from flows._solve.arguments import no_observables

    return no_observables


def _plain(args):
    from flows._solve.flow import flow_program

    with _compile.callback_free():
        return eqx.filter_jit(flow_program).lower(*args).compile()(*args)


def _assert_same(a, b):
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    assert jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b)
    assert len(la) == len(lb) > 0
    for x, y in zip(la, lb, strict=True):
        x, y = np.asarray(x), np.asarray(y)
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_array_equal(x, y)


def _entries_of(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(_compile.PROGRAM_SUFFIX))


def test_a_persisted_program_gives_bit_for_bit_what_a_fresh_trace_gives(tmp_path, monkeypatch):
    pytest.importorskip("flatbuffers")
    from flows._solve.flow import flow_program

    args = _flow_args()
    fresh = _plain(args)
    written = _compile.persisted_program(flow_program, args, tmp_path)
    assert written is not None
    (entry,) = _entries_of(tmp_path)
    assert entry.startswith("flow_program-")
    _assert_same(written(*args), fresh)

    # read back without tracing: exporting again would fail the test
    def no_export(*a, **k):
        raise AssertionError("traced again although the entry was there")

    monkeypatch.setattr(jax.export, "export", no_export)
    read = _compile.persisted_program(flow_program, args, tmp_path)
    assert read is not None
    _assert_same(read(*args), fresh)
    # other run-time values (tolerances, θ(0)) through the same program
    tight = (*args[:-1], flows._solvers.runtime_tolerances((1e-9, 1e-12)))
    _assert_same(read(*tight), _plain(tight))


@pytest.mark.parametrize(
    "damage",
    default_and_ci(["truncated", "flipped byte", "foreign", "not an entry"], default=["foreign"]),
)
def test_a_damaged_entry_is_traced_again_with_one_warning(tmp_path, damage):
    pytest.importorskip("flatbuffers")
    from flows._solve.flow import flow_program

    args = _flow_args()
    assert _compile.persisted_program(flow_program, args, tmp_path) is not None
    (entry,) = _entries_of(tmp_path)
    path = tmp_path / entry
    data = path.read_bytes()
    if damage == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "flipped byte":
        path.write_bytes(data[:-100] + bytes([data[-100] ^ 0xFF]) + data[-99:])
    elif damage == "foreign":  # a valid entry of another program under this key's name
        other = _flow_args(max_steps=77)
        sub = tmp_path / "other"
        assert _compile.persisted_program(flow_program, other, sub) is not None
        (o,) = _entries_of(sub)
        path.write_bytes((sub / o).read_bytes())
    else:
        path.write_bytes(b"\x00garbage" * 64)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        program = _compile.persisted_program(flow_program, args, tmp_path)
    assert program is not None
    lines = [str(w.message) for w in caught if "persistent cache" in str(w.message)]
    assert len(lines) == 1 and entry in lines[0] and "\n" not in lines[0], lines
    _assert_same(program(*args), _plain(args))
    # rewritten whole: the next process reads it without a warning
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again = _compile.persisted_program(flow_program, args, tmp_path)
    assert again is not None and not [w for w in caught if "persistent" in str(w.message)]


@pytest.mark.e2e  # compiles a program of its own: ~35 s on a loaded machine
def test_an_unwritable_folder_warns_once_and_the_run_goes_on(tmp_path, monkeypatch):
    pytest.importorskip("flatbuffers")
    from flows._solve.flow import flow_program

    monkeypatch.setattr(_compile.programs, "_WRITE_WARNED", False)
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    args = _flow_args()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        program = _compile.persisted_program(flow_program, args, blocker / "programs")
        assert program is not None
        _assert_same(program(*args), _plain(args))
        _compile.persisted_program(flow_program, _flow_args(max_steps=99), blocker / "programs")
    lines = [str(w.message) for w in caught if "persistent cache" in str(w.message)]
    assert len(lines) == 1 and "cannot write" in lines[0], lines


def test_a_program_of_a_users_function_is_not_kept(tmp_path):
    """The static part names a function of a module the key cannot vouch for (this test
    module): the program is compiled as usual, nothing is written."""
    from flows._solve.flow import flow_program

    args = _flow_args(observables=lambda p, th, t: {"n": jnp.sum(th["a"] ** 2)})
    assert _compile.persisted_program(flow_program, args, tmp_path) is None
    assert not tmp_path.exists() or not _entries_of(tmp_path)


def test_the_key_changes_with_what_shapes_the_program():
    from flows._solve.flow import flow_program

    def key(args):
        dynamic, static = eqx.partition(args, eqx.is_array)
        return _compile.program_key(flow_program, static, jax.tree_util.tree_leaves(dynamic))

    base = _flow_args()
    assert key(base) is not None and key(base) == key(_flow_args())
    assert key(_flow_args(max_steps=11)) != key(base)  # a static setting
    wider = _flow_args(problem=_problem(m=7))
    assert key(wider) != key(base)  # a shape
    # a closure's captured value (the stop condition's threshold) is part of the key
    s1, s2 = (
        (dataclasses.replace(base[0], stop=flows.stop_at_loss(v)), *base[1:]) for v in (1e-3, 1e-4)
    )
    assert key(s1) is not None and key(s1) != key(s2)
    # weak types trace differently (a float32 solve with float64 tolerances)
    strong = (*base[:-1], tuple(jnp.asarray(v, jnp.float64) for v in (1e-7, 1e-10)))
    assert key(strong) != key(base)


@pytest.mark.e2e  # compiles a program of its own: ~40 s on a loaded machine
def test_simulate_with_kept_programs_gives_what_it_gives_without(tmp_path, monkeypatch):
    pytest.importorskip("flatbuffers")
    problem = _problem()
    kw = dict(t1=2.0, rtol=1e-7, atol=1e-10, save_params="all", n_save=11)
    monkeypatch.setattr(_compile.jax_cache, "_ENABLED", None)
    monkeypatch.setattr(_solvers.cache, "_COMPILED", {})
    plain = flows.simulate(problem, **kw)
    monkeypatch.setattr(_compile.jax_cache, "_ENABLED", tmp_path)
    for _ in range(2):  # written, then read back (a fresh in-process cache each time)
        monkeypatch.setattr(_solvers.cache, "_COMPILED", {})
        kept = flows.simulate(problem, **kw)
        assert kept.stats.steps == plain.stats.steps
        assert kept.stats.result is plain.stats.result
        for a, b in zip(
            (kept.loss, *kept.to_dataset().data_vars.values()),
            (plain.loss, *plain.to_dataset().data_vars.values()),
            strict=True,
        ):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert len(_entries_of(tmp_path / _compile.PROGRAMS_DIR)) == 1


def test_trim_counts_kept_programs_and_removes_stale_temporaries(tmp_path):
    import flows._io as _io

    programs = tmp_path / _compile.PROGRAMS_DIR
    programs.mkdir()
    prog = [f"f-{str(i) * 48}{_compile.PROGRAM_SUFFIX}" for i in range(4)]
    for i in range(4):
        (tmp_path / f"{_jax_entry(i)}-cache").write_bytes(b"\x78\x9c" + b"x" * 98)
        os.utime(tmp_path / f"{_jax_entry(i)}-cache", (1000 + 2 * i, 1000 + 2 * i))
        (programs / prog[i]).write_bytes(
            _compile.jax_cache._MAGIC + b"y" * (100 - len(_compile.jax_cache._MAGIC))
        )
        os.utime(programs / prog[i], (1001 + 2 * i, 1001 + 2 * i))
    stale = Path(_io.create_owned_temporary(programs, f"f-{'9' * 48}-program"))
    stale.write_bytes(b"z")
    os.utime(stale, (1000, 1000))
    (programs / "a user's note").write_text("kept")
    (programs / ".f-9-program.123.ab.tmp").write_text("a user's file named like a temporary")
    assert _compile.trim_cache(tmp_path, 900) == 0
    assert not stale.exists()
    assert _compile.trim_cache(tmp_path, 400) == 5  # 800 bytes down to 300: oldest first
    assert sorted(p.name for p in programs.iterdir()) == sorted(
        ["a user's note", ".f-9-program.123.ab.tmp", prog[2], prog[3]]
    )
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == [f"{_jax_entry(3)}-cache"]
