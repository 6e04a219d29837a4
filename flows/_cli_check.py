"""`flows check`: every chosen paper's checks run, a progress line per paper (estimates from
the previous run's recorded time), the table or JSON on stdout, `report.html` per paper and
`index.html` over them written beside the results."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import sys
import time
from pathlib import Path

from ._cli_env import _command
from ._cli_output import EXIT_FAILED, EXIT_OK
from ._errors import ConfigError


def terminal_width(fallback: int = 120) -> int:
    """Columns of the terminal (`COLUMNS` if set; `fallback` when not a terminal)."""
    return max(shutil.get_terminal_size((fallback, 24)).columns, 20)


def _duration(s: float) -> str:
    if s < 90:
        return f"{s:.0f}s"
    if s < 5400:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


class _StampedLines(io.TextIOBase):
    """A text stream that passes whole lines on to `target`, each changed by `edit(line)`
    (e.g. prefixed with the time elapsed); used to time the progress lines that
    experiments and sweeps print."""

    def __init__(self, target, edit):
        self.target, self.edit, self._buf = target, edit, ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._buf += text
        *lines, self._buf = self._buf.split("\n")
        for line in lines:
            self.target.write(self.edit(line) + "\n")
        return len(text)

    def flush(self) -> None:
        if self._buf:
            self.target.write(self.edit(self._buf))
            self._buf = ""
        self.target.flush()


def _fit(text: str, width: int, indent: int) -> str:
    """`text` wrapped to `width` with a hanging indent; words (paths) are never split."""
    import textwrap

    return textwrap.fill(
        text,
        width,
        subsequent_indent=" " * indent,
        break_long_words=False,
        break_on_hyphens=False,
    )


def _previous_wall_s(folder: Path) -> float | None:
    """The wall time recorded by the last run in `folder` (its results.json), if any."""
    try:
        value = float(json.loads((folder / "results.json").read_text())["wall_s"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return value if value > 0 else None


def _cmd_check(args) -> int:
    from ._checks import any_failed, format_checks, json_safe
    from ._io import INDEX_NAME, OutputDir
    from .experiments import EXPERIMENTS as exps

    names = sorted(exps) if args.experiment == "all" else [args.experiment]
    out = Path(args.out)
    report = not args.no_report
    for name in names:  # refuse a bad --out before minutes of computing
        OutputDir.preflight(out / name, exps[name].outputs if report else exps[name].files, name)
    if report and len(names) > 1:
        OutputDir.preflight(out, (INDEX_NAME,))
    as_json = args.format == "json"
    width = args.width or terminal_width()
    mode = "quick" if args.quick else "default"
    # progress goes where the table does not: stderr for json, else stdout
    progress_stream = sys.stderr if as_json else sys.stdout
    command_start = time.perf_counter()
    previous = {n: _previous_wall_s(out / n) for n in names}
    failed = False
    done: list[dict] = []

    def stamp(line: str) -> str:
        if not line.strip():
            return line
        return _fit(f"[{_duration(time.perf_counter() - command_start):>7}] {line}", width, 10)

    for k, name in enumerate(names, 1):
        exp = exps[name]
        cfg = exp.default_config(quick=args.quick)
        if (last := previous[name]) is not None:
            print(
                _fit(
                    f"[{k}/{len(names)}] {name}: starting; the last run in this folder took "
                    f"{_duration(last)}",
                    width,
                    4,
                ),
                file=progress_stream,
                flush=True,
            )
        start = time.perf_counter()
        with contextlib.redirect_stdout(_StampedLines(progress_stream, stamp)) as stamped:
            try:
                result = exp.run(cfg, out)
            finally:
                stamped.flush()
        wall = time.perf_counter() - start
        files = [str(f) for f in result.files]
        report_path = None
        if report:
            report_path = _write_report(exp, result, out, mode=mode, wall_s=wall)
            if report_path is not None:
                files.append(str(report_path))
        failed |= any_failed(result.checks)
        done.append(
            {
                "name": name,
                "title": exp.title,
                "mode": mode,
                "wall_s": wall,
                "failed": any_failed(result.checks),
                "checks": result.checks,
                "files": files,
                "report": f"{name}/{report_path.name}" if report_path else None,
            }
        )
        if as_json:
            _progress_line(k, names, done, command_start, previous, progress_stream, width)
            continue
        print(f"\n== {name} ({mode}; {wall:.0f}s) ==")
        print(format_checks(result.checks, args.format, width))
        print(_fit("wrote: " + ", ".join(files), width, 2))
        if len(names) > 1:
            _progress_line(k, names, done, command_start, previous, progress_stream, width)
    if report and len(names) > 1:
        index = _write_index(out, done, mode=mode, wall_s=time.perf_counter() - command_start)
        if index is not None and not as_json:
            print(_fit(f"wrote: {index}", width, 2))
    if as_json:
        payload = {
            "experiments": [
                {**{k: v for k, v in e.items() if k != "checks"},
                 "checks": [c.to_dict() for c in e["checks"]]}
                for e in done
            ],
            "failed": failed,
        }  # fmt: skip
        print(json.dumps(json_safe(payload), indent=1, ensure_ascii=False))
    return EXIT_FAILED if failed else EXIT_OK


def _progress_line(k, names, done, command_start, previous, stream, width) -> None:
    """'[k/n] name done in …; elapsed …, about … left' after each experiment: the estimate
    uses the wall time of the last run in each remaining folder where there is one, else
    the mean of the experiments finished now."""
    elapsed = time.perf_counter() - command_start
    left = names[k:]
    mean = sum(e["wall_s"] for e in done) / len(done)
    est = sum(previous.get(n) or mean for n in left)
    tail = f"; about {_duration(est)} left (estimate)" if left else "; all done"
    print(
        _fit(
            f"[{k}/{len(names)}] {done[-1]['name']} done in {_duration(done[-1]['wall_s'])}; "
            f"elapsed {_duration(elapsed)}{tail}",
            width,
            4,
        ),
        file=stream,
        flush=True,
    )


def _write_report(exp, result, out: Path, *, mode: str, wall_s: float) -> Path | None:
    """`out/<name>/report.html`; a report that cannot be written is a warning (the results
    are already in place), not a failure of the check."""
    from .experiments.base import write_report

    try:
        return write_report(exp, result, out, mode=mode, wall_s=wall_s, command=_command())
    except Exception as exc:  # noqa: BLE001 - the checks and results stand without it
        print(
            f"flows: warning: report.html not written ({type(exc).__name__}: {exc})",
            file=sys.stderr,
        )
        return None


def _write_index(out: Path, done: list[dict], *, mode: str, wall_s: float) -> Path | None:
    from ._io import INDEX_NAME, add_owned_file, versions
    from ._report import index_report

    page = index_report(done, mode=mode, command=_command(), wall_s=wall_s, versions=versions())
    try:
        return add_owned_file(
            out, INDEX_NAME, lambda tmp: Path(tmp).write_text(page, encoding="utf-8")
        )
    except (ConfigError, OSError) as exc:
        print(f"flows: warning: {INDEX_NAME} not written: {exc}", file=sys.stderr)
        return None
