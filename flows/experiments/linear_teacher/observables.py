# ruff: noqa: F722
"""Observables of the linear-teacher paper, computed inside the solve (jitted).

`teacher_observables(...)` returns a function (problem, θ, t) → dict for `flows.simulate`
(any clock); `clustering_summary` evaluates the same quantities once, in
NumPy-friendly form, for a given θ (figures, SGD results, tests).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from flows import ConfigError
from reduced.linear_teacher import smoothed_margin

__all__ = [
    "DESCRIPTIONS",
    "teacher_observables",
    "clustering",
    "linear_region_outside",
    "LOG2",
]

#: One line per observable of `teacher_observables`: its formula and what it means (the
#: `flows simulate linear-teacher` report lists them beside their final values).
DESCRIPTIONS: dict[str, str] = {
    "w_bar": "w̄ = mean of the w neurons (the positive type)",
    "u_bar": "ū = mean of the u neurons (the negative type)",
    "r": "r = max(max_i ‖w⁽ⁱ⁾ − w̄‖, max_i ‖u⁽ⁱ⁾ − ū‖): spread of each type around its "
    "mean (Theorem 5.1: neurons cluster)",
    "r_rel": "r / ‖w̄ − ū‖: the spread relative to the separation of the two means",
    "max_angle_w": "largest angle between two w neurons, in radians (App. D.3)",
    "max_angle_u": "largest angle between two u neurons, in radians (App. D.3)",
    "frac_outside": "share of training points with |(w̄ − ū)·x| < 2r‖x‖: outside Theorem "
    "5.1's linear region",
    "frac_outside_test": "the same share on the test points",
    "sign_agreement": "share of training points where sign N(x) = sign((w̄ − ū)·x): the "
    "network agrees with its linear part",
    "thm51_violations": "points inside the linear region where the signs differ (Theorem 5.1: "
    "0 whenever α > 0)",
    "in_nar": "1 when W is in a NAR(β) (§6.1: on every point all neurons of a type on one "
    "side with margin β), else 0",
    "in_par": "1 when W is in the PAR(β) (§6.2: every neuron classifies like its type), else 0",
    "par_share": "share of neurons in the PAR (mean of par_share_w and par_share_u; App. I)",
    "par_share_w": "share of w neurons that classify like y on every training point",
    "par_share_u": "share of u neurons that classify like −y on every training point",
    "par_share_kink": "share of neurons that would be in the PAR but for points on their kink",
    "max_disagree": "largest number of points on which two neurons of one type disagree in "
    "sign (App. J; on-kink pairs not counted)",
    "on_kink_w": "pairs (w neuron, point) on the kink, |ŵ·x̂| ≤ kink_cos",
    "on_kink_u": "pairs (u neuron, point) on the kink, |û·x̂| ≤ kink_cos",
    "nar_margin": "min(β*_w, β*_u): the largest β for which W is in a NAR(β), in cosines "
    "ŵ·x̂ (≤ 0 when two neurons disagree on a point)",
    "margin": "γ = min_i y_i N(x_i) / ‖W‖: the normalized margin (> 0 once every point is fitted)",
    "smoothed_margin": "γ̃ = −log(exp(L_sum) − 1) / ‖W‖; NaN while L_sum ≥ log 2, where it is "
    "undefined (Assumption 6.1 not yet met)",
    "l_sum": "L_sum = Σ_i log(1 + e^{−y_i N(x_i)}): the summed logistic loss",
    "norm_W": "‖W‖: Frobenius norm of all the weights",
    "accuracy": "share of training points classified correctly",
    "accuracy_test": "share of test points classified correctly",
    "teacher_cos": "cos(w̄ − ū, w*): alignment of the network's linear part with the teacher",
}

LOG2 = math.log(2.0)


def clustering(w, u):
    """w̄, ū, r = max(max_i ‖w^(i) − w̄‖, max_i ‖u^(i) − ū‖) (Theorem 5.1)."""
    w_bar, u_bar = jnp.mean(w, axis=0), jnp.mean(u, axis=0)
    r = jnp.maximum(
        jnp.max(jnp.linalg.norm(w - w_bar, axis=1)), jnp.max(jnp.linalg.norm(u - u_bar, axis=1))
    )
    return w_bar, u_bar, r


def linear_region_outside(z, w_bar, u_bar, r):
    """Boolean per point: outside Theorem 5.1's linear region, |(w̄ − ū)·x| < 2r‖x‖."""
    return jnp.abs(z @ (w_bar - u_bar)) < 2.0 * r * jnp.linalg.norm(z, axis=1)


def _max_angle(w):
    """Largest angle (radians) between two neurons of one type."""
    nrm = jnp.linalg.norm(w, axis=1)
    wh = w / jnp.maximum(nrm, 1e-300)[:, None]
    cos = jnp.clip(wh @ wh.T, -1.0, 1.0)
    return jnp.max(jnp.arccos(cos))


def _max_disagree(p, off):
    """Largest number of points on which two neurons (columns of p = x·w) disagree in sign,
    not counting the points where either sits on its kink (`off`, same shape as p)."""
    pos = ((p > 0) & ~off).astype(jnp.float64)  # (n, k)
    neg = ((p < 0) & ~off).astype(jnp.float64)
    # disagreements between neurons a, b: Σ_i pos_ia neg_ib + neg_ia pos_ib
    dis = pos.T @ neg + neg.T @ pos
    return jnp.max(dis)


def nar_margin(c):
    """β* = min_i max(min_l c_il, −max_l c_il) for cosines c = ŵ^(l)·x̂_i (n, k): the largest β
    for which one sign per point puts every neuron of the type at ≥ β (the NAR margin,
    continuous; ≤ 0 when two neurons disagree on a point or one sits on its kink)."""
    return jnp.min(jnp.maximum(jnp.min(c, axis=1), -jnp.max(c, axis=1)))


def teacher_observables(
    *, beta: float = 0.0, x_test=None, y_test=None, teacher=None, kink_cos: float = 1e-6
):
    """Observables of the linear-teacher paper (§4–§6), for a `LeakyReLUNet` problem.

    **Arguments:**
    - `beta`: the β of the NAR / PAR tests (≥ 0), applied to normalized neurons ŵ^(l).
    - `x_test`, `y_test`: optional test set for the test linear-region fraction and accuracy.
    - `teacher`: optional teacher direction w* (in feature space) for the teacher cosine.
    - `kink_cos`: a neuron is *on the kink* of point i when |ŵ·x̂_i| ≤ `kink_cos` (the
      exact flow can keep it there: Filippov sliding); such pairs are counted apart.

    **Returns:** a function (problem, θ, t) → dict with
    - `w_bar`, `u_bar` (d′,), `r`, `r_rel` = r/‖w̄ − ū‖ (Theorem 5.1 and App. D.3),
      `max_angle_w`, `max_angle_u` (radians; App. D.3);
    - `frac_outside` / `frac_outside_test`: share of train / test points with
      |(w̄ − ū)·x| < 2r‖x‖ (outside Theorem 5.1's linear region);
    - `sign_agreement`: share of train points with sign N_W(x) = sign((w̄ − ū)·x);
      `thm51_violations`: points *inside* the linear region where the signs differ
      (Theorem 5.1 says 0 whenever α > 0);
    - `in_nar`, `in_par`: 1.0 if W is in some NAR(β) / in PAR(β) (§6.1–6.2), else 0.0;
      `par_share`, `par_share_w`, `par_share_u`: share of neurons that classify like y
      (w neurons) or like −y (u neurons) on every training point (App. I);
      `max_disagree`: the largest number of points on which two neurons of one type
      disagree (App. J), on-kink pairs not counted; `on_kink_w`, `on_kink_u`: pairs
      (neuron, point) on the kink; `nar_margin` = min(β*_w, β*_u), β* the continuous NAR
      margin of a type (`nar_margin`, in cosines ŵ·x̂); `par_share_kink`: share of neurons
      that would be in the PAR but for points on their kink;
    - `margin`: normalized margin γ = min_i y_i N(x_i)/‖W‖; `smoothed_margin`:
      γ̃ = −log(exp(L_sum) − 1)/‖W‖, L_sum = Σ_i ℓ(y_i N(x_i)); **NaN while
      L_sum ≥ log 2**, where γ̃ is undefined or ≤ 0 (Assumption 6.1 not yet met);
      `l_sum`; `norm_W` = ‖W‖ (Frobenius); `accuracy`, `accuracy_test`;
      `teacher_cos` = cos(w̄ − ū, w*) when `teacher` is given.
    """
    if not (math.isfinite(beta) and beta >= 0):
        raise ConfigError(f"`beta` must be ≥ 0 (e.g. 0 or 1e-3); got {beta!r}.")
    # equal arguments give the same function object: the observables are part of the
    # compiled loop's key, so a sweep over seeds (one teacher e₁) compiles once
    key = (float(beta), float(kink_cos), _array_key(x_test), _array_key(y_test))
    key += (_array_key(teacher),)
    if key not in _OBSERVABLES:
        _OBSERVABLES[key] = _teacher_observables(beta, x_test, y_test, teacher, kink_cos)
    return _OBSERVABLES[key]


#: `teacher_observables` functions by their arguments (a handful per process).
_OBSERVABLES: dict = {}


def _array_key(a):
    if a is None:
        return None
    a = np.ascontiguousarray(np.asarray(a, dtype=np.float64))
    return a.shape, a.tobytes()


def _teacher_observables(beta, x_test, y_test, teacher, kink_cos):
    xt = None if x_test is None else jnp.asarray(np.asarray(x_test, dtype=np.float64))
    yt = None if y_test is None else jnp.asarray(np.asarray(y_test, dtype=np.float64))
    ws = None if teacher is None else jnp.asarray(np.asarray(teacher, dtype=np.float64))

    def obs(problem, theta, t):
        model = problem.model
        x, y = problem.x, problem.y
        z = model.features(x)
        w, u = theta["w"], theta["u"]
        w_bar, u_bar, r = clustering(w, u)
        sep = w_bar - u_bar
        sep_norm = jnp.linalg.norm(sep)
        out_train = linear_region_outside(z, w_bar, u_bar, r)
        f = model(theta, x)
        lin = z @ sep
        agree = jnp.sign(f) == jnp.sign(lin)
        pw, pu = z @ w.T, z @ u.T  # (n, k)
        wn = jnp.maximum(jnp.linalg.norm(w, axis=1), 1e-300)
        un = jnp.maximum(jnp.linalg.norm(u, axis=1), 1e-300)
        pwh, puh = pw / wn, pu / un
        xn = jnp.maximum(jnp.linalg.norm(z, axis=1), 1e-300)[:, None]
        cw, cu = pwh / xn, puh / xn  # cosines ŵ·x̂
        kw, ku = jnp.abs(cw) <= kink_cos, jnp.abs(cu) <= kink_cos
        # NAR(β): per point, all neurons of a type on one side with margin β
        nar_w = jnp.all((jnp.min(pwh, axis=1) >= beta) | (jnp.max(pwh, axis=1) <= -beta))
        nar_u = jnp.all((jnp.min(puh, axis=1) >= beta) | (jnp.max(puh, axis=1) <= -beta))
        par_w_neuron = jnp.all(y[:, None] * pwh >= beta, axis=0) & jnp.all(y[:, None] * pw > 0, 0)
        par_u_neuron = jnp.all(-y[:, None] * puh >= beta, axis=0) & jnp.all(-y[:, None] * pu > 0, 0)
        # would be in the PAR if the on-kink points were not counted
        par_w_kink = ~par_w_neuron & jnp.all((y[:, None] * pw > 0) | kw, 0) & jnp.any(kw, 0)
        par_u_kink = ~par_u_neuron & jnp.all((-y[:, None] * pu > 0) | ku, 0) & jnp.any(ku, 0)
        q = y * f
        l_sum = jnp.sum(jnp.logaddexp(0.0, -q))
        norm_w = jnp.sqrt(jnp.sum(w * w) + jnp.sum(u * u))
        gamma_s = jnp.where(
            l_sum < LOG2, smoothed_margin(jnp.minimum(l_sum, LOG2), norm_w), jnp.nan
        )
        res = {
            "w_bar": w_bar,
            "u_bar": u_bar,
            "r": r,
            "r_rel": r / sep_norm,
            "max_angle_w": _max_angle(w),
            "max_angle_u": _max_angle(u),
            "frac_outside": jnp.mean(out_train.astype(jnp.float64)),
            "sign_agreement": jnp.mean(agree.astype(jnp.float64)),
            "thm51_violations": jnp.sum((~out_train & ~agree).astype(jnp.float64)),
            "in_nar": (nar_w & nar_u).astype(jnp.float64),
            "in_par": (jnp.all(par_w_neuron) & jnp.all(par_u_neuron)).astype(jnp.float64),
            "par_share_w": jnp.mean(par_w_neuron.astype(jnp.float64)),
            "par_share_u": jnp.mean(par_u_neuron.astype(jnp.float64)),
            "par_share": 0.5
            * (
                jnp.mean(par_w_neuron.astype(jnp.float64))
                + jnp.mean(par_u_neuron.astype(jnp.float64))
            ),
            "max_disagree": jnp.maximum(_max_disagree(pw, kw), _max_disagree(pu, ku)),
            "on_kink_w": jnp.sum(kw).astype(jnp.float64),
            "on_kink_u": jnp.sum(ku).astype(jnp.float64),
            "nar_margin": jnp.minimum(nar_margin(cw), nar_margin(cu)),
            "par_share_kink": 0.5
            * (jnp.mean(par_w_kink.astype(jnp.float64)) + jnp.mean(par_u_kink.astype(jnp.float64))),
            "margin": jnp.min(q) / norm_w,
            "smoothed_margin": gamma_s,
            "l_sum": l_sum,
            "norm_W": norm_w,
            "accuracy": jnp.mean((q > 0).astype(jnp.float64)),
        }
        if xt is not None:
            zt = model.features(xt)
            res["frac_outside_test"] = jnp.mean(
                linear_region_outside(zt, w_bar, u_bar, r).astype(jnp.float64)
            )
            if yt is not None:
                res["accuracy_test"] = jnp.mean((yt * model(theta, xt) > 0).astype(jnp.float64))
        if ws is not None:
            res["teacher_cos"] = sep @ ws / (sep_norm * jnp.linalg.norm(ws))
        return res

    return obs


def evaluate(problem, theta, **kwargs) -> dict:
    """The observables of `teacher_observables(**kwargs)` at one θ, as NumPy values."""
    fn = jax.jit(lambda th: teacher_observables(**kwargs)(problem, th, 0.0))
    return {k: np.asarray(v) for k, v in fn(theta).items()}
