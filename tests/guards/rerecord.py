"""Re-record one paper in the refactor-guard record (`tests/test_refactor_guard.py`) after
a claim changed on purpose — in the same commit, with the reason:

    python tests/guards/rerecord.py multistage "Re-recorded for multistage on DATE (why) …"

Runs `flows check NAME --quick` in-process (as the guard test does), replaces the paper's
entry of `tests/data/quick_checks_before_restructure.json` and appends the reason to its
`note`. Compare the two checkouts first with `guard_checks.py run OLD` and say in the
reason which fields changed and that every other number is unchanged.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

RECORD = Path(__file__).resolve().parents[1] / "data" / "quick_checks_before_restructure.json"


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not argv[1].strip():
        print(__doc__, file=sys.stderr)
        return 2
    from flows.experiments import EXPERIMENTS
    from flows.experiments.base import _default

    name, why = argv
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
    record["note"] = record["note"].rstrip() + " " + why.strip()
    RECORD.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    print(f"{name}: {len(checks)} checks recorded")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
