"""Data of the deep-linear experiment: whitened inputs and a linear teacher with chosen
singular values, plus noise that the best linear map cannot fit."""

from __future__ import annotations

import dataclasses

import numpy as np

from flows import ConfigError, Dataset, from_arrays
from reduced import deep_linear as dl

__all__ = ["teacher_data"]


def teacher_data(
    d_in: int,
    d_out: int,
    n: int,
    singular_values,
    noise: float = 0.0,
    seed: int = 0,
) -> Dataset:
    """n samples y = W* x + ξ with whitened x, a teacher W* = U diag(s) Vᵀ and noise ξ.

    - x: Gaussian, then whitened exactly (`reduced.deep_linear.whiten`): (1/n) Σ x xᵀ = I.
    - W* (d_out × d_in): Haar-random U, V, singular values `singular_values` (at most
      min(d_in, d_out) of them).
    - ξ: Gaussian of standard deviation `noise` per output component, with its part that is
      linear in x removed (ξ ← ξ − x (1/n)Σ xξᵀ), so that Σ_yx = (1/n) Σ y xᵀ = W* exactly:
      the singular values of Σ_yx — the s_α of the closed forms — are the chosen ones, and
      the noise only raises the loss floor ½(tr Σ_yy − Σ s²) (needs n > d_in to be nonzero).

    **Returns:** a `flows.Dataset` with x (n, d_in), y (n, d_out) and `meta` holding the
    teacher, its singular values and the noise.
    """
    s = np.asarray(singular_values, dtype=np.float64)
    if s.ndim != 1 or s.size == 0 or s.size > min(d_in, d_out):
        raise ConfigError(
            f"`singular_values` must hold 1 … min(d_in, d_out) = {min(d_in, d_out)} values; "
            f"got {s.tolist()}."
        )
    if n < d_in:
        raise ConfigError(f"whitening needs n ≥ d_in = {d_in} samples; got n = {n}.")
    rng = np.random.default_rng(seed)
    x = np.asarray(dl.whiten(rng.standard_normal((n, d_in))))
    u = np.linalg.qr(rng.standard_normal((d_out, d_out)))[0]
    v = np.linalg.qr(rng.standard_normal((d_in, d_in)))[0]
    r = s.size
    teacher = (u[:, :r] * s[None, :]) @ v[:, :r].T
    xi = noise * rng.standard_normal((n, d_out))
    xi = xi - x @ (x.T @ xi / n)  # remove the part a linear map of x would fit
    y = x @ teacher.T + xi
    meta = {
        "teacher": teacher.tolist(),
        "singular_values": s.tolist(),
        "noise": float(noise),
        "seed": int(seed),
    }
    data = from_arrays(x, y, name=f"deep-linear-teacher-{d_in}x{d_out}")
    # `from_arrays` reads a (n, 1) target as n scalars; the network's output is (n, d_out)
    # for every d_out, so y keeps that shape (else Σ_yx is a vector and ŷ − y broadcasts)
    return dataclasses.replace(data, y=np.asarray(data.y).reshape(n, d_out), meta=meta)
