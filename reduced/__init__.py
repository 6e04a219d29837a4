"""Reduced models: closed forms, reduced ODEs, theorem bounds and symbolic derivations.

Pure theory; never imports `flows`. One module per paper:

- `reduced.multistage` — linearized flow, descent-stage and logistic laws, Table 1 and
  the bounds of Theorems 1–3 (multi-stage loss curves).
- `reduced.bias_plateau` — the tensor-power bias ODE, its early-phase closed form and
  blow-up times (bias / interpolation plateau).
- `reduced.interpolation` — Theorem 1 of the bias paper: bias gaps, V_max, the predicted
  error-plateau interval and loss bound of the linearly interpolated net.
- `reduced.linear_teacher` — region-wise form of clustered leaky-ReLU nets, PAR margins,
  smoothed margin (linear teachers).
- `reduced.max_margin` — the convex max-margin problem of Theorem 6.2 in the PAR
  (linear teachers), solved with scipy.
- `reduced.deep_linear` — the closed-form mode dynamics of deep linear networks (Saxe et
  al.): learning times and the balanced-init solution.
- `reduced.derive` — sympy derivations of all of the above (`flows derive`).
"""

from . import bias_plateau as bias_plateau
from . import deep_linear as deep_linear
from . import interpolation as interpolation
from . import linear_teacher as linear_teacher
from . import max_margin as max_margin
from . import multistage as multistage

__all__ = [
    "bias_plateau",
    "deep_linear",
    "interpolation",
    "linear_teacher",
    "max_margin",
    "multistage",
]
