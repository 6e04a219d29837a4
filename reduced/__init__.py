"""Reduced models: closed forms, reduced ODEs, theorem bounds and symbolic derivations.

Pure theory; never imports `flows`. One module per paper:

- `reduced.multistage` — linearized flow, descent-stage and logistic laws, Table 1 and
  the bounds of Theorems 1–3 (multi-stage loss curves).
"""

from . import multistage as multistage

__all__ = ["multistage"]
