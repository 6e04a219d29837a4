"""The papers' refactor guard (not a benchmark): compares two `flows check --format json`
outputs claim by claim — every field of every check (verdict, measured and predicted
text, values, margin, error, critical values, hypotheses, reference, trend) — ignoring
only wall and CPU times and the output folder's name.

    python tests/guards/guard_checks.py run /path/to/old/checkout [--papers all] [--full]
    python tests/guards/guard_checks.py old.json new.json

`run` makes both outputs itself (`flows check PAPERS --quick --format json`; `--full`
drops `--quick`): the old one with the old checkout first on the import path, the new
one with this checkout, each in its own process started in an empty folder, and it
refuses to compare when a process imported `flows` from anywhere else. (By hand, mind
that `python -m flows` puts the current folder first on the import path: started inside
a checkout, `PYTHONPATH=/old/checkout` is shadowed and both runs are the same code.)

Exit status 0 when every claim of every paper is identical, 1 otherwise (each difference
printed with the claim and the field's path), 2 when a run did not use the code asked for.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

IGNORED = {"wall_s", "cpu_s", "files", "report"}


def _diff(a, b, path: str, out: list[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k in IGNORED:
                continue
            if k not in a or k not in b:
                out.append(f"{path}.{k}: only in {'new' if k in b else 'old'}")
            else:
                _diff(a[k], b[k], f"{path}.{k}", out)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{path}: {len(a)} entries → {len(b)}")
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            _diff(x, y, f"{path}[{i}]", out)
    elif a != b and not (a != a and b != b):  # NaN == NaN here
        out.append(f"{path}: {a!r} → {b!r}")


def _keyed(experiment: dict) -> dict:
    """The experiment with its checks keyed by '[source] claim' (a repeated claim gets
    ' #2', …), so that a claim added or removed shows as such, not as every later row
    shifted by one."""
    keyed: dict[str, dict] = {}
    for c in experiment.get("checks", []):
        key = f"[{c.get('source')}] {c.get('claim')}"
        k, n = key, 1
        while k in keyed:
            n += 1
            k = f"{key} #{n}"
        keyed[k] = c
    return experiment | {"checks": keyed}


def main(old_path: str, new_path: str) -> int:
    old = {e["name"]: e for e in json.load(open(old_path))["experiments"]}
    new = {e["name"]: e for e in json.load(open(new_path))["experiments"]}
    bad = 0
    for name in sorted(set(old) | set(new)):
        if name not in old or name not in new:
            print(f"{name}: only in {'new' if name in new else 'old'}")
            bad += 1
            continue
        out: list[str] = []
        _diff(_keyed(old[name]), _keyed(new[name]), name, out)
        n = len(new[name]["checks"])
        print(f"{name}: {n} claims, " + ("identical" if not out else f"{len(out)} differences"))
        for line in out[:40]:
            print("   ", line)
        bad += bool(out)
    return 1 if bad else 0


HERE = Path(__file__).resolve().parents[2]  # this checkout

#: Runs `flows check` after checking where `flows` was imported from.
_LAUNCH = (
    "import sys, flows\n"
    "from pathlib import Path\n"
    "want = Path(sys.argv[1]).resolve()\n"
    "got = Path(flows.__file__).resolve().parents[1]\n"
    "if got != want:\n"
    "    print(f'flows imported from {got}, not {want}', file=sys.stderr)\n"
    "    sys.exit(99)\n"
    "from flows._cli.app import entry\n"
    "sys.argv = ['flows', *sys.argv[2:]]\n"
    "entry()\n"
)


def _check_json(checkout: Path, args: list[str], out: Path) -> Path:
    """`flows check ARGS --format json` with `checkout`'s flows; the JSON's path."""
    env = dict(os.environ, PYTHONPATH=str(checkout))
    run_dir = Path(tempfile.mkdtemp(prefix="guard-"))
    cmd = [sys.executable, "-c", _LAUNCH, str(checkout), "check", *args, "--format", "json"]
    cmd += ["--no-report", "--out", str(run_dir / "results")]
    with open(out, "w") as fh:
        proc = subprocess.run(cmd, cwd=run_dir, env=env, stdout=fh)
    if proc.returncode == 99:
        sys.exit(2)
    if proc.returncode not in (0, 1):  # 1: a claim fails, as it may
        print(f"flows check with {checkout} exited {proc.returncode}", file=sys.stderr)
        sys.exit(2)
    return out


def run(argv: list[str]) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="guard_checks.py run")
    ap.add_argument("old", type=Path, help="the old checkout (e.g. from `git worktree add`)")
    ap.add_argument("--papers", default="all")
    ap.add_argument("--full", action="store_true", help="the default size, not --quick")
    ap.add_argument("--keep", type=Path, default=None, help="folder for old.json, new.json")
    a = ap.parse_args(argv)
    keep = a.keep or Path(tempfile.mkdtemp(prefix="guard-json-"))
    keep.mkdir(parents=True, exist_ok=True)
    args = [a.papers] + ([] if a.full else ["--quick"])
    old = _check_json(a.old.resolve(), args, keep / "old.json")
    new = _check_json(HERE, args, keep / "new.json")
    print(f"outputs in {keep}")
    return main(str(old), str(new))


if __name__ == "__main__":
    if sys.argv[1:2] == ["run"]:
        sys.exit(run(sys.argv[2:]))
    sys.exit(main(*sys.argv[1:3]))
