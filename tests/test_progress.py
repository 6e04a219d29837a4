"""The live progress of a solve (`simulate(…, progress=True)`): the meter's counts are the
solve's own (steps, rejected steps, time reached), a terminal gets one live bar, anything
else plain lines at every tenth, and a run without progress has no meter at all."""

import io
import re

import pytest
from _matrix import default_and_ci

import flows
from flows._solve.progress import Bar
from flows.models import TwoLayer


@pytest.fixture(scope="module")
def small():
    data = flows.assumption_data("f2", n=30)
    return flows.make_problem(TwoLayer(m=15, d=1, alpha=1.0), data, key=5)


LINE = re.compile(r"flows: +(\d+)% · t = (\S+) of (\S+), (\d+) steps \((\d+) rejected\) · \S+ s")


@pytest.mark.parametrize("clock", default_and_ci(["physical", "log"], default=["physical"]))
def test_plain_lines_report_the_solves_own_counts(small, capsys, clock):
    t1 = 200.0 if clock == "physical" else 1e4
    traj = flows.simulate(small, t1=t1, rtol=1e-8, n_save=3, clock=clock, progress=True)
    lines = [LINE.match(x) for x in capsys.readouterr().err.splitlines()]
    lines = [m for m in lines if m]
    pct = [int(m.group(1)) for m in lines]
    assert len(lines) >= 5 and pct == sorted(pct) and pct.count(100) == 1, pct
    last = lines[-1]
    # the last line is the solve's end: its steps and rejections are the solve's stats
    assert int(last.group(4)) == traj.stats["steps"]
    assert int(last.group(5)) == traj.stats["rejected_steps"] > 0
    assert float(last.group(2)) == pytest.approx(t1, rel=1e-3)
    ts = [float(m.group(2)) for m in lines]
    assert ts == sorted(ts) and 0 < ts[0] < t1  # physical time, on either clock


def test_a_terminal_gets_one_live_bar():
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    out = Terminal()
    bar = Bar(10.0, stream=out)
    assert bar.live
    for i in range(1, 11):
        bar.update(i / 10, float(i), 10 * i, i // 3)
    bar.close()
    text = out.getvalue()
    assert "\r" in text and "\n" not in text.rstrip("\n")  # one line, redrawn
    assert "t = 10 of 10, 100 steps (3 rejected)" in text and "100%" in text


def test_a_run_stopped_early_says_where():
    out = io.StringIO()
    bar = Bar(10.0, stream=out)
    assert not bar.live
    bar.update(0.05, 0.5, 3, 0)
    bar.update(0.42, 4.2, 30, 2)
    bar.close()
    lines = out.getvalue().splitlines()
    assert lines[-1].startswith("flows: stopped at 42% · t = 4.2 of 10, 30 steps (2 rejected)")
    assert not any("100%" in x for x in lines)
