"""Progress by default on a terminal: the launcher's starting line, one live status line or
bar per command (compiling named, then the run), the summary on a line of its own, and
plain sparse lines where no live line can be shown (a pipe, `TERM=dumb`, a 20-column
terminal). The tests read the bytes a pseudo-terminal receives; they assert on content
and order, never on timings."""

from __future__ import annotations

import fcntl
import io
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from flows._cli import live
from flows._cli.check_progress import _PlainProgress
from flows._cli.sweep import _SweepBar, _SweepTimer
from flows._solve.progress import Bar

ROOT = Path(__file__).resolve().parents[1]
#: A carriage return that is not the terminal's own end of line ("\r\n"): a redraw.
REDRAW = re.compile(r"\r(?!\n)")


class Terminal(io.StringIO):
    """A stream that says it is a terminal, and remembers what was flushed."""

    def __init__(self):
        super().__init__()
        self.flushed = 0

    def isatty(self):
        return True

    def flush(self):
        self.flushed = len(self.getvalue())


def run_in_pty(argv, *, columns=100, env=None, interrupt_on=None, timeout=600):
    """(output, exit status) of `argv` run in a pseudo-terminal of `columns` columns;
    `interrupt_on`: a text after which the child gets SIGINT (Ctrl-C)."""
    pid, fd = pty.fork()
    if pid == 0:  # the child
        # as a shell gives a foreground command: Ctrl-C on (a test run started in the
        # background, `cmd &`, inherits SIGINT ignored, and an ignored signal stays ignored)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.environ.update({"COLUMNS": str(columns), **(env or {})})
        os.execvp(argv[0], argv)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    out, sent, end = b"", False, time.monotonic() + timeout
    while time.monotonic() < end:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                data = os.read(fd, 4096)
            except OSError:  # the child closed the terminal
                break
            if not data:
                break
            out += data
            if interrupt_on and not sent and interrupt_on in out.decode("utf-8", "replace"):
                os.kill(pid, signal.SIGINT)
                sent = True
    else:
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return out.decode("utf-8", "replace"), os.waitstatus_to_exitcode(status)


def flows_command(*args):
    return [str(Path(sys.executable).with_name("flows")), *args]


# --- where a live line may be drawn ------------------------------------------------------


def test_only_a_capable_terminal_gets_a_live_line(monkeypatch):
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setenv("COLUMNS", "100")
    assert live.live_terminal(Terminal())
    assert not live.live_terminal(io.StringIO())  # a pipe, a file
    monkeypatch.setenv("COLUMNS", "20")
    assert not live.live_terminal(Terminal())
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setenv("TERM", "dumb")
    assert not live.live_terminal(Terminal())


def test_the_solves_bar_follows_the_same_rules(monkeypatch):
    monkeypatch.setenv("COLUMNS", "20")
    assert not Bar(10.0, stream=Terminal()).live
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setenv("TERM", "dumb")
    assert not Bar(10.0, stream=Terminal()).live


def test_the_solves_bar_ends_its_line_before_anything_else_is_printed(monkeypatch):
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setenv("COLUMNS", "100")
    out = Terminal()
    bar = Bar(10.0, stream=out, live=True)
    bar.update(1.0, 10.0, 100, 3)
    bar.close()
    text = out.getvalue()
    assert text.endswith("\n") and out.flushed == len(text)  # the newline is on screen


# --- the status line of `flows simulate` -------------------------------------------------


def test_a_status_line_names_the_compile_then_ends_on_its_own_line(monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    out = Terminal()
    status = live.Status(out, "flows simulate x", expected_s=60.0)
    monkeypatch.setattr(live._COMPILES, "since", time.perf_counter() - 3)
    compiling = status.frame()
    monkeypatch.setattr(live._COMPILES, "since", None)
    status.phase = "saving trajectory.nc"
    saving = status.frame()
    assert live.any_open()
    status.close("flows simulate x: done in 4s · t = 20, 178 steps (8 rejected)")
    assert not live.any_open()
    assert compiling.startswith("flows simulate x: compiling (3s)") and "left" in compiling
    assert "saving trajectory.nc" in saving
    text = out.getvalue()
    assert text.startswith("\r") and text.endswith("178 steps (8 rejected)\n")
    status.close()  # closing twice adds nothing
    assert out.getvalue() == text


def test_an_interrupt_ends_every_live_line_first():
    out = Terminal()
    status = live.Status(out, "flows simulate x")
    with pytest.raises(KeyboardInterrupt), live.lines_ended():
        raise KeyboardInterrupt
    assert out.getvalue().endswith("\n") and status not in live._OPEN


# --- the sweep's bar ---------------------------------------------------------------------


def test_the_sweep_bar_counts_points_and_leaves_the_summary_a_line_of_its_own(monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    out = Terminal()
    bar = _SweepBar(out, _SweepTimer())
    bar.line("[sweep] toy: 2 grid points")
    bar.begin(2, 0)
    bar.batch(["a=1", "a=2"])
    running = out.getvalue()
    bar.point(1, 2, "a=1 ok")
    bar.point(2, 2, "a=2 ok")
    bar.phase("drawing toy.png")
    bar.end()
    bar.line("== sweep summary ==")
    text = out.getvalue()
    assert "running a=1 and 1 more" in running
    assert "[1/2] a=1 ok" in text and "[2/2] a=2 ok" in text
    assert "2/2 points" in text
    assert text.index("[sweep] toy") < text.index("[1/2]") < text.index("[2/2]")
    assert text.endswith("\n== sweep summary ==\n")  # not glued to the bar's last frame


# --- `flows check` without a terminal: sparse lines ---------------------------------------


def test_piped_check_progress_holds_back_the_single_runs_lines():
    out = io.StringIO()
    progress = _PlainProgress(out, 100, time.perf_counter())
    progress.begin(1, 1, "toy", None, None)
    progress.write("[toy] stage one")
    for k in range(200):
        progress.write(f"  [toy] trend run {k}: plateau 1.0")
    progress.write("[toy] stage two")
    progress.end(1.0, True)
    lines = out.getvalue().splitlines()
    assert len(lines) <= 5, lines
    assert "\r" not in out.getvalue()
    assert lines[-2].endswith("trend run 199: plateau 1.0 (and 199 more runs before it)")
    assert lines[-1].endswith("[toy] stage two")
    assert len(progress.times) == 202  # every line still counts for the estimates


# --- the launcher's starting line -------------------------------------------------------


def test_the_launcher_keeps_a_live_starting_line_on_a_terminal():
    probe = (
        "import time, _flows_launch\n"
        "t = _flows_launch._say_starting(['check'])\n"
        "time.sleep(1.2)\n"
        "t.stop()\n"
        "print('after')\n"
    )
    out, code = run_in_pty([sys.executable, "-c", probe], env={"TERM": "xterm"})
    assert code == 0, out
    frames = REDRAW.split(out)
    assert sum("flows check: starting (loading JAX and the papers)" in f for f in frames) >= 2
    assert re.search(r"s\r?\nafter", out)  # the command's output on a line of its own
    piped = subprocess.run(
        [sys.executable, "-c", probe.replace("t.stop()", "assert t is None")],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert piped.returncode == 0 and "\r" not in piped.stderr


# --- the commands in a pseudo-terminal (real solves) -------------------------------------

SIMULATE = ("simulate", "multistage", "--m", "20", "--n", "50", "--t1", "2", "--no-report")


@pytest.mark.e2e
def test_simulate_on_a_terminal_shows_one_live_line_then_the_summary(tmp_path):
    out, code = run_in_pty(flows_command(*SIMULATE, "--out", str(tmp_path / "a")))
    assert code == 0, out
    assert "flows simulate: starting (loading JAX)" in out
    frames = [f for f in REDRAW.split(out) if f.startswith("flows simulate multistage:")]
    assert frames and "done in" in frames[-1] and "steps" in frames[-1]
    assert re.search(r"steps \(\d+ rejected\) *\r?\ngradient flow \(tsit5\): loss", out)

    quiet, code = run_in_pty(flows_command(*SIMULATE, "--quiet", "--out", str(tmp_path / "b")))
    assert code == 0 and not REDRAW.search(quiet) and "gradient flow" in quiet


@pytest.mark.e2e
@pytest.mark.parametrize("how", ["TERM=dumb", "20 columns"])
def test_simulate_degrades_to_plain_lines(tmp_path, how):
    env = {"TERM": "dumb"} if how == "TERM=dumb" else {"TERM": "xterm"}
    columns = 20 if how == "20 columns" else 100
    out, code = run_in_pty(
        flows_command(*SIMULATE, "--out", str(tmp_path / "a")), columns=columns, env=env
    )
    assert code == 0 and not REDRAW.search(out), out
    assert "gradient flow (tsit5): loss" in out


@pytest.mark.e2e
def test_ctrl_c_in_the_middle_of_the_line_leaves_the_terminal_clean(tmp_path):
    argv = flows_command(*SIMULATE[:-1], "--t1", "2000", "--out", str(tmp_path / "a"))
    out, code = run_in_pty(argv, interrupt_on="flows simulate multistage:")
    assert code == 130, out
    assert re.search(r"\n(flows: interrupted|flows simulate: interrupted)", out), out
    tail = out[out.index("interrupted") :]
    assert not REDRAW.search(tail)  # nothing drawn after the message
    assert not (tmp_path / "a" / "trajectory.nc").exists()


@pytest.mark.e2e
def test_sweep_on_a_terminal_shows_a_bar_of_points_then_the_summary(tmp_path):
    argv = flows_command(
        "sweep", "multistage", "--m", "20", "--alpha", "1.0", "--seeds", "0-1", "--n", "50",
        "--no-plot", "--out", str(tmp_path / "s"),
    )  # fmt: skip
    out, code = run_in_pty(argv)
    assert code == 0, out
    bars = [f for f in REDRAW.split(out) if f.startswith("sweep: ")]
    assert any("running m=20" in f for f in bars) and any("2/2 points" in f for f in bars)
    assert re.search(r"\n\r?\n== sweep summary: 2 points", out)
    assert out.index("[1/2]") < out.index("== sweep summary")
