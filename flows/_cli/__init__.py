"""The command line: `flows check`, `flows simulate`, `flows sweep`, `flows derive`.

`app` (the parser, `flows derive`, error handling and Ctrl-C), `check` (`flows check`:
every paper's checks), `check_progress` (its recorded timelines and bars), `jobs` (its
worker processes), `simulate` (`flows simulate` and its short report), `sweep` (`flows
sweep` and its bar of points), `live` (live lines on a terminal, plain lines elsewhere),
`lines` (widths, durations, line-by-line streams), `flags` (flags declared as data by the
experiments), `output` (output that survives any terminal), `env` (the environment JAX
starts in), `text` (the words `flows --help` shows without importing JAX).
"""
