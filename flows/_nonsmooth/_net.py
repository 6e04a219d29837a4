"""The static data every part of the event loop shares: the pairs' layout, the run's
settings, the activation's kink tables (`Net`, built once per trace), and the constants
that tune the switching logic."""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from .._errors import ConfigError
from .._solve.problem import Problem

#: Largest |z − c|/scale allowed for a pair at a located switch (the switching certificate;
#: a well-located switch has ~1e-15): beyond it a switch was located late or missed.
SWITCH_RESIDUAL_MAX = 1e-6

#: Rate (per unit of the solver's clock s) at which a sliding pair that drifted off its kink
#: by integration error is brought back (Baumgarte-type stabilization of the sliding mode).
SLIDING_RETURN = 1.0

#: Relative tolerance on a sliding pair's λ at the ends of its box [s_left, s_right]: the
#: decision accepts λ within half of it as inside, the leave-event fires beyond all of it.
BOX_TOL = 1e-8

#: Consecutive events whose Filippov decision did not settle (the minimum-norm fallback
#: taken) before the run stops: several coupled kinks the decision cannot resolve. Each
#: such event costs many equivalent-control solves, so waiting for the event-storm window
#: would take minutes to report what a few events already show.
UNRESOLVED_RUN = 25

#: Damping of the least-squares solves of the sliding systems, relative to the system's
#: largest entry: x = Jᵀ(JJᵀ + μI)⁻¹r with √μ = DAMPING·max|J|. Where kink constraints are
#: redundant (a sample dead in one layer holds the next layer's pairs on their kinks, their
#: normals multiples of the first layer's) J is singular but the system consistent, and
#: this is its minimum-norm solution; where J is well conditioned it is J⁻¹r to
#: (DAMPING·cond J)².
DAMPING = 1e-8

#: Newton's method for the sliding pairs' λ stops (`sliding_jacobian`, the decision's
#: `_equivalent_control_k`) once every residual ż + κ(z − c) is below this fraction of the
#: largest |ż| over all pairs: the decision resolves ż to 1e-10 of it, and where ż is affine
#: in λ (one hidden layer) the first step is exact and the rest would only move λ by
#: rounding, at one Jacobian (a tangent per sliding pair) each.
NEWTON_RESIDUAL = 1e-13

#: A pair is held on its kink by the sliding pairs (`slaved`) when its rate of change along
#: a random direction tangent to their kinks is below this fraction of that along the
#: direction itself (exactly zero in exact arithmetic; an independent pair gives O(1)).
SLAVED_RATIO = 1e-8


class Stop(enum.IntEnum):
    """Why the event loop stopped (its carry's `code`, an int32 under JIT: the members are
    ints, so `jnp.where(cond, Stop.STORM, code)` traces as before)."""

    OK = 0  # reached t1 (or a stop event)
    MAX_STEPS = 1  # max_steps or max_events
    STEP_COLLAPSED = 2  # h < 1e-14·|s|
    NONFINITE = 3  # a NaN/Inf state
    STORM = 4  # storm_window switching events within storm_span·max(1, t)
    OUT_OF_SLOTS = 5  # more pairs at a kink or sliding than the slots hold (resumed larger)
    UNDECIDED = 6  # UNRESOLVED_RUN events in a row whose Filippov decision did not settle


@dataclasses.dataclass(frozen=True)
class Layout:
    """Where each layer's pre-activations (n, units) sit in the flat vector of pairs."""

    names: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    offsets: tuple[int, ...]

    @property
    def size(self) -> int:
        return self.offsets[-1] + math.prod(self.shapes[-1]) if self.names else 0

    def decode(self, j: int) -> dict:
        """Layer, sample and unit of pair `j`."""
        for name, shape, off in zip(self.names, self.shapes, self.offsets, strict=True):
            size = math.prod(shape)
            if off <= j < off + size:
                i, u = divmod(j - off, shape[-1])
                return {"layer": name, "sample": int(i), "unit": int(u)}
        return {"layer": "?", "sample": -1, "unit": -1}


def layout_of(problem: Problem) -> Layout:
    """The layout of the problem's pairs, read from one abstract forward pass."""
    names, shapes = [], []

    def record(name, z):
        names.append(name)
        shapes.append(tuple(z.shape))
        return z

    jax.eval_shape(lambda th: problem.model.forward(th, problem.x, record), problem.theta0)
    offsets, off = [], 0
    for shape in shapes:
        offsets.append(off)
        off += math.prod(shape)
    if len(set(names)) != len(names):
        raise ConfigError(f"the model's `forward` names a layer twice: {names}.")
    return Layout(tuple(names), tuple(shapes), tuple(offsets))


@dataclasses.dataclass(frozen=True)
class Settings:
    """The compile-time settings of one loop (hashable: part of the compile key). The
    tolerances are not among them: they are run-time values (`Net.rtol`, `Net.atol`), so
    a run at other tolerances (a companion solve, a tolerance sweep) reuses the program."""

    clock: str
    max_steps: int
    max_events: int
    max_sliding: int
    max_candidates: int
    kink_tol: float
    storm_window: int
    storm_span: float
    observables: Callable
    n_save: int
    n_psave: int
    error_norm: str = "rms"


@dataclasses.dataclass(frozen=True, eq=False)
class Net:
    """Everything the loop's functions share within one trace: the problem, its layout and
    settings, and the activation's kink tables as arrays of the problem's dtype.

    Piece p of the activation spans (lo[p], hi[p]) with σ(z) = a[p] + s[p]·z there; kink k
    sits at c[k] with value vc[k] (so piece k is left of kink k, piece k + 1 right of it).
    `layer_of[j]` is the layer of pair j; M and C are the sliding and candidate slots, P
    the number of pairs. `rtol`, `atol`: the step controller's tolerances, traced scalars
    (arguments of the compiled loop)."""

    problem: Problem
    settings: Settings
    layout: Layout
    c: jax.Array
    vc: jax.Array
    a: jax.Array
    s: jax.Array
    lo: jax.Array
    hi: jax.Array
    layer_of: jax.Array
    rtol: jax.Array
    atol: jax.Array

    @classmethod
    def build(cls, problem: Problem, settings: Settings, layout: Layout, tols) -> Net:
        """The tables for `problem`; `tols` = (rtol, atol), arrays or numbers."""
        pl = problem.model.activation_kinks
        assert pl is not None  # checked by simulate_nonsmooth
        c_np, vc_np, a_np, s_np = pl.tables()
        dtype = problem.dtype
        c = jnp.asarray(c_np, dtype)
        vc = jnp.asarray(vc_np, dtype)
        a = jnp.asarray(a_np, dtype)
        s = jnp.asarray(s_np, dtype)
        lo = jnp.concatenate([jnp.array([-jnp.inf], dtype), c])
        hi = jnp.concatenate([c, jnp.array([jnp.inf], dtype)])
        layer_of = np.concatenate(
            [np.full(math.prod(sh), i) for i, sh in enumerate(layout.shapes)]
        ).astype(np.int32)
        rtol, atol = (jnp.asarray(v, dtype) for v in (tols[0], tols[1]))
        return cls(
            problem, settings, layout, c, vc, a, s, lo, hi, jnp.asarray(layer_of), rtol, atol
        )

    @property
    def dtype(self):
        return self.problem.dtype

    @property
    def n_kinks(self) -> int:
        return self.c.shape[0]

    @property
    def n_layers(self) -> int:
        return len(self.layout.names)

    @property
    def M(self) -> int:
        return self.settings.max_sliding

    @property
    def C(self) -> int:
        return self.settings.max_candidates

    @property
    def P(self) -> int:
        return self.layout.size

    @property
    def tiny(self):
        return jnp.finfo(self.dtype).tiny

    @property
    def eps(self):
        return jnp.finfo(self.dtype).eps
