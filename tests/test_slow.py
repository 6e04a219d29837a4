"""Paper-sized runs (deselected by default; run with `pytest -m slow`)."""

import pytest

from flows.claims import FAILS
from flows.experiments import multistage


@pytest.mark.slow
def test_multistage_default_all_applicable_claims_hold(tmp_path):
    report = multistage.run(multistage.default_config(), tmp_path, progress=False)
    failed = [c.claim for c in report.checks if c.verdict == FAILS]
    assert not failed, failed
