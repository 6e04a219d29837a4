"""The solver classes used directly in diffrax keep the toolkit's tolerance contract
(issue 49, item 2).

A user who writes `diffrax.diffeqsolve(ODETerm(f), flows.RKC2(tolerances=(rtol, atol)),
…, stepsize_controller=diffrax.PIDController(rtol=rtol, atol=atol))` gets the object
`flows.make_solver` builds (`nonstiff='auto'`: Tsit5 non-stiff steps once tolerances are
given), so the same steps, evaluations and err/rtol as `flows.simulate`'s solver. The
solves are `benchmarks/bench_bare_contract.py`'s (a plain `diffrax.PIDController`, atol =
1e-3 rtol, `dt0=None`) on problems of `benchmarks/work_precision/stiff.py` at the sizes
of `tests/test_solvers_tolerance.py`. Without `tolerances` a class cannot know the
controller's rtol (`docs/limits.md`, "Tolerance proportionality").
"""

import importlib.util
import sys
from pathlib import Path

import equinox as eqx
import pytest

_PATH = Path(__file__).parent.parent / "benchmarks" / "bench_bare_contract.py"


def _bench():
    if "bench_bare_contract" not in sys.modules:
        spec = importlib.util.spec_from_file_location("bench_bare_contract", _PATH)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules["bench_bare_contract"] = mod
        spec.loader.exec_module(mod)
    return sys.modules["bench_bare_contract"]


ALL_RTOLS = (1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8)
QUICK_RTOLS = (1e-3, 1e-5, 1e-8)
SMALL = {
    "heat": lambda s: s.heat(100),
    "brusselator": lambda s: s.brusselator(40),
    "quartic": lambda s: s.quartic(50),
}
# Where each solver claims the lower bound err/rtol ≥ 0.1 (as `test_solvers_tolerance`
# does for the toolkit's objects): RKC2 from 1e-3 to 1e-6 (below, its non-stiff Tsit5
# steps at their stability limit deliver far more than asked), ESERK4 from 1e-4 to 1e-8;
# ROCK4 only ≥ 0.01 (it over-delivers where smooth modes carry the error, heat N = 100:
# 0.012–0.054; `flows._solvers._rock._ERROR_FACTOR`).
LOWER = {"rkc": (0.1, 1e-6, 1e-3), "eserk4": (0.1, 1e-8, 1e-4), "rock4": (0.01, 1e-8, 1e-3)}


def _check_band(name, rows):
    floor, lo_rtol, hi_rtol = LOWER[name]
    assert all(r["ok"] for r in rows), rows
    assert max(r["err_rtol"] for r in rows) <= 3.0, rows
    claimed = [r for r in rows if lo_rtol <= r["rtol"] <= hi_rtol]
    assert all(r["err_rtol"] >= floor for r in claimed), rows


@pytest.mark.parametrize("name", ["rkc", "rock4", "eserk4"])
def test_a_class_given_the_controllers_tolerances_is_the_toolkits_solver(name):
    """`Cls(tolerances=(rtol, atol))` equals `make_solver(name, rtol, atol)` (RMS and max
    norm); without tolerances the non-stiff method is the one that needs none (RKC2:
    'bs3', ROCK4/ESERK4: 'none'), as before; an explicit `nonstiff` is kept. Before
    `nonstiff='auto'` the given class took Bogacki–Shampine (RKC2) or no (ROCK4, ESERK4)
    non-stiff steps: another solver than the toolkit's."""
    import flows

    b = _bench()
    cls = getattr(flows, b.CLASSES[name])
    for norm in ("rms", "max"):
        given = cls(tolerances=(1e-5, 1e-8), error_norm=norm)
        assert eqx.tree_equal(given, flows.make_solver(name, 1e-5, 1e-8, norm)) is True
    assert cls().nonstiff == ("bs3" if name == "rkc" else "none")
    assert cls().tolerances is None
    assert cls(nonstiff="none", tolerances=(1e-5, 1e-8)).nonstiff == "none"


@pytest.mark.parametrize("name", ["rkc", "rock4", "eserk4"])
def test_given_class_in_diffrax_takes_the_toolkits_steps_and_keeps_the_contract(name):
    """Heat equation N = 100 at rtol 1e-3, 1e-5, 1e-8: the class given the controller's
    tolerances takes exactly the accepted and rejected steps and evaluations of its
    `make_solver` twin under the same `diffrax.PIDController`, and err/rtol is in the
    band it claims (`LOWER`). Before: RKC2 took 0.0066 × rtol at 1e-8 with 6502
    evaluations against the twin's 5242, ROCK4 2523 against 1781."""
    b = _bench()
    p = SMALL["heat"](b.stiff_module())
    given = b.solve(p, name, "given", QUICK_RTOLS)
    twin = b.solve(p, name, "toolkit", QUICK_RTOLS)
    for g, t in zip(given, twin, strict=True):
        assert (g["steps"], g["rejected"], g["evals"]) == (t["steps"], t["rejected"], t["evals"])
        assert g["err"] == pytest.approx(t["err"], rel=1e-9, abs=1e-15)
    _check_band(name, given)


@pytest.mark.slow
@pytest.mark.parametrize("problem", list(SMALL))
@pytest.mark.parametrize("name", ["rkc", "rock4", "eserk4"])
def test_given_class_keeps_the_contract_at_every_rtol(name, problem):
    """Every rtol 1e-3 … 1e-8 on the three problems: err/rtol ≤ 3 and above the claimed
    floor (`LOWER`). Before `nonstiff='auto'`, RKC2 given its tolerances reached 4.1 × rtol
    on the Brusselator at 1e-8 (Bogacki–Shampine non-stiff steps)."""
    b = _bench()
    _check_band(name, b.solve(SMALL[problem](b.stiff_module()), name, "given", ALL_RTOLS))


def test_explicit_tolerances_take_precedence_over_the_controllers():
    """The tolerances a class is given are the ones it uses, whatever the controller's:
    RKC2 given rtol 1e-4 under a controller at 1e-6 controls its RKC steps to the looser
    transformed tolerance — measured 4.2× the error of the same class given the
    controller's tolerances (its Tsit5 steps, rescaled by the wrong tolerances, then take
    more evaluations: give a class the controller's tolerances)."""
    import flows

    b = _bench()
    p = SMALL["heat"](b.stiff_module())
    rt = (1e-6,)
    own = b.solve(p, "rkc", "given", rt)[0]
    loose = b.solve(p, "rkc", "given", rt, make=lambda r, a: flows.RKC2(tolerances=(1e-4, 1e-7)))
    assert loose[0]["err"] > 2.0 * own["err"], (loose, own)
