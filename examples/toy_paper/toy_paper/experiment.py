"""`flows check toy-paper`: two claims on the gradient flow of least squares.

Gradient flow on L(w) = (1/2n)‖Xw − y‖² with a realizable target y = Xw* satisfies the
Polyak–Łojasiewicz inequality ‖∇L‖² ≥ 2 λ_min L (λ_min the smallest eigenvalue of XᵀX/n),
hence

1. L(t) ≤ L(0)·e^{−2 λ_min t} (a bound, judged by the claim kit), and
2. L is non-increasing along the flow (a plain comparison, `Check.compare`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

import flows
from flows import Check
from flows.claims import Bound, Hypothesis, Measured
from flows.plugin import (
    AbstractExperiment,
    Flag,
    OutputDir,
    Report,
    Simulated,
    as_float,
    as_int,
    count,
    positive,
    write_results_json,
)

NAME = "toy-paper"
SOURCE = "toy paper, PL inequality"
#: What `run` writes into `out/toy-paper/` (the command line adds `report.html`).
FILES = ("trajectory.nc", "results.json")


@dataclasses.dataclass(frozen=True)
class Config:
    """n samples in d dimensions, the flow to time t1 at rtol."""

    n: int = 50
    d: int = 3
    t1: float = 5.0
    rtol: float = 1e-8
    seed: int = 0

    def __post_init__(self):  # validated once; each error names the field
        object.__setattr__(self, "n", as_int("n", self.n, minimum=1))
        object.__setattr__(self, "d", as_int("d", self.d, minimum=1))
        object.__setattr__(self, "t1", as_float("t1", self.t1, positive=True))


def linear(p, x):
    return x @ p["w"]


def solve(cfg: Config) -> tuple[flows.Trajectory, np.ndarray]:
    rng = np.random.default_rng(cfg.seed)
    x = rng.normal(size=(cfg.n, cfg.d))
    y = x @ np.linspace(1.0, -1.0, cfg.d)
    problem = flows.make_problem(linear, flows.from_arrays(x, y), theta0={"w": np.zeros(cfg.d)})
    traj = flows.simulate(problem, t1=cfg.t1, rtol=cfg.rtol, atol=1e-12, n_save=51)
    return traj, x


def checks(traj: flows.Trajectory, x: np.ndarray, rtol: float) -> list[Check]:
    lam = float(np.linalg.eigvalsh(x.T @ x / len(x))[0])
    t, loss = np.asarray(traj.times), np.asarray(traj.observables["loss"])
    slack = 100 * rtol * loss[0]  # the solve's accuracy, an error bar on every L(t)
    bound = loss[0] * np.exp(-2 * lam * t[1:])
    ratio = float(np.max(loss[1:] / bound))  # the worst ratio of L(t) to the bound, t > 0
    pl = Bound(
        "L(t) ≤ L(0)·exp(−2 λ_min t)",
        SOURCE,
        Measured(ratio, error=float(slack / bound.min()), how="100·rtol·L(0)"),
        1.0,
        a_priori=(0.0, np.inf),
        hypotheses=(Hypothesis("λ_min(XᵀX/n) > 0", lam > 1e-12, f"λ_min = {lam:.3g}"),),
    ).judge()
    rise = float(np.max(np.diff(loss)))
    monotone = Check.compare(
        "L(t) is non-increasing",
        SOURCE,
        holds=rise <= slack,
        predicted=f"largest rise between saves ≤ {slack:.1e}",
        measured=f"{rise:.1e}",
        values={"largest_rise": rise},
    )
    return [pl, monotone]


class ToyPaper(AbstractExperiment):
    name = NAME
    title = "A toy paper: the PL decay of least squares"
    files = FILES
    identities = "toy_paper.identities"  # `flows derive toy-paper` settles its IDENTITIES
    simulate_flags = (
        Flag("t1", "the flow's end time (default: 5)", type=positive("--t1")),
        Flag("n", "samples (default: 50)", type=count("--n")),
    )

    def default_config(self, quick: bool = False) -> Config:
        return Config(t1=2.0) if quick else Config()

    def run(self, cfg: Config, out: Path, *, progress: bool = True) -> Report:
        traj, x = solve(cfg)
        found = self.annotate(checks(traj, x, cfg.rtol), cfg)
        outdir = OutputDir(Path(out) / NAME, FILES, NAME)
        try:
            traj.save(outdir.path("trajectory.nc"))
            write_results_json(
                outdir.path("results.json"),
                NAME,
                dataclasses.asdict(cfg),
                found,
                {"loss_final": float(traj.loss[-1])},
            )
            files = outdir.commit()
        except BaseException:
            outdir.abort()
            raise
        return Report(NAME, found, files, {"loss_final": float(traj.loss[-1])})

    def simulate(self, options: dict, *, progress: bool = False) -> Simulated:
        given = {k: v for k, v in options.items() if k in ("t1", "n") and v is not None}
        cfg = Config(**given)
        return Simulated(solve(cfg)[0], rtol=cfg.rtol)


EXPERIMENT = ToyPaper()
