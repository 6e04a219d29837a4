"""Every flag of every subcommand, for every experiment, tried with invalid values generated
from the parser itself (each typed flag says what it accepts): each must exit 2 with the
flag named in the message and nothing written. A flag that does not act on the chosen
experiment must be refused the same way, never ignored; so must a flag that does not act
on the chosen `--method` (every combination generated from the declarations,
`flows._cli.flags.Flag.methods`), while every flag that does act is accepted. Grids larger
than a sweep holds are refused before anything is built.

Runs in-process with the computations replaced by a sentinel, so a value that slipped
through validation shows up as "computation started" instead of a long run.
"""

from __future__ import annotations

import argparse

import pytest

from flows import ConfigError
from flows._cli import app as _cli
from flows._cli import flags as fl
from flows._sweep import engine as _sweep
from flows._sweep import grid as _grid
from flows.experiments import EXPERIMENTS


class ComputationStarted(Exception):
    pass


@pytest.fixture(autouse=True)
def no_computation(monkeypatch):
    def refuse(*args, **kwargs):
        raise ComputationStarted

    monkeypatch.setattr(_sweep, "_run", refuse)
    for exp in EXPERIMENTS.values():
        monkeypatch.setattr(exp, "run", refuse)
        monkeypatch.setattr(exp, "simulate", refuse)


def _subparsers(parser: argparse.ArgumentParser | None = None) -> dict:
    parser = parser or _cli.build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def parsers():
    """(command, experiment, parser) for every leaf parser of the CLI."""
    for cmd, p in _subparsers().items():
        if cmd in ("simulate", "sweep"):
            for exp, ep in _subparsers(p).items():
                yield cmd, exp, ep
        elif cmd == "check":
            for exp in [c for c in _positional(p).choices if c != "all"]:
                yield cmd, exp, p
        else:
            yield cmd, None, p


def _options(p: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in p._actions if a.option_strings and a.dest != "help"]


def _positional(p: argparse.ArgumentParser) -> argparse.Action | None:
    pos = [a for a in p._actions if not a.option_strings]
    return pos[0] if pos else None


#: Free-text flags, with invalid values written out (they have no type to generate from).
TEXT_INVALID = {
    ("sweep", "--m"): ["abc", "", "0", "-5", "2.5", "10,10"],
    ("sweep", "--alpha"): ["abc", "", "0.4", "nan", "inf"],
    ("sweep", "--seeds"): ["abc", "", "-1", "3-1", "1.5"],
}
#: Flags not tried here, with the reason.
EXEMPT = {
    ("sweep", "--scheduler"): "needs a network round trip (tests/test_sweep.py tries it)",
    ("check", "--out"): "a path: tried below with files in the way",
    ("simulate", "--out"): "a path: tried below",
    ("sweep", "--out"): "a path: tried below",
}


def invalid_values(cmd: str, action: argparse.Action) -> list[str]:
    """Values `action` must refuse, derived from its declared choices or domain."""
    flag = action.option_strings[0]
    if (cmd, flag) in TEXT_INVALID:
        return TEXT_INVALID[(cmd, flag)]
    if action.choices is not None:
        return ["bogus", ""]
    domain = getattr(action.type, "domain", None)
    if domain is None:
        return []
    kind, kw = domain
    vals = ["abc", ""]
    if kind in ("as_float", "as_tolerance"):
        vals += ["nan", "inf", "-inf", "1e400"]
    if kind in ("as_int", "as_seed"):
        vals += ["2.5", "1e3"]
    if kind == "as_seed":
        vals += ["-1", str(2**63), "99999999999999999999999"]
    if kind == "as_tolerance":
        vals += ["0", "-1e-6", "1", "1e300"]
    if kw.get("positive"):
        vals += ["0", "-1", "-1e-6"]
    if kw.get("nonnegative"):
        vals += ["-1"]
    if kw.get("minimum") is not None:
        vals += [str(kw["minimum"] - 1)]
    if kw.get("maximum") is not None:
        vals += [str(kw["maximum"] + 1)]
    if kw.get("lo") is not None:
        vals += [str(kw["lo"] - 1)]
    if kw.get("hi") is not None:
        vals += [str(kw["hi"] + 1)]
    return vals


#: A valid value of each required grid flag of `flows sweep` (free text or grid types, whose
#: domains do not say everything: a slope must also be < 1).
VALID_GRID = {"--m": "20", "--alpha": "1.0", "--depth": "3", "--delta": "0.1", "--init": "1e-4"}
VALID_GRID |= {"--slope": "0.1"}


def base_argv(cmd: str, experiment: str | None, out: str) -> list[str]:
    """A complete valid command line: every required flag given (sweeps: their grids)."""
    argv = [cmd] + ([experiment] if experiment else [])
    if cmd == "sweep" and experiment in _subparsers(_subparsers()["sweep"]):
        p = _subparsers(_subparsers()["sweep"])[experiment]
        for action in _options(p):
            flag = action.option_strings[0]
            if action.required and flag != "--out":
                assert flag in VALID_GRID, f"no valid value known for `flows sweep {flag}`"
                argv += [flag, VALID_GRID[flag]]
    elif cmd == "sweep":
        argv += ["--m", "20", "--alpha", "1.0"]
    return argv + ["--out", out]


def cases():
    for cmd, exp, p in parsers():
        for action in _options(p):
            flag = action.option_strings[0]
            if (cmd, flag) in EXEMPT or action.nargs == 0:
                continue
            values = invalid_values(cmd, action)
            assert values, f"no invalid values known for `flows {cmd} {exp} {flag}`"
            for v in values:
                yield pytest.param(cmd, exp, flag, v, id=f"{cmd}-{exp}-{flag}={v!r}")


def run(argv, capsys) -> tuple[int, str]:
    try:
        code = _cli.main(argv)
    except SystemExit as exc:  # argparse's own refusal
        code = exc.code
    return code, capsys.readouterr().err


def _without(argv: list[str], flag: str) -> list[str]:
    if flag in argv:
        i = argv.index(flag)
        return argv[:i] + argv[i + 2 :]
    return argv


@pytest.mark.parametrize("cmd, exp, flag, value", list(cases()))
def test_invalid_value_is_refused(cmd, exp, flag, value, tmp_path, capsys):
    out = tmp_path / "out"
    argv = _without(base_argv(cmd, exp, str(out)), flag) + [flag, value]
    code, err = run(argv, capsys)
    assert code == 2, f"`flows {' '.join(argv)}` → exit {code}: {err[-300:]}"
    assert flag in err or flag.lstrip("-").replace("-", "_") in err, err[-300:]
    assert list(tmp_path.iterdir()) == [], "something was written"


def test_positional_choices_are_refused(tmp_path, capsys):
    for cmd in ("check", "simulate", "sweep"):
        code, err = run(base_argv(cmd, "no-such-paper", str(tmp_path / "o")), capsys)
        assert code == 2 and "no-such-paper" in err
    code, err = run(["derive", "no-such-paper"], capsys)
    assert code == 2 and "no-such-paper" in err
    assert list(tmp_path.iterdir()) == []


def valid_value(action: argparse.Action) -> list[str]:
    if action.nargs == 0:
        return []
    if action.choices is not None:
        return [sorted(action.choices)[-1]]
    kind, kw = action.type.domain
    if kind == "as_tolerance":
        return ["1e-3"]
    return ["0.5" if kw.get("hi") == 1.0 else "3"]


def test_simulate_refuses_flags_that_do_not_act(tmp_path, capsys):
    """Every flag some experiment declares, given to one that does not: exit 2, named."""
    sims = _subparsers(_subparsers()["simulate"])
    declared = {exp: {a.option_strings[0]: a for a in _options(p)} for exp, p in sims.items()}
    tried = 0
    for exp, own in declared.items():
        for flags in declared.values():
            for flag, action in flags.items():
                if flag in own:
                    continue
                argv = base_argv("simulate", exp, str(tmp_path / "o")) + [
                    flag,
                    *valid_value(action),
                ]
                code, err = run(argv, capsys)
                assert code == 2, f"`flows {' '.join(argv)}` → exit {code}"
                assert flag in err and "unrecognized" in err
                tried += 1
    assert tried > 10
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("cmd", ["check", "simulate", "sweep"])
def test_bad_out_paths_are_refused_before_computing(cmd, tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("mine")
    exp = "multistage"
    for out in (afile, afile / "sub", "/proc/flows-no-such-dir"):
        code, err = run(base_argv(cmd, exp, str(out)), capsys)
        assert code == 2, err
        assert "--out" in err
    assert afile.read_text() == "mine" and sorted(tmp_path.iterdir()) == [afile]


# ---------------------------------------------------------------------------------------
# Flags that act under some `--method` values only (`Flag.methods`)


def _declared(cmd: str, exp: str) -> tuple[fl.Flag, ...]:
    e = EXPERIMENTS[exp]
    return e.simulate_flags if cmd == "simulate" else e.sweep_flags


def method_cases():
    """(cmd, experiment, method, typed, flag, applies) for every experiment whose simulate or
    sweep has a `--method` flag, every method it offers (the default also not typed), every
    flag declared for some methods only: generated from the declarations."""
    for cmd, exp, _ in parsers():
        if cmd not in ("simulate", "sweep"):
            continue
        flags = _declared(cmd, exp)
        chooser = next((f for f in flags if f.name == "method"), None)
        if chooser is None:
            assert not [f.name for f in flags if f.methods], f"{cmd} {exp}: no --method flag"
            continue
        assert chooser.default in chooser.choices, f"{cmd} {exp}: --method needs its default"
        scoped = [f for f in flags if f.methods]
        assert scoped, f"{cmd} {exp}: --method, but no flag says which method it acts under"
        for method in chooser.choices:
            for typed in (True, False) if method == chooser.default else (True,):
                for f in scoped:
                    assert set(f.methods) <= set(chooser.choices), f.option
                    applies = method in f.methods
                    yield pytest.param(
                        cmd,
                        exp,
                        method,
                        typed,
                        f.option,
                        applies,
                        id=f"{cmd}-{exp}-{'' if typed else 'default:'}{method}-{f.option}"
                        f"-{'acts' if applies else 'refused'}",
                    )


METHOD_CASES = list(method_cases())


def test_method_cases_cover_the_papers_with_methods():
    """The generator found the known methods (multistage simulate, bias-plateau sweep) and
    both outcomes: a declaration that went missing fails here, not silently."""
    pairs = {(c.values[0], c.values[1]) for c in METHOD_CASES}
    assert {("simulate", "multistage"), ("sweep", "bias-plateau")} <= pairs
    outcomes = {(c.values[0], c.values[1], c.values[4], c.values[5]) for c in METHOD_CASES}
    for flag in ("--rtol", "--atol", "--solver", "--max-steps", "--error-norm", "--progress"):
        assert ("simulate", "multistage", flag, False) in outcomes, flag
    assert ("simulate", "multistage", "--lr", False) in outcomes
    assert ("sweep", "bias-plateau", "--lr", False) in outcomes
    assert ("sweep", "bias-plateau", "--rtol", False) in outcomes


@pytest.fixture
def no_sweep(monkeypatch):
    """`flows sweep` stops where the experiment's sweep would start (parse level)."""

    def refuse(*args, **kwargs):
        raise ComputationStarted

    for exp in EXPERIMENTS.values():
        monkeypatch.setattr(exp, "sweep", refuse)


@pytest.mark.parametrize("cmd, exp, method, typed, flag, applies", METHOD_CASES)
def test_flag_of_another_method_is_refused(
    cmd, exp, method, typed, flag, applies, tmp_path, capsys, no_sweep
):
    """An inapplicable flag: exit 2 before anything runs, the flag, the chosen method and
    the way out named. An applicable one: not refused (the computation is reached)."""
    p = _subparsers(_subparsers()[cmd])[exp]
    action = next(a for a in _options(p) if a.option_strings[0] == flag)
    argv = base_argv(cmd, exp, str(tmp_path / "o")) + [flag, *valid_value(action)]
    if typed:
        argv += ["--method", method]
    if applies:
        with pytest.raises(ComputationStarted):
            run(argv, capsys)
        return
    code, err = run(argv, capsys)
    assert code == 2, f"`flows {' '.join(argv)}` → exit {code}: {err[-300:]}"
    assert f"{flag} applies to --method " in err and f"--method {method} (" in err, err
    assert f"Drop {flag}" in err and ("use --method" if typed else "add --method") in err, err
    assert "the default" in err or typed, err
    assert list(tmp_path.iterdir()) == []


def test_every_inapplicable_flag_is_named_at_once(tmp_path, capsys):
    argv = base_argv("simulate", "multistage", str(tmp_path / "o"))
    argv += ["--method", "gd", "--rtol", "1e-3", "--solver", "rkc", "--progress"]
    code, err = run(argv, capsys)
    assert code == 2
    assert "--solver, --rtol, --progress apply to --method flow (the exact flow) only" in err
    assert "its own flags: --lr" in err


def test_a_typed_value_equal_to_the_default_is_given():
    """`--method flow` typed (the default) and a switch are recorded as given; defaults are
    not (the refusal must not depend on whether a value equals its default)."""
    parser = _cli.build_parser()
    args = parser.parse_args(["simulate", "multistage", "--out", "o"])
    assert fl.given(args) == set() and args.method == "flow" and args.progress is False
    args = parser.parse_args(
        ["simulate", "multistage", "--method", "flow", "--progress", "--out", "o"]
    )
    assert fl.given(args) == {"method", "progress"}
    assert args.method == "flow" and args.progress is True


def test_the_python_api_refuses_the_same():
    """`experiment.simulate(options)` (None: not given) refuses before computing too."""
    exp = EXPERIMENTS["multistage"]
    with pytest.raises(ConfigError, match="--rtol applies to --method flow"):
        type(exp).simulate(exp, {"method": "gd", "rtol": 1e-3})
    with pytest.raises(ConfigError, match="--lr applies to --method gd .* add --method gd"):
        type(exp).simulate(exp, {"lr": 0.1, "progress": False})
    fl.refuse_inapplicable(exp.simulate_flags, {"method": "gd", "lr": 0.1, "progress": False})


def test_methods_need_a_method_flag_with_a_default():
    lone = (fl.Flag("rtol", "tolerance", methods=("flow",)),)
    with pytest.raises(ValueError, match="no --method flag"):
        fl.refuse_inapplicable(lone, {"rtol": 1e-3})
    no_default = (fl.Flag("method", "m", choices=("flow", "gd")), *lone)
    with pytest.raises(ValueError, match="default"):
        fl.refuse_inapplicable(no_default, {"rtol": 1e-3})


# ---------------------------------------------------------------------------------------
# Inputs that crashed


def test_deep_relu_depth_outside_its_range_is_refused(tmp_path, capsys):
    """`--net deep-relu --depth 1` crashed inside the piecewise-smooth solver (no hidden
    ReLU layer), `--depth 100` compiled for ever: both refused with the range named."""
    base = base_argv("simulate", "bias-plateau", str(tmp_path / "o")) + ["--net", "deep-relu"]
    for depth in ("1", "0", "65"):
        code, err = run([*base, "--depth", depth], capsys)
        assert code == 2 and "--depth" in err and "[2, 64]" in err, err
    assert "hidden ReLU layer" in err
    for depth in ("2", "64"):
        with pytest.raises(ComputationStarted):
            run([*base, "--depth", depth], capsys)
    assert list(tmp_path.iterdir()) == []


def test_depth_one_sweep_point_runs():
    """`flows sweep bias-plateau --depth 1` failed every point (Theorem 1's quantities need
    r ≥ 2); parse_depths accepts 1, so the point runs with them NaN (one GD step)."""
    import math

    from flows.experiments.bias_plateau.sweep import PlateauSweepConfig, run_point

    cfg = PlateauSweepConfig(method="gd", lr=0.05, t1=0.05, n_alpha=2, width=2, n_per_class=1)
    rec = run_point(cfg, 1, 0.1, 0)
    assert math.isnan(rec["bias_gap"]) and math.isnan(rec["alpha_2"])
    assert math.isfinite(rec["loss_final"]) and rec["steps"] == 1


SWEEPS = sorted(_subparsers(_subparsers()["sweep"]))


@pytest.mark.parametrize("exp", SWEEPS)
def test_a_seed_range_beyond_a_sweep_is_refused_before_building(exp, tmp_path, capsys):
    """`--seeds 0-99999999` (10⁸ points) is refused up front, with the count and the limit
    named; so is a grid whose axes multiply past the limit."""
    out = tmp_path / "o"
    code, err = run(base_argv("sweep", exp, str(out)) + ["--seeds", "0-99999999"], capsys)
    assert code == 2 and "--seeds" in err, err
    assert "100,000,000 seeds" in err and f"{_grid.MAX_GRID_POINTS:,}" in err, err
    argv = base_argv("sweep", exp, str(out)) + ["--seeds", "0-49999"]
    axis = next(f for f in argv if f in VALID_GRID)
    i = argv.index(axis) + 1
    argv[i] = {"--m": "20,30,40", "--depth": "2,3,4", "--init": "1e-4,1e-3,1e-2"}[axis]
    code, err = run(argv, capsys)
    assert code == 2 and "150,000 points" in err and f"{_grid.MAX_GRID_POINTS:,}" in err, err
    assert list(tmp_path.iterdir()) == []
