"""`flows check`'s progress: a first line at once naming the papers; on a terminal one live
bar per paper (its stages done of the last run's count, the time left from that run's
recorded timeline); elsewhere plain lines stamped with the time elapsed, as in CI logs."""

from __future__ import annotations

import io
import json
import re
from unittest.mock import ANY

import pytest

from flows import Check
from flows._cli import app as _cli
from flows._cli.check_progress import Timings, time_left
from flows.experiments import EXPERIMENTS
from flows.plugin import Report

NAME = "deep-linear"


class Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.fixture
def fake_run(monkeypatch, tmp_path):
    """`deep-linear`'s run replaced by one that prints three stage lines (the first is
    printed after checking that the command's first line is already out)."""
    monkeypatch.setenv("FLOWS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("FLOWS_NO_CACHE", raising=False)
    exp = EXPERIMENTS[NAME]
    seen: list[str] = []

    def run(cfg, out, **kw):
        import sys

        stream = sys.stdout
        while hasattr(stream, "progress"):  # our line splitter: look at what it feeds
            stream = stream.progress.stream
        seen.append(stream.getvalue() if hasattr(stream, "getvalue") else "")
        for i in range(3):
            print(f"[{NAME}] stage {i + 1}", flush=True)
        print("  a detail line")
        return Report(NAME, [Check("c", "s", "1", "1", "holds")], [], {})

    monkeypatch.setattr(exp, "run", run)
    return seen


def _check(tmp_path, *extra: str) -> list[str]:
    return ["check", NAME, "--quick", "--no-report", "--out", str(tmp_path / "out"), *extra]


def test_plain_lines_when_not_a_terminal(tmp_path, fake_run, capsys):
    assert _cli.main(_check(tmp_path)) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert " ".join(out.split()).startswith(f"flows check: {NAME} (quick) into ")  # may wrap
    assert fake_run == [""] or fake_run[0].startswith("flows check:")  # first, before the run
    stamped = [x for x in lines if re.match(r"^\[ +\d+s\] ", x)]
    assert [x.split("] ", 1)[1] for x in stamped] == [
        f"[{NAME}] stage 1",
        f"[{NAME}] stage 2",
        f"[{NAME}] stage 3",
        "  a detail line",
    ]
    assert "\r" not in out and "stages" not in out
    # the run's timeline is recorded for the next estimate: one time per line
    (rec,) = json.loads((tmp_path / "cache" / "check-timings.json").read_text()).values()
    assert len(rec["lines"]) == 4 and rec["wall_s"] >= rec["lines"][-1] >= 0
    # the next run knows how long this one took
    assert _cli.main(_check(tmp_path)) == 0
    again = capsys.readouterr().out
    # (seconds as measured: a loaded machine may round the fake run's wall up)
    assert re.search(r"about \d+s in all \(the last runs\)", " ".join(again.split()))
    assert re.search(rf"\n\[1/1\] {NAME}: starting; the last run took \d+s\n", again)


def test_a_terminal_gets_one_bar_per_paper(tmp_path, fake_run, monkeypatch):
    term = Terminal()
    monkeypatch.setattr("sys.stdout", term)
    assert _cli.main(_check(tmp_path)) == 0
    first = term.getvalue()
    # the header (wrapped to the terminal's width), after the "preparing" live line it
    # replaces (drawn, then blanked)
    flat = re.sub(r"[ \n]+", " ", first)
    before, header, _ = flat.partition(f"flows check: {NAME} (quick) into ")
    assert header and before.split("\r")[-1].strip() == ""
    assert not before.strip() or before.strip().startswith("flows check: preparing")
    # the header was out before the paper's run began
    assert f"flows check: {NAME} (quick) into " in re.sub(r"[ \n]+", " ", fake_run[0])
    assert "\r" in first  # a live bar, redrawn
    assert f"[1/1] {NAME}: 4 stages done" in first and "no earlier run to estimate from" in first
    assert f"[{NAME}] stage 2" in first and "  a detail line" in first  # the log is kept
    # the second run has the first one's timeline (here a slower one, recorded anew): a bar
    # with a total and an estimate
    cfg = EXPERIMENTS[NAME].default_config(quick=True)
    Timings().record(NAME, cfg, [1.0, 2.0, 3.0, 4.0], 30.0)
    term.seek(0)
    term.truncate()
    assert _cli.main(_check(tmp_path)) == 0
    second = term.getvalue()
    assert re.search(rf"\[1/1\] {NAME}: +0%\|.*\| 0/4 stages \[00:0\d, about \d+s left\]", second)
    assert re.search(rf"\[1/1\] {NAME}: 100%\|.*\| 4/4 stages \[00:0\d, done in \d+s\]", second)
    assert "== deep-linear (quick;" in second  # the table follows the bar


def test_the_json_format_keeps_stdout_clean(tmp_path, fake_run, capsys):
    assert _cli.main([*_check(tmp_path), "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["experiments"][0]["name"] == NAME
    assert err.splitlines()[0].startswith("flows check:")


def test_no_cache_records_nothing(tmp_path, fake_run):
    assert _cli.main(["--no-cache", *_check(tmp_path)]) == 0
    assert not (tmp_path / "cache" / "check-timings.json").exists()


def test_time_left_follows_the_recorded_timeline():
    rec = {"lines": [10.0, 20.0, 90.0], "wall_s": 100.0}
    assert time_left(None, [], 5.0) is None
    assert time_left(rec, [], 3.0) == pytest.approx(97.0)  # before any line: 100 − 3
    assert time_left(rec, [10.0, 20.0], 21.0) == pytest.approx(79.0)  # as fast as before
    assert time_left(rec, [20.0, 40.0], 42.0) == pytest.approx(2 * 80 - 2)  # twice as slow
    assert time_left(rec, [1.0, 400.0], 400.0) == pytest.approx(2 * 80)  # at most ×2
    assert time_left(rec, [10.0, 20.0, 90.0], 95.0) == pytest.approx(5.0)
    assert time_left(rec, [1.0] * 5, 200.0) == 0.0  # past the record: never negative
    # a wall time alone (results.json of the last run in the folder): the rest of it
    assert time_left({"lines": [], "wall_s": 60.0}, [1.0, 2.0, 3.0], 10.0) == pytest.approx(50.0)


def test_timings_are_kept_per_configuration(tmp_path):
    exp = EXPERIMENTS[NAME]
    quick, full = exp.default_config(quick=True), exp.default_config()
    t = Timings(tmp_path / "t.json")
    t.record(NAME, quick, [1.0, 2.0], 3.0)
    again = Timings(tmp_path / "t.json")
    assert again.get(NAME, quick) == {"lines": [1.0, 2.0], "wall_s": 3.0, "recorded": ANY}
    assert again.get(NAME, full) is None
    (tmp_path / "bad.json").write_text("{not json")
    assert Timings(tmp_path / "bad.json").get(NAME, quick) is None
