"""The event flow's parts as units (`flows._nonsmooth`): the Filippov decision on hand-made
patterns of a one-hidden-layer leaky-ReLU net, its three solvers against each other and
against a hand-solved linear system, the slot padding, the damped solve and the pair
layout — without running the event loop.

Oracle: ż of every pair written out by hand in NumPy for this net (f = σ(w·x) − σ(u·x),
mean logistic loss, σ(z) = s·z with s the pair's slope), independent of the package's
autodiff. Each case first checks that it is the case it claims to be (the sign of ż on
either side of the kink), then that the decision is Filippov's: both fields pointing one
way → cross; both pointing into the kink → slide with ż(λ) = 0, λ in the box; pointing back
→ stay; a sliding pair whose equivalent control leaves the box → leaves to the side whose
slope that end is.

One compilation for every decision case (the data and θ are arguments; the net has 1 unit
per layer, 4 samples, 2 sliding and 2 candidate slots).
"""

from __future__ import annotations

import itertools
import types

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import flows
from flows import logistic
from flows._nonsmooth._api import grow_slots
from flows._nonsmooth._decision import (
    _nearest_few,
    active_set,
    candidates,
    complementarity,
    decide,
    min_norm_sides,
    solve_sides,
)
from flows._nonsmooth._loop import Carry, root, root_vector
from flows._nonsmooth._net import Net, Settings, layout_of
from flows._nonsmooth._pattern import initial_pattern
from flows._nonsmooth._sliding import damped_solve, jac_columns, jac_rows, with_jacobian
from flows.models.leaky import LeakyReLUNet

ALPHA = 0.1
SLOTS = 2
W = np.array([1.0, 0.0, 0.0])  # z_w = x₁: a sample with x₁ = 0 sits on the w unit's kink
U = np.array([-1.0, 0.3, 0.2])  # the u unit: no sample on its kink
X = np.array([[0, 1.0, 0], [1, 1.5, 0], [1, -0.5, 0.3], [-1, 0.2, 1]])
Y = np.array([-1.0, 1, 1, -1])


def _zdot(x, y, sw, su):
    """ż of the w-pairs and u-pairs by hand: σ(z) = s·z per pair, f = σ_w − σ_u, L = mean
    log(1 + exp(−y f)); ż = −∇L·x along the flow."""
    zw, zu = x @ W, x @ U
    f = sw * zw - su * zu
    g = (-y / (1 + np.exp(y * f))) / len(y)  # dL/df_i
    gw, gu = (g * sw) @ x, -(g * su) @ x
    return -(x @ gw), -(x @ gu)


def _slopes(z):
    return np.where(z > 0, 1.0, ALPHA)


def _zdot_w(x, y, lam: dict):
    """ż of the w-pairs with the slopes of the pairs in `lam` (sample → λ) set."""
    sw = _slopes(x @ W)
    for i, v in lam.items():
        sw[i] = v
    return _zdot(x, y, sw, _slopes(x @ U))[0]


def _problem(x, y):
    model = LeakyReLUNet(k=1, d=3, slope=ALPHA, v=1.0)
    theta0 = {"w": jnp.asarray(W)[None], "u": jnp.asarray(U)[None]}
    return flows.make_problem(model, flows.from_arrays(x, y), theta0=theta0, loss_fn=logistic)


#: (rtol, atol) of the nets built here (only the step controller reads them).
TOLS = (1e-6, 1e-9)


def _settings(slots=SLOTS):
    return Settings(
        clock="physical",
        max_steps=100,
        max_events=100,
        max_sliding=slots,
        max_candidates=slots,
        kink_tol=1e-9,
        storm_window=10,
        storm_span=1e-9,
        observables=lambda problem, theta, t: {},
        n_save=2,
        n_psave=2,
    )


@pytest.fixture(scope="module")
def decider():
    """decide(x, y, sliding samples) → (new pattern, info), compiled once: the pattern is
    the one θ lies in, with the w-pairs of `sliding` put in sliding slots."""
    pb = _problem(X, Y)
    _, static = eqx.partition(pb, eqx.is_array)
    layout, settings = layout_of(pb), _settings()

    @jax.jit
    def run(dynamic, slot_idx, slot_on):
        problem = eqx.combine(dynamic, static)
        net = Net.build(problem, settings, layout, TOLS)
        theta = problem.theta0
        y = (theta, jnp.zeros(()), jnp.zeros(()))
        pat = initial_pattern(net, theta)
        kink = jnp.zeros((SLOTS,), jnp.int32)
        warm = jnp.full((SLOTS,), jnp.nan)
        pat = with_jacobian(net, theta, (pat[0], pat[1], slot_idx, kink, slot_on), y, warm)
        return decide(net, y, pat)

    def call(x, y, sliding=()):
        dynamic, _ = eqx.partition(_problem(x, y), eqx.is_array)
        idx = np.zeros(SLOTS, np.int32)
        idx[: len(sliding)] = sliding  # the w layer comes first: pair = sample
        on = np.arange(SLOTS) < len(sliding)
        pat, info = run(dynamic, jnp.asarray(idx), jnp.asarray(on))
        return jax.tree_util.tree_map(np.asarray, pat), jax.tree_util.tree_map(np.asarray, info)

    assert layout.names == ("w", "u") and layout.size == 8
    return call


def _sliding_slots(pat):
    """{pair: λ} of the occupied sliding slots."""
    return {int(i): float(lam) for i, lam, on in zip(pat[2], pat[6], pat[4], strict=True) if on}


def test_both_fields_onward_cross(decider):
    """Sample 0 on the w unit's kink, coming from the right piece (z = 0 is the edge of
    the piece θ lies in), its field pointing left on both sides: it crosses."""
    x = X.copy()
    x[1] = [1, -1.0, 0]
    zl, zr = _zdot_w(x, Y, {0: ALPHA})[0], _zdot_w(x, Y, {0: 1.0})[0]
    assert zl < 0 and zr < 0  # the case
    pat, info = decider(x, Y)
    assert pat[0][0] == 0  # the left piece
    assert (info["crossings"], info["switches"], info["entries"]) == (1, 1, 0)
    assert not pat[4].any() and not info["unresolved"] and not info["over"]


def test_both_fields_into_the_kink_slide_at_the_equivalent_control(decider):
    """Sample 0 (label −1) pulls z down, sample 1 (label +1, x₁·x₀ > 0) pushes it up; the
    pull wins on the right piece (slope 1), the push on the left (slope α): both fields
    point into the kink and the pair slides with the λ where ż = 0 (affine in λ here)."""
    zl, zr = _zdot_w(X, Y, {0: ALPHA})[0], _zdot_w(X, Y, {0: 1.0})[0]
    assert zl > 0 > zr  # the case
    lam_star = ALPHA + (1 - ALPHA) * zl / (zl - zr)
    assert _zdot_w(X, Y, {0: lam_star})[0] == pytest.approx(0.0, abs=1e-15)
    pat, info = decider(X, Y)
    assert _sliding_slots(pat) == {0: pytest.approx(lam_star, rel=1e-12)}
    assert (info["crossings"], info["switches"], info["entries"]) == (0, 1, 1)
    assert info["resid"] == 0.0 and not info["unresolved"]


def test_field_pointing_back_stays(decider):
    """Label +1 on sample 0: both fields point back into the right piece it came from. It
    touches the kink and stays: no switch."""
    y = Y.copy()
    y[0] = 1.0
    zl, zr = _zdot_w(X, y, {0: ALPHA})[0], _zdot_w(X, y, {0: 1.0})[0]
    assert zl > 0 and zr > 0  # the case
    pat, info = decider(X, y)
    assert pat[0][0] == 1 and not pat[4].any()
    assert (info["crossings"], info["switches"], info["entries"]) == (0, 0, 0)


def test_sliding_pair_whose_control_leaves_the_box_exits_to_that_end(decider):
    """Sample 0 sliding while both fields point left: its equivalent control λ* lies below
    the box [α, 1]; it leaves to the side whose slope is α, the left piece, as a switch
    but not a crossing."""
    x = X.copy()
    x[1] = [1, -1.0, 0]
    zl, zr = _zdot_w(x, Y, {0: ALPHA})[0], _zdot_w(x, Y, {0: 1.0})[0]
    assert ALPHA + (1 - ALPHA) * zl / (zl - zr) < ALPHA  # the case: λ* below the box
    pat, info = decider(x, Y, sliding=(0,))
    assert pat[0][0] == 0 and not pat[4].any()
    assert (info["crossings"], info["switches"], info["entries"]) == (0, 1, 0)


#: Samples 0 and 3 both on the w unit's kink (x₃ = (0, ·, ·)), so that each pair's ż
#: depends on the other's slope; (x₃, y₃) → the unique solution of the hand enumeration.
COUPLED = {
    "both slide": ((0, 0.5, 1.0), -1.0),
    "0 crosses, 3 slides": ((0, 3.0, 0.5), -1.0),
    "0 slides, 3 stays": ((0, 0.2, 1.0), 1.0),
    "0 crosses, 3 stays": ((0, -1.0, 1.0), 1.0),
}


def _coupled(case):
    x, y = X.copy(), Y.copy()
    x[3], y[3] = COUPLED[case]
    return x, y


def _filippov_by_enumeration(x, y, samples=(0, 3)):
    """Every assignment of sides (0 left, 1 right, 2 sliding) to the w-pairs of `samples`
    that satisfies Filippov's conditions, by hand: sliding λ solving ż = 0 (ż is affine in
    the slopes here) inside [α, 1]; ż ≤ 0 on the left, ≥ 0 on the right. [(sides, λ)]."""
    out = []
    for sides in itertools.product((0, 1, 2), repeat=len(samples)):
        fixed = {
            i: (ALPHA if s == 0 else 1.0) for i, s in zip(samples, sides, strict=True) if s != 2
        }
        sl = [i for i, s in zip(samples, sides, strict=True) if s == 2]

        def zd(lam_sl, fixed=fixed, sl=sl):
            return _zdot_w(x, y, {**fixed, **dict(zip(sl, lam_sl, strict=True))})

        lam = np.zeros(len(sl))
        if sl:
            base = zd(np.zeros(len(sl)))[sl]
            J = np.stack([zd(e)[sl] - base for e in np.eye(len(sl))], axis=1)
            lam = np.linalg.solve(J, -base)
            if not np.all((lam >= ALPHA) & (lam <= 1.0)):
                continue
        z = zd(lam)
        if all(
            z[i] <= 0 if s == 0 else z[i] >= 0 if s == 1 else True
            for i, s in zip(samples, sides, strict=True)
        ):
            out.append((sides, dict(zip(sl, lam, strict=True))))
    return out


@pytest.mark.parametrize("case", list(COUPLED))
def test_coupled_kinks_decided_as_by_hand(decider, case):
    x, y = _coupled(case)
    (sides, lam), *others = _filippov_by_enumeration(x, y)
    assert not others  # the case: one Filippov solution
    pat, info = decider(x, y)
    assert _sliding_slots(pat) == {i: pytest.approx(v, rel=1e-10) for i, v in lam.items()}
    for i, s in zip((0, 3), sides, strict=True):
        if s != 2:
            assert pat[0][i] == s, (i, s)
    assert not info["unresolved"] and not info["over"]


def test_more_pairs_at_a_kink_than_slots_stops_before_deciding(decider):
    """Three samples on the w unit's kink with two candidate slots: the event reports that
    it needs three (the loop then grows its slots and decides it in full)."""
    x, y = _coupled("both slide")
    x[1] = [0, 1.5, 0]
    pat, info = decider(x, y)
    assert info["over"] and tuple(info["need"]) == (3, 0)


@pytest.fixture(scope="module")
def solvers():
    """(candidate pairs, used, active-set sides, still violated, complementarity (sides, λ,
    converged), minimum-norm sides, (the active set's λ, λ solved anew for its sides)) at
    the event θ is at, compiled once."""
    pb = _problem(X, Y)
    _, static = eqx.partition(pb, eqx.is_array)
    layout, settings = layout_of(pb), _settings()

    @jax.jit
    def run(dynamic):
        problem = eqx.combine(dynamic, static)
        net = Net.build(problem, settings, layout, TOLS)
        y = (problem.theta0, jnp.zeros(()), jnp.zeros(()))
        ev = candidates(net, y, initial_pattern(net, problem.theta0))
        side, start, still_bad, lam_as = active_set(net, ev)
        mcp = complementarity(net, ev, start)
        solved = (lam_as, solve_sides(net, ev, side, start)[0])
        return ev.idx, ev.on, side, still_bad, mcp, min_norm_sides(net, ev), solved

    def call(x, y):
        dynamic, _ = eqx.partition(_problem(x, y), eqx.is_array)
        return jax.tree_util.tree_map(np.asarray, run(dynamic))

    return call


def _attractive(x, y, samples=(0, 3)):
    """Whether every pair's own slope pulls it back to its kink (∂ż_i/∂λ_i < 0, by hand;
    ż is affine in λ_i here)."""
    out = []
    for i in samples:
        others = {j: 0.5 for j in samples if j != i}
        out.append(_zdot_w(x, y, {**others, i: 1.0})[i] < _zdot_w(x, y, {**others, i: 0.0})[i])
    return all(out)


@pytest.mark.parametrize("case", list(COUPLED))
def test_active_set_and_complementarity_solve_agree_with_the_hand_enumeration(solvers, case):
    """The one-pair-at-a-time iteration finds the Filippov solution, λ included. The
    semismooth Newton solve of the box complementarity problem (the fallback where that
    iteration cycles, in deep nets) finds it too where every kink is attractive; where one
    is repulsive (its own slope pushes the pair away: the problem is not monotone) it may
    not converge, and then says so (`ok` false → the minimum-norm fallback, counted as
    unresolved) — never a wrong decision reported as converged."""
    x, y = _coupled(case)
    [(sides, lam)] = _filippov_by_enumeration(x, y)
    idx, on, side, still_bad, (side_c, lam_c, ok), _, (lam_as, lam_new) = solvers(x, y)
    # the decision reuses the active set's λ instead of solving its sides again: the same
    np.testing.assert_array_equal(lam_as, lam_new)
    used = on.astype(bool)
    order = np.argsort(idx[used])
    assert list(idx[used][order]) == [0, 3] and not still_bad
    np.testing.assert_array_equal(side[used][order], sides)
    if _attractive(x, y):
        assert ok
    if ok:
        np.testing.assert_array_equal(side_c[used][order], sides)
        for k, i in enumerate((0, 3)):
            if i in lam:
                assert lam_c[used][order][k] == pytest.approx(lam[i], rel=1e-10)


def test_minimum_norm_fallback_is_the_filippov_solution_on_attractive_kinks(solvers):
    """For one hidden layer with both pairs sliding (attractive kinks) the minimum-norm
    element of the Clarke subdifferential is the Filippov solution."""
    x, y = _coupled("both slide")
    idx, on, *_, side_n, _ = solvers(x, y)
    used = on.astype(bool)
    assert sorted(idx[used]) == [0, 3] and np.all(side_n[used] == 2)


def test_grow_slots_keeps_the_occupied_slots():
    J = jnp.asarray([[2.0, 0.5], [0.25, 3.0]])
    pat = (
        jnp.arange(5),
        jnp.zeros(5),
        jnp.asarray([3, 1], jnp.int32),
        jnp.asarray([0, 1], jnp.int32),
        jnp.asarray([True, True]),
        J,
        jnp.asarray([0.3, 0.7]),
        jnp.asarray(1.5),
    )
    carry = Carry(*[None] * len(Carry._fields))._replace(pat=pat, k=4)
    grown = grow_slots(carry, 4)
    piece, off, idx, kink, on, J4, lam0, kappa = grown.pat
    assert grown.k == 4 and float(kappa) == 1.5
    np.testing.assert_array_equal(idx, [3, 1, 0, 0])
    np.testing.assert_array_equal(kink, [0, 1, 0, 0])
    np.testing.assert_array_equal(on, [True, True, False, False])
    np.testing.assert_array_equal(lam0, [0.3, 0.7, 0.0, 0.0])
    np.testing.assert_array_equal(J4[:2, :2], J)
    np.testing.assert_array_equal(J4[2:, 2:], np.eye(2))
    np.testing.assert_array_equal(J4[:2, 2:], 0.0)


def test_damped_solve_is_the_minimum_norm_solution_of_a_consistent_singular_system():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((3, 3))
    b = rng.standard_normal(3)
    np.testing.assert_allclose(
        damped_solve(jnp.asarray(A), jnp.asarray(b)), np.linalg.solve(A, b), rtol=1e-10
    )
    # two equal rows (a redundant kink constraint), consistent right-hand side
    S = np.stack([A[0], A[0], A[1]])
    r = S @ rng.standard_normal(3)
    x = np.asarray(damped_solve(jnp.asarray(S), jnp.asarray(r)))
    np.testing.assert_allclose(x, np.linalg.lstsq(S, r, rcond=None)[0], rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(S @ x, r, rtol=1e-8)


def test_layout_decodes_every_pair():
    pb = _problem(X, Y)
    layout = layout_of(pb)
    assert layout.offsets == (0, 4) and layout.shapes == ((4, 1), (4, 1))
    assert layout.decode(2) == {"layer": "w", "sample": 2, "unit": 0}
    assert layout.decode(7) == {"layer": "u", "sample": 3, "unit": 0}
    assert layout.decode(8) == {"layer": "?", "sample": -1, "unit": -1}


def test_root_finder_brackets_the_crossing_from_the_far_side():
    """The event location: Illinois false position returns the bracket end past the root
    (fn ≤ 0 there: the margin has changed sign), within the width tolerance."""
    net = types.SimpleNamespace(eps=np.finfo(np.float64).eps)
    root_at = 0.3 + 1e-3 * np.pi

    def fn(x):
        return jnp.tanh(root_at - x) * (1 + x**2)

    b, evals = jax.jit(lambda a, b: root(net, fn, a, b, fn(a), fn(b)))(0.0, 1.0)
    assert float(fn(b)) <= 0 and 0 <= float(b) - root_at <= 1e-12
    assert 0 < int(evals) < 20


def test_root_finder_on_the_margins_finds_the_earliest_crossing_in_few_evaluations():
    """`root_vector` (the event location on the margins' vector, each entry smooth): the
    earliest of several crossings in the bracket, past it by ≤ 1e-12, where the entry
    smallest at the bracket's start (the first) never crosses — φ = min of the entries has
    a kink at 0.42, where entry 1 takes over from entry 0, and a root at 0.55 + 1e-3π
    (entry 1; entry 2 crosses later, at 0.8). It takes fewer evaluations than `root` on φ
    (measured: 9 against 26)."""
    net = types.SimpleNamespace(eps=np.finfo(np.float64).eps)
    r1, r2 = 0.55 + 1e-3 * np.pi, 0.8

    def fn(x):
        return jnp.stack([0.1 + 0.5 * x**2, jnp.tanh(r1 - x) * (1 + x), 2.0 * (r2 - x)])

    def phi(x):
        return jnp.min(fn(x))

    b, evals = jax.jit(lambda a, b: root_vector(net, fn, a, b, fn(a), fn(b)))(0.0, 1.0)
    assert float(phi(b)) <= 0 and 0 <= float(b) - r1 <= 1e-12
    b_phi, evals_phi = jax.jit(lambda a, b: root(net, phi, a, b, phi(a), phi(b)))(0.0, 1.0)
    assert 0 <= float(b_phi) - r1 <= 1e-12
    assert 0 < int(evals) < int(evals_phi), (int(evals), int(evals_phi))


@pytest.mark.parametrize("n_near", [0, 1, 5, 8])
@pytest.mark.parametrize("pairs", [12, 300])
def test_candidate_selection_is_top_k_s_without_the_sort(n_near, pairs):
    """`_nearest_few` (the candidates where at most C pairs are near a kink) returns
    `lax.top_k`'s indices in top_k's order: near pairs by descending score, ties by index,
    then the first pairs not near — with scores tied, near pairs among the first 2C, and
    fewer pairs than 2C."""
    C = 8
    rng = np.random.default_rng(n_near + pairs)
    for trial in range(20):
        near = np.zeros(pairs, bool)
        where = rng.choice(min(pairs, 2 * C) if trial % 2 else pairs, n_near, replace=False)
        near[where] = True
        score = -np.abs(rng.normal(size=pairs))
        if trial % 3 == 0:
            score = np.round(score, 1)  # ties
        score = jnp.asarray(np.where(near, score, -np.inf))
        got = _nearest_few(score, jnp.asarray(near), n_near, C)
        np.testing.assert_array_equal(got, jax.lax.top_k(score, C)[1])


@pytest.mark.parametrize(
    "used", [(), (0,), (1, 4), tuple(range(8)), tuple(range(9)), tuple(range(11))]
)
def test_jacobian_over_the_used_slots_only(used):
    """`jac_columns`/`jac_rows` (the Jacobians of the sliding systems, over the slots in
    use, one at a time) equal jax.jacfwd/jax.jacrev in the used columns/rows and are zero
    in the others, for no, one, several and all but none of the slots, in any order."""
    K = 11
    rng = np.random.default_rng(0)
    W = jnp.asarray(rng.normal(size=(K, 5)))
    x = jnp.asarray(rng.normal(size=K))
    on = jnp.asarray(np.isin(np.arange(K), used)[::-1].copy())  # used at the end

    def f(v):  # (K,) → (5,)
        return jnp.tanh(v @ W) * jnp.sum(v**2)

    Jc = jac_columns(f, x, on)
    np.testing.assert_allclose(Jc, jnp.where(on[None, :], jax.jacfwd(f)(x), 0.0), rtol=1e-14)
    y = jnp.asarray(rng.normal(size=5))

    def g(v):  # (5,) → (K,)
        return jnp.sin(W @ v) * jnp.sum(v)

    Jr = jac_rows(g, y, on)
    np.testing.assert_allclose(Jr, jnp.where(on[:, None], jax.jacrev(g)(y), 0.0), rtol=1e-14)
