"""The command line: `flows check`, `flows simulate`, `flows sweep`, `flows derive`.

`app` (the parser and the commands), `check` (`flows check`: every paper's checks with
their progress), `flags` (flags declared as data by the experiments), `output` (output
that survives any terminal), `env` (the environment JAX starts in).
"""
