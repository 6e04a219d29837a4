"""Refactor guard: `flows check <experiment> --quick` gives every claim the same
verdict and the same numbers as the record `tests/data/quick_checks_reference.json`.

The record is no oracle of correctness — the claims' own checks are — only a record that
moving code changed no result. When a claim is changed on purpose (a new measurement, a
fixed bug), re-record it in the same commit (`tests/guards/rerecord.py`) and say why in
the commit message. Two checkouts in one environment are compared claim by claim, free of
library drift, by `tests/guards/guard_checks.py`.
"""

import json
import math
from pathlib import Path

import pytest

from flows.experiments import EXPERIMENTS
from flows.plugin import _json_default as _default

REFERENCE = Path(__file__).parent / "data" / "quick_checks_reference.json"


def _same(a, b) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):  # wall times are not results
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a if k != "wall_s")
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is b
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-300)
    return a == b


@pytest.mark.slow
@pytest.mark.parametrize("name", ["multistage", "bias-plateau", "linear-teacher"])
def test_quick_check_numbers_unchanged_by_the_restructure(name, tmp_path):
    reference = json.loads(REFERENCE.read_text())["experiments"][name]
    exp = EXPERIMENTS[name]
    report = exp.run(exp.default_config(quick=True), tmp_path, progress=False)
    # through JSON, as the reference was stored (dict keys become strings)
    got = json.loads(json.dumps([c.to_dict() for c in report.checks], default=_default))
    assert [c["claim"] for c in got] == [c["claim"] for c in reference]
    for ref, now in zip(reference, got, strict=True):
        assert now["verdict"] == ref["verdict"], ref["claim"]
        assert _same(now["values"], ref["values"]), (ref["claim"], ref["values"], now["values"])
