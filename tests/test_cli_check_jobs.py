"""`flows check --jobs N`: the papers run in worker processes, the results, table, JSON and
exit status those of a serial run; a bad `--jobs` is refused naming the flag; a worker that
dies is named, every finished paper kept, exit 3, no hang.

The fast tests run small fake papers (defined here, at module level, so that a worker
process rebuilds them by import); the real papers' bitwise comparison is end-to-end."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import signal
from pathlib import Path

import pytest

from flows import Check, SolverError
from flows._cli import app as _cli
from flows._cli import jobs as _jobs
from flows.experiments import EXPERIMENTS
from flows.plugin import AbstractExperiment, OutputDir, Report, write_results_json


@dataclasses.dataclass(frozen=True)
class FakeConfig:
    value: float = 0.1
    quick: bool = False


class FakePaper(AbstractExperiment):
    """A paper that prints two progress lines and writes results.json with one number;
    `behaviour` "die" kills its own process, "raise" raises a SolverError."""

    title = "A fake paper"
    files = ("results.json",)
    simulate_flags = ()

    def __init__(self, name: str, behaviour: str = "ok"):
        self.name, self.behaviour = name, behaviour  # type: ignore[misc]

    def default_config(self, quick: bool = False):
        return FakeConfig(quick=quick)

    def run(self, cfg, out: Path, *, progress: bool = True) -> Report:
        print(f"[{self.name}] stage 1", flush=True)
        print("  a detail line", flush=True)
        if self.behaviour == "die":
            os.kill(os.getpid(), signal.SIGKILL)
        if self.behaviour == "raise":
            raise SolverError(f"{self.name}: gave up at t = 1", t_reached=1.0, reason="max steps")
        measured = sum(cfg.value * k for k in range(10))  # a float, the same bits each run
        checks = [Check(f"{self.name} claim", "s", "4.5", f"{measured!r}", "holds")]
        od = OutputDir(Path(out) / self.name, self.files, self.name)
        write_results_json(
            od.path("results.json"), self.name, dataclasses.asdict(cfg), checks,
            {"measured": measured, "pid_free": True},
        )  # fmt: skip
        return Report(self.name, checks, od.commit(), {"measured": measured})

    def simulate(self, options, *, progress=False):  # pragma: no cover - not used
        raise NotImplementedError


def _papers(monkeypatch, *papers: FakePaper) -> None:
    registry = {p.name: p for p in papers}
    monkeypatch.setattr("flows.experiments.EXPERIMENTS", registry)


#: The timings in results.json and the JSON output: measured, so never the same twice.
TIMINGS = ("wall_s", "compile_s", "cpu_s")


def _without_walls(obj):
    """`obj` (parsed JSON) without the timings, the numbers a rerun changes."""
    if isinstance(obj, dict):
        return {k: _without_walls(v) for k, v in obj.items() if k not in TIMINGS}
    if isinstance(obj, list):
        return [_without_walls(v) for v in obj]
    return obj


@pytest.fixture(autouse=True)
def _own_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("FLOWS_CACHE_DIR", str(tmp_path / "cache"))


@pytest.mark.parametrize("value", ["0", "-1", "-3", "1.5", "abc", "", "2e0"])
def test_bad_jobs_exit_2_naming_the_flag(value, tmp_path, capsys):
    assert _cli.main(["check", "deep-linear", "--jobs", value, "--out", str(tmp_path)]) == 2
    assert "--jobs" in capsys.readouterr().err
    assert not (tmp_path / "deep-linear").exists()  # refused before anything ran


def test_parallel_is_the_serial_run(tmp_path, monkeypatch, capsys):
    """Two papers in two workers: the same JSON (but wall times), the same results.json
    bytes, the same exit status, progress lines merged with the paper's name on each."""
    _papers(monkeypatch, FakePaper("jobs-a"), FakePaper("jobs-b"))
    monkeypatch.setattr(_jobs, "cores", lambda: 1)  # so --jobs 2 is "more than the cores"
    runs = {}
    for jobs in ("1", "2"):
        out = tmp_path / f"j{jobs}"
        argv = ["check", "all", "--format", "json", "--jobs", jobs, "--out", str(out)]
        assert _cli.main(argv) == 0
        captured = capsys.readouterr()
        # the same but for the output folder's name in the file paths
        runs[jobs] = (json.loads(captured.out.replace(str(out), "OUT")), captured.err, out)
    (serial, serial_err, s_out), (parallel, par_err, p_out) = runs["1"], runs["2"]
    assert _without_walls(parallel) == _without_walls(serial)
    assert [e["name"] for e in parallel["experiments"]] == ["jobs-a", "jobs-b"]
    # each paper's CPU seconds (its process's, every thread): this one's or its worker's
    assert all(e["cpu_s"] >= 0 for run in (serial, parallel) for e in run["experiments"])
    for name in ("jobs-a", "jobs-b"):
        a = json.loads((s_out / name / "results.json").read_text())
        b = json.loads((p_out / name / "results.json").read_text())
        assert a == b and a["measured"] == sum(0.1 * k for k in range(10))
    assert "2 worker processes" in " ".join(par_err.split())
    assert "worker processes" not in serial_err
    assert "--jobs 2 is more than the 1 cores here" in " ".join(par_err.split())
    for name in ("jobs-a", "jobs-b"):  # every line of a paper's progress names it
        assert f"[{name}] stage 1" in par_err
        # a single run's (indented) line keeps its indent before the tag: it stays one
        # that a plain log holds back (`_PlainProgress`)
        assert f"  [{name}] a detail line" in par_err
    assert "[2/2]" in par_err and "all done" in par_err


class Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.e2e  # the layout only; two worker processes (~10 s quiet, 26 s loaded)
def test_a_terminal_gets_a_bar_per_running_paper(tmp_path, monkeypatch):
    _papers(monkeypatch, FakePaper("jobs-a"), FakePaper("jobs-b"))
    term = Terminal()
    monkeypatch.setattr("sys.stdout", term)
    assert _cli.main(["check", "all", "--no-report", "--jobs", "2", "--out", str(tmp_path)]) == 0
    text = term.getvalue()
    assert "\r" in text  # live bars, redrawn
    for k, name in enumerate(("jobs-a", "jobs-b"), 1):
        assert f"[{k}/2] {name}: done in" in text  # a line stays when its bar goes
        assert f"[{name}] stage 1" in text and f"== {name} (default;" in text
    assert text.index("== jobs-a") < text.index("== jobs-b")  # tables in registry order


def test_a_killed_worker_is_named_and_the_rest_kept(tmp_path, monkeypatch, capsys):
    _papers(monkeypatch, FakePaper("jobs-a"), FakePaper("jobs-b", "die"))
    out = tmp_path / "out"
    assert _cli.main(["check", "all", "--jobs", "2", "--format", "json", "--out", str(out)]) == 3
    captured = capsys.readouterr()
    err = " ".join(captured.err.split())
    assert "the run of jobs-b was lost" in err and "SIGKILL" in err
    assert "out-of-memory" in err and "kept (jobs-a)" in err
    assert "jobs-b: lost" in err  # said in the progress when it happened
    payload = json.loads(captured.out)  # stdout is still one JSON document
    assert [e["name"] for e in payload["experiments"]] == ["jobs-a"]
    assert payload["lost"][0]["name"] == "jobs-b" and "SIGKILL" in payload["lost"][0]["reason"]
    # every finished paper: results, report, and the index that links it
    assert (out / "jobs-a" / "results.json").exists() and (out / "jobs-a" / "report.html").exists()
    assert not (out / "jobs-b" / "results.json").exists()
    index = (out / "index.html").read_text()
    assert "jobs-a/report.html" in index and "jobs-b/report.html" not in index


def test_a_workers_error_is_the_serial_runs(tmp_path, monkeypatch, capsys):
    """A paper that raises: the same message and exit status as a serial run, after the
    papers before it (its table printed), none after it."""
    _papers(monkeypatch, FakePaper("jobs-a"), FakePaper("jobs-b", "raise"), FakePaper("jobs-c"))
    results = {}
    for jobs in ("1", "2"):
        out = tmp_path / f"j{jobs}"
        code = _cli.main(["check", "all", "--no-report", "--jobs", jobs, "--out", str(out)])
        captured = capsys.readouterr()
        results[jobs] = (code, captured)
        assert "== jobs-a (default;" in captured.out
        assert "== jobs-c" not in captured.out
    assert results["1"][0] == results["2"][0] == 3
    message = "flows: solver failure: jobs-b: gave up at t = 1"
    assert message in results["1"][1].err and message in results["2"][1].err


def test_an_error_crosses_the_process_boundary_whole():
    import pickle

    exc = SolverError("stopped", t_reached=2.5, reason="step size")
    exc.trajectory = lambda: None  # an attribute that does not pickle: left behind
    back = pickle.loads(pickle.dumps(_jobs._portable(exc)))
    assert type(back) is SolverError and str(back) == "stopped"
    assert (back.t_reached, back.reason) == (2.5, "step size")
    assert "in the worker process" in back.__notes__[0]
    disk = pickle.loads(pickle.dumps(_jobs._portable(OSError(28, "No space left", "f"))))
    assert (disk.errno, disk.strerror, disk.filename) == (28, "No space left", "f")


def test_one_paper_or_an_unsendable_one_runs_in_this_process(tmp_path, monkeypatch, capsys):
    """No worker where there is nothing to share (one paper), nor for a paper that cannot
    be rebuilt in a worker (its `run` replaced on the instance, as tests do)."""
    a, b = FakePaper("jobs-a"), FakePaper("jobs-b")
    _papers(monkeypatch, a, b)
    pid = os.getpid()
    seen = []

    def here(cfg, out, **kw):
        seen.append(os.getpid())
        return FakePaper.run(a, cfg, out)

    monkeypatch.setattr(a, "run", here)
    assert not _jobs.sendable(a) and _jobs.sendable(b)
    assert _cli.main(["check", "all", "--no-report", "--jobs", "2", "--out", str(tmp_path)]) == 0
    assert seen == [pid]
    assert "worker processes" not in capsys.readouterr().out


def test_the_longest_runs_start_first():
    walls = {"a": 30.0, "b": None, "c": 130.0, "d": 60.0, "e": 60.0}
    assert _jobs.longest_first(list(walls), walls) == ["b", "c", "d", "e", "a"]


def test_default_jobs_is_the_cores(monkeypatch):
    parser = _cli.build_parser()
    assert parser.parse_args(["check"]).jobs is None  # None: the cores
    assert _jobs.cores() >= 1
    monkeypatch.setattr(os, "process_cpu_count", lambda: 7, raising=False)
    assert _jobs.cores() == 7


@pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs an affinity mask of two cores or more to narrow",
)
def test_saved_cores_follow_the_affinity_mask():
    """`flows.machine()["cpu_cores"]` — saved with every result, and `--jobs`' default —
    is the cores this process may run on (XLA sizes its thread pool, and so splits its
    reductions, by them), not the machine's count: narrowed to one core by
    `sched_setaffinity` (as `taskset -c 0` does), it says 1."""
    import subprocess
    import sys

    code = (
        "import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); "
        "import flows; from flows._cli import jobs; "
        "print(flows.machine()['cpu_cores'], jobs.cores())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["1", "1"]
    import flows

    assert flows.machine()["cpu_cores"] == len(os.sched_getaffinity(0))


def _numbers(folder: Path) -> str:
    """results.json but the timings and versions, as canonical JSON text (NaN is "NaN":
    equal text, equal bits)."""
    data = json.loads((folder / "results.json").read_text())
    return json.dumps(_without_walls({k: v for k, v in data.items() if k != "versions"}))


@pytest.mark.e2e
def test_real_papers_bitwise_equal_serial_and_parallel(tmp_path, monkeypatch, capsys):
    """deep-linear and linear-teacher --quick, one at a time in this process and in two
    workers: every number of results.json the same (JSON text of the floats: bitwise)."""
    names = ("deep-linear", "linear-teacher")
    monkeypatch.setattr("flows.experiments.EXPERIMENTS", {n: EXPERIMENTS[n] for n in names})
    payloads = {}
    for jobs in ("1", "2"):
        out = tmp_path / f"j{jobs}"
        argv = ["check", "all", "--quick", "--no-report", "--format", "json", "--jobs", jobs]
        assert _cli.main([*argv, "--out", str(out)]) in (0, 1)
        payloads[jobs] = json.loads(capsys.readouterr().out.replace(str(out), "OUT"))
    canonical = {j: json.dumps(_without_walls(p)) for j, p in payloads.items()}  # NaN-safe
    assert canonical["1"] == canonical["2"]
    for n in names:
        assert _numbers(tmp_path / "j1" / n) == _numbers(tmp_path / "j2" / n)
