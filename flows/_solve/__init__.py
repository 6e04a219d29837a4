"""The solve: a `Problem` and the run's arguments, validated once, integrated by diffrax
and returned as a `Trajectory` with its statistics and the digits it resolves.

`problem` (model + data + loss + θ(0)), `arguments` (the run's arguments, checked in the
user's terms), `simulate` (the public entry point), `flow` (the compiled solve on the
physical and log clocks), `loss_clock`, `clocks`, `batch` (runs of equal shape under
`vmap`), `baselines` (gradient descent, SGD), `stats`, `significance`, `global_error`,
`trajectory`, `progress`, `resources`, `losses`, `data`, `stages`.

Nothing is re-exported here: the public names come from `flows`.
"""
