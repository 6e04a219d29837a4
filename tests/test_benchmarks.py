"""The benchmark scripts stay runnable (tiny sizes; no timing assertions here)."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).parent.parent / "benchmarks"


def _load(name):
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# the earlier, narrower benchmark (superseded by bench_work_precision, whose quick run is
# in the default suite): ~20 s, so only with -m slow
@pytest.mark.slow
def test_bench_multistage_runs_at_tiny_size(tmp_path):
    out = tmp_path / "multistage.md"
    rows = _load("bench_multistage").main(
        ["--m", "30", "--t1", "0.2", "--lr", "1e-2", "--out", str(out)]
    )
    names = [r[0] for r in rows]
    assert names[0].startswith("gradient descent") and any("scipy" in n for n in names)
    errors = {r[0]: r[3] for r in rows}
    # the exact flow at rtol 1e-6 is far closer to the reference than GD with η = 1e-2
    assert errors["flows tsit5 rtol=1e-06"] < 1e-2 * errors[names[0]]
    assert all(np.isfinite(r[2]) and r[1] > 0 for r in rows)
    assert "| method |" in out.read_text()
