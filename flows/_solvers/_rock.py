"""Fourth-order stabilized explicit Runge–Kutta solver with a three-term recurrence
(ROCK4-type) for diffrax.

A step with s stages has a stability polynomial

    R_s(z) = w_4(z) P_{s−4}(z),   R_s(z) = e^z + O(z⁵),   |R_s(z)| ≤ 1 on [−ℓ_s, 0],

with ℓ_s up to ≈ 0.354 s² (Abdulle, "Fourth order Chebyshev methods with recurrence relation",
SIAM J. Sci. Comput. 23(6), 2041–2054, 2002). Here w_4(z) = Π (1 − z/z_i)(1 − z/z̄_i),
i = 1, 2, holds the two complex root pairs, and P_{s−4} is the polynomial of degree s − 4
orthogonal on [−ℓ, 0] for the weight w_4(z)²/√(1 − x²) (x = 1 + 2z/ℓ), normalised to
P(0) = 1. Orthogonal polynomials satisfy a three-term recurrence, and so do the stages:

    K_0 = y,  K_1 = y + μ_1 h F(K_0),
    K_j = ν_j K_{j−1} − κ_j K_{j−2} + μ_j h F(K_{j−1}),  j = 2…s − 4   (ν_j − κ_j = 1),

so K_{s−4} = P_{s−4}(hJ) y on a linear problem. A 4-stage explicit method W (the
"finishing procedure") is then applied to K_{s−4}; its stability polynomial is w_4, and
its coefficients also make the composite s-stage method of order 4 on nonlinear problems.

Everything is derived here, nothing is copied from a table (`derive_degree`):

1. For a degree s and an interval length ℓ, the 4 real parameters of z_1, z_2 solve the 4
   order conditions R_s(z) = 1 + z + z²/2 + z³/6 + z⁴/24 + O(z⁵) (Taylor coefficients of
   P_{s−4} propagated through the recurrence; the recurrence by the Stieltjes procedure on
   Gauss–Chebyshev nodes, exact for these polynomial weights). ℓ_max(s) is the largest
   ℓ (bisection) for which |R_s| ≤ 1 on all of [−ℓ, 0]; it agrees with Abdulle's Table
   2.1 to within 1 % (tests): s = 10: 32.56 (his 32.45), s = 100: 3536.2 (3538.1). The
   method uses ℓ_s = 0.9 ℓ_max(s) ≈ 0.318 s² (`ELL_FRACTION`): there |R_s| ≤ 0.61 on
   [−ℓ_s, −10], where at ℓ_max it reaches 0.95 — stiff modes are damped.
2. The finishing procedure has 10 coefficients (a21, a31, a32, a41, a42, a43, b1…b4) and 8
   conditions: its stability polynomial is w_4 (4 conditions: then the composite's
   conditions for the "tall" trees follow from R_s) and the composite's 4 remaining
   order-4 conditions (b·c² = 1/3, b·c³ = 1/4, b·(c∘Ac) = 1/8, b·Ac² = 1/12, on the full
   s-stage Butcher tableau built from the recurrence). Of the solutions, the one nearest
   to classical RK4's coefficients (Gauss–Newton on the linearised nearest-point
   problem, followed by continuation in s from s = 5; see `_finishing`).
3. Error estimate: a 3rd-order embedded solution ŷ = K_{s−4} + h(b̂_0 F(K_{s−5}) +
   Σ b̂_i k_i) — the finishing stages and the last recurrence stage, no extra evaluation.
   The order-3 conditions leave a one-parameter family b̂ = b + γ δ, so y_1 − ŷ =
   γ h (F(K_{s−5}) + Σ δ_i k_i) is an O(h⁴) estimate whose size is set by γ alone; γ is
   fixed per degree so that on y′ = λy it is (z⁴/24)(1 + O(z)), the same meaning at every
   s, and `_ERROR_FACTOR` scales it once (measured, see there). ROCK4's own estimator uses
   F(y_1) instead of F(K_{s−5}); that one grows like 1.7 |z| |R_s(z)| on the stiff modes
   (up to 10⁴ × their amplitude at s = 137), this one stays ≈ |R_s(z)| there (its top
   term is z⁴ P_{s−4}(z), R_s's own). With F(y_1) the runs over-delivered by a
   problem-dependent factor: err/rtol 0.0004–0.003 on the quartic flow against 0.04–0.16
   on the Brusselator (`tests/test_solvers_tolerance.py` sizes, rtol 1e-3…1e-7); with
   F(K_{s−5}), 0.02–0.025 against 0.05–0.11 (before `_ERROR_FACTOR`).

The derivation takes minutes for all degrees, so its results — per degree ℓ, the root
parameters and the 10 finishing coefficients — are stored in `rock4_table.json`
(this package's data), written by `python -m flows._solvers._rock`; the recurrence,
the composite tableau and the embedded weights are recomputed from them at import, and the
order conditions and |R_s| ≤ 1 are checked there and in the tests (which also re-derive
several degrees from scratch and compare).
"""

from __future__ import annotations

import functools
import json
import math
from importlib import resources
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np

from ._stabilized import AbstractStabilizedSolver
from .record import SolverRecord

#: The derived coefficients (package data, next to this module).
TABLE_FILE = "rock4_table.json"

__all__ = [
    "ROCK4",
    "ROCK4_DEGREES",
    "composite_tableau",
    "derive_degree",
    "max_stability_interval",
    "order_conditions",
    "rock4_coefficients",
    "rock4_stability_polynomial",
]

#: Degrees (stage counts) of the method: every s from 5 to 20, then ~6 % apart up to 292
#: (a step uses the smallest degree whose ℓ_s covers h ρ, so at most ~6 % of the stages
#: are spare beyond s = 20).
ROCK4_DEGREES: tuple[int, ...] = tuple(range(5, 21)) + tuple(
    sorted({int(round(20 * 1.06**k)) for k in range(1, 48) if 20 * 1.06**k <= 300})
)

# --- derivation (numpy / scipy; offline, results in rock4_table.json) -----------------


def _w4_coefficients(roots: np.ndarray) -> np.ndarray:
    """Coefficients (ascending) of w_4(z) = Π (1 − z/z_i)(1 − z/z̄_i), z_i = r[2i] + i r[2i+1]."""
    c = np.array([1.0])
    for k in range(2):
        q = 1.0 / complex(roots[2 * k], roots[2 * k + 1])
        c = np.convolve(c, [1.0, -2.0 * q.real, abs(q) ** 2])
    return c


def rock4_recurrence(s: int, ell: float, roots) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """μ_j, ν_j, κ_j (j = 1…s − 4) of the polynomials P_j(z) = p_j(x)/p_j(1), x = 1 + 2z/ℓ,
    p_j monic orthogonal on [−1, 1] for w_4(z(x))²/√(1 − x²): P_j = (μ_j z + ν_j) P_{j−1}
    − κ_j P_{j−2}. Stieltjes procedure on n + 6 Gauss–Chebyshev nodes (exact: the
    integrands are polynomials of degree ≤ 2(n + 4))."""
    n = s - 4
    m = n + 6
    x = np.cos((2.0 * np.arange(1, m + 1) - 1.0) * np.pi / (2.0 * m))
    w = np.ones(m)
    for k in range(2):
        zeta = 1.0 + 2.0 * complex(roots[2 * k], roots[2 * k + 1]) / ell
        w *= np.abs(1.0 - x / zeta) ** 2
    wt = w * w
    mu, nu, ka = np.zeros(n), np.zeros(n), np.zeros(n)
    p_prev, p = np.zeros(m), np.ones(m)
    nrm_prev, r_prev = 1.0, 1.0
    for j in range(n):
        nrm = float(np.sum(wt * p * p))
        a = float(np.sum(wt * x * p * p)) / nrm
        b = 0.0 if j == 0 else nrm / nrm_prev
        p_next = (x - a) * p - b * p_prev
        r = (1.0 - a) - b / r_prev  # p_{j+1}(1)/p_j(1) > 0: all roots in (−1, 1)
        mu[j] = 2.0 / (ell * r)
        nu[j] = (1.0 - a) / r
        ka[j] = b / (r * r_prev)
        scale = math.sqrt(float(np.sum(wt * p_next * p_next)))  # keep values O(1)
        p_prev, p = p / scale, p_next / scale
        nrm_prev, r_prev = nrm / scale**2, r
    return mu, nu, ka


def _taylor_residual(params, s: int, ell: float) -> np.ndarray:
    """R_s's Taylor coefficients of z¹…z⁴ minus e^z's."""
    mu, nu, ka = rock4_recurrence(s, ell, params)
    p_prev, p = np.zeros(5), np.eye(5)[0]
    for j in range(len(mu)):
        zp = np.concatenate([[0.0], p[:-1]])
        p_prev, p = p, mu[j] * zp + nu[j] * p - ka[j] * p_prev
    r = np.convolve(p, _w4_coefficients(np.asarray(params)))[:5]
    return r[1:] - np.array([1.0, 1 / 2, 1 / 6, 1 / 24])


def rock4_stability_polynomial(s: int, ell: float, roots, z) -> np.ndarray:
    """R_s(z) = w_4(z) P_{s−4}(z) at real points z (numpy)."""
    z = np.asarray(z, dtype=np.float64)
    mu, nu, ka = rock4_recurrence(s, ell, roots)
    p_prev, p = np.ones_like(z), np.ones_like(z)
    for j in range(len(mu)):
        p_prev, p = p, (mu[j] * z + nu[j]) * p - ka[j] * p_prev
    return np.polynomial.polynomial.polyval(z, _w4_coefficients(np.asarray(roots))) * p


def _bounded(s: int, ell: float, roots, per_stage: int = 400) -> bool:
    """|R_s| ≤ 1 on [−ℓ, 0], checked on `per_stage`·s points uniform in θ, z = ℓ(cos θ − 1)/2
    (dense where the orthogonal polynomial oscillates fastest, near the ends)."""
    theta = np.linspace(0.0, np.pi, per_stage * s)
    z = 0.5 * ell * (np.cos(theta) - 1.0)
    return bool(np.all(np.abs(rock4_stability_polynomial(s, ell, roots, z)) <= 1.0 + 1e-12))


def _solve_roots(s: int, ell: float, guess) -> np.ndarray | None:
    from scipy import optimize

    sol = optimize.root(_taylor_residual, guess, args=(s, ell), method="hybr", tol=1e-14)
    if not np.all(np.isfinite(sol.x)) or np.max(np.abs(_taylor_residual(sol.x, s, ell))) > 1e-11:
        return None
    return sol.x


def composite_tableau(mu, nu, ka, fin) -> tuple[np.ndarray, np.ndarray]:
    """Butcher tableau (A, b) of the composite s-stage method: the recurrence stages
    K_0…K_{n−1} (n = s − 4), then the finishing stages from K_n with coefficients
    `fin` = (a21, a31, a32, a41, a42, a43, b1, b2, b3, b4)."""
    n = len(mu)
    rows = np.zeros((n + 1, n))  # K_j − y = h Σ_k rows[j, k] F(K_k)
    for j in range(1, n + 1):
        rows[j] = nu[j - 1] * rows[j - 1] - ka[j - 1] * (rows[j - 2] if j >= 2 else 0.0)
        rows[j, j - 1] += mu[j - 1]
    a21, a31, a32, a41, a42, a43, b1, b2, b3, b4 = fin
    w = np.array([[0, 0, 0, 0], [a21, 0, 0, 0], [a31, a32, 0, 0], [a41, a42, a43, 0.0]])
    size = n + 4
    a = np.zeros((size, size))
    a[:n, :n] = rows[:n]
    a[n:, :n] = rows[n]
    a[n:, n:] = w
    b = np.concatenate([rows[n], [b1, b2, b3, b4]])
    return a, b


def order_conditions(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(Φ(t) − 1/γ(t) for the 8 trees of order ≤ 4, (Φ(t) − 1/γ(t))/σ(t) for the 9 trees of
    order 5: the principal error coefficients)."""
    c = a.sum(axis=1)
    ac = a @ c
    ac2 = a @ c**2
    aac = a @ ac
    o4 = np.array(
        [
            b.sum() - 1,
            b @ c - 1 / 2,
            b @ c**2 - 1 / 3,
            b @ ac - 1 / 6,
            b @ c**3 - 1 / 4,
            b @ (c * ac) - 1 / 8,
            b @ ac2 - 1 / 12,
            b @ aac - 1 / 24,
        ]
    )
    o5 = np.array(
        [
            (b @ c**4 - 1 / 5) / 24,
            (b @ (c**2 * ac) - 1 / 10) / 2,
            (b @ (c * ac2) - 1 / 15) / 2,
            b @ (c * aac) - 1 / 30,
            (b @ (ac * ac) - 1 / 20) / 2,
            (b @ (a @ c**3) - 1 / 20) / 6,
            b @ (a @ (c * ac)) - 1 / 40,
            (b @ (a @ ac2) - 1 / 60) / 2,
            b @ (a @ aac) - 1 / 120,
        ]
    )
    return o4, o5


def _finishing_stability(fin) -> np.ndarray:
    """z¹…z⁴ coefficients of the finishing method's stability polynomial."""
    a21, a31, a32, a41, a42, a43, b1, b2, b3, b4 = fin
    w = np.array([[0, 0, 0, 0], [a21, 0, 0, 0], [a31, a32, 0, 0], [a41, a42, a43, 0.0]])
    b, e = np.array([b1, b2, b3, b4]), np.ones(4)
    return np.array([b @ e, b @ w @ e, b @ w @ w @ e, b @ w @ w @ w @ e])


#: ℓ_s = this × the largest interval ℓ_max(s) on which |R_s| ≤ 1 (the undamped, near-optimal
#: polynomial): at ℓ_max, |R_s| reaches 0.95 on [−ℓ, −10] (stiff modes barely decay, and
#: the error estimate, which grows like |z|·|R_s(z)| there, sees them step after step); at
#: 0.9 ℓ_max it is ≤ 0.61 (s = 10, 20, 50; ≤ 0.56 at 0.85, rising again below) for 5 %
#: more stages at equal h ρ.
ELL_FRACTION = 0.9

#: Classical RK4 as (a21, a31, a32, a41, a42, a43, b1…b4): the reference point of the
#: finishing coefficients (see `_finishing`).
RK4_FINISHING = np.array([0.5, 0.0, 0.5, 0.0, 0.0, 1.0, 1 / 6, 1 / 3, 1 / 3, 1 / 6])


def _finishing(mu, nu, ka, roots, start=None) -> np.ndarray:
    """The finishing coefficients: of the points p satisfying the 8 conditions (see the
    module doc), the one nearest (Euclidean) to `RK4_FINISHING`, by Gauss–Newton steps
    p ← p_RK4 + J⁺(J(p − p_RK4) − r(p)) (the linearised nearest-point problem) from
    `start` (default RK4 itself). The conditions have other solution branches, some with
    coefficients of size 10–300; from RK4 the iteration lands on one of those for some
    degrees (s = 20, 100, 301 in a trial), so the table follows the branch by continuation
    in s from s = 5 (`_write_table`), where from RK4 it is found directly.

    Tried first: minimising the 5th-order error coefficients subject to the conditions
    (SLSQP) — many local minima within 20 % of each other, the coefficients jumping
    between branches from one degree to the next; the nearest-to-RK4 branch has error
    coefficients within 30 % of the best found (0.0027 against 0.0021 at s = 50)."""
    target = _w4_coefficients(np.asarray(roots))[1:]

    def constraints(p):
        o4, _ = order_conditions(*composite_tableau(mu, nu, ka, p))
        return np.concatenate([_finishing_stability(p) - target, o4[[2, 4, 5, 6]]])

    ref = RK4_FINISHING
    p = np.array(ref if start is None else start, dtype=np.float64)
    for _ in range(100):
        r = constraints(p)
        jac = np.empty((8, 10))
        for i in range(10):
            dp = np.zeros(10)
            dp[i] = 1e-6
            jac[:, i] = (constraints(p + dp) - constraints(p - dp)) / 2e-6
        step = ref + np.linalg.lstsq(jac, jac @ (p - ref) - r, rcond=None)[0] - p
        lam, rn = 1.0, np.linalg.norm(r)
        while lam > 1e-4 and rn > 1e-13 and np.linalg.norm(constraints(p + lam * step)) > rn:
            lam *= 0.5
        p = p + lam * step
        if np.linalg.norm(step) < 1e-12 and rn < 1e-13:
            break
    if np.max(np.abs(constraints(p))) > 1e-12 or np.max(np.abs(p)) > 5.0:
        raise RuntimeError(
            f"ROCK4 finishing procedure: no O(1) solution found for s = {len(mu) + 4} "
            "(start from the previous degree's coefficients)"
        )
    return p


def max_stability_interval(s: int, guess_roots=None) -> tuple[float, np.ndarray]:
    """ℓ_max(s): the largest ℓ for which the order-4 polynomial R_s = w_4 P_{s−4} built on
    [−ℓ, 0] (see the module doc) has |R_s| ≤ 1 on all of [−ℓ, 0] (bisection to 1e-10), and
    the root parameters of w_4 there. Abdulle's Table 2.1 is the oracle (tests)."""
    if s < 5:
        raise ValueError(f"ROCK4 degrees start at 5; got s = {s}.")
    roots = np.array([-0.3, 3.5, -2.4, 1.3] if guess_roots is None else guess_roots, float)
    lo, hi = 0.15 * s * s, 0.40 * s * s
    x = _solve_roots(s, lo, roots)
    while x is None or not _bounded(s, lo, x):  # a bracket's stable end
        lo *= 0.8
        if lo < 1.0:
            raise RuntimeError(f"ROCK4 polynomial: no stable start for s = {s}")
        x = _solve_roots(s, lo, roots)
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        xm = _solve_roots(s, mid, x)
        if xm is not None and _bounded(s, mid, xm):
            lo, x = mid, xm
        else:
            hi = mid
        if hi - lo < 1e-10 * lo:
            break
    return lo, x


def derive_degree(s: int, guess_roots=None, start_fin=None) -> dict:
    """Derive degree s: ℓ_s = `ELL_FRACTION` ℓ_max(s), the roots of w_4 on that interval
    and the finishing coefficients (see the module doc; `start_fin`: where the finishing
    iteration starts, default RK4 — the table starts each degree from the previous
    one's). Returns {'s', 'ell', 'ell_max', 'roots', 'fin'}."""
    ell_max, x = max_stability_interval(s, guess_roots)
    ell = ELL_FRACTION * ell_max
    x = _solve_roots(s, ell, x)
    if x is None or not _bounded(s, ell, x):
        raise RuntimeError(f"ROCK4 polynomial: no damped polynomial for s = {s}")
    mu, nu, ka = rock4_recurrence(s, ell, x)
    fin = _finishing(mu, nu, ka, x, start_fin)
    return {
        "s": s,
        "ell": float(ell),
        "ell_max": float(ell_max),
        "roots": [float(v) for v in x],
        "fin": [float(v) for v in fin],
    }


def _embedded(mu, nu, ka, fin) -> np.ndarray:
    """e = γ(1, d_1…d_4): the estimate y_1 − ŷ = h(e_0 F(K_{s−5}) + Σ_{i≤4} e_i k_i), with ŷ
    = K_{s−4} + h(Σ b̂_i k_i + b̂_0 F(K_{s−5})) the 3rd-order embedded solution that also
    weighs the last recurrence stage, and γ such that on y′ = λy the estimate is
    (z⁴/24)(1 + O(z))."""
    a, b = composite_tableau(mu, nu, ka, fin)
    size = len(b)
    n = size - 4
    c = a.sum(axis=1)
    ac = a @ c
    # b̂ = b (γ = 0) satisfies the order-3 conditions; b̂ = b + γ δ, δ on the stages
    # K_{n−1} and the 4 finishing stages, does iff Σδ = δ·c = δ·c² = δ·Ac = 0
    cols = [n - 1, n, n + 1, n + 2, n + 3]
    m = np.array([[1.0, c[i], c[i] ** 2, ac[i]] for i in cols]).T  # 4 × 5
    d = np.concatenate([[1.0], -np.linalg.solve(m[:, 1:], m[:, 0])])
    delta = np.zeros(size)
    delta[cols] = d
    # on y′ = λy the stage values are Σ_k z^k A^k 1, so the estimate −γ z Σ δ_i K_i has the
    # z^{k+1} coefficients −γ δ·A^k 1: zero for k < 3 (order 3), δ·A³1 sets γ
    coeffs = [delta @ np.linalg.matrix_power(a, k) @ np.ones(size) for k in range(4)]
    if max(abs(coeffs[0]), abs(coeffs[1]), abs(coeffs[2])) > 1e-9 * abs(coeffs[3]):
        raise RuntimeError("ROCK4 embedded estimate is not O(h⁴)")
    return d * (1.0 / 24.0) / coeffs[3]


def rock4_table() -> list[dict]:
    """The stored derivation (`TABLE_FILE`): per degree s, ℓ_s, ℓ_max(s), the roots of w_4
    (re, im, re, im) and the finishing coefficients (a21, a31, a32, a41, a42, a43,
    b1…b4)."""
    return json.loads(resources.files("flows._solvers").joinpath(TABLE_FILE).read_text("utf-8"))


@functools.cache
def rock4_coefficients() -> dict[str, np.ndarray]:
    """Per degree of `ROCK4_DEGREES` (rows, padded with zeros): 'degrees', 'ell' (ℓ_s:
    |R_s| ≤ 1 on [−ℓ_s, 0]), 'mu', 'nu', 'kappa', 'c' (stage times of K_0…K_{s−5}),
    'fin' (a21, a31, a32, a41, a42, a43, b1…b4), 'c_fin' (times of the 4 finishing
    stages), 'emb' (error weights e_1…e_5). Built from the table `rock4_table.json` (this
    package's data) and checked (order conditions to 1e-10, w_4's Taylor conditions to
    1e-10)."""
    table = rock4_table()
    if tuple(r["s"] for r in table) != ROCK4_DEGREES:
        raise RuntimeError(f"{TABLE_FILE} is stale: run `python -m flows._solvers._rock`")
    nmax = ROCK4_DEGREES[-1] - 4
    k = len(ROCK4_DEGREES)
    out = {
        "degrees": np.array(ROCK4_DEGREES, np.int32),
        "ell": np.zeros(k),
        "mu": np.zeros((k, nmax)),
        "nu": np.zeros((k, nmax)),
        "kappa": np.zeros((k, nmax)),
        "c": np.zeros((k, nmax)),
        "fin": np.zeros((k, 10)),
        "c_fin": np.zeros((k, 4)),
        "emb": np.zeros((k, 5)),
    }
    for i, row in enumerate(table):
        s, ell, roots, fin = row["s"], row["ell"], np.array(row["roots"]), np.array(row["fin"])
        if np.max(np.abs(_taylor_residual(roots, s, ell))) > 1e-10:
            raise RuntimeError(f"ROCK4 table: degree {s} is not of order 4 (linear)")
        mu, nu, ka = rock4_recurrence(s, ell, roots)
        a, b = composite_tableau(mu, nu, ka, fin)
        o4, _ = order_conditions(a, b)
        if np.max(np.abs(o4)) > 1e-10:
            raise RuntimeError(f"ROCK4 table: degree {s} is not of order 4")
        n = s - 4
        c = a.sum(axis=1)
        out["ell"][i] = ell
        out["mu"][i, :n], out["nu"][i, :n], out["kappa"][i, :n] = mu, nu, ka
        out["c"][i, :n] = c[:n]
        out["fin"][i] = fin
        out["c_fin"][i] = c[n:]
        out["emb"][i] = _embedded(mu, nu, ka, fin)
    return out


def _write_table(path: str) -> None:
    rows = []
    roots, fin = None, None
    for s in ROCK4_DEGREES:
        r = derive_degree(s, roots, fin)
        roots, fin = r["roots"], r["fin"]
        rows.append({k: r[k] for k in ("s", "ell", "ell_max", "roots", "fin")})
        print(f"s = {s:3d}: ell = {r['ell']:.6f} (ell/s² = {r['ell'] / s**2:.5f})", flush=True)
    rows = [{k: (list(map(float, v)) if k in ("roots", "fin") else v) for k, v in r.items()}
            for r in rows]  # fmt: skip
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(rows, fh, indent=1)  # floats round-trip exactly (repr)


# --- the solver ----------------------------------------------------------------------

# The estimate (z⁴/24 on y′ = λy, an O(h⁴) bound on the 3rd-order solution's error) is
# reported × this; the 4th-order solution is propagated (local extrapolation). One factor
# serves two regimes that want different ones: on smooth modes (|z| < 0.1) the raw
# estimate is 400–1200× the step's true local error |R_s(z) − e^z| (s ≥ 10), on stiff
# modes (z < −10) about 5× it. Measured (err/rtol, rtol 1e-3 … 1e-8): with 0.05 the small
# stiff set (heat N = 100, Brusselator N = 40, quartic d = 50, multi-stage m = 20) was at
# 0.043–1.8 (22 of 24 cells in [0.1, 3]) but the heat equation N = 1000 (rough data, ρ ≈
# 4·10⁶: stiff modes carry the error) at 3.3–4.9 — under-delivered, the estimate on its
# stiff modes 4× too small; with 0.1 heat N = 1000 1.9–3.2; with 0.2 heat N = 1000
# 0.54–1.3 and the small set 0.015–0.62 (the heat equation N = 100 over-delivers 20–65×).
# 0.2: never above rtol by more than 1.3× on any of them, at the price of over-delivery
# where smooth modes carry the error (+10–20 % evaluations against 0.05).
_ERROR_FACTOR = 0.2
# non-stiff steps (Tsit5) where h ρ < this (Tsit5's real stability interval ≈ [−3.5, 0];
# the smallest degree, s = 5, covers h ρ ≤ 5.45 for 5 evaluations)
_ROCK4_NONSTIFF_MAX_HRHO = 2.5


class ROCK4(AbstractStabilizedSolver):
    r"""Fourth-order stabilized explicit method with a three-term recurrence (ROCK4-type;
    see the module `flows._solvers._rock`), for gradient flows whose step is limited by the
    spectral radius ρ of the Hessian: s stages stabilize h ρ ≤ ℓ_s ≈ 0.318 s² and a step
    costs s evaluations (F(y_{n+1}) included) — against ESERK4's ≈ 10 s′ with
    0.964 s′² ≥ h ρ, about 6× fewer at equal h.

    Shares `RKC2`'s machinery (`flows.AbstractStabilizedSolver`): ρ by Hessian-vector
    power iteration, sub-steps when h ρ needs more than `max_stages`, the secant check
    with a fresh ρ for a stale one, non-finite steps reported as `RESULTS.nonfinite`,
    evaluation counts in the state (`flows.rkc_eval_counts`), cubic Hermite dense output.

    **Fields** as `RKC2`, except:

    - `max_stages`: default 292 (the largest derived degree; h ρ ≤ ℓ_292 ≈ 2.7·10⁴ per
      (sub-)step). Degrees are 5…20 and then ~6 % apart (`ROCK4_DEGREES`).
    - `nonstiff`: 'tsit5' (steps with h ρ < 2.5 by diffrax's Tsit5; needs tolerances),
      'none' (ROCK4 steps everywhere, s ≥ 5) or 'auto' (default: 'tsit5' when tolerances
      are there, else 'none'). Without `tolerances` it takes the adaptive controller's
      (`RKC2`, `tolerances`): `ROCK4()` under `diffrax.PIDController(rtol, atol)` is
      `make_solver('rock4', rtol, atol)`; with `ConstantStepSize`, give
      `nonstiff='none'`.
    - No tolerance transformation (`proportional` has no effect): the fourth-order
      solution is propagated with an O(h⁴) estimate.

    Order 4, `error_order` 4.
    """

    nonstiff: str = eqx.field(static=True, default="auto")
    max_stages: int = eqx.field(static=True, default=ROCK4_DEGREES[-1])

    _nonstiff_methods: ClassVar[tuple[str, ...]] = ("tsit5", "none")
    _bare_nonstiff: ClassVar[str] = "none"
    _nonstiff_max_hrho: ClassVar[float] = _ROCK4_NONSTIFF_MAX_HRHO

    def __check_init__(self):
        if self.max_stages < ROCK4_DEGREES[0]:
            raise ValueError(
                f"ROCK4 `max_stages` must be ≥ {ROCK4_DEGREES[0]} (its smallest degree); "
                f"got {self.max_stages}."
            )

    def order(self, terms):
        return 4

    def error_order(self, terms):
        return 4

    def _n_degrees(self) -> int:
        return sum(1 for s in ROCK4_DEGREES if s <= self.max_stages)

    def _max_hrho(self) -> float:
        return float(rock4_coefficients()["ell"][self._n_degrees() - 1])

    def _core_step(self, terms, t0, t1, y0, args, f0, control, rho):
        fdt = jnp.result_type(float)
        co = rock4_coefficients()
        nd = self._n_degrees()
        ells = jnp.asarray(co["ell"][:nd], fdt)
        h = jnp.abs(jnp.asarray(control, fdt))
        idx = jnp.clip(jnp.searchsorted(ells, h * rho, side="left"), 0, nd - 1)
        s = jnp.asarray(co["degrees"][:nd])[idx]
        n = s - 4
        mu = jnp.asarray(co["mu"][:nd], fdt)[idx]
        nu = jnp.asarray(co["nu"][:nd], fdt)[idx]
        ka = jnp.asarray(co["kappa"][:nd], fdt)[idx]
        cc = jnp.asarray(co["c"][:nd], fdt)[idx]
        fin = jnp.asarray(co["fin"][:nd], fdt)[idx]
        cfin = jnp.asarray(co["c_fin"][:nd], fdt)[idx]
        emb = jnp.asarray(co["emb"][:nd], fdt)[idx] * _ERROR_FACTOR
        dt = t1 - t0
        tdt = jnp.result_type(dt)

        def lin(coefs, trees):
            """Σ coefs[i] · trees[i] leafwise, coefficients cast to each leaf's dtype."""

            def comb(*leaves):
                return sum(c.astype(x.dtype) * x for c, x in zip(coefs, leaves, strict=True))

            return jtu.tree_map(comb, *trees)

        hf0 = terms.prod(f0, control)
        k1 = lin([jnp.ones((), fdt), mu[0]], [y0, hf0])  # K_1

        def body(c):
            j, km1, km2, _ = c  # K_{j−1}, K_{j−2}; computes K_j (j ≥ 2)
            f = terms.vf(t0 + cc[j - 1].astype(tdt) * dt, km1, args)
            hf = terms.prod(f, control)
            kj = lin([nu[j - 1], -ka[j - 1], mu[j - 1]], [km1, km2, hf])
            return j + 1, kj, km1, hf

        # K_n and h F(K_{n−1}) (for the error estimate)
        _, kn, _, hf_last = jax.lax.while_loop(
            lambda c: c[0] <= n, body, (jnp.asarray(2, jnp.int32), k1, y0, hf0)
        )
        a21, a31, a32, a41, a42, a43, b1, b2, b3, b4 = (fin[i] for i in range(10))
        one = jnp.ones((), fdt)

        def stage(i, y):
            return terms.prod(terms.vf(t0 + cfin[i].astype(tdt) * dt, y, args), control)

        g1 = stage(0, kn)
        g2 = stage(1, lin([one, a21], [kn, g1]))
        g3 = stage(2, lin([one, a31, a32], [kn, g1, g2]))
        g4 = stage(3, lin([one, a41, a42, a43], [kn, g1, g2, g3]))
        y1 = lin([one, b1, b2, b3, b4], [kn, g1, g2, g3, g4])
        f1 = terms.vf(t1, y1, args)
        err = lin([emb[i] for i in range(5)], [hf_last, g1, g2, g3, g4])
        return y1, f1, err, s


if __name__ == "__main__":  # pragma: no cover - regenerates rock4_table.json
    import pathlib

    _write_table(str(pathlib.Path(__file__).with_name(TABLE_FILE)))


def _make_rock4(rtol, atol, error_norm, on_products):
    return ROCK4(nonstiff="tsit5", tolerances=(float(rtol), float(atol)), error_norm=error_norm)


#: `solver='rock4'`: ROCK4 taking its non-stiff steps with Tsit5, its tolerances and error
#: norm those of the controller; it steps to its save times (its cubic Hermite between
#: stiff steps is not trusted, `control.steps_to_saves`).
RECORD = SolverRecord(
    "rock4",
    ROCK4,
    make=_make_rock4,
    method=(
        "ROCK4-type (orthogonal-polynomial recurrence + 4-stage finishing procedure, "
        "degrees 5-292, coefficients derived in flows._solvers._rock), non-stiff steps by Tsit5, "
        "steps to its save times"
    ),
    steps_to_saves=True,
)
