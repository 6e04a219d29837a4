"""`flows check --budget CPU_S`: the CPU seconds a paper may spend extending a limit row
its sweep left undecided — passed to the papers whose rows extend (multistage's
`extend_budget_s`), refused below 0 before anything runs."""

import argparse
import subprocess
import sys

from flows._cli.check import BUDGET_FIELD, _with_budget
from flows.experiments import EXPERIMENTS


def test_the_budget_reaches_the_papers_that_extend_and_only_them():
    ms = EXPERIMENTS["multistage"].default_config(quick=False)
    dl = EXPERIMENTS["deep-linear"].default_config(quick=False)
    given = argparse.Namespace(budget=30.0)
    assert getattr(_with_budget(ms, given), BUDGET_FIELD) == 30.0
    assert getattr(ms, BUDGET_FIELD) == 120.0  # the paper's default, untouched
    assert _with_budget(dl, given) is dl  # nothing to extend there
    assert _with_budget(ms, argparse.Namespace(budget=None)) is ms


def test_a_negative_budget_is_refused_by_name(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "flows", "check", "deep-linear", "--budget", "-1",
         "--out", str(tmp_path / "r")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 2 and "--budget" in out.stderr and "≥ 0" in out.stderr
    assert not (tmp_path / "r").exists()
