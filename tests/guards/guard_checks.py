"""The papers' refactor guard (not a benchmark): compares two `flows check --format json`
outputs claim by claim — every field of every check (verdict, measured and predicted
text, values, margin, error, critical values, hypotheses, reference, trend) — ignoring
only wall times and the output folder's name.

    PYTHONPATH=/path/to/old/checkout flows check all --quick --format json \
        --out /tmp/old_out --no-report > old.json
    flows check all --quick --format json --out /tmp/new_out --no-report > new.json
    python tests/guards/guard_checks.py old.json new.json

Exit status 0 when every claim of every paper is identical, 1 otherwise (each difference
printed with the claim and the field's path).
"""

from __future__ import annotations

import json
import sys

IGNORED = {"wall_s", "files", "report"}


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
        _diff(old[name], new[name], name, out)
        n = len(new[name]["checks"])
        print(f"{name}: {n} claims, " + ("identical" if not out else f"{len(out)} differences"))
        for line in out[:40]:
            print("   ", line)
        bad += bool(out)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
