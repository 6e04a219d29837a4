"""Every flag of every subcommand, for every experiment, tried with invalid values generated
from the parser itself (each typed flag says what it accepts): each must exit 2 with the
flag named in the message and nothing written. A flag that does not act on the chosen
experiment must be refused the same way, never ignored.

Runs in-process with the computations replaced by a sentinel, so a value that slipped
through validation shows up as "computation started" instead of a long run.
"""

from __future__ import annotations

import argparse

import pytest

from flows import _cli, _sweep
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
    if kw.get("lo") is not None:
        vals += [str(kw["lo"] - 1)]
    if kw.get("hi") is not None:
        vals += [str(kw["hi"] + 1)]
    return vals


def base_argv(cmd: str, experiment: str | None, out: str) -> list[str]:
    argv = [cmd] + ([experiment] if experiment else [])
    if cmd in ("simulate", "check"):
        argv += ["--out", out]
    if cmd == "sweep":
        argv += ["--m", "20", "--alpha", "1.0", "--out", out]
    return argv


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
