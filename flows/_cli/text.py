"""The command line's own words: its description, the commands' one-line help, the
top-level options. Standard library only: the launcher (`_flows_launch`, outside the
package) loads this file by its path to answer `flows --help` and `flows --version`
without importing JAX or the package (0.1 s, not 2–4); `flows._cli.app` imports it as
usual. Nothing here imports the launcher.
"""

import argparse

#: The program's top level, shared with the full parser (`flows._cli.app.build_parser`), so
#: that `flows --help` and `flows --version` answer without importing JAX (0.1 s, not 2–4).
DESCRIPTION = "Exact gradient flows of small networks vs reduced models and theorems."
COMMANDS = {
    "check": "run an experiment and check the paper's claims (default: every paper)",
    "simulate": "integrate one gradient flow and save trajectory.nc",
    "sweep": "run a grid of gradient flows (batched, resumable, optionally on Dask)",
    "derive": "check the symbolic derivations (sympy)",
}
NO_CACHE_HELP = (
    "do not use the persistent compilation cache (default: compiled solves are kept in "
    "$FLOWS_CACHE_DIR or ~/.cache/flows/jax and reused by later commands; FLOWS_NO_CACHE=1 "
    "does the same)"
)


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as _version

    try:
        return _version("flows-theory")
    except PackageNotFoundError:  # a source tree that was never installed
        return "0+unknown"


def add_top_level(parser: argparse.ArgumentParser) -> None:
    """The options before the command: --version and --no-cache."""
    parser.add_argument("--version", action="version", version=f"flows {version()}")
    parser.add_argument("--no-cache", action="store_true", help=NO_CACHE_HELP)
