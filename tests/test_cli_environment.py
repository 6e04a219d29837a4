"""The command line in unusual surroundings: a terminal that cannot encode the
toolkit's characters, stdout to a full disk or a closed pipe, and `JAX_PLATFORMS` /
`XLA_FLAGS` values JAX cannot start with. Each runs `python -m flows` (the same `entry`
as the console script) as a subprocess, with the cheapest command that shows the case:
`--help` pages for the output, `flows derive <unknown paper>` for the environment (the
check runs before the command, so that an accepted environment ends in the "unknown
paper" error instead: seconds, nothing computed)."""

import importlib.metadata
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _matrix import default_and_ci

from flows._cli.output import (
    EXIT_BAD_INPUT,
    EXIT_BROKEN_PIPE,
    EXIT_CANNOT_WRITE,
    ascii_spelling,
)

ROOT = Path(__file__).resolve().parents[1]
UNKNOWN_PAPER = ["derive", "no-such-paper"]


def _env(**extra) -> dict:
    """The test process's environment without the variables under test, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_PLATFORMS", "XLA_FLAGS")}
    env.pop("PYTHONIOENCODING", None)
    return {**env, **extra}


def _flows(args, *, env=None, stdout=subprocess.PIPE, code=None) -> subprocess.CompletedProcess:
    """`python -m flows ARGS` (or `python -c CODE`), stderr captured as bytes."""
    cmd = [sys.executable, "-c", code] if code else [sys.executable, "-m", "flows", *args]
    return subprocess.run(
        cmd, cwd=ROOT, env=env or _env(), stdout=stdout, stderr=subprocess.PIPE, timeout=300
    )


def _closed_pipe():
    """The write end of a pipe whose reader is gone (as after `| head -1` has exited)."""
    r, w = os.pipe()
    os.close(r)
    return w


# ---- output that survives any terminal -------------------------------------------------


def test_an_ascii_terminal_gets_ascii_spellings():
    # the help page of `simulate deep-linear` has ≥, · and θ; before: UnicodeEncodeError
    res = _flows(["simulate", "deep-linear", "--help"], env=_env(PYTHONIOENCODING="ascii"))
    assert res.returncode == 0, res.stderr.decode(errors="replace")[-2000:]
    out = res.stdout.decode("ascii")  # raises if anything non-ASCII came through
    assert ">= 0" in out and "theta saved at" in out and "2*u0" in out
    assert b"Traceback" not in res.stderr


@pytest.mark.parametrize(
    "text, ascii",
    [
        ("t → ∞, ‖θ‖ ≤ η·α", "t -> inf, ||theta|| <= eta*alpha"),
        ("½Σ(s − ab)² + θ₀", "1/2Sigma(s - ab)^2 + theta_0"),
        ("ȧ = b(s−ab); u̇ ≥ 0; λ", "a' = b(s-ab); u' >= 0; lambda"),
        ("W₁ᵀ x⁻¹ ℓ ŷ", "W_1^T x^(-1) l y_hat"),
        ("☃", "\\u2603"),  # nothing the toolkit prints: an escape, never an error
    ],
)
def test_ascii_spellings(text, ascii):
    assert ascii_spelling(text) == ascii


def test_stdout_to_a_full_disk_is_one_line_and_exit_3():
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    with open("/dev/full", "wb") as full:
        res = _flows(["--help"], stdout=full)  # before: a traceback (OSError), status 1
    assert res.returncode == EXIT_CANNOT_WRITE == 3
    assert res.stderr == b"flows: error: cannot write output: No space left on device\n"


def test_a_closed_pipe_ends_quietly_with_141():
    w = _closed_pipe()
    try:
        res = _flows(["--help"], stdout=w)  # before: BrokenPipeError traceback
    finally:
        os.close(w)
    assert res.returncode == EXIT_BROKEN_PIPE == 141
    assert res.stderr == b"", res.stderr.decode(errors="replace")


#: A command that fails to write in the middle of its work (100 kB, more than any buffer),
#: not in the final flush: `main` replaced by one that prints, then `entry` as the CLI runs.
_LONG_OUTPUT = textwrap.dedent(
    """
    from flows._cli import app as _cli
    def main(argv=None, **kw):
        for _ in range(2000):
            print("θ → " * 20)
        raise SystemExit("not reached: the write above must have failed")
    _cli.main = main
    _cli.entry()
    """
)


@pytest.mark.parametrize("where", ["closed pipe", "full disk"])
def test_a_write_that_fails_inside_the_command(where):
    if where == "full disk" and not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    target = _closed_pipe() if where == "closed pipe" else os.open("/dev/full", os.O_WRONLY)
    try:
        res = _flows([], stdout=target, code=_LONG_OUTPUT)
    finally:
        os.close(target)
    if where == "closed pipe":
        assert (res.returncode, res.stderr) == (EXIT_BROKEN_PIPE, b"")
    else:
        assert res.returncode == EXIT_CANNOT_WRITE
        assert res.stderr == b"flows: error: cannot write output: No space left on device\n"


# ---- environment checks ----------------------------------------------------------------


def _refused(var: str, value: str) -> str:
    res = _flows(UNKNOWN_PAPER, env=_env(**{var: value}))
    err = res.stderr.decode(errors="replace")
    assert res.returncode == EXIT_BAD_INPUT, err[-2000:]
    assert err.startswith(f"flows: error: {var}={value!r}"), err[-2000:]
    assert f"unset {var}" in err and f"env -u {var} flows derive no-such-paper" in err
    assert "Traceback" not in err and "unknown paper" not in err
    assert err.count("\n") == 1, err  # one line: XLA's own log is not passed on
    return err


def test_jax_platforms_unknown_is_refused():
    # before: a JAX RuntimeError traceback from the first computation (`flows check`)
    err = _refused("JAX_PLATFORMS", "garbage")
    assert "not in the list of known backends" in err


def test_jax_platforms_cuda_without_cuda_is_refused():
    if any("cuda" in (d.metadata["Name"] or "") for d in importlib.metadata.distributions()):
        pytest.skip("a JAX CUDA plugin is installed here")
    # before: a bare AssertionError traceback from jax's backend start-up
    _refused("JAX_PLATFORMS", "cuda")


@pytest.mark.parametrize(
    "value, said",
    default_and_ci(
        [
            ("--no_such_flag=1", "Unknown flag in XLA_FLAGS: --no_such_flag=1"),
            # the thread setting without "--": XLA reads it as a file of flags
            ("intra_op_parallelism_threads=1", "did not start with a"),
            ("--xla_cpu_multi_thread_eigen=maybe", "Couldn't interpret value maybe"),
        ],
        default=[("--no_such_flag=1", "Unknown flag in XLA_FLAGS: --no_such_flag=1")],
        unpack=True,
    ),
)
def test_xla_flags_xla_would_abort_on_are_refused(value, said):
    # before: XLA's fatal log line and the process ended (status 1) at the first computation
    assert said in _refused("XLA_FLAGS", value)


@pytest.mark.parametrize(
    "var, value",
    [
        ("JAX_PLATFORMS", "cpu"),
        ("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"),
    ],
)
def test_an_environment_jax_accepts_is_not_refused(var, value):
    res = _flows(UNKNOWN_PAPER, env=_env(**{var: value}))
    err = res.stderr.decode(errors="replace")
    assert res.returncode == EXIT_BAD_INPUT and "unknown paper 'no-such-paper'" in err, err
    assert var not in err
