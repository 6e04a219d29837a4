"""Coverage of the deep-linear paper (Saxe, McClelland & Ganguli, ICLR 2014) by `flows
check deep-linear` (`flows.claims.coverage`; the table on docs/papers/deep-linear.md is
generated from it by docs/_coverage.py).

The paper's text is not among the project's sources, so its numbers are not counted here:
the entries are the claims docs/papers/deep-linear.md states for the two-layer network,
paraphrased (no quotes), and, not checked, the paper's larger themes beyond it (deeper
networks, initializations, nonlinear networks), named by topic.
"""

from __future__ import annotations

from flows.claims.coverage import (
    CHECKED,
    NEEDS_RUN,
    NOT_BUILT,
    NOT_CHECKED,
    CoverageEntry,
)

__all__ = ["COVERAGE", "PAPER", "TOOLKIT_ROWS"]

#: The paper's name in the registry (`flows check deep-linear`).
PAPER = "deep-linear"

_E = CoverageEntry

#: The paper's claims the toolkit reads, then the themes it does not.
COVERAGE: tuple[CoverageEntry, ...] = (
    _E(
        "Exact solutions",
        "from a balanced init aligned with the SVD of Σ_yx, each mode follows "
        "u̇ = 2u(s − u): W₂W₁(t), W₁(t), W₂(t) and L(t) in closed form",
        CHECKED,
        rows=("balanced aligned init: W₂W₁(t), W₁(t), W₂(t), L(t) = closed form",),
    ),
    _E(
        "Learning time",
        "a mode reaches s/2 at t½ = (1/2s) ln((s − u₀)/u₀)",
        CHECKED,
        rows=("mode α reaches s_α/2 at t½",),
    ),
    _E(
        "Conservation law",
        "W₁W₁ᵀ − W₂ᵀW₂ is conserved from any initialization",
        CHECKED,
        rows=("W₁W₁ᵀ − W₂ᵀW₂ conserved along the flow",),
    ),
    _E(
        "Stage-like transitions",
        "with equal initial strengths, modes are learned in order of decreasing singular value",
        CHECKED,
        rows=("stage-like learning: modes learned in order of decreasing s_α",),
    ),
    _E(
        "Random initial conditions",
        "from a small random init the modes go through the same sigmoidal transitions",
        CHECKED,
        rows=("small random init: same sigmoidal transitions",),
    ),
    _E(
        "Deeper networks",
        "the learning dynamics and learning times of linear networks with more than one "
        "hidden layer",
        NOT_CHECKED,
        gap=NOT_BUILT,
        note="the plug-in's model has one hidden layer; the engine's deep fully connected "
        "family with identity activation could run it.",
    ),
    _E(
        "Initializations",
        "how pretraining and random orthogonal initializations affect learning speed",
        NOT_CHECKED,
        gap=NEEDS_RUN,
        note="runs with pretrained or orthogonal deep initializations, which the plug-in "
        "does not do.",
    ),
    _E(
        "Nonlinear networks",
        "the same initializations in deep nonlinear networks",
        NOT_CHECKED,
        gap=NEEDS_RUN,
        note="deep nonlinear networks trained on real data, outside the plug-in.",
    ),
)

#: Rows of `flows check deep-linear` that check the toolkit, not a claim of the paper.
TOOLKIT_ROWS: tuple[str, ...] = ("energy identity L(0) − L(t) = ∫‖∇L‖², loss non-increasing",)
