"""The exact gradient flow of networks whose activations have kinks (ReLU, leaky ReLU, any
`PiecewiseLinear`): a piecewise-smooth ODE, integrated with located switching and Filippov
sliding.

The switching functions are the pre-activations z_j(θ) of every unit on every sample
("pairs" j). Within one activation pattern (each pair's piece of σ fixed) the loss is a
smooth function of θ and the flow is integrated by Tsit5 (diffrax's step, our own step-size
control and event location), on the pattern's smooth extension. After each accepted step
the pairs' margins (distance of z_j to the edges of its piece) are checked along the dense
output; the earliest crossing is located by a bracketing root finder on the interpolant,
the step is cut there, and the pattern is updated by a Filippov decision over every pair at
a kink:

- a pair whose field on the far side points onward crosses (its piece changes);
- a pair whose fields on both sides point into the surface *slides*: its slope λ_j ∈
  [s_left, s_right] is the equivalent control that keeps ż_j = 0 (solved by Newton's method
  on ż(λ), all sliding pairs together), until λ_j reaches an end of its interval — an event
  that returns it to that side.

With several pairs at a kink at once the decision solves the box-constrained
complementarity problem (λ in the box, ż = 0 where interior, ż pointing to the chosen
side where at a bound) by an active-set iteration, one pair at a time; for one-hidden-layer
nets on attractive kinks this is the minimum-norm element of the Clarke subdifferential.
Where the iteration does not settle (several coupled surfaces in deep nets, where ż is
multilinear in the slopes of one sample's pairs in different layers), the same problem is
solved for all candidates at once by semismooth Newton on its natural residual
λ − Π_box(λ − F(λ)), F = ∓ż. Only if that fails too is the minimum-norm element of the
Clarke subdifferential taken (a box-constrained least-squares problem in the candidates'
slopes, ∇L linearized in them; counted in `stats.extra["unresolved_events"]`).
If that still chatters, the event-storm guard stops the run and names the pair.

Redundant surfaces: where a sample is dead in one layer (every unit there off, or a ReLU
unit held on its kink) and there is no hidden bias, the next layer's pairs of that sample
sit at z = 0 with a normal that is zero or a combination of the held units' normals. They
are no switching surfaces of their own while those slide (`slaved`): they are left out of
the decisions and of event detection until the pattern upstream changes, and the sliding
systems are solved by damped least squares (`_sliding.damped_solve`), so a dependent constraint
that does reach them leaves them consistent rather than singular.
Everything runs in one compiled `lax.while_loop`: no recompilation per event, thousands of
pairs.

The package, in the order data flows (see its README.md): `_net` (layout, settings, kink
tables, constants), `_pattern` (the network under a pattern), `_sliding` (equivalent
control, vector field, margins), `_decision` (the Filippov decision at an event), `_loop`
(steps, event location, saves), `_api` (`simulate_nonsmooth`).

Along the Filippov flow dL/dt = −‖θ̇‖² (chain rule for these piecewise-smooth losses), so
the energy identity remains the accuracy certificate; the switching residual at each
located event and the pattern consistency at each save certify the switching.
"""

from __future__ import annotations

from ._api import _CACHE as _CACHE
from ._api import KINK_OBSERVABLES as KINK_OBSERVABLES
from ._api import NONSMOOTH_CLOCKS as NONSMOOTH_CLOCKS
from ._api import simulate_nonsmooth as simulate_nonsmooth
from ._net import SWITCH_RESIDUAL_MAX as SWITCH_RESIDUAL_MAX

__all__ = ["simulate_nonsmooth", "KINK_OBSERVABLES", "NONSMOOTH_CLOCKS"]
