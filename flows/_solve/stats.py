"""Typed solve statistics: `SolveStats` with a `Result` code, how a failed solve is
classified (`failure_reason`, `advice`), and the accuracy certificate.

`SolveStats` is also a read-only mapping over its JSON form — the keys and values that
`Trajectory.stats` has always had (`stats["result"]`, `stats["vf_evals"]`, …) and that
saved files hold — so code reading `traj.stats["steps"]` keeps working; new code reads
the typed attributes (`traj.stats.steps`, `traj.stats.result is Result.successful`).
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Iterator, Mapping
from typing import Any

import diffrax
import jax
import jax.numpy as jnp
import numpy as np

from .._trees import all_finite, tree_sq_norm
from .significance import unresolved

__all__ = [
    "BLOWUP_FACTOR",
    "CERTIFICATE_FACTOR",
    "Result",
    "SolveStats",
    "advice",
    "certificate",
    "describe_certificate",
    "failure_reason",
]


class Result(enum.Enum):
    """How a solve ended (compare diffrax's `RESULTS`). `ok` for `successful` and
    `event_stopped`; every other member is a failure, described in `SolveStats.reason`."""

    successful = "successful"
    #: the `stop` condition was met: the run ends there, as asked
    event_stopped = "event_stopped"
    max_steps_reached = "max_steps_reached"
    #: far more rejected than accepted steps: the flow is stiff for this solver
    step_size_collapsed = "step_size_collapsed"
    #: NaN/Inf in the state, the gradient, or the vector field at trial stages
    nonfinite = "nonfinite"
    #: ‖θ‖ grew without bound: the ODE's solution escapes in finite time
    blow_up = "blow_up"
    #: loss clock: L underflowed to 0 (or overflowed), so dt/ds = 1/L is not finite
    clock_overflow = "clock_overflow"
    #: loss clock: the loss stopped decaying towards 0 (a positive minimum)
    loss_stalled = "loss_stalled"
    #: loss clock: a segment ended before the physical save time it was integrating to
    clock_short = "clock_short"
    #: gradient descent: the loss became non-finite or ended above L(0)
    diverged = "diverged"
    #: another failure code of the solver (named in `reason`)
    solver_failed = "solver_failed"

    @property
    def ok(self) -> bool:
        return self in (Result.successful, Result.event_stopped)


#: Optional fields of `SolveStats` that its mapping view holds when they are not None.
_OPTIONAL = ("vf_evals_counted_by", "max_loss_rise", "segments", "batch_wall_s", "batch_size")


@dataclasses.dataclass(frozen=True)
class SolveStats(Mapping):
    """Statistics of one run (a flow, a batch member, or gradient descent).

    **Fields:**
    - `result` (`Result`) and `reason`: a human sentence ('successful'; the failure and
      its numbers; where an event stopped the run).
    - `t_reached`: physical time the run reached. `steps`, `accepted_steps`,
      `rejected_steps`: the solver's step counts (gradient descent: its steps).
    - `vf_evals`: vector-field (gradient) evaluations, or None when not counted;
      `vf_evals_counted_by`: how they were counted (None where the producer does not say).
    - `compile_s`, `wall_s`: compilation and run wall time.
    - `stopped_at`: physical time where a `stop` event ended the run, else None;
      `stop_supported`: whether the solve could stop on an event (simulate's physical and
      log clocks; the mapping view then holds `stopped_at`, NaN when not stopped).
    - `max_loss_rise` (gradient descent), `segments` (loss clock: save-time segments
      integrated), `batch_wall_s`, `batch_size` (batched solves): None where they do not
      apply.
    - `extra`: the solver's own counts (RKC2: `jvp_evals`, `spectral_radius`,
      `last_stages`, `nonstiff_steps`; the non-smooth flow: `events`, `crossings`, …, and
      `slot_growth`, a list of {t, max_sliding, max_candidates}), JSON-serializable.
    - `certificate`: the energy-identity certificate of a flow (`certificate`), or None.
    - `resolution`: the final loss against the error it cannot be known below
      (`flows._solve.significance.resolution`: `quantity`, `value`, `floor`, `t`, `resolved`),
      or None where not measured. `resolved` False means the number has no significant
      digit; `SolveStats.resolved` reads it.
    - `resolutions`: the same record for each observable at the last save, by name (a
      vector's components as `b[2]`; `flows._solve.significance.observable_resolutions`),
      or None where not measured. An observable with no floor (it is computed from t, is
      integer-valued, or is not a function of θ at the save, as `energy`) has `floor`
      NaN, `resolved` None and a `reason`; an error measure the observables function
      names (`error_measures`) keeps its floor, with `resolved` None. `SolveStats.unresolved`
      lists the numbers, the loss among them, that have no significant digit.

    **Mapping view:** `stats[key]` reads the JSON form (`to_dict`): the keys above that
    apply, `result` as the text older results carry ('successful' for a run that succeeded
    or was stopped by its event, else `reason`), `vf_evals` −1 when not counted,
    `stopped_at` NaN when not stopped, then `extra`'s keys, then `certificate`.
    """

    result: Result
    reason: str
    t_reached: float
    steps: int
    accepted_steps: int
    rejected_steps: int
    vf_evals: int | None
    compile_s: float
    wall_s: float
    stopped_at: float | None = None
    stop_supported: bool = False
    vf_evals_counted_by: str | None = None
    max_loss_rise: float | None = None
    segments: int | None = None
    batch_wall_s: float | None = None
    batch_size: int | None = None
    extra: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    certificate: Mapping[str, Any] | None = None
    resolution: Mapping[str, Any] | None = None
    resolutions: Mapping[str, Mapping[str, Any]] | None = None

    def __post_init__(self):
        if not isinstance(self.result, Result):
            raise TypeError(f"`result` must be a Result; got {self.result!r}.")
        object.__setattr__(self, "extra", dict(self.extra))
        if self.certificate is not None:
            object.__setattr__(self, "certificate", dict(self.certificate))
        if self.resolution is not None:
            object.__setattr__(self, "resolution", dict(self.resolution))
        if self.resolutions is not None:
            records = {k: dict(v) for k, v in self.resolutions.items()}
            object.__setattr__(self, "resolutions", records)

    @property
    def ok(self) -> bool:
        """The run succeeded (or ended at its stop event)."""
        return self.result.ok

    @property
    def resolved(self) -> bool | None:
        """Whether the final loss is larger than the error it cannot be known below (None
        where that was not measured)."""
        return None if self.resolution is None else bool(self.resolution["resolved"])

    @property
    def unresolved(self) -> list[dict]:
        """The reported numbers that have no significant digit — the final loss, then the
        observables at the last save — as their records (`resolution`: `quantity`,
        `value`, `floor`, `t`, …; `flows._solve.significance.describe_unresolved` says each
        in a sentence). Empty when every measured number is resolved or none was
        measured."""
        return unresolved([self.resolution, *(self.resolutions or {}).values()])

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (what `Trajectory.to_dataset` saves as the `stats` attribute)."""
        d: dict[str, Any] = {
            "result": "successful" if self.result.ok else self.reason,
            "t_reached": self.t_reached,
            "steps": self.steps,
            "accepted_steps": self.accepted_steps,
            "rejected_steps": self.rejected_steps,
            "vf_evals": -1 if self.vf_evals is None else self.vf_evals,
            "compile_s": self.compile_s,
            "wall_s": self.wall_s,
        }
        if self.stop_supported:
            d["stopped_at"] = math.nan if self.stopped_at is None else self.stopped_at
        for key in _OPTIONAL:
            if getattr(self, key) is not None:
                d[key] = getattr(self, key)
        d.update(self.extra)
        if self.certificate is not None:
            d["certificate"] = dict(self.certificate)
        if self.resolution is not None:
            d["resolution"] = dict(self.resolution)
        if self.resolutions is not None:
            d["resolutions"] = {k: dict(v) for k, v in self.resolutions.items()}
        return d

    def replace(self, **changes) -> SolveStats:
        """A copy with `changes` applied (the stats themselves are immutable)."""
        return dataclasses.replace(self, **changes)

    # read-only Mapping over the JSON form
    def __getitem__(self, key: str):
        return self.to_dict()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.to_dict())

    def __len__(self) -> int:
        return len(self.to_dict())

    __hash__ = None  # type: ignore[assignment]  # holds dicts; compared by value


#: Accuracy certificate of a flow run: along an exact flow L(0) − L(t) = ∫‖∇L‖² and L is
#: non-increasing. A solve meeting its tolerances keeps both within a small multiple of rtol
#: times the loss over the window each covers; beyond `CERTIFICATE_FACTOR` times that the
#: run is not the flow it claims to be.
CERTIFICATE_FACTOR = 100.0


def certificate(observables: Mapping, rtol: float, roundoff_floor: float = 0.0) -> dict:
    """The energy-identity and monotone-loss certificate of a flow run.

    Each check is judged against the scale of the loss over the window it covers:
    the energy residual at save i (the window [t₀, tᵢ]) against
    `CERTIFICATE_FACTOR`·(rtol·max_{j≤i}|L_j| + `roundoff_floor`), and the rise of the
    loss between saves i and i+1 against `CERTIFICATE_FACTOR`·(rtol·max(|L_i|, |L_{i+1}|)
    + `roundoff_floor`). So a loss that climbs from 6 to 22 late in a run whose L(0) was
    2·10¹¹ fails (a bound on L(0)'s scale would pass it), and a run started at a
    minimiser (L(0) = 3·10⁻³⁵) is judged against the float64 round-off of its loss
    (`flows._solve.significance.loss_floors`), not against 100·rtol·L(0) alone.

    **Arguments:** `observables` with `loss` and `energy_residual` (leading axis: time);
    `rtol`, the solve's relative tolerance; `roundoff_floor`, the level below which float64
    cannot resolve the loss (absolute).

    **Returns:** a dict: `max_residual`, `max_rise` (largest increase of the saved loss),
    `bound` (the residual's bound at the end, `CERTIFICATE_FACTOR`·(rtol·max|L| + floor)),
    `rise_bound` (the bound at the worst rise, relative to it), `roundoff_floor`, and `ok`.
    """
    loss = np.asarray(observables["loss"], dtype=np.float64)
    res = np.asarray(observables["energy_residual"], dtype=np.float64)
    floor = float(roundoff_floor) if math.isfinite(roundoff_floor) else 0.0
    with np.errstate(invalid="ignore"):  # a failed run's loss may hold inf − inf
        scale = np.maximum.accumulate(np.abs(loss)) if len(loss) else loss
        res_bound = CERTIFICATE_FACTOR * (rtol * scale + floor)
        rise = np.diff(loss)
        rise_bound = CERTIFICATE_FACTOR * (
            rtol * np.maximum(np.abs(loss[:-1]), np.abs(loss[1:])) + floor
        )
    max_res = float(np.max(res)) if len(res) else 0.0
    res_ok = bool(np.all(res <= res_bound[: len(res)])) if len(res) else True
    bound = float(res_bound[-1]) if len(res_bound) else float("nan")
    if len(rise):
        with np.errstate(invalid="ignore"):  # a NaN or inf − inf rise fails
            excess = np.where(np.isnan(rise), np.inf, rise - rise_bound)
        worst = int(np.argmax(excess))
        rise_ok = bool(excess[worst] <= 0)
        max_rise = max(float(np.max(rise)), 0.0)
        rise_at = float(rise_bound[worst])
    else:
        max_rise, rise_ok, rise_at = 0.0, True, bound
    ok = bool(math.isfinite(max_res) and res_ok and rise_ok)
    return {
        "max_residual": max_res,
        "max_rise": max_rise,
        "bound": bound,
        "rise_bound": rise_at,
        "roundoff_floor": floor,
        "ok": ok,
    }


def describe_certificate(cert: Mapping) -> str:
    """One line for a failed certificate, with what to try."""
    if cert.get("switching_ok") is False:
        return (
            f"switching certificate failed: a located switch sat {cert['switch_residual']:.3g} "
            f"(relative) from its kink (bound {cert['switch_residual_bound']:.3g}) or "
            f"{cert['pattern_mismatch']:.0f} pairs were outside their pattern's piece at a "
            "save: a switch was located late or missed. Tighten rtol/atol."
        )
    rise_bound = cert.get("rise_bound", cert["bound"])
    return (
        f"accuracy certificate failed: energy-identity residual {cert['max_residual']:.3g} "
        f"(bound {cert['bound']:.3g}) and loss rise between saves {cert['max_rise']:.3g} "
        f"(bound {rise_bound:.3g}) must both stay within {CERTIFICATE_FACTOR:g}·(rtol × the "
        "loss over the window each covers + its float64 round-off). The solve did not "
        "follow the flow (a gradient flow's loss never rises): tighten rtol/atol, or "
        "rescale the problem if its loss is a difference of huge terms."
    )


#: A failed solve whose ‖θ‖ grew beyond this factor × max(‖θ(0)‖, 1) is reported as a
#: finite-time blow-up of the flow (not as stiffness: no solver can pass a blow-up time).
BLOWUP_FACTOR = 1e6


def failure_reason(
    problem, code, stats, theta_end, nonfinite: int = 0, n_evals: int = 0
) -> tuple[Result, str]:
    """Why a solve that ended with diffrax result `code` failed: a `Result` and a sentence.

    **Arguments:** `stats`, diffrax's solve statistics (`num_accepted_steps`, …);
    `theta_end`, the state reached; `nonfinite` of `n_evals` vector-field evaluations that
    returned NaN/Inf (host-callback count; 0 when not counted).
    """
    finite = all_finite(theta_end)
    if finite:
        g = problem.grad(theta_end)
        finite = all_finite(g)
    if finite:
        n_end = float(jnp.sqrt(tree_sq_norm(theta_end)))
        n_0 = float(jnp.sqrt(tree_sq_norm(problem.theta0)))
        if n_end > BLOWUP_FACTOR * max(n_0, 1.0):
            return Result.blow_up, (
                f"blow-up: ‖θ‖ grew from {n_0:.3g} to {n_end:.3g} (the flow leaves every "
                "bounded set in finite time)"
            )
        # On a gradient flow ‖θ(t) − θ(0)‖² ≤ t·(L(0) − L(t)): θ can only escape (one
        # parameter to infinity while ‖θ‖ is dominated by others) where L falls without bound
        l_0, l_end = float(problem.loss(problem.theta0)), float(problem.loss(theta_end))
        if math.isfinite(l_end) and l_0 - l_end > BLOWUP_FACTOR * max(abs(l_0), 1.0):
            return Result.blow_up, (
                f"blow-up: the loss fell from {l_0:.4g} to {l_end:.4g} and ‖θ‖ grew from "
                f"{n_0:.3g} to {n_end:.3g} (the loss is unbounded below along the flow, which "
                "leaves every bounded set in finite time)"
            )
    if not finite:
        return Result.nonfinite, "non-finite (NaN/Inf) state or gradient"
    if nonfinite:
        return Result.nonfinite, (
            f"non-finite (NaN/Inf) vector field in {nonfinite} of {n_evals} "
            "evaluations: trial steps leave the region where the loss is finite"
        )
    # Without a callback count: probe along the flow direction for a non-finite field just
    # ahead of the reached state (trial stages that fail there are rejected silently).
    for h in np.logspace(-12, 0, 25):
        ahead = jax.tree_util.tree_map(lambda p, gi, h=h: p - h * gi, theta_end, g)
        if not all_finite(problem.grad(ahead)):
            return Result.nonfinite, (
                f"non-finite (NaN/Inf) vector field a step h = {h:.1e} ahead of the reached "
                "state: trial steps leave the region where the loss is finite"
            )
    if code == diffrax.RESULTS.max_steps_reached:
        acc, rej = int(stats["num_accepted_steps"]), int(stats["num_rejected_steps"])
        if rej > acc:
            return (
                Result.step_size_collapsed,
                f"step size collapsed ({rej} rejected vs {acc} accepted steps)",
            )
        return Result.max_steps_reached, "max_steps reached"
    return Result.solver_failed, str(diffrax.RESULTS[code])


def advice(result: Result, implicit: bool) -> str:
    """What to try after a failed flow solve."""
    if result is Result.blow_up:
        return (
            "This is the ODE, not the solver: its solution escapes to infinity near the time "
            "reached. Shorten `t1` below it, or check that the loss is bounded below."
        )
    if result is Result.nonfinite:
        return (
            "Check the data and initialization for overflow; a smaller init scale or a "
            "tighter rtol may help."
        )
    if result is Result.step_size_collapsed:
        if implicit:  # already a stiff solver: naming it again would send the user in circles
            return (
                "The step size collapsed with an implicit solver too: loosen `rtol`, shorten "
                "`t1` below the time reached, or check the model and loss near that time."
            )
        return "The flow is stiff here: try solver='kvaerno5' (small problems) or a looser rtol."
    stiff = "" if implicit else " or a stiff solver ('kvaerno5', small problems)"
    return f"Increase `max_steps`, shorten `t1`, loosen `rtol`{stiff}."
