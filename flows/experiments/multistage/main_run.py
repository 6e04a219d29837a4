"""The main run as the multi-stage checks read it (`MainRun`: observables on the
theorems' time τ and the stage times) and what the checks of every stage share: the
claims' statements and sources, grouped by stage as `check_run` marks them not
applicable; the constant hidden in '≲' and the finite-m tolerances; maxima over a window
of τ; the accuracy certificate (energy identity, monotone loss); and whether the
theorems' hypotheses hold (`theory_inapplicable`)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from flows import Check, Trajectory
from flows.claims import Constant
from flows.models import TwoLayer

from .config import LESSSIM_C, SOURCE, Config
from .data import Units

__all__ = [
    "THEOREM_CLAIMS",
    "DESCENT_CLAIMS",
    "DESCENT_RATIO_CLAIMS",
    "SECONDARY_LENGTH_CLAIM",
    "SECONDARY_CLAIMS",
    "W2_TP_CLAIM",
    "W2_TD_CLAIM",
    "SPLIT_CLAIM",
    "TARGET_CLAIM",
    "MainRun",
    "cfg_d",
    "fmt_reached",
    "lesssim_c",
    "tolerance",
    "w2_rel_range",
    "window_max",
    "check_energy_identity",
    "check_loss_monotone",
    "theory_inapplicable",
]

THEOREM_CLAIMS = [
    ("T_p ≤ T₁ (linearized flow tracks the full flow)", f"{SOURCE} Thm 1 (27)"),
    ("plateau: |R(T_p) − R(0)| / T_p ≲ 1/(m^{2α₁−1} ln m)", f"{SOURCE} Thm 1 (29)"),
    ("K/K′ → 1/2 at T_p", f"{SOURCE} Prop 2"),
    ("Σa² / Σ(w¹)² → 1 at T_p", f"{SOURCE} Cor 2"),
]
W2_TP_CLAIM = (
    "relative W₂(ρ_|a|, ρ_‖w‖) at T_p ≤ C m^{-(γ₁−α₁)}(ln m)³ + C max{m^{-(α−α₁)}, …}",
    f"{SOURCE} Cor 1 (42)",
)
W2_TD_CLAIM = (
    "relative W₂(ρ_|a|, ρ_‖w‖) at T_d ≤ m^{-(α−1/2)} + C max{m^{-(2α−1)/2}, …}",
    f"{SOURCE} Cor 4 (61)",
)
SPLIT_CLAIM = (
    "secondary plateau: d(Σa² − Σw²)/dt given by the third-order f_k, g_k",
    f"{SOURCE} §4.3.2",
)
TARGET_CLAIM = (
    "target figure: ‖a‖/‖w‖ ≈ 1 and relative W₂ ≈ 0 at T_d for f₁, f₂, f₃",
    f"{SOURCE} §4.3.3",
)
DESCENT_RATIO_CLAIMS = [
    ("T_d/ln m ≥ (2α−1)/(2+δ′)", f"{SOURCE} Thm 2 (45)"),
    ("T_d/ln m ≤ (2α−1)/(2−δ′)", f"{SOURCE} Thm 2 (45)"),
]
SECONDARY_LENGTH_CLAIM = ("(T_sp − T_d)/T_d ≫ 1", f"{SOURCE} Thm 3 (64)")
DESCENT_CLAIMS = [
    ("K̂(t) follows the logistic law from T_p to T_d", f"{SOURCE} eqs (18–19)"),
    *DESCENT_RATIO_CLAIMS,
    ("descent/plateau average decay rate ≳ m^{2α₁−1}", f"{SOURCE} Thm 2 (46)"),
    ("q_max(T_d) ≤ m^{-(1/2 − (2α−1)δ′)}", f"{SOURCE} Thm 2"),
    W2_TD_CLAIM,
    SECONDARY_LENGTH_CLAIM,
]
SECONDARY_CLAIMS = [
    ("|K̂ − 1| ≤ 2β on [T_d, T_sp]", f"{SOURCE} Thm 3 (68)"),
    ("secondary-plateau / descent average decay rate ≈ 0", f"{SOURCE} Thm 3 (65)"),
    SPLIT_CLAIM,
]


def lesssim_c() -> Constant:
    """The constant hidden in '≲' (and in 'C·max{…}'): default `LESSSIM_C`, any C > 0."""
    return Constant("C", LESSSIM_C, (0.0, math.inf), "the constant hidden in '≲'")


def tolerance(default: float) -> Constant:
    """A finite-m tolerance the toolkit picks for '→' or '≈' read at one width."""
    return Constant("tol", default, (0.0, 1.0), "finite-m tolerance")


def fmt_reached(x: float, digits: int = 4) -> str:
    """`x` to `digits` significant digits; "not reached" for a time that is not finite."""
    return f"{x:.{digits}g}" if math.isfinite(x) else "not reached"


def w2_rel_range(r: MainRun, tq: float) -> tuple[float, float]:
    """A-priori range of the relative W₂(ρ_|a|, ρ_‖w‖)/W₂(ρ_|a|, δ₀) at τ = `tq`, whatever
    the shapes of the two distributions: by the triangle inequality through δ₀, W₂ ≤
    RMS|a| + RMS‖w‖, so the ratio is at most 1 + ‖w‖/‖a‖ (≈ 2 when Σa² ≈ Σ‖w‖²)."""
    return (0.0, 1.0 + 1.0 / r.at("ratio_aw", tq))


def cfg_d(traj: Trajectory) -> int:
    return int(traj.config["problem"]["model"]["d"])


@dataclasses.dataclass
class MainRun:
    """The main run as the checks read it: `traj` with its `units` and `cfg`, the stage
    times `st` (τ; see `runs.stage_times`), and — derived — the observables `o` and the
    theorems' time `tau` of the save times."""

    traj: Trajectory
    units: Units
    cfg: Config
    st: dict
    o: dict = dataclasses.field(init=False, repr=False)
    tau: np.ndarray = dataclasses.field(init=False, repr=False)

    def __post_init__(self):
        self.o = self.traj.observables
        self.tau = self.units.tau(self.traj.times)

    @property
    def assumptions(self) -> str:
        return f"α = {self.cfg.alpha}, m = {self.cfg.m}; {self.units.description}"

    def at(self, name: str, tq: float) -> float:
        """Observable `name` at τ = `tq` (linear interpolation between save times)."""
        return float(np.interp(tq, self.tau, self.o[name]))


def window_max(r: MainRun, name: str, t0: float, t1: float, *, absolute: bool = False) -> float:
    """max of observable `name` (or of its absolute value) over τ ∈ [t0, t1], the ends
    interpolated; NaN when the window is empty or not finite."""
    if not (math.isfinite(t0) and math.isfinite(t1) and t1 >= t0):
        return float("nan")
    sel = (r.tau > t0) & (r.tau < t1)
    v = np.concatenate([[r.at(name, t0)], r.o[name][sel], [r.at(name, t1)]])
    return float(np.max(np.abs(v) if absolute else v))


# ---------------------------------------------------------------------------------------
# Accuracy certificate: energy identity and monotone loss.


def check_energy_identity(r: MainRun) -> Check:
    res = float(np.max(r.o["energy_residual"]))
    loss0 = float(r.o["loss"][0])
    tol = 100 * r.cfg.rtol * max(loss0, 1e-300)
    return Check.compare(
        "energy identity R(0) − R(t) = ∫‖∇R‖² along the solve",
        "gradient flow",
        holds=res <= tol,
        predicted=f"residual ≤ 100·rtol·R(0) = {tol:.2e}",
        measured=f"max residual {res:.2e}",
        values={"max_residual": res, "tolerance": tol},
    )


def check_loss_monotone(r: MainRun) -> Check:
    o = r.o
    loss0 = float(o["loss"][0])
    rise = float(np.max(np.diff(o["loss"]))) if len(o["loss"]) > 1 else 0.0
    return Check.compare(
        "loss non-increasing along the flow",
        "gradient flow",
        holds=rise <= 1e-9 * max(loss0, 1e-300),
        predicted="max rise ≤ 1e-9·R(0)",
        measured=f"max rise {rise:.2e}",
        values={"max_rise": rise},
    )


def theory_inapplicable(r: MainRun) -> str | None:
    """Why the theorems do not apply to this run (None when they do)."""
    m, alpha, units = r.cfg.m, r.cfg.alpha, r.units
    reasons = []
    if not alpha > 0.5:
        reasons.append(f"α = {alpha} ≤ 1/2 (the theorems need small init, α > 1/2)")
    if not units.isotropic:
        reasons.append(units.description)
    tanh_like, why = TwoLayer(m=m, d=1, alpha=alpha).tanh_like()
    if not tanh_like:
        reasons.append(why)
    return "; ".join(reasons) if reasons else None
