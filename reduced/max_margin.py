"""The max-margin problem of the Perfect Agreement Regime (PAR), Theorem 6.2.

Paper: *Towards Understanding Learning in Neural Networks with Linear Teachers*, §6.2 and App. G.2.

**The convex problem, confirmed from the paper.** Gradient flow of a 1-homogeneous network
with the logistic loss converges in direction to a KKT point of
(P) min ½‖W‖² s.t. y_i N_W(x_i) ≥ 1 (Lyu & Li 2020, Theorem A.8; App. F). In the PAR every
w neuron has sign(w·x_i) = y_i and every u neuron sign(u·x_i) = −y_i, and the limit is
perfectly clustered (Theorem 6.1: all w^(j) = w, all u^(j) = u). With σ(z) = z for z > 0
and αz for z < 0 the margins are then (App. G.2)

    y_i = +1:  y_i N_W(x_i) = v k (w·x_i − α u·x_i),
    y_i = −1:  y_i N_W(x_i) = v k (u·x_i − α w·x_i),

and ½‖W‖² = (k/2)(‖w‖² + ‖u‖²), so (P) becomes (eq. 8, up to the factor ½ which does not
change the minimizer)

    min_{w,u} k(‖w‖² + ‖u‖²)  s.t. the margins above ≥ 1,

a strictly convex quadratic program with linear constraints: its solution is unique, and
Theorem 6.2 predicts the learned directions ŵ = w/‖w‖, û = u/‖u‖ and the linear decision
boundary sign((w − u)·x). The margins are checked symbolically in
`reduced.derive.linear_teacher` (`par_margins`).

**Symmetric data (Lemma 6.1).** If the set is closed under (x, y) → (−x, −y), the map
(w, u) → (−u, −w) sends the feasible set onto itself and keeps the objective, so the unique
solution has u = −w, and the constraints reduce to (1 + α) v k y_i w·x_i ≥ 1: w is the
hard-margin SVM through the origin divided by (1 + α) v k (`symmetric_solution`).

Pure theory (NumPy/SciPy); never imports `flows`.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

__all__ = [
    "ParSolution",
    "nar_constraint_matrix",
    "par_constraint_matrix",
    "solve_nar",
    "solve_par",
    "svm_through_origin",
    "symmetric_solution",
    "direction_agreement",
]


@dataclasses.dataclass(frozen=True)
class ParSolution:
    """Solution of the PAR max-margin problem (Theorem 6.2, eq. 8).

    `w`, `u`: the minimizer; `w_hat`, `u_hat`: its directions; `delta_w` = ‖w‖,
    `delta_u` = ‖u‖; `boundary`: unit normal of the predicted linear boundary, (w − u)/‖w − u‖;
    `objective` = k(‖w‖² + ‖u‖²); `margins` (n,) = the PAR margins at the solution (≥ 1);
    `in_par`: whether the solution itself satisfies the PAR sign pattern (sign(w·x_i) = y_i,
    sign(u·x_i) = −y_i for all i; if not, the PAR formulas do not describe it);
    `kkt_residual`: ‖2k z − Aᵀλ‖ / ‖2k z‖ of the stationarity condition; `success`, `message`.
    """

    w: np.ndarray
    u: np.ndarray
    w_hat: np.ndarray
    u_hat: np.ndarray
    delta_w: float
    delta_u: float
    boundary: np.ndarray
    objective: float
    margins: np.ndarray
    in_par: bool
    kkt_residual: float
    success: bool
    message: str


def _check(x, y, v, k, slope):
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.ndim != 2 or y.shape != (x.shape[0],):
        raise ValueError(f"need x of shape (n, d) and y of shape (n,); got {x.shape}, {y.shape}.")
    if not np.all(np.isin(y, (-1.0, 1.0))):
        raise ValueError("labels y must be −1 or +1.")
    if not (math.isfinite(v) and v > 0):
        raise ValueError(f"`v` must be > 0; got {v!r}.")
    if not (isinstance(k, int) and k >= 1):
        raise ValueError(f"`k` must be an integer ≥ 1; got {k!r}.")
    if not 0 <= slope < 1:
        raise ValueError(f"the leaky slope α must lie in [0, 1); got {slope!r}.")
    return x, y


def nar_constraint_matrix(x, y, cw, cu, *, v: float, k: int, slope: float) -> np.ndarray:
    """A (n, 2d) with (A z)_i = y_i N_W(x_i) for a perfectly clustered W = (w, u) with the
    sign pattern sign(w·x_i) = cw_i, sign(u·x_i) = cu_i (an NAR, §6.1).

    σ(p) = p if cw_i = +1 and αp if cw_i = −1, so y_i N = y_i v k (s^w_i w·x_i − s^u_i u·x_i)
    with s^w_i = 1 or α by cw_i, s^u_i likewise by cu_i.
    """
    x, y = _check(x, y, v, k, slope)
    cw = np.broadcast_to(np.asarray(cw, dtype=np.float64), y.shape)
    cu = np.broadcast_to(np.asarray(cu, dtype=np.float64), y.shape)
    sw = np.where(cw > 0, 1.0, slope)[:, None]
    su = np.where(cu > 0, 1.0, slope)[:, None]
    return v * k * np.concatenate([y[:, None] * sw * x, -y[:, None] * su * x], axis=1)


def par_constraint_matrix(x, y, *, v: float, k: int, slope: float) -> np.ndarray:
    """A (n, 2d) with (A z)_i = the PAR margin of point i at z = (w, u) (App. G.2).

    Row i: y_i = +1 → v k (x_i, −α x_i); y_i = −1 → v k (−α x_i, x_i). The NAR matrix with
    c^w = y, c^u = −y.
    """
    y = np.asarray(y, dtype=np.float64)
    return nar_constraint_matrix(x, y, y, -y, v=v, k=k, slope=slope)


def _qp_min_norm(a: np.ndarray, weight: float) -> tuple[np.ndarray, np.ndarray, bool, str]:
    """min weight·‖z‖² s.t. A z ≥ 1, by its dual: max 1ᵀλ − ‖Aᵀλ‖²/(4·weight), λ ≥ 0.

    The dual is a bound-constrained smooth problem; L-BFGS-B solves it, then the primal
    z = Aᵀλ/(2·weight) is polished with SLSQP. Returns (z, λ, success, message).
    """
    from scipy.optimize import minimize

    n, m = a.shape
    gram = a @ a.T / (4.0 * weight)

    # f(λ) = λᵀGλ − 1ᵀλ with G = AAᵀ/(4w); ∇f = 2Gλ − 1
    def f(lam):
        g = gram @ lam
        return float(lam @ g - lam.sum()), 2.0 * g - 1.0

    res = minimize(
        f,
        np.full(n, 1.0 / max(np.trace(gram), 1e-300)),
        jac=True,
        method="L-BFGS-B",
        bounds=[(0.0, None)] * n,
        options={"maxiter": 20_000, "ftol": 1e-15, "gtol": 1e-12},
    )
    lam = np.maximum(res.x, 0.0)
    z = a.T @ lam / (2.0 * weight)
    # polish the primal with SLSQP, from the dual's point made feasible by scaling
    m_min = float(np.min(a @ z)) if z.any() else 0.0
    z_start = z / m_min if m_min > 0 else z
    pol = minimize(
        lambda zz: (weight * zz @ zz, 2.0 * weight * zz),
        z_start,
        jac=True,
        method="SLSQP",
        constraints=[{"type": "ineq", "fun": lambda zz: a @ zz - 1.0, "jac": lambda zz: a}],
        options={"maxiter": 1000, "ftol": 1e-15},
    )
    # SLSQP often stops with "positive directional derivative" at machine precision; accept
    # any feasible point that is no worse (optimality is certified by the KKT residual).
    candidates = [c for c in (pol.x, z, z_start) if np.min(a @ c) >= 1 - 1e-8]
    if candidates:
        z = min(candidates, key=lambda c: float(c @ c))
    ok = bool(np.min(a @ z) >= 1 - 1e-8)
    msg = "solved (dual L-BFGS-B + SLSQP polish)" if ok else f"infeasible or failed: {res.message}"
    return z, lam, ok, msg


def solve_par(x, y, *, v: float = 1.0, k: int = 1, slope: float = 0.1) -> ParSolution:
    """Solve min k(‖w‖² + ‖u‖²) s.t. PAR margins ≥ 1 (Theorem 6.2, eq. 8).

    **Arguments:** `x` (n, d) (with a bias, pass the augmented inputs [x, 1]); `y` (n,) in
    {−1, +1}; `v` > 0, `k` ≥ 1, `slope` α ∈ [0, 1) as in the network.

    **Returns:** a `ParSolution`. `success` is False (with a message) if the constraints
    cannot be met, e.g. for data no PAR network separates.
    """
    y = np.asarray(y, dtype=np.float64)
    return solve_nar(x, y, y, -y, v=v, k=k, slope=slope)


def solve_nar(x, y, cw, cu, *, v: float = 1.0, k: int = 1, slope: float = 0.1) -> ParSolution:
    """The same convex problem for any NAR sign pattern (c^w, c^u) (App. F): min
    k(‖w‖² + ‖u‖²) s.t. the margins of `nar_constraint_matrix` ≥ 1. `in_par` of the result
    then says whether the solution has the sign pattern (c^w, c^u) it assumed.
    """
    x, y = _check(x, y, v, k, slope)
    cw = np.broadcast_to(np.asarray(cw, dtype=np.float64), y.shape)
    cu = np.broadcast_to(np.asarray(cu, dtype=np.float64), y.shape)
    d = x.shape[1]
    a = nar_constraint_matrix(x, y, cw, cu, v=v, k=k, slope=slope)
    z, lam, ok, msg = _qp_min_norm(a, float(k))
    w, u = z[:d], z[d:]
    margins = a @ z
    active = margins <= 1 + 1e-6
    if active.any():
        lam_a, *_ = np.linalg.lstsq(a[active].T, 2 * k * z, rcond=None)
        kkt = float(np.linalg.norm(2 * k * z - a[active].T @ lam_a) / np.linalg.norm(2 * k * z))
        if np.any(lam_a < -1e-8 * np.max(np.abs(lam_a))):
            kkt = max(kkt, float(-np.min(lam_a) / np.max(np.abs(lam_a))))
    else:
        kkt = float("inf")
    nw, nu = float(np.linalg.norm(w)), float(np.linalg.norm(u))
    sep = w - u
    consistent = bool(np.all(cw * (x @ w) > 0) and np.all(cu * (x @ u) > 0))
    return ParSolution(
        w=w,
        u=u,
        w_hat=w / nw if nw > 0 else w,
        u_hat=u / nu if nu > 0 else u,
        delta_w=nw,
        delta_u=nu,
        boundary=sep / np.linalg.norm(sep),
        objective=float(k * (z @ z)),
        margins=margins,
        in_par=consistent,
        kkt_residual=kkt,
        success=ok,
        message=msg,
    )


def svm_through_origin(x, y) -> np.ndarray:
    """Hard-margin SVM without bias: argmin ‖w‖² s.t. y_i w·x_i ≥ 1."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    z, _, ok, msg = _qp_min_norm(y[:, None] * x, 1.0)
    if not ok:
        raise ValueError(f"the data are not separable through the origin ({msg}).")
    return z


def symmetric_solution(x, y, *, v: float = 1.0, k: int = 1, slope: float = 0.1):
    """Closed form for data closed under (x, y) → (−x, −y): w = w_SVM/((1 + α) v k), u = −w.

    Keep only one of each antipodal pair or all points: the SVM is the same.
    """
    x, y = _check(x, y, v, k, slope)
    w = svm_through_origin(x, y) / ((1.0 + slope) * v * k)
    return w, -w


def direction_agreement(w_pred, u_pred, w_learned, u_learned) -> dict:
    """Cosines cos(ŵ_pred, ŵ_learned), cos(û_pred, û_learned) and the angle (degrees)
    between the predicted boundary normal w − u and the learned one w̄ − ū."""

    def cos(a, b):
        a, b = np.asarray(a, float), np.asarray(b, float)
        return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))

    cb = cos(np.asarray(w_pred) - u_pred, np.asarray(w_learned) - u_learned)
    return {
        "cos_w": cos(w_pred, w_learned),
        "cos_u": cos(u_pred, u_learned),
        "boundary_angle_deg": math.degrees(math.acos(min(1.0, max(-1.0, cb)))),
        "norm_ratio_pred": float(np.linalg.norm(w_pred) / np.linalg.norm(u_pred)),
        "norm_ratio_learned": float(np.linalg.norm(w_learned) / np.linalg.norm(u_learned)),
    }
