"""Symbolic derivation checks: every reduced model derived from its full model with sympy.

Each paper module (`multistage`, `bias_plateau`, `linear_teacher`) states its derivations
as `Identity` objects (claims of the form "these expressions are zero"); `settle` proves
them symbolically or, failing that within a time budget, checks them numerically at high
precision and says so. `run(paper)` settles every identity of a paper (or `"all"`), and
`format_table` renders the results.
"""

from ._core import Identity as Identity
from ._core import Settled as Settled
from ._core import format_table as format_table
from ._core import settle as settle
from ._registry import PAPERS as PAPERS
from ._registry import identities as identities
from ._registry import run as run

__all__ = ["Identity", "Settled", "settle", "run", "format_table", "PAPERS", "identities"]
