"""The toy paper's derivation, settled symbolically by `flows derive toy-paper`: the PL
bound's right-hand side solves dL/dt = −2 λ_min L (equality in ‖∇L‖² ≥ 2 λ_min L)."""

import sympy as sp

from reduced.derive import Identity

t, lam, L0 = sp.symbols("t lambda_min L_0", positive=True)
bound = L0 * sp.exp(-2 * lam * t)

IDENTITIES = [
    Identity(
        "L(0)·exp(−2 λ_min t) solves dL/dt = −2 λ_min L",
        "toy-paper",
        "the PL bound is the solution of the PL inequality taken with equality",
        lambda: sp.diff(bound, t) + 2 * lam * bound,
        (t, lam, L0),
    )
]
