"""Coverage of the multi-stage paper (arXiv:2410.20119v1): every numbered result and
figure-level claim, in the paper's order, with the rows of `flows check multistage` that
check it (`flows.claims.coverage`; the table on docs/papers/multistage.md is generated
from it by docs/_coverage.py).

Counted from the paper's text: the informal Theorems 1*–4* (eqs. 1–7), Lemmas 1–2,
Theorems 1–3 with their numbered parts, Propositions 1–7, Corollaries 1–4, eqs. (18–19),
§4.3.2, the three figures (stages, descent time, targets), and the appendix's results
about the initialization (Lemma 3, Proposition 8, the quoted Bernstein inequality).
Assumptions, definitions, remarks and Tables 1–2 state no claim of their own.
"""

from __future__ import annotations

from flows.claims.coverage import (
    CHECKED,
    NOT_BUILT,
    NOT_CHECKED,
    OUT_OF_SCOPE,
    PARTLY,
    CoverageEntry,
)

__all__ = ["COVERAGE", "PAPER", "TOOLKIT_ROWS"]

#: The paper's name in the registry (`flows check multistage`).
PAPER = "multistage"

_E = CoverageEntry

#: The paper's numbered results and figure-level claims, in its order.
COVERAGE: tuple[CoverageEntry, ...] = (
    _E(
        "Theorem 1* (1)",
        "“T_p = Ω(log m)”",
        NOT_CHECKED,
        gap=OUT_OF_SCOPE,
        note="T_p is defined as (2α−1)/4·ln m (Theorem 1), so (1) holds by definition; "
        "what it promises is Theorem 1 (27)–(29).",
    ),
    _E(
        "Theorem 1* (2)",
        "“the average decay rate of initial plateau stage … = 0” as m → ∞",
        PARTLY,
        rows=("plateau: |R(T_p) − R(0)| / T_p ≲",),
        gap=NOT_BUILT,
        note="read through Theorem 1 (29)'s bound at one width; no row states the limit "
        "over the widths of the sweep.",
    ),
    _E(
        "Theorem 2* (3)",
        "“lim T_d / log m = (2α−1)/2”",
        CHECKED,
        rows=("T_d / ln m → (2α−1)/2", "slope of T_d vs ln m", "slope of T_d vs α"),
        note="through the slopes of T_d against ln m and α (the literal ratio is shown "
        "beside; the single-run row is not applicable).",
    ),
    _E(
        "Theorem 2* (4)",
        "the descent/plateau ratio of average decay rates “= +∞” as m → ∞",
        PARTLY,
        rows=("descent/plateau average decay rate ≳ m^{2α₁−1}",),
        gap=NOT_BUILT,
        note="read through Theorem 2 (46)'s bound c·m^{2α₁−1} at one width; no limit row "
        "over the widths.",
    ),
    _E(
        "Theorem 3* (5)",
        "“lim T_sp / log m = +∞”",
        NOT_CHECKED,
        gap=NOT_BUILT,
        note="with T_sp defined by (63) at a fixed β, T_sp/ln m → (2α−1)/2 + 1/(40β), "
        "finite: (5) needs β → 0 with m, which no row reads.",
    ),
    _E(
        "Theorem 3* (6)",
        "the secondary-plateau/descent ratio of average decay rates “= 0” as m → ∞",
        PARTLY,
        rows=("secondary-plateau / descent average decay rate ≈ 0",),
        gap=NOT_BUILT,
        note="read through Theorem 3 (65) (≈ 0 within a tolerance) at one width; no limit "
        "row over the widths.",
    ),
    _E(
        "Theorem 4* (7)",
        "“for any t ∈ [T_p, T_d] … W₂(ρ_|a|, ρ_‖w‖)/W₂(ρ_|a|) → 0”",
        CHECKED,
        rows=("relative W₂(ρ_|a|, ρ_‖w‖) → 0 uniformly on [T_p, T_d]",),
    ),
    _E(
        "Lemma 1 (12)",
        "“|f_k|, ‖g_k‖₂ ≤ C_L(q_max³ + m q_max⁵)”",
        NOT_CHECKED,
        gap=NOT_BUILT,
        note="f_k and g_k are the field minus its leading terms, computable along the flow; "
        "no row bounds them.",
    ),
    _E(
        "Fig. diff_stage (stages)",
        "“the norms of w and a progressively approach equality” at T_p; “the relative "
        "Wasserstein distance vanishes” at T_d",
        PARTLY,
        rows=("Σa² / Σ(w¹)² → 1 at T_p", "relative W₂(ρ_|a|, ρ_‖w‖) at T_d ≤"),
        gap=OUT_OF_SCOPE,
        note="“the microscopic changes often occur slightly before the macroscopic "
        "changes” states no criterion to test.",
    ),
    _E(
        "Eqs. (18–19)",
        "“dK/dt = 2K(1 − K)”, the logistic law from T_p",
        CHECKED,
        rows=("K̂(t) follows the logistic law from T_p to T_d",),
    ),
    _E(
        "Lemma 2 (22)",
        "“Growth lemma”: ‖wⁱ‖₂ grows at most at rate C max{(log m)^{3γ}/m^{3β−1/2}, …}",
        CHECKED,
        rows=("‖wⁱ‖₂ grows at most at rate",),
    ),
    _E(
        "Theorem 1 (27)",
        "“T_p ≤ T₁”",
        CHECKED,
        rows=("T_p ≤ T₁ (linearized flow tracks the full flow)",),
    ),
    _E(
        "Theorem 1 (28)",
        "“max |w_kⁱ(T_p)| ≲ max{m^{−α} log m, m^{−3}(log m)⁶}”",
        CHECKED,
        rows=("max_{k,i≥2} |w_kⁱ(T_p)| ≲", "Theorem 1: one C (the constant of '≲')"),
        note="on the d = 2 sweep (the main run has d = 1); jointly with (29), one C.",
    ),
    _E(
        "Theorem 1 (29)",
        "“|R(θ(T_p)) − R(θ(0))|/T_p ≲ 1/(m^{2α₁−1} log m)”",
        CHECKED,
        rows=("plateau: |R(T_p) − R(0)| / T_p ≲", "Theorem 1: one C (the constant of '≲')"),
        note="jointly with (28): one C for both, its window shown.",
    ),
    _E(
        "Proposition 1 (30)",
        "“(Σ_k (w_kⁱ)²)^{1/2} ≤ C max{m^{−(2α−1)/2}, (log m)⁵ m^{−5/2}}” on [0, min{T_p, T₁}]",
        CHECKED,
        rows=("‖wⁱ‖₂ ≤ C max{m^{-(2α−1)/2}",),
    ),
    _E(
        "Proposition 2 (36)",
        "“Σ a_k w_k¹, Σ a_k² + (w_k¹)² = Θ(1/m^{2α₁−1})” at T_p",
        NOT_CHECKED,
        gap=NOT_BUILT,
        note="K(T_p) and K′(T_p) are recorded on every run of the sweep; no row fits their "
        "exponent in m.",
    ),
    _E(
        "Proposition 2 (37)",
        "“K/K′ = 1/2 + ε₁” at T_p",
        CHECKED,
        rows=("K/K′ → 1/2 at T_p",),
    ),
    _E(
        "Corollary 1 (42)",
        "relative W₂ at T_p “≤ C m^{−(γ₁−α₁)}(log m)³ + C max{…}”",
        CHECKED,
        rows=("relative W₂(ρ_|a|, ρ_‖w‖) at T_p ≤", "relative W₂ at T_p ≤"),
    ),
    _E(
        "Corollary 2 (43)",
        "“Σ‖w‖²/Σ(w_k¹)² ≥ 1 − C max{…}” at T_p: “initial condensation”",
        CHECKED,
        rows=("condensation", "Σa² / Σ(w¹)² → 1 at T_p"),
        note="the ratio read right side up (Σ(w¹)²/Σ‖w‖² → 1), on the d = 2 sweep; with "
        "Σa²/Σ(w¹)² → 1 on the main run for the equal distributions of |a| and ‖w‖ the text "
        "draws from it.",
    ),
    _E(
        "Theorem 2 (45)",
        "“(2α−1)/(2+δ′) ≤ T_d/log m ≤ (2α−1)/(2−δ′)”",
        CHECKED,
        rows=(
            "T_d/ln m ≥ (2α−1)/(2+δ′)",
            "T_d/ln m ≤ (2α−1)/(2−δ′)",
            "Theorem 2: one δ′ for (45) and (47)",
            "Theorem 2: the δ′ window's edge → 0",
        ),
        note="with one δ′ shared with (47): the window of δ′ and its edge's trend in m.",
    ),
    _E(
        "Theorem 2 (46)",
        "descent/plateau ratio of average decay rates “≥ C m^{2α₁−1}”",
        CHECKED,
        rows=("descent/plateau average decay rate ≳ m^{2α₁−1}",),
        note="the row cites the informal (4).",
    ),
    _E(
        "Theorem 2 (47)",
        "“q_max(T_d) ≤ m^{−(1/2−(2α−1)δ′)}”, “max |w_kⁱ(T_d)| ≤ m^{−(α−2(2α−1)δ′)}”",
        CHECKED,
        rows=("q_max(T_d) ≤ m^{-(1/2 − (2α−1)δ′)}", "max_{k,i≥2} |w_kⁱ(T_d)| ≤"),
    ),
    _E(
        "Proposition 3 (49)",
        "“(Σ_k (w_kⁱ)²)^{1/2} ≤ C max{m^{−(2α−1)/2}, log m/m^{1−5α₂}}” on [T_p, T_d]",
        NOT_CHECKED,
        gap=NOT_BUILT,
        note="the observable of Proposition 1's row, on [T_p, T_d] instead of [0, T_p]; "
        "no row reads it there.",
    ),
    _E(
        "Proposition 4",
        "“K and K′ increase monotonically” on [T_p, T_d]",
        NOT_CHECKED,
        gap=NOT_BUILT,
        note="K and K′ are observables of the main run; no row tests their monotonicity.",
    ),
    _E(
        "Proposition 5 (52)",
        "“|4K dK/dt − K′ dK′/dt| ≤ C ε₂ (K′)²” (approximate conservation law)",
        NOT_CHECKED,
        gap=NOT_BUILT,
        note="computable from K, K′ and the field along the flow; no row bounds it.",
    ),
    _E(
        "Proposition 6 (53), (54)",
        "“K/K′ = 1/2 + ε₃”, “Σa²/Σ(w¹)² = 1 + ε₃” on [T_p, T_d]",
        PARTLY,
        rows=("K/K′ → 1/2 at T_p", "Σa² / Σ(w¹)² → 1 at T_p"),
        gap=NOT_BUILT,
        note="checked at T_p (where it is Proposition 2); not over [T_p, T_d].",
    ),
    _E(
        "Corollary 3 (59)",
        "“‖∇R(θ)‖_∞ ≤ β‖θ‖_∞” at T_d",
        CHECKED,
        rows=("β-relative critical point at T_d", "Theorem 3 with Corollary 3: one β"),
        note="as a limit in m of the excess over β, and in Theorem 3's joint window of β.",
    ),
    _E(
        "Corollary 3 (60)",
        "“‖∇R(θ)‖_∞ ≥ (1 − C/m^{2α₁})‖θ‖_∞” at T_fp,α",
        CHECKED,
        rows=("at T_p: ‖∇R‖_∞ ≥ (1 − C m^{-2α₁})‖θ‖_∞",),
        note="T_fp,α, undefined in the paper, read as T_p.",
    ),
    _E(
        "Corollary 4 (61)",
        "“ρ_|a| and ρ_‖w‖ are similar at T_d”",
        CHECKED,
        rows=("relative W₂(ρ_|a|, ρ_‖w‖) at T_d ≤", "relative W₂ at T_d ≤"),
    ),
    _E(
        "Fig. descent_time, §4.2.2",
        "“T_d indeed has a linear relationship with α”, “linearly related to log m”",
        CHECKED,
        rows=("slope of T_d vs ln m", "slope of T_d vs α"),
        note="on Assumption 1–2 data at m ≤ 4000; the paper's grid (m to 100 000) is "
        "benchmarks/bench_descent_time.py.",
    ),
    _E(
        "Theorem 3 (64)",
        "“(T_sp − T_d)/T_d ≫ 1”",
        CHECKED,
        rows=("(T_sp − T_d)/T_d ≫ 1", "Theorem 3: one β for T_d"),
    ),
    _E(
        "Theorem 3 (65)",
        "the secondary-plateau/descent ratio of average decay rates “≈ 0”",
        CHECKED,
        rows=("secondary-plateau / descent average decay rate ≈ 0", "Theorem 3: one β for T_d"),
    ),
    _E(
        "Proposition 7 (66)",
        "“(Σ_k (w_kⁱ)²)^{1/2} ≤ C max{…} + C (log m)²/m^{5α₃−3/2}” on [T_d, T_sp]",
        NOT_CHECKED,
        gap=NOT_BUILT,
        note="the observable of Proposition 1's row, on [T_d, T_sp]; no row reads it there.",
    ),
    _E(
        "Theorem 3 (67)",
        "“T_sp ≤ T₃”, i.e. q_max ≤ m^{−0.4} up to T_sp",
        NOT_CHECKED,
        gap=NOT_BUILT,
        note="q_max is an observable of the main run; no row compares it with m^{−α₃} on "
        "[T_d, T_sp].",
    ),
    _E(
        "Theorem 3 (68)",
        "“|K − 1|(t) ≤ 2β” on [T_d, T_sp]",
        CHECKED,
        rows=("|K̂ − 1| ≤ 2β on [T_d, T_sp]", "Theorem 3: one β for T_d"),
    ),
    _E(
        "§4.3.2",
        "“d(Σ a_k²)/d(Σ w_k²) ≠ 1”: the third-order f_k, g_k lead the loss off the plateau",
        CHECKED,
        rows=("secondary plateau: d(Σa² − Σw²)/dt",),
        note="against the corrected f_k (the printed one misses a term).",
    ),
    _E(
        "Fig. target_plot, §4.3.3",
        "the norm ratio “stays around the value of 1” and the relative W₂ distances "
        "“approach zero synchronously” for f₁, f₂, f₃",
        PARTLY,
        rows=("target figure: ‖a‖/‖w‖ ≈ 1 and relative W₂ ≈ 0 at T_d",),
        gap=OUT_OF_SCOPE,
        note="judged at T_d; when the ratio leaves 1 is reported, but the paper states no "
        "criterion for it.",
    ),
    _E(
        "Lemma 3",
        "“Bounds on initial parameters” (rephrased from [2])",
        NOT_CHECKED,
        gap=OUT_OF_SCOPE,
        note="a probability bound on the Gaussian initialization used inside the proofs; no "
        "flow observable.",
    ),
    _E(
        "Theorem 4 (App.)",
        "“Bernstein's inequality”",
        NOT_CHECKED,
        gap=OUT_OF_SCOPE,
        note="a quoted probability inequality, a proof device.",
    ),
    _E(
        "Proposition 8",
        "“Upper and lower bounds of initial parameters” (rephrased from [2])",
        NOT_CHECKED,
        gap=OUT_OF_SCOPE,
        note="a probability bound on the Gaussian initialization used inside the proofs; no "
        "flow observable.",
    ),
)

#: Rows of `flows check multistage` that check the toolkit, not a claim of the paper.
TOOLKIT_ROWS: tuple[str, ...] = (
    "energy identity R(0) − R(t) = ∫‖∇R‖² along the solve",
    "loss non-increasing along the flow",
)
