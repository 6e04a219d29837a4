"""The solver classes used directly in diffrax keep the toolkit's tolerance contract
(issue 49, item 2).

A user who writes `diffrax.diffeqsolve(ODETerm(f), flows.RKC2(), …,
stepsize_controller=diffrax.PIDController(rtol=rtol, atol=atol))` — or gives the class
`tolerances=(rtol, atol)` — gets the solver `flows.make_solver` builds (Tsit5 non-stiff
steps, the controller's tolerances: diffrax hands them to the class as to its implicit
solvers), so the same steps, evaluations and err/rtol as `flows.simulate`'s solver. The
solves are `benchmarks/bench_bare_contract.py`'s (a plain `diffrax.PIDController`, atol =
1e-3 rtol, `dt0=None`) on problems of `benchmarks/work_precision/stiff.py` at the sizes
of `tests/test_solvers_tolerance.py`.
"""

import importlib.util
import sys
from pathlib import Path

import diffrax
import equinox as eqx
import jax.numpy as jnp
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
    norm). Without tolerances, `nonstiff='auto'` stays unresolved and the class waits for
    the controller's (diffrax's marker in `root_finder`); a `nonstiff` that needs none
    (RKC2: 'bs3', all: 'none') asks for none, and an explicit `nonstiff` is kept."""
    import flows

    b = _bench()
    cls = getattr(flows, b.CLASSES[name])
    for norm in ("rms", "max"):
        given = cls(tolerances=(1e-5, 1e-8), error_norm=norm)
        assert eqx.tree_equal(given, flows.make_solver(name, 1e-5, 1e-8, norm)) is True
        assert not given.root_finder.waits_for_controller()
    bare = cls()
    assert (bare.nonstiff, bare.tolerances) == ("auto", None)
    assert isinstance(bare, diffrax.AbstractImplicitSolver)
    assert bare.root_finder.waits_for_controller()
    no_tol = cls(nonstiff=b.NO_TOL_NONSTIFF[name])
    assert not no_tol.root_finder.waits_for_controller()
    assert cls(nonstiff="none", tolerances=(1e-5, 1e-8)).nonstiff == "none"


@pytest.mark.parametrize("variant", ["bare", "given"])
@pytest.mark.parametrize("name", ["rkc", "rock4", "eserk4"])
def test_class_in_diffrax_takes_the_toolkits_steps_and_keeps_the_contract(name, variant):
    """Heat equation N = 100 at rtol 1e-3, 1e-5, 1e-8: the class with no arguments
    (`bare`: the controller's tolerances, handed over by diffrax) and the class given them
    (`given`) take exactly the accepted and rejected steps and evaluations of its
    `make_solver` twin under the same `diffrax.PIDController`, with the same error, and
    err/rtol is in the band it claims (`LOWER`). Before, a bare RKC2 had no tolerances
    (Bogacki–Shampine non-stiff steps, no tolerance-proportional control): 23–110 × rtol
    at 1e-8 (`benchmarks/results/bare_contract.md`, row `no-tol`)."""
    b = _bench()
    p = SMALL["heat"](b.stiff_module())
    got = b.solve(p, name, variant, QUICK_RTOLS)
    twin = b.solve(p, name, "toolkit", QUICK_RTOLS)
    for g, t in zip(got, twin, strict=True):
        assert (g["steps"], g["rejected"], g["evals"]) == (t["steps"], t["rejected"], t["evals"])
        assert g["err"] == pytest.approx(t["err"], rel=1e-9, abs=1e-15)
    _check_band(name, got)


def test_bare_class_takes_the_controllers_max_norm():
    """Under `PIDController(norm=optimistix.max_norm)` a bare RKC2 judges its own steps in
    the max norm too: the steps and error of `make_solver('rkc', …, error_norm='max')`."""
    import optimistix as optx

    import flows

    b = _bench()
    p = SMALL["heat"](b.stiff_module())
    rtol, atol = 1e-6, 1e-9
    out = []
    for solver in (flows.RKC2(), flows.make_solver("rkc", rtol, atol, "max")):
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(p.field),
            solver,
            0.0,
            p.t1,
            None,
            jnp.asarray(p.y0),
            stepsize_controller=diffrax.PIDController(rtol=rtol, atol=atol, norm=optx.max_norm),
            saveat=diffrax.SaveAt(t1=True),
            max_steps=100_000,
        )
        assert sol.ys is not None
        out.append((int(sol.stats["num_steps"]), float(jnp.max(jnp.abs(sol.ys[-1])))))
    assert out[0][0] == out[1][0]
    assert out[0][1] == pytest.approx(out[1][1], rel=1e-12)


@pytest.mark.parametrize("name", ["rkc", "rock4", "eserk4"])
def test_constant_steps_need_a_nonstiff_method_without_tolerances(name):
    """With `diffrax.ConstantStepSize` there are no controller tolerances: the bare class
    gets diffrax's error asking for an adaptive controller (as `diffrax.Kvaerno5` does);
    with a non-stiff method that needs none (`no-tol`) or with `tolerances` it runs."""
    import flows

    b = _bench()
    cls = getattr(flows, b.CLASSES[name])
    term = diffrax.ODETerm(lambda t, y, a: -jnp.geomspace(1.0, 1e3, 8) * y)

    def solve(solver):
        return diffrax.diffeqsolve(
            term,
            solver,
            0.0,
            0.1,
            0.01,
            jnp.ones(8),
            stepsize_controller=diffrax.ConstantStepSize(),
        )

    with pytest.raises(ValueError, match="fixed step size controller"):
        solve(cls())
    for solver in (cls(nonstiff=b.NO_TOL_NONSTIFF[name]), cls(tolerances=(1e-6, 1e-9))):
        sol = solve(solver)
        assert sol.result == diffrax.RESULTS.successful and sol.ys is not None
        assert bool(jnp.all(jnp.abs(sol.ys[-1]) <= 1.0))


@pytest.mark.slow
@pytest.mark.parametrize("problem", list(SMALL))
@pytest.mark.parametrize("name", ["rkc", "rock4", "eserk4"])
def test_bare_class_keeps_the_contract_at_every_rtol(name, problem):
    """Every rtol 1e-3 … 1e-8 on the three problems: err/rtol ≤ 3 and above the claimed
    floor (`LOWER`) for the bare class (the controller's tolerances). Before it took
    them, RKC2 reached 23–110 × rtol at 1e-8."""
    b = _bench()
    _check_band(name, b.solve(SMALL[problem](b.stiff_module()), name, "bare", ALL_RTOLS))


def test_explicit_tolerances_take_precedence_over_the_controllers():
    """The tolerances a class is given are the ones it uses, whatever the controller's:
    RKC2 given rtol 1e-4 under a controller at 1e-6 controls its RKC steps to the looser
    transformed tolerance — measured 4.2× the error of the bare class, which takes the
    controller's (its Tsit5 steps, rescaled by the wrong tolerances, then take more
    evaluations: give a class the controller's tolerances, or none)."""
    import flows

    b = _bench()
    p = SMALL["heat"](b.stiff_module())
    rt = (1e-6,)
    own = b.solve(p, "rkc", "bare", rt)[0]
    loose = b.solve(p, "rkc", "given", rt, make=lambda r, a: flows.RKC2(tolerances=(1e-4, 1e-7)))
    assert loose[0]["err"] > 2.0 * own["err"], (loose, own)
    assert loose[0]["steps"] != own["steps"]
