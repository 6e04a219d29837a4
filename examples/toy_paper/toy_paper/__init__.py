"""A toy paper as a `flows` plug-in: gradient flow on realizable least squares decays at
least as fast as the Polyak–Łojasiewicz bound L(t) ≤ L(0)·e^{−2 λ_min t}."""
