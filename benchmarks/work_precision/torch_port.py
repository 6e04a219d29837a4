"""PyTorch port of the toolkit's benchmark objectives, for the torchdiffeq comparison.

The same objectives as `flows.make_problem` builds, on a flat parameter vector with the
layout of `jax.flatten_util.ravel_pytree(problem.theta0)` (dict leaves in sorted key
order, each raveled C-order), so the JAX and torch vector fields can be compared entry by
entry:

- two-layer net f(x) = Σ_k a_k tanh(w_k·x) (`flows.models.TwoLayer`, tanh, no bias) with
  the squared error R = 1/(2n) Σ_i (f(x_i) − y_i)² (`flows.squared_error`);
- the ±v leaky-ReLU net N(x) = v Σ_j σ(w_j·x) − v Σ_j σ(u_j·x), σ(z) = max(αz, z)
  (`flows.models.LeakyReLUNet`, no bias) with the mean logistic loss
  (1/n) Σ_i log(1 + exp(−y_i N(x_i))) (`flows.logistic`);
- the r-homogeneous net f_c(x) = ⟨W_c, x⟩^r + b_c (`flows.models.Homogeneous`) with the
  class-summed cross-entropy (k/N) Σ_x CE(f(x), y_x) of the bias-plateau paper's §4.

Everything is float64; data and θ(0) are copied from the JAX problem. The vector field
−∇L is computed by `torch.autograd.grad`. Imports torch only (no JAX), so the module is
importable wherever torch is; `port_problem` reads a `flows.Problem` by duck typing.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

import numpy as np
import torch

__all__ = ["TorchObjective", "port_problem", "odeint_dopri5"]


@dataclasses.dataclass
class TorchObjective:
    """L(θ) on a flat float64 θ, its vector field −∇L, and an evaluation counter."""

    loss: Callable[[torch.Tensor], torch.Tensor]
    theta0: torch.Tensor
    description: str
    n_evals: int = 0

    def vector_field(self, t, theta: torch.Tensor) -> torch.Tensor:
        """−∇L(θ) (the gradient-flow field; `t` is ignored). Counts one evaluation."""
        self.n_evals += 1
        with torch.enable_grad():
            th = theta.detach().requires_grad_(True)
            (g,) = torch.autograd.grad(self.loss(th), th)
        return -g

    def grad_numpy(self, theta: np.ndarray) -> np.ndarray:
        """∇L at a flat NumPy θ (for the tests)."""
        th = torch.tensor(np.array(theta, dtype=np.float64))
        return -self.vector_field(0.0, th).numpy()


def _layout(theta0: dict) -> list[tuple[str, tuple[int, ...], int, int]]:
    """(name, shape, start, stop) per leaf, in ravel_pytree's order (sorted dict keys)."""
    out, start = [], 0
    for name in sorted(theta0):
        shape = tuple(np.shape(theta0[name]))
        size = int(np.prod(shape))
        out.append((name, shape, start, start + size))
        start += size
    return out


def port_problem(problem) -> TorchObjective:
    """The torch objective of a `flows.Problem` (two-layer tanh + squared error, the
    leaky-ReLU ±v net + logistic loss, or the r-homogeneous net + class-summed
    cross-entropy). Raises `NotImplementedError` for anything else."""
    model = problem.model
    family = model.describe().get("family", "")
    loss_name = getattr(problem.loss_fn, "__name__", "")
    x = torch.tensor(np.array(problem.x, dtype=np.float64))  # copies (JAX arrays are read-only)
    y = torch.tensor(np.array(problem.y, dtype=np.float64))
    theta0 = {k: np.asarray(v, dtype=np.float64) for k, v in problem.theta0.items()}
    layout = _layout(theta0)
    flat0 = torch.as_tensor(np.concatenate([theta0[name].ravel() for name, *_ in layout]))

    def unpack(th):
        return {name: th[a:b].reshape(shape) for name, shape, a, b in layout}

    if family == "two-layer":
        if model.activation != "tanh" or model.bias:
            raise NotImplementedError("the torch port covers the tanh two-layer net without bias")
        if loss_name != "squared_error":
            raise NotImplementedError(f"two-layer port needs the squared error; got {loss_name}")

        def loss(th):
            p = unpack(th)
            f = torch.tanh(x @ p["w"].T) @ p["a"]
            return 0.5 * torch.mean((f - y) ** 2)

        desc = "two-layer tanh, R = 1/(2n) sum (f - y)^2"
    elif family.startswith("leaky-relu"):
        if model.bias:
            raise NotImplementedError("the torch port covers the leaky-ReLU net without bias")
        if loss_name != "logistic":
            raise NotImplementedError(f"leaky-ReLU port needs the logistic loss; got {loss_name}")
        slope, v = float(model.slope), float(model.v)

        def sigma(z):
            return torch.where(z >= 0, z, slope * z)  # as jnp.where: derivative 1 at z = 0

        def loss(th):
            p = unpack(th)
            out = v * (sigma(x @ p["w"].T).sum(1) - sigma(x @ p["u"].T).sum(1))
            return torch.mean(torch.logaddexp(torch.zeros_like(out), -y * out))

        desc = "leaky-ReLU ±v net, mean logistic loss"
    elif family == "r-homogeneous":
        if loss_name != "class_sum_cross_entropy":
            raise NotImplementedError(
                f"r-homogeneous port needs the class-summed cross-entropy; got {loss_name}"
            )
        r = int(model.r)
        labels = y.long()

        def loss(th):
            p = unpack(th)
            logits = (x @ p["W"].T) ** r + p["b"]
            k = logits.shape[-1]
            return k * torch.nn.functional.cross_entropy(logits, labels)

        desc = "r-homogeneous net, (k/N) sum_x CE"
    else:
        raise NotImplementedError(f"no torch port for model family {family!r}")
    return TorchObjective(loss=loss, theta0=flat0, description=desc)


def odeint_dopri5(obj: TorchObjective, t1: float, rtol: float, atol: float) -> dict:
    """Integrate dθ/dt = −∇L(θ) on [0, t1] with torchdiffeq's dopri5; θ(t1), evals, wall."""
    import torchdiffeq

    ts = torch.tensor([0.0, float(t1)], dtype=torch.float64)
    obj.vector_field(0.0, obj.theta0)  # warm-up (first autograd call allocates)
    obj.n_evals = 0
    start = time.perf_counter()
    with torch.no_grad():
        sol = torchdiffeq.odeint(
            obj.vector_field, obj.theta0, ts, method="dopri5", rtol=rtol, atol=atol
        )
    wall = time.perf_counter() - start
    return {"theta": sol[-1].numpy().copy(), "vf_evals": obj.n_evals, "wall_s": wall}
