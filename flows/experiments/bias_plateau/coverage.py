"""Coverage of the bias-plateau paper (Wang, Wang, Zhou & Ge, ICLR 2023): every numbered
result and figure-level claim, in the paper's order, with the rows of `flows check
bias-plateau` that check it (`flows.claims.coverage`; the table on
docs/papers/bias-plateau.md is generated from it by docs/_coverage.py).

Counted from the paper's text: Theorem 1 (and the reading of it the text gives after
it), §4's convergence result and Proposition 1 with its two lemmas (whose numbers the
text lost), Figures 1, 2, 3 and 8, §5's experiments and Appendices A and D. The text's
display equations and theorem statements were lost in conversion; where a number is
lost, the label is the section and a short name.
"""

from __future__ import annotations

from flows.claims.coverage import (
    CHECKED,
    NEEDS_RUN,
    NOT_BUILT,
    NOT_CHECKED,
    OUT_OF_SCOPE,
    PARTLY,
    CoverageEntry,
)

__all__ = ["COVERAGE", "PAPER", "TOOLKIT_ROWS"]

#: The paper's name in the registry (`flows check bias-plateau`).
PAPER = "bias-plateau"

_E = CoverageEntry

#: The paper's numbered results and figure-level claims, in its order.
COVERAGE: tuple[CoverageEntry, ...] = (
    _E(
        "Fig. 1",
        "“the loss interpolation curve is monotonic and approximately convex” (MNIST); "
        "“a long plateau” (CIFAR-10)",
        NOT_CHECKED,
        gap=NEEDS_RUN,
        note="earlier works' observations on MNIST and CIFAR-10 networks, which the "
        "toolkit does not train.",
    ),
    _E(
        "App. A",
        "“the hardness of optimization problems does not need to be related to the shape "
        "of interpolation curves”",
        NOT_CHECKED,
        gap=OUT_OF_SCOPE,
        note="constructed examples about optimization hardness (not in the text at hand); "
        "no flow observable.",
    ),
    _E(
        "§3 (bias gap), Fig. 8",
        "“after training there exists a gap between the largest bias and the second "
        "largest, which also holds empirically (see Figure 8)”",
        PARTLY,
        rows=("every sample predicted as k* on [δ/Δ_min",),
        gap=NOT_BUILT,
        note="Δ_min > 0 is Theorem 1's hypothesis on every deep run (its rows are outside "
        "hypothesis without it); no row states the gap over seeds as the figure does.",
    ),
    _E(
        "§3, §5 (output bias)",
        "“this bias gap is essential for the plateau in the error interpolation”",
        CHECKED,
        rows=("error plateau (nearly) disappears without output bias",),
    ),
    _E(
        "Theorem 1 (error plateau)",
        "“for all α ∈ [α₁, α₂], the error remains at 1 − 1/k”",
        CHECKED,
        rows=(
            "error remains at 1 − 1/k for every α ∈ [δ/Δ_min, (Δ_min/2V_max^r)^(1/(r−1))] "
            "(the paper's words)",
            "measured error plateau ⊇ predicted [α₁, α₂]",
            "every sample predicted as k* on [δ/Δ_min, (Δ_min/2V_max^r)^(1/(r−1))]",
        ),
        note="the paper's words searched over α (every change of a prediction located); "
        "beside them the error on the α grid, and every sample predicted as k* (the "
        "toolkit's stronger reading, literal, re-read, and on a run whose θ(0) is "
        "rescaled to meet its reconstructed hypothesis).",
    ),
    _E(
        "Theorem 1 (loss plateau)",
        "“the average loss cannot be lower than log k − 2eε when α ≤ ε^{1/r}/V_max”",
        CHECKED,
        rows=("average loss ≥ log k − 2eε for α ≤ ε^(1/r)/V_max",),
    ),
    _E(
        "Theorem 1 (error plateau, depth)",
        "“Δ_min/2V_max^r is smaller than 1 and does not change much when depth increases. "
        "So the plateau becomes longer in a deeper network.”",
        PARTLY,
        rows=("error plateau lengthens with depth r",),
        gap=NOT_BUILT,
        note="the lengthening is checked; that Δ_min/2V_max^r stays below 1 and nearly "
        "constant over depth is not a row.",
    ),
    _E(
        "Theorem 1 (loss plateau, depth)",
        "“the loss plateau is becoming longer when depth r increases”",
        CHECKED,
        rows=("loss plateau lengthens with depth r",),
    ),
    _E(
        "Fig. 2",
        "“As illustrated in Figure 2 (left)”: the r-homogeneous-weight network",
        NOT_CHECKED,
        gap=OUT_OF_SCOPE,
        note="an illustration of the model; no claim.",
    ),
    _E(
        "§4 (init remark)",
        "“can be trivially generalized to standard Gaussian initialization … when r is an "
        "even integer”",
        NOT_CHECKED,
        gap=NOT_BUILT,
        note="§4's runs draw |N(0, δ²)|; no run at even r from signed Gaussian weights.",
    ),
    _E(
        "§4 (gradient descent remark)",
        "“Our analysis can also be extended to gradient descent with a small step size.”",
        NOT_CHECKED,
        gap=NOT_BUILT,
        note="§4's model is run by the exact flow only (GD is compared with the flow on the "
        "deep nets).",
    ),
    _E(
        "§4 (convergence result)",
        "“gradient flow from a small initialization can converge to a model with zero "
        "error and constant bias gap”",
        PARTLY,
        rows=("the last-learned class ends with the largest bias", "learned classes sit ≥ C₂"),
        gap=NOT_BUILT,
        note="the bias gap is checked; zero training error at T is not a row of its own.",
    ),
    _E(
        "Proposition 1 (order)",
        "“gradient flow learns k classes one by one, from class 1 to class k”",
        CHECKED,
        rows=("classes learned one by one in the order of W_ii(0)", "order, top bias"),
    ),
    _E(
        "Proposition 1 (unlearned classes), §4 lemma",
        "“b_j ≥ max_{i′} b_{i′} − O(δ^r)” for the classes not yet learned; their W_jj stay O(δ)",
        NOT_CHECKED,
        gap=NOT_BUILT,
        note="the biases and W_jj are observables of §4's run; no row bounds the unlearned "
        "classes' distance to the top bias by a multiple of δ^r.",
    ),
    _E(
        "Proposition 1 (learned classes), §4 lemma",
        "“b_j − b_k ≤ −C₂ for any t ≥ s_{j+1}”",
        CHECKED,
        rows=("learned classes sit ≥ C₂", "order, top bias"),
        note="at each later class's learning time and at T.",
    ),
    _E(
        "Proposition 1 (off-diagonal weights)",
        "“all the off-diagonal entries W_{j,j′} are only O(δ)”",
        CHECKED,
        rows=("off-diagonal weights stay O(δ)", "O(δ) off-diagonals hold over seeds"),
    ),
    _E(
        "Proposition 1 (noise)",
        "“The correlation between the weights and noise terms also remains small.”",
        NOT_CHECKED,
        gap=NOT_BUILT,
        note="the weights' correlation with each sample's noise is computable on §4's run; "
        "no row reads it.",
    ),
    _E(
        "Proposition 1 (end), Fig. 3",
        "“At the end time T = s_k … all x ∈ S_k are also classified correctly because "
        "b_k is the largest bias”",
        CHECKED,
        rows=("the last-learned class ends with the largest bias", "order, top bias"),
    ),
    _E(
        "§4 (tensor power)",
        "“the dynamics of W_ii is similar as in the tensor power method” on [s_i, t_i]",
        CHECKED,
        rows=("full flow tracks the reduced tensor-power ODE",),
    ),
    _E(
        "§5 (initialization scale)",
        "“the influence of initialization size”: the plateau shortens as the scale grows",
        CHECKED,
        rows=("plateau shortens as the init scale δ grows",),
    ),
    _E(
        "§5 (bias order)",
        "“the class that is learned last often has larger bias”",
        NOT_CHECKED,
        gap=NOT_BUILT,
        note="checked on §4's model (Proposition 1); on the deep nets the learning order "
        "and the biases are recorded but no row compares them.",
    ),
    _E(
        "§5 (standard initialization)",
        "“we also observe plateau in CIFAR-100 with standard initialization”",
        NOT_CHECKED,
        gap=NEEDS_RUN,
        note="VGG-16 on CIFAR-100 is outside the toolkit's runs.",
    ),
    _E(
        "App. D",
        "“similar results also hold on Fashion-MNIST and CIFAR-10”; “the ordering of the "
        "biases does not exactly follow the ordering of the learning” (D.5)",
        NOT_CHECKED,
        gap=NEEDS_RUN,
        note="data sets and networks the toolkit does not train (its deep nets run on "
        "synthetic data and scikit-learn's digits).",
    ),
)

#: Rows of `flows check bias-plateau` that check the toolkit, not a claim of the paper.
TOOLKIT_ROWS: tuple[str, ...] = (
    "energy identity L(0) − L(t) = ∫‖∇L‖² along the solve",
    "training reaches zero error by T",
    "reproduces the exact flow's error plateau",
    "reproduces the exact ReLU flow's error plateau",
    "η → 0 extrapolation of the ReLU net's loss L(T) is the exact flow's",
)
