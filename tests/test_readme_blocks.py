"""Every code block of the README and of the docs site, as a reader would run it.

- **Python** blocks of the README are executed (each preceded by `<!-- runnable -->`, the
  docs' marker; the docs' own Python blocks are executed by `tests/test_docs.py`).
- **Shell** blocks (README and every docs page): every line that starts with `flows` is
  read by the command line's own parser (`flows._cli.app.build_parser`), with a synopsis
  expanded into each command it stands for (`[a|b]` → a, b; `[--quick]` → with and without;
  `<paper>` → every paper that command accepts; `DIR` → a folder), so a renamed flag, a
  removed paper or a value the flag's type refuses fails here with the line. The short
  ones (`EXECUTED`) are also run in full by `pytest -m e2e`; the others are full paper
  runs and sweeps (minutes to hours), which the e2e tests and the stop's fresh-machine
  check run in their own forms.
- `python -m flows …` is checked to start the same program (`--version`).
- Every other shell line is a tool invocation: the README's test command must be the line
  `.ci/run` runs, and the other tools (`pip install`, `ruff`, `pyright`, `pytest`,
  `mkdocs`) must be ones `.ci/run` runs too, so no block names a step CI does not take.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import re
import shlex
import subprocess
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"

_FENCE = re.compile(r"^```(?P<lang>\w*)[^\n]*\n(?P<code>.*?)^```", re.S | re.M)
_RUNNABLE = re.compile(r"<!--\s*runnable\s*-->\s*$")

#: Command lines of the shell blocks that the e2e run executes in full (seconds each).
EXECUTED = (
    "flows check deep-linear",
    "flows simulate deep-linear --out DIR",
    "flows derive deep-linear",
)

#: Tools (first word of a shell line) other than `flows`, each run by `.ci/run`.
TOOLS = ("python3", "pip", "ruff", "pyright", "pytest", "mkdocs")


def _blocks(path: Path) -> list[tuple[int, str, str, bool]]:
    """(line, language, code, marked runnable) of every fenced block of `path`."""
    text = path.read_text(encoding="utf-8")
    out = []
    for m in _FENCE.finditer(text):
        before = text[: m.start()].rstrip("\n").splitlines()
        runnable = bool(before) and bool(_RUNNABLE.search(before[-1]))
        line = text.count("\n", 0, m.start()) + 1
        out.append((line, m.group("lang"), m.group("code"), runnable))
    return out


def _sources() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def _shell_lines() -> list[tuple[str, str]]:
    """(where, line) of every non-blank shell line, comments removed."""
    out = []
    for path in _sources():
        for line, lang, code, _ in _blocks(path):
            if lang not in ("bash", "sh", "shell", "console"):
                continue
            for i, raw in enumerate(code.splitlines()):
                words = shlex.split(raw, comments=True)
                if words:
                    out.append((f"{path.relative_to(ROOT)}:{line + 1 + i}", " ".join(words)))
    return out


SHELL = _shell_lines()
FLOWS_LINES = [(w, s) for w, s in SHELL if s.startswith("flows")]
README_PYTHON = [(ln, code) for ln, lang, code, run in _blocks(README) if lang == "python"]


def test_blocks_found():
    # the collection itself can fail: the README's quick start and the docs' synopses
    assert len(FLOWS_LINES) >= 20, FLOWS_LINES
    assert README_PYTHON, "the README has no python block"
    assert any(s == "flows check deep-linear" for _, s in FLOWS_LINES)


def test_every_readme_python_block_is_runnable():
    unmarked = [ln for ln, lang, _, run in _blocks(README) if lang == "python" and not run]
    assert not unmarked, f"README.md python blocks at lines {unmarked} lack `<!-- runnable -->`"


def test_readme_python_blocks(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    module = types.ModuleType("readme_example")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    for line, code in README_PYTHON:
        with contextlib.redirect_stdout(io.StringIO()) as out:
            exec(compile(code, f"README.md, block at line {line}", "exec"), module.__dict__)  # noqa: S102
        assert out.getvalue().strip(), f"README.md block at line {line} printed nothing"


def _papers_for(command: str) -> list[str]:
    from flows.experiments import EXPERIMENTS

    if command == "sweep":
        return sorted(n for n, e in EXPERIMENTS.items() if e.has_sweep)
    return sorted(EXPERIMENTS)


def expand(line: str, folder: str) -> list[list[str]]:
    """The command lines a synopsis line stands for, as argv lists (without `flows`)."""
    groups = re.findall(r"\[([^\]]*)\]", line)
    template = re.sub(r"\[[^\]]*\]", "\0", line)
    lines = []
    for choice in itertools.product(*[["", *g.split("|")] for g in groups]):
        pieces = template.split("\0")
        lines.append("".join(a + b for a, b in zip(pieces, [*choice, ""], strict=True)))
    out = []
    for text in lines:
        words = shlex.split(text.replace("DIR", folder))[1:]
        commands = ["check", "simulate", "sweep", "derive"] if "<command>" in words else [None]
        for cmd in commands:
            ws = [cmd if w == "<command>" else w for w in words]
            papers = _papers_for(ws[0]) if "<paper>" in ws else [None]
            out.extend([[p if w == "<paper>" else w for w in ws] for p in papers])
    # an empty alternative in a required group (`[a|b]` read as optional) gives a command
    # without its argument; those the parser accepts are also valid lines
    return [argv for argv in out if argv]


def test_expand():
    got = expand("flows check [a|b] [--quick]", "/o")
    assert sorted(got) == sorted(
        [["check"], ["check", "a"], ["check", "b"], ["check", "--quick"]]
        + [["check", "a", "--quick"], ["check", "b", "--quick"]]
    )
    assert ["sweep", "multistage", "--help"] in expand("flows <command> <paper> --help", "/o")
    assert ["sweep", "deep-linear", "--help"] not in expand("flows <command> <paper> --help", "/o")


@pytest.mark.parametrize(("where", "line"), FLOWS_LINES, ids=[w for w, _ in FLOWS_LINES])
def test_flows_line_parses(where, line, tmp_path, capsys):
    from flows._cli.app import build_parser

    argvs = expand(line, str(tmp_path / "out"))
    assert argvs, f"{where}: {line!r} expands to no command"
    for argv in argvs:
        try:
            build_parser().parse_args(argv)
        except SystemExit as exc:
            # --help and --version exit 0 after printing; anything else is a refusal
            assert exc.code == 0, f"{where}: `flows {shlex.join(argv)}` refused:\n" + (
                capsys.readouterr().err
            )


def test_tool_lines_are_what_ci_runs():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    readme_cmd = README.read_text(encoding="utf-8").split("```bash\n", 1)[1].splitlines()[1]
    assert readme_cmd in ci, "the README's test command is not the line .ci/run runs"
    others = [(w, s) for w, s in SHELL if not s.startswith(("flows", "python -m flows"))]
    for where, line in others:
        tool = line.split()[0]
        assert tool in TOOLS, f"{where}: {line!r} is neither a flows command nor a known tool"
        ran = re.search(rf"(^|[\s&;(]){re.escape(tool)}\b", ci)
        assert ran, f"{where}: .ci/run never runs {tool}"


def test_python_m_flows_is_the_same_program():
    # `python -m flows …` (the synopsis' last line): the same launcher, answering without JAX
    lines = [s for _, s in SHELL if s.startswith("python -m flows")]
    assert lines, "no `python -m flows` line any more: drop this test"
    import flows

    done = subprocess.run(
        [sys.executable, "-m", "flows", "--version"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert flows.__version__ in done.stdout


@pytest.mark.e2e
@pytest.mark.parametrize("line", EXECUTED)
def test_executed_lines(line, tmp_path, monkeypatch):
    from flows._cli import app as _cli

    assert any(s == line for _, s in FLOWS_LINES), f"{line!r} is no longer in a block"
    monkeypatch.chdir(tmp_path)
    argv = shlex.split(line.replace("DIR", str(tmp_path / "out")))[1:]
    assert _cli.main(argv) == 0
