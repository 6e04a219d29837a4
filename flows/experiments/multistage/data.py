"""Data of the multistage experiment: the data set of a `Config`, the conversion to the
theorems' units (`Units`), and the save times of the main run.

Predictions are made in the units of the data: time τ = ‖b‖·t, weights â = a/λ,
K̂ = K·s²/‖b‖ (see `reduced.multistage.normalization`); on Assumption 1–2 data these are
the identity.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from flows import DataMoments, Dataset, assumption_data, paper_data
from reduced import multistage as ms

from .config import Config

__all__ = ["make_data", "Units", "save_times"]


def make_data(cfg: Config) -> Dataset:
    if cfg.data == "paper":
        return paper_data(cfg.target, n=cfg.n)
    return assumption_data(cfg.target, n=cfg.n)


@dataclasses.dataclass(frozen=True)
class Units:
    """Conversion between the data's units and the theorems' (Assumption 1–2) units."""

    lam: float
    rate: float
    k_inf: float
    s2: float
    description: str
    isotropic: bool = True

    @classmethod
    def of(cls, mom: DataMoments) -> Units:
        nz = ms.normalization(mom.s2, mom.b_norm)
        return cls(nz.lam, nz.time_rate, nz.k_inf, mom.s2, mom.describe(), mom.isotropic)

    def tau(self, t):
        return np.asarray(t) * self.rate

    def t(self, tau):
        return tau / self.rate


def save_times(cfg: Config, units: Units) -> np.ndarray:
    """Dense saves through plateau, descent and the predicted secondary plateau; sparse after."""
    tau_d = ms.descent_time_leading(cfg.m, cfg.alpha) if cfg.alpha > 0.5 else math.log(cfg.m)
    tau_sp = tau_d + 3.0 + math.log(cfg.m) / (40 * cfg.beta)
    t_dense = min(cfg.t1, 2.0 * units.t(tau_sp))
    if not t_dense < cfg.t1:  # all dense, with as many saves (runs of one shape share a compile)
        return np.linspace(0.0, cfg.t1, 1001)
    ts = np.linspace(0.0, t_dense, 801)
    return np.concatenate([ts, np.geomspace(t_dense, cfg.t1, 201)[1:]])
