"""The memory-map limit behind the suite's old segfault (`flows._compile`): compiled
programs are dropped before a new one is compiled once the process holds more than half
of the kernel's memory-map limit, and only then."""

from __future__ import annotations

import numpy as np
import pytest

import flows
from flows import _compile, _nonsmooth, _solvers


def _problem():
    x = np.linspace(-1.0, 1.0, 8)[:, None]
    return flows.make_problem(
        flows.models.TwoLayer(d=1, m=3, alpha=0.6), flows.from_arrays(x, x[:, 0])
    )


def test_map_usage_reads_the_process_and_its_limit():
    usage = _compile.map_usage()
    if usage is None:
        pytest.skip("no /proc on this system")
    used, limit = usage
    assert 0 < used < limit


@pytest.mark.parametrize("pressure", [0.3, 0.7])
def test_compiled_programs_are_dropped_only_above_half_the_limit(pressure, monkeypatch):
    flows.simulate(_problem(), t1=0.5, n_save=2)
    assert _solvers.cache._COMPILED  # the solve is cached
    _nonsmooth._CACHE["marker"] = object()
    monkeypatch.setattr(_compile.process, "map_usage", lambda: (int(pressure * 65530), 65530))
    dropped = _compile.relieve_map_pressure()
    assert dropped == (pressure > _compile.MAP_PRESSURE)
    assert bool(_solvers.cache._COMPILED) == (not dropped)
    assert ("marker" in _nonsmooth._CACHE) == (not dropped)
    # a solve under pressure compiles again (after dropping) and still runs
    tr = flows.simulate(_problem(), t1=0.5, n_save=2)
    assert tr.stats.ok


def test_unknown_usage_drops_nothing(monkeypatch):
    flows.simulate(_problem(), t1=0.5, n_save=2)
    monkeypatch.setattr(_compile.process, "map_usage", lambda: None)
    assert not _compile.relieve_map_pressure(threshold=0.0)
    assert _solvers.cache._COMPILED
