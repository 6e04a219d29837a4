"""Re-record one paper in the refactor-guard record (`tests/test_refactor_guard.py`) after
a claim changed on purpose — in the same commit, whose message says why:

    python tests/guards/rerecord.py multistage

Runs `flows check NAME --quick` in-process (as the guard test does) and replaces the
paper's entry of `tests/data/quick_checks_reference.json`. Compare the two checkouts first
with `guard_checks.py run OLD` and say in the commit message which fields changed and that
every other number is unchanged.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

RECORD = Path(__file__).resolve().parents[1] / "data" / "quick_checks_reference.json"


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    from flows.experiments import EXPERIMENTS
    from flows.plugin import _json_default as _default

    (name,) = argv
    record = json.loads(RECORD.read_text())
    if name not in record["experiments"]:
        print(
            f"{name!r} is not in the record; one of {sorted(record['experiments'])}",
            file=sys.stderr,
        )
        return 2
    exp = EXPERIMENTS[name]
    with tempfile.TemporaryDirectory() as tmp:
        report = exp.run(exp.default_config(quick=True), Path(tmp), progress=False)
    checks = json.loads(json.dumps([c.to_dict() for c in report.checks], default=_default))
    record["experiments"][name] = checks
    RECORD.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    print(f"{name}: {len(checks)} checks recorded")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
