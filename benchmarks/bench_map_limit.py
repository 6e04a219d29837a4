"""The memory-map limit behind the test suite's old segmentation fault (not a speed
benchmark): how many memory mappings a cached XLA CPU executable holds, how many cached
executables reach the kernel's limit `vm.max_map_count`. (That the toolkit drops its
compiled programs at half the limit is tested in tests/test_map_limit.py.)

In one process: compile `--n` distinct small jitted functions, keeping every executable
alive, and read /proc/self/maps every 250; the slope is the mappings per executable, and
the limit over it the number of executables that exhaust the limit (measured once to the
end, 2026-12-04, jaxlib 0.10.2: "LLVM compilation error: Cannot allocate memory", then a
segmentation fault at 21 500 executables and 65 046 mappings).

Writes `benchmarks/results/map_limit.md` and `.json`. Linux only.

    python benchmarks/bench_map_limit.py [--n 3000]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

OUT = Path(__file__).parent / "results"


def map_usage() -> tuple[int, int] | None:
    """(memory mappings of this process, `vm.max_map_count`), None without /proc."""
    try:
        limit = int(Path("/proc/sys/vm/max_map_count").read_text().strip())
        with open("/proc/self/maps", "rb") as fh:
            return sum(1 for _ in fh), limit
    except (OSError, ValueError):
        return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=3000, help="executables to compile (3000)")
    args = parser.parse_args()
    import jax
    import jax.numpy as jnp
    import numpy as np

    if map_usage() is None:
        print("no /proc/self/maps: Linux only", file=sys.stderr)
        return 2
    used0, limit = map_usage()
    keep, rows = [], []
    for i in range(args.n):
        f = jax.jit(lambda x, i=i: jnp.sin(x) * i + jnp.cos(x * i))
        keep.append(f.lower(jnp.ones(3)).compile())
        if i % 250 == 0 or i == args.n - 1:
            rows.append((i + 1, map_usage()[0]))
    n, m = np.asarray(rows, float).T
    per_exe = float(np.polyfit(n, m, 1)[0])
    at_limit = int((limit - used0) / per_exe)
    result = {
        "jax": jax.__version__,
        "platform": platform.platform(),
        "max_map_count": limit,
        "mappings_at_start": used0,
        "mappings_per_executable": per_exe,
        "executables_at_limit": at_limit,
        "samples": rows,
    }
    OUT.mkdir(exist_ok=True)
    (OUT / "map_limit.json").write_text(json.dumps(result, indent=1))
    lines = [
        "# The memory-map limit (`benchmarks/bench_map_limit.py`)",
        "",
        f"jax {jax.__version__}, {platform.platform()}; vm.max_map_count = {limit}.",
        "",
        f"- {per_exe:.2f} memory mappings per cached XLA CPU executable (fit over {args.n}).",
        f"- The limit is reached at about {at_limit:,} cached executables "
        "(measured to the end once, 2026-12-04: LLVM 'Cannot allocate memory', then a",
        "  segmentation fault at 21,500 executables and 65,046 mappings).",
        "- The toolkit drops its compiled programs before compiling once half the limit is",
        "  used (`flows._compile.relieve_map_pressure`; tests/test_map_limit.py).",
        "",
    ]
    (OUT / "map_limit.md").write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
