"""Discrete baselines on the same problems as the flow: gradient descent (forward Euler on
the flow, the papers' stand-in for it) and SGD.

SGD of Theorem 4.1 of the linear-teacher paper: epochs of sampling without replacement,
W_{t+1} = W_t − η ∇_W ℓ(y_{i_t} N_{W_t}(x_{i_t})), ℓ(q) = log(1 + e^{−q}), where each epoch
visits the n points once in an order drawn from a PRNG key. Theorem 4.1: for separable
data, any η > 0 and any initialization, the training loss L(W) = (1/n) Σ_i ℓ(y_i N(x_i))
reaches ε within M(n, ε) = C n⁴/ε² updates.
"""

from __future__ import annotations

import dataclasses
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import PRNGKeyArray

from .._errors import ConfigError, SolverError
from .._trees import tree_sq_norm
from .._validate import MAX_SAVES, MAX_STEPS, as_float, as_int, as_seed
from .arguments import (
    Observables,
    StopCondition,
    check_initial_state,
    check_n_save,
    check_observables,
    check_problem,
    check_save_memory,
    check_save_params,
    check_span,
    check_stop,
    describe_stop,
)
from .problem import Problem, check_params_like
from .stats import Result, SolveStats
from .trajectory import Trajectory, assemble_trajectory, flat_params, stack_params

__all__ = ["SGDResult", "gradient_descent", "sgd_to_epsilon"]


@eqx.filter_jit
def _gd_chunk(carry, n, prob, lr):
    """`n` steps of θ ← θ − η∇L(θ), accumulating η‖∇L‖² (module level: compiled once)."""

    def body(_, c):
        theta, energy = c
        g = prob.grad(theta)
        theta = jax.tree_util.tree_map(lambda p, gi: p - lr * gi, theta, g)
        return theta, energy + lr * tree_sq_norm(g)

    return jax.lax.fori_loop(0, n, body, carry)


@eqx.filter_jit
def _gd_chunk_stop(carry, n, prob, lr, stop, step0):
    """Up to `n` steps of θ ← θ − η∇L(θ) from step `step0`, ending after the first step at
    which `stop(prob, θ, t)` falls from > 0 to ≤ 0. `carry` = (θ, energy, stop value of the
    current θ); returns (carry, steps taken, whether the stop fired)."""

    def cond(c):
        (_, _, _), i, hit = c
        return (i < n) & ~hit

    def body(c):
        (theta, energy, g_prev), i, _ = c
        g = prob.grad(theta)
        theta = jax.tree_util.tree_map(lambda p, gi: p - lr * gi, theta, g)
        energy = energy + lr * tree_sq_norm(g)
        g_new = jnp.asarray(stop(prob, theta, (step0 + i + 1) * lr), dtype=energy.dtype)
        return (theta, energy, g_new), i + 1, (g_prev > 0) & (g_new <= 0)

    return jax.lax.while_loop(cond, body, (carry, jnp.asarray(0), jnp.asarray(False)))


@eqx.filter_jit
def _gd_stop_value(prob, theta, stop):
    return stop(prob, theta, jnp.asarray(0.0))


@eqx.filter_jit
def _gd_record(carry, t, prob, obs_fn):
    theta, energy = carry
    out = dict(obs_fn(prob, theta, t))
    out["loss"] = prob.loss(theta)
    out["energy"] = energy
    return out


def gradient_descent(
    problem: Problem,
    *,
    learning_rate: float,
    t1: float,
    n_save: int = 201,
    save_params: str = "ends",
    observables: Observables | None = None,
    throw: bool = True,
    stop: StopCondition | None = None,
) -> Trajectory:
    """Discrete gradient descent θ ← θ − η∇L(θ) (forward Euler with step η), the papers'
    stand-in for gradient flow; time t = η · steps.

    Runs round(t1/η) steps (at most `MAX_STEPS` = 10¹²), saving at `n_save` equally spaced
    step counts (rounded to whole steps, so save times are exact multiples of η). `energy`
    accumulates η·Σ‖∇L‖² (the Riemann sum of the energy identity).

    GD whose saved loss becomes non-finite, or ends above L(0), has diverged (η too large
    for the curvature it meets): with `throw=True` (default) that raises `SolverError`
    naming the time; with `throw=False` the run (up to the last finite save) is returned
    with `stats.result` = `Result.diverged` and `stats.reason` saying so.
    `stats.max_loss_rise` records the largest rise of the saved loss: a transient rise (a
    spike GD recovers from) is not divergence, but there GD does not follow the gradient
    flow.

    `stop` (as in `flows.simulate`): (problem, θ, t) → scalar, evaluated after every step;
    the run ends after the first step where it falls from > 0 to ≤ 0 (a run that starts at
    or below 0 is not stopped at t = 0). The trajectory then ends at that step's time
    (later save times dropped, the stop time appended with θ there as the last stored
    parameters), `stats.result` is `Result.event_stopped` and `stats.stopped_at` the time
    (None when not triggered). Without `stop` nothing changes (no extra evaluations).
    """
    problem = check_problem(problem)
    _, t1 = check_span(0.0, t1)
    check_save_params(save_params)
    learning_rate = as_float(
        "learning_rate", learning_rate, positive=True, hint="Try e.g. learning_rate=1e-3."
    )
    n_save = check_n_save(n_save)
    check_initial_state(problem)
    obs_fn, obs_bytes = check_observables(problem, observables)
    stop = check_stop(problem, stop)
    n_steps, save_steps, ts, pts_idx = _gd_schedule(t1, learning_rate, n_save, save_params)
    check_save_memory(problem, len(ts), len(pts_idx), obs_bytes)
    lr = jnp.asarray(learning_rate)

    def chunk(carry, n, prob):
        return _gd_chunk(carry, n, prob, lr)

    def rec(carry, t, prob):
        return _gd_record(carry, t, prob, obs_fn)

    carry = (problem.theta0, jnp.zeros((), dtype=problem.dtype))
    compile_s, scarry = _gd_compile(chunk, rec, carry, problem, lr, stop)
    start = time.perf_counter()
    run = _gd_steps(
        chunk, rec, carry, scarry, problem, lr, learning_rate, stop, save_steps, ts, pts_idx
    )
    records, thetas, save_steps, ts, pts_idx, stopped_at = run
    n_steps = int(save_steps[-1]) if stopped_at is not None else n_steps
    jax.block_until_ready(records[-1])
    wall_s = time.perf_counter() - start
    obs = {k: np.stack([np.asarray(r[k]) for r in records]) for k in records[0]}
    loss0 = float(problem.loss(problem.theta0))
    params = stack_params(thetas)
    loss = obs["loss"]
    result, reason, t_reached = Result.successful, "successful", float(ts[-1])
    if stopped_at is not None:
        result = Result.event_stopped
        reason = (
            f"stopped by the stop condition ({describe_stop(stop)}) at t = {stopped_at:.6g} "
            f"(step {n_steps})"
        )
    diverged = _gd_divergence(loss, loss0, ts, save_steps, learning_rate, throw)
    if diverged is not None:
        result, reason = Result.diverged, diverged
        if not np.isfinite(loss).all():  # keep the run up to the last finite save
            i = int(np.argmax(~np.isfinite(loss)))
            obs = {k: v[:i] for k, v in obs.items()}
            keep_p = np.asarray(pts_idx, dtype=int) < i
            params = {k: v[keep_p] for k, v in params.items()}
            pts_idx = np.asarray(pts_idx, dtype=int)[keep_p]
            ts = ts[:i]
            t_reached = float(ts[-1]) if i else 0.0
    stats = SolveStats(
        result=result,
        reason=reason,
        t_reached=t_reached,
        steps=n_steps,
        accepted_steps=n_steps,
        rejected_steps=0,
        vf_evals=n_steps,
        compile_s=compile_s,
        wall_s=wall_s,
        stopped_at=stopped_at,
        stop_supported=stop is not None,
        # GD is no gradient flow where its loss rises: the largest rise between saves
        max_loss_rise=max(float(np.max(np.diff(obs["loss"]))), 0.0)
        if len(obs["loss"]) > 1
        else 0.0,
    )
    config = {
        "method": f"gradient descent (lr={learning_rate})",
        "problem": problem.describe(),
        "learning_rate": learning_rate,
        "t1": n_steps * learning_rate,
        "save_params": save_params,
    }
    return assemble_trajectory(
        problem,
        times=ts,
        observables=obs,
        param_times=ts[np.asarray(pts_idx, dtype=int)],
        params=params,
        stats=stats,
        config=config,
        loss0=loss0,
    )


def _gd_steps(chunk, rec, carry, scarry, problem, lr, eta, stop, save_steps, ts, pts_idx):
    """GD's steps between its saves, recording at each: (records, stored θs, save steps,
    save times, stored-θ indices, stopped_at). Where `stop` fires, its step is the last
    save (later saves dropped, θ there stored) and `stopped_at` its time (else None)."""
    records, thetas = [], []
    keep = set(np.asarray(pts_idx, dtype=int).tolist())
    prev = 0
    for i, step in enumerate(save_steps):
        if step > prev and stop is None:
            carry = chunk(carry, jnp.asarray(int(step - prev)), problem)
            prev = int(step)
        elif step > prev:
            scarry, done, hit = _gd_chunk_stop(
                scarry, jnp.asarray(int(step - prev)), problem, lr, stop, jnp.asarray(prev)
            )
            carry = scarry[:2]
            if bool(hit):  # the stop fired: its step is the last save
                n_steps = prev + int(done)
                save_steps = np.append(save_steps[:i], n_steps)
                ts = save_steps * eta
                pts_idx = np.asarray(pts_idx, dtype=int)
                pts_idx = np.append(pts_idx[pts_idx < i], i) if len(pts_idx) else pts_idx
                records.append(rec(carry, jnp.asarray(ts[i]), problem))
                if i in set(pts_idx.tolist()):
                    thetas.append(carry[0])
                return records, thetas, save_steps, ts, pts_idx, n_steps * eta
            prev = int(step)
        records.append(rec(carry, jnp.asarray(ts[i]), problem))
        if i in keep:
            thetas.append(carry[0])
    return records, thetas, save_steps, ts, pts_idx, None


def _gd_compile(chunk, rec, carry, problem, lr, stop):
    """(seconds, the stop's carry or None): GD's programs compiled outside the timing."""
    start = time.perf_counter()
    scarry = None
    if stop is None:
        jax.block_until_ready(chunk(carry, jnp.asarray(0), problem))
    else:
        g0 = _gd_stop_value(problem, problem.theta0, stop)
        scarry = (*carry, jnp.asarray(g0, dtype=problem.dtype))
        jax.block_until_ready(
            _gd_chunk_stop(scarry, jnp.asarray(0), problem, lr, stop, jnp.asarray(0))
        )
    jax.block_until_ready(rec(carry, jnp.asarray(0.0), problem))
    return time.perf_counter() - start, scarry


def _gd_schedule(t1: float, learning_rate: float, n_save: int, save_params: str):
    """(steps, save steps, save times, indices of the saves that keep θ) of a GD run: the
    save times are whole multiples of η."""
    steps = t1 / learning_rate
    if not steps <= MAX_STEPS:  # also an overflow to inf
        raise ConfigError(
            f"gradient descent would take t1/η = {steps:.3g} steps (t1 = {t1:g}, η = "
            f"`learning_rate` = {learning_rate:g}); at most {MAX_STEPS:.0e} are supported. "
            "Use a larger learning rate or a shorter t1 (or flows.simulate, the flow itself)."
        )
    n_steps = int(round(steps))
    if n_steps < 1:
        raise ConfigError(f"`t1` = {t1} is shorter than one step of η = {learning_rate}.")
    save_steps = np.unique(np.round(np.linspace(0, n_steps, n_save)).astype(np.int64))
    ts = save_steps * learning_rate
    pts_idx = {"all": np.arange(len(ts)), "ends": np.array([0, len(ts) - 1]), "none": []}[
        save_params
    ]
    return n_steps, save_steps, ts, pts_idx


def _gd_divergence(loss, loss0, ts, save_steps, learning_rate, throw) -> str | None:
    """Why a GD run diverged (its saved loss non-finite, or ending above L(0)), or None;
    with `throw`, a `SolverError` naming the time instead."""
    nonfinite = ~np.isfinite(loss)
    # "above L(0)" by more than float64 can tell: the first save is L(0) as the compiled
    # run computes it (the eager `loss0` may differ in its last bits), plus its round-off
    start = float(loss[0]) if len(loss) and np.isfinite(loss[0]) else loss0
    above = loss[-1] > start + 8 * np.finfo(np.float64).eps * abs(start)
    if not (nonfinite.any() or above):
        return None
    i = int(np.argmax(nonfinite)) if nonfinite.any() else int(np.nanargmax(loss))
    reason = (
        f"diverged: loss {loss0:.4g} → {loss[i]:.4g} at t = {ts[i]:g} (step "
        f"{int(save_steps[i])}), ending at {loss[-1]:.4g}; η = {learning_rate:g} is too large"
    )
    if throw:
        raise SolverError(
            f"gradient descent {reason}. Try a smaller learning rate (e.g. η/10).",
            t_reached=float(ts[i]),
            reason="diverged",
        )
    return reason


@dataclasses.dataclass(frozen=True)
class SGDResult:
    """Outcome of `sgd_to_epsilon`.

    `updates`: the number of single-sample updates after which the training loss first
    was ≤ ε (0 if it already was; None if not reached within the budget). `epochs_run`,
    `final_loss`, `min_loss`, `epoch_losses` (loss at the end of every epoch run),
    `params` (θ at the stop), `wall_s`, and the settings.
    """

    updates: int | None
    epsilon: float
    learning_rate: float
    n: int
    epochs_run: int
    final_loss: float
    min_loss: float
    epoch_losses: np.ndarray
    params: dict
    wall_s: float

    @property
    def reached(self) -> bool:
        return self.updates is not None

    def to_dict(self) -> dict:
        return {
            "updates": self.updates,
            "epsilon": self.epsilon,
            "learning_rate": self.learning_rate,
            "n": self.n,
            "epochs_run": self.epochs_run,
            "final_loss": self.final_loss,
            "min_loss": self.min_loss,
            "wall_s": self.wall_s,
        }


def _run(problem, theta, key, eps, lr, max_epochs: int):
    """Jitted epochs: returns (θ, first update index with L ≤ ε or −1, epochs, losses)."""
    n = problem.x.shape[0]

    def sample_loss(th, xi, yi):
        return jnp.logaddexp(0.0, -yi * problem.model(th, xi[None])[0])

    grad_one = jax.grad(sample_loss)

    def epoch(carry):
        th, hit, ep, losses = carry
        order = jax.random.permutation(jax.random.fold_in(key, ep), n)

        def step(c, idx):
            th_, hit_, count = c
            g = grad_one(th_, problem.x[idx], problem.y[idx])
            th_ = jax.tree_util.tree_map(lambda p, gi: p - lr * gi, th_, g)
            count = count + 1
            loss = problem.loss(th_)
            hit_ = jnp.where((hit_ < 0) & (loss <= eps), count, hit_)
            return (th_, hit_, count), None

        (th, hit, _), _ = jax.lax.scan(step, (th, hit, ep * n), order)
        losses = losses.at[ep].set(problem.loss(th))
        return th, hit, ep + 1, losses

    def cond(carry):
        _, hit, ep, _ = carry
        return (hit < 0) & (ep < max_epochs)

    loss0 = problem.loss(theta)
    hit0 = jnp.where(loss0 <= eps, 0, -1)
    losses = jnp.full((max_epochs,), jnp.nan)
    return jax.lax.while_loop(cond, epoch, (theta, hit0, jnp.asarray(0), losses))


_run_jit = eqx.filter_jit(_run, donate="none")


def sgd_to_epsilon(
    problem: Problem,
    *,
    epsilon: float,
    learning_rate: float,
    key: PRNGKeyArray | int = 0,
    max_epochs: int = 10_000,
    theta0=None,
) -> SGDResult:
    """Run SGD (epochs without replacement) until the training loss is ≤ `epsilon`.

    **Arguments:**
    - `problem`: a logistic-loss problem with labels ±1 (`flows.make_problem(...,
      loss_fn=flows.logistic)`); its θ(0) is the start unless `theta0` is given (any init).
    - `epsilon` > 0: the target loss (the mean logistic loss, eq. 2).
    - `learning_rate` η > 0 (Theorem 4.1 holds for any η).
    - `key`: PRNG key (or int seed) for the epoch orders (fold_in(key, epoch)).
    - `max_epochs`: budget; the loss is evaluated after every update.

    **Returns:** an `SGDResult`; `updates` is the number of updates to reach ε (None if the
    budget ran out — compare with Theorem 4.1's M(n, ε) = C n⁴/ε²).
    """
    problem = check_problem(problem)
    epsilon = as_float("epsilon", epsilon, positive=True)
    learning_rate = as_float("learning_rate", learning_rate, positive=True)
    max_epochs = as_int(
        "max_epochs",
        max_epochs,
        minimum=1,
        maximum=MAX_SAVES,
        hint="The loss after every epoch is recorded, one number an epoch.",
    )
    y = np.asarray(problem.y)
    if not np.all(np.isin(y, (-1.0, 1.0))):
        raise ConfigError("SGD of Theorem 4.1 needs labels in {−1, +1}.")
    # a typed key or a legacy uint32 key array passes; a seed (any integer type) is checked
    typed = isinstance(key, jax.Array) and jnp.issubdtype(key.dtype, jax.dtypes.prng_key)
    if not (typed or np.ndim(key) == 1):
        key = jax.random.key(as_seed("key", key))
    theta = problem.theta0
    if theta0 is not None:
        theta = check_params_like("theta0", theta0, problem.theta0, "the problem's θ(0)")
    theta = jax.tree_util.tree_map(lambda v: jnp.asarray(v, dtype=jnp.float64), theta)
    start = time.perf_counter()
    th, hit, ep, losses = _run_jit(
        problem,
        theta,
        key,
        jnp.asarray(float(epsilon)),
        jnp.asarray(float(learning_rate)),
        max_epochs,
    )
    jax.block_until_ready(th)
    wall = time.perf_counter() - start
    hit, ep = int(hit), int(ep)
    losses = np.asarray(losses)[:ep]
    final = float(problem.loss(th))
    return SGDResult(
        updates=None if hit < 0 else hit,
        epsilon=float(epsilon),
        learning_rate=float(learning_rate),
        n=int(y.shape[0]),
        epochs_run=ep,
        final_loss=final,
        min_loss=float(np.nanmin(np.append(losses, final))),
        epoch_losses=losses,
        params=flat_params(th),
        wall_s=wall,
    )
