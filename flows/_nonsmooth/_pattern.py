"""The network under an activation pattern: every pair's σ replaced by the affine map of
its piece (or, sliding, by σ(z) = vc + λ(z − c) with its equivalent-control slope λ).

A pattern is a `Pattern` (a NamedTuple, so a pytree): `pat` = (piece, off, idx, kink, on, J,
lam0, kappa):

- `piece` (P,) int: each pair's piece; `off` (P,): an offset added to its margin (a pair
  that starts a segment on its edge gets a small positive margin; inf: held, see
  `_sliding.slaved`);
- M sliding slots: `idx` (M,) the pair in the slot, `kink` (M,) its kink, `on` (M,) whether
  the slot is used, `J` (M, M) ∂ż/∂λ at the step's start, `lam0` (M,) the slopes there;
- `kappa`: the sliding return rate on the solver's clock (`SLIDING_RETURN`/(dt/ds)).
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

from ._net import Net


class Pattern(NamedTuple):
    """The activation pattern of a segment (the module docstring names each field)."""

    piece: jax.Array
    off: jax.Array
    idx: jax.Array
    kink: jax.Array
    on: jax.Array
    J: jax.Array
    lam0: jax.Array
    kappa: jax.Array


def forward(net: Net, theta, A, S):
    """(network output, flat pre-activations z) with σ(z_j) = A_j + S_j z_j."""
    layout = net.layout
    zs = []

    def act(name, z):
        i = layout.names.index(name)
        off, shape = layout.offsets[i], layout.shapes[i]
        size = math.prod(shape)
        zs.append(z.reshape(-1))
        return A[off : off + size].reshape(shape) + S[off : off + size].reshape(shape) * z

    out = net.problem.model.forward(theta, net.problem.x, act)
    return out, jnp.concatenate(zs)


def loss_pat(net: Net, theta, A, S):
    return net.problem.loss_fn(forward(net, theta, A, S)[0], net.problem.y)


def preacts(net: Net, theta, A, S):
    return forward(net, theta, A, S)[1]


def affine(net: Net, pat, lam):
    """(A, S) of every pair: its piece's, or for a sliding pair the line through its kink
    with slope λ."""
    piece, _, sl_idx, sl_kink, sl_on = pat[:5]
    A, S = net.a[piece], net.s[piece]
    idx = jnp.where(sl_on, sl_idx, net.P)  # out of range: dropped
    S = S.at[idx].set(lam, mode="drop")
    A = A.at[idx].set(net.vc[sl_kink] - lam * net.c[sl_kink], mode="drop")
    return A, S


def box(net: Net, kink):
    """λ interval of a kink: (smaller, larger) of its two neighbouring slopes."""
    sl, sr = net.s[kink], net.s[kink + 1]
    return jnp.minimum(sl, sr), jnp.maximum(sl, sr)


def zdot_z(net: Net, theta, A, S):
    """(ż of every pair along the field, ∇L, z) under the affine maps (A, S)."""
    g = jax.grad(functools.partial(loss_pat, net))(theta, A, S)
    f = jax.tree_util.tree_map(jnp.negative, g)
    z, zd = jax.jvp(lambda th: preacts(net, th, A, S), (theta,), (f,))
    return zd, g, z


def zdot_all(net: Net, theta, A, S):
    zd, g, _ = zdot_z(net, theta, A, S)
    return zd, g


def layer_scales(net: Net, z):
    """Per-layer RMS of the pre-activations (the unit of `kink_tol`)."""
    sums = jax.ops.segment_sum(z * z, net.layer_of, num_segments=net.n_layers)
    counts = jnp.asarray([math.prod(s) for s in net.layout.shapes], net.dtype)
    return jnp.sqrt(sums / counts) + net.tiny


def sliding_mask(net: Net, on, idx):
    """(P,) the pairs that occupy a sliding slot."""
    P = net.P
    return jnp.zeros((P,), bool).at[jnp.where(on, idx, P)].set(True, mode="drop")


def initial_pattern(net: Net, theta0):
    """Every pair on the piece its z(θ₀) lies in, nothing sliding."""
    P, M, dtype = net.P, net.M, net.dtype
    piece = jnp.zeros((P,), jnp.int32)
    A, S = net.a[piece], net.s[piece]
    # preactivations of layer l depend on the pieces of layers < l: fix them layer by layer
    for _ in range(net.n_layers):
        z = preacts(net, theta0, A, S)
        piece = jnp.searchsorted(net.c, z, side="right").astype(jnp.int32)
        A, S = net.a[piece], net.s[piece]
    return Pattern(
        piece=piece,
        off=jnp.zeros((P,), dtype),
        idx=jnp.zeros((M,), jnp.int32),
        kink=jnp.zeros((M,), jnp.int32),
        on=jnp.zeros((M,), bool),
        J=jnp.eye(M, dtype=dtype),
        lam0=jnp.zeros((M,), dtype),
        kappa=jnp.zeros((), dtype),
    )
