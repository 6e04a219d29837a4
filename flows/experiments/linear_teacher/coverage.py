"""Coverage of the linear-teacher paper (Sarussi, Brutzkus & Globerson, ICML 2021): every
numbered result and figure-level claim, in the paper's order, with the rows of `flows
check linear-teacher` that check it (`flows.claims.coverage`; the table on
docs/papers/linear-teacher.md is generated from it by docs/_coverage.py).

Counted from the paper's text: Theorems 4.1, 5.1, 6.1 and 6.2, Corollary 6.1 and the
corollary after Theorem 6.1 (its number lost), Lemma 6.1, Theorem 6.2's Assumptions 3
and 4 (the hypotheses the issue of checking them turns on), Figures 1–9 and Appendix K.
Assumption 6.1 is the late-phase hypothesis every flow row states; "Theorem 3.1" in the
text is Ji & Telgarsky's.
"""

from __future__ import annotations

from flows.claims.coverage import (
    CHECKED,
    NEEDS_RUN,
    NOT_BUILT,
    NOT_CHECKED,
    PARTLY,
    CoverageEntry,
)

__all__ = ["COVERAGE", "PAPER", "TOOLKIT_ROWS"]

#: The paper's name in the registry (`flows check linear-teacher`).
PAPER = "linear-teacher"

_E = CoverageEntry

#: The paper's numbered results and figure-level claims, in its order.
COVERAGE: tuple[CoverageEntry, ...] = (
    _E(
        "Fig. 1",
        "“when a small initialization scale is used, the learned network converges to a "
        "decision boundary that is very close to linear”",
        CHECKED,
        rows=("decision boundary: linear from small init", "visibly less clustering"),
        note="on 2-D Gaussian data, against a large initialization.",
    ),
    _E(
        "Eq. (6) (Lyu & Li 2020)",
        "the smoothed margin is non-decreasing in the late phase",
        CHECKED,
        rows=("smoothed margin γ̃ non-decreasing once Σℓ < log 2",),
        note="a cited result the paper builds on.",
    ),
    _E(
        "Theorem 4.1",
        "“SGD converges to ε empirical-loss within O(n⁴/ε²) updates”, “for any η > 0” and "
        "any initialization",
        CHECKED,
        rows=(
            "SGD (epochs without replacement) reaches loss ε",
            "updates to ε grow at most like 1/ε²",
            "updates to ε grow at most like n⁴",
            "SGD reaches ε = 0.03 for any η and any init scale",
        ),
        note="through fitted exponents in 1/ε and n; M(n, ε)'s constant, defined in the "
        "supplement, is not evaluated.",
    ),
    _E(
        "Theorem 5.1",
        "“sign(N_W(x)) = f(x) for all x such that |(w̄ − ū)·x| ≥ 2r‖x‖”",
        CHECKED,
        rows=(
            "sign N_W(x) = sign((w̄ − ū)·x) wherever",
            "Theorem 5.1 holds on the learned networks",
        ),
        note="a property test over random clustered networks, and on the trained ones.",
    ),
    _E(
        "§5, Fig. 5 (App. D.1)",
        "“The result is not true for ReLU networks”",
        CHECKED,
        rows=("Theorem 5.1 fails for ReLU (α = 0): a counterexample exists",),
    ),
    _E(
        "Fig. 2, §5.1",
        "“for small initialization, this fraction [of points outside the linear regime] "
        "converges to zero” (MNIST pairs (0, 1), (3, 5))",
        PARTLY,
        rows=("small init (0.0001): r/‖w̄ − ū‖ → 0 and linear-region share → 1",),
        gap=NEEDS_RUN,
        note="checked on 2-D Gaussian data; the digit pairs (scikit-learn's digits) are an "
        "opt-in run, off in `flows check`.",
    ),
    _E(
        "Fig. 3",
        "a well clustered network “does not imply that the network output itself is a "
        "linear function of the input”",
        NOT_CHECKED,
        gap=NOT_BUILT,
        note="the learned networks' output off the boundary is computable; no row shows it "
        "is not linear.",
    ),
    _E(
        "Corollary 6.1",
        "a perfectly clustered network (r = 0) has a linear decision boundary",
        PARTLY,
        rows=("sign N_W(x) = sign((w̄ − ū)·x) wherever",),
        gap=NOT_BUILT,
        note="through Theorem 5.1's property test (r > 0); no perfectly clustered network "
        "is tested on its own.",
    ),
    _E(
        "Theorem 6.1",
        "“if gradient flow enters an NAR … and stays in it, then it will converge to a "
        "perfectly clustered network”",
        CHECKED,
        rows=("stays in an NAR from T_NAR on ⇒ W/‖W‖ converges to a perfectly clustered",),
    ),
    _E(
        "Corollary after Theorem 6.1",
        "“Under the assumptions in Theorem 6.1, GF converges to a network with a linear "
        "decision boundary.”",
        CHECKED,
        rows=(
            "stays in an NAR from T_NAR on ⇒ W/‖W‖ converges to a perfectly clustered",
            "decision boundary: linear from small init",
        ),
    ),
    _E(
        "Theorem 6.2 (8)",
        "“(δ_w ŵ, δ_u û) is the solution to the following convex optimization problem”",
        CHECKED,
        rows=("learned directions (ŵ, û) and boundary match the PAR max-margin solution",),
        note="its conclusion; its Assumptions 3 and 4 are lines of their own.",
    ),
    _E(
        "Assumption 3 (Theorem 6.2)",
        "“sufficiently large smoothed margin is achieved at some stage of the optimization”",
        NOT_CHECKED,
        gap=NOT_BUILT,
        note="the smoothed margin is an observable of every flow; no row compares it with "
        "the assumption's lower bound.",
    ),
    _E(
        "Assumption 4 (Theorem 6.2)",
        "“the two classes are approximately symmetric with respect to the origin”",
        NOT_CHECKED,
        gap=NOT_BUILT,
        note="a condition on the training set, evaluable on the data; no row evaluates it.",
    ),
    _E(
        "Lemma 6.1",
        "“a certain symmetric training set satisfies Assumption 4”",
        PARTLY,
        rows=("symmetric Gaussians: every neuron enters the PAR",),
        gap=NOT_BUILT,
        note="its consequence (the flow on data closed under (x, y) → (−x, −y) enters the "
        "PAR) is checked; the lemma as stated, Assumption 4 on that set, is not a row.",
    ),
    _E(
        "Fig. 4, §6.3",
        "the PAR predictions of the decision boundary and the learned weights “show "
        "excellent agreement with the empirical results”",
        CHECKED,
        rows=("learned directions (ŵ, û) and boundary match the PAR max-margin solution",),
    ),
    _E(
        "Fig. 6 (App. D.2)",
        "“the above holds for more pairs of digits”",
        NOT_CHECKED,
        gap=NEEDS_RUN,
        note="MNIST digit pairs; the toolkit's opt-in digit run has the pairs (0, 1) and "
        "(3, 5) of scikit-learn's digits only.",
    ),
    _E(
        "Fig. 7 (App. D.3)",
        "r/‖w̄ − ū‖ and the largest same-type angle “converge to zero”",
        PARTLY,
        rows=(
            "small init (0.0001): r/‖w̄ − ū‖ → 0",
            "stays in an NAR from T_NAR on ⇒ W/‖W‖ converges to a perfectly clustered",
        ),
        gap=NEEDS_RUN,
        note="both measures on Gaussian data (the angle in Theorem 6.1's rows); the "
        "paper's figure is on MNIST pairs.",
    ),
    _E(
        "Fig. 8 (App. I)",
        "“We can see that the network enters the PAR.” (high-dimensional Gaussians)",
        CHECKED,
        rows=("symmetric Gaussians, 2-D and high-dimensional: every neuron enters the PAR",),
    ),
    _E(
        "Fig. 9 (App. J)",
        "“learning can enter an NAR which is not a PAR”",
        CHECKED,
        rows=("outlier data:",),
    ),
    _E(
        "App. K",
        "with a first-layer bias “all of the following results would still hold”",
        NOT_CHECKED,
        gap=NOT_BUILT,
        note="the bias is a constant input coordinate; no run appends it.",
    ),
)

#: Rows of `flows check linear-teacher` that check the toolkit, not a claim of the paper.
TOOLKIT_ROWS: tuple[str, ...] = (
    "energy identity L(0) − L(t) = ∫‖∇L‖²",
    "loss non-increasing along the flow",
    "the exact flow through the kinks is the ε → 0 limit of the smoothed flows",
)
