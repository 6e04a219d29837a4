"""The work-precision benchmark as a package; `benchmarks/bench_work_precision.py` is its
command line.

- `cases`: the problems (multi-stage default, late-phase linear teacher), the reference
  and the tolerance grids;
- `methods`: the rows as data and their runners — the toolkit's solvers, gradient
  descent, scipy's `solve_ivp`, torchdiffeq on the PyTorch port (`torch_port`);
- `run`: the reference solve, running the rows, provenance, and writing one case's files;
- `report`: the headline ratios, the Markdown page and the work-precision plot.

Uses only public names of `flows`.
"""
