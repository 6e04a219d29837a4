"""SGD of Theorem 4.1 of the linear-teacher paper: epochs of sampling without replacement.

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

from ._errors import ConfigError
from ._problem import Problem
from ._validate import as_float, as_int, as_seed

__all__ = ["SGDResult", "sgd_to_epsilon"]


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
    epsilon = as_float("epsilon", epsilon, positive=True)
    learning_rate = as_float("learning_rate", learning_rate, positive=True)
    max_epochs = as_int("max_epochs", max_epochs, minimum=1)
    y = np.asarray(problem.y)
    if not np.all(np.isin(y, (-1.0, 1.0))):
        raise ConfigError("SGD of Theorem 4.1 needs labels in {−1, +1}.")
    # a typed key or a legacy uint32 key array passes; a seed (any integer type) is checked
    typed = isinstance(key, jax.Array) and jnp.issubdtype(key.dtype, jax.dtypes.prng_key)
    if not (typed or np.ndim(key) == 1):
        key = jax.random.key(as_seed("key", key))
    theta = problem.theta0 if theta0 is None else theta0
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
        params={k: np.asarray(v) for k, v in th.items()},
        wall_s=wall,
    )
