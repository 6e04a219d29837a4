"""The environment JAX starts in: `JAX_PLATFORMS` or `XLA_FLAGS` values that XLA cannot
start with are found by a probe in a subprocess before the command imports JAX, and
refused with the variable named and how to unset it (exit 2)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from .._errors import ConfigError


#: Seconds a probe of `XLA_FLAGS` may take before it is given up (the run then goes on).
def _command() -> list[str]:
    """The command as typed (for advice that repeats it)."""
    return ["flows", *sys.argv[1:]]


ENV_PROBE_TIMEOUT_S = 120.0
#: The probes, run as `python -c`: a bare XLA CPU client (≈0.3 s: parses XLA_FLAGS, and XLA
#: aborts the process on a flag it refuses), then, only if that failed, what the run does.
_PROBE_XLA = "from jaxlib import xla_client\nxla_client.make_cpu_client()\n"
_PROBE_JAX = "import jax\njax.devices()\n"
#: An error or fatal line of XLA's log: "F1203 14:43:40.766182 4510 file.cc:234] message".
_XLA_LOG = re.compile(r"^([EF])\d{4} [\d:.]+\s+\d+ [^\]\s]+\] (.*)$", re.MULTILINE)


def _unset_advice(name: str) -> str:
    import shlex

    return f"`unset {name}`, or run `env -u {name} {shlex.join(_command())}`"


def _probe(code: str, env: dict) -> subprocess.CompletedProcess | None:
    """`code` run by this Python in a child process with `env`; None when it could not be
    run or took longer than `ENV_PROBE_TIMEOUT_S` (no verdict)."""
    try:
        return subprocess.run(
            [sys.executable, "-c", code],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=ENV_PROBE_TIMEOUT_S,
        )
    except (OSError, subprocess.SubprocessError):
        return None


def _xla_complaint(stderr: str) -> str | None:
    """What XLA said when it refused its flags: the error lines (the cause), else the fatal
    one; None when the log has neither (the failure was not XLA's)."""
    lines = _XLA_LOG.findall(stderr)
    said = [m for level, m in lines if level == "E"] or [m for level, m in lines]
    text = " ".join(m.strip() for m in said).rstrip(".")
    return text[:400] + (" ..." if len(text) > 400 else "") if text else None


def _check_environment() -> None:
    """Refuse (`ConfigError`, exit 2) an environment that JAX cannot start in, before
    anything runs, naming the variable and how to unset it.

    - `XLA_FLAGS`: XLA parses it when the first backend starts and, on a flag it does not
      know, a value it cannot read or a first word without "--" (read as a file name),
      logs a fatal line and ends the process (status 1, no Python exception). That cannot
      be caught in this process, so it is tried first in a child process: a bare XLA CPU
      client (measured 0.3 s; every XLA flag, GPU ones included, is known to it), and only
      if that fails, `jax.devices()` as the run would call it (2 s), so that nothing the
      run would accept is refused.
    - `JAX_PLATFORMS`: a backend that is unknown or cannot start here (`cuda` without a
      GPU or its plugin) raises a Python exception (an empty `AssertionError` for `cuda`
      with jax 0.10) on the first use of JAX; tried here in this process, at the cost of
      starting the backend the run starts anyway.

    Neither set (the common case): nothing is done."""
    flags = os.environ.get("XLA_FLAGS", "")
    platforms = os.environ.get("JAX_PLATFORMS", "")
    if flags:
        cheap = _probe(_PROBE_XLA, dict(os.environ))
        if cheap is not None and cheap.returncode != 0:
            env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false")  # no GPU memory
            full = _probe(_PROBE_JAX, env)
            said = None if full is None or full.returncode == 0 else _xla_complaint(full.stderr)
            if said is None and full is not None and full.returncode != 0 and not platforms:
                said = ([""] + full.stderr.strip().splitlines())[-1][-300:] or "it ended"
            if said is not None:
                raise ConfigError(
                    f"XLA_FLAGS={flags!r} is refused by XLA: {said}. "
                    "XLA would abort the run; each flag must be written --name=value, one "
                    "of the flags XLA knows. Fix the value or unset it: "
                    f"{_unset_advice('XLA_FLAGS')}."
                )
    if platforms.strip():
        import jax

        try:
            jax.devices()
        except Exception as exc:  # RuntimeError, or jax's bare AssertionError for `cuda`
            said = re.sub(r"\s*\(set JAX_PLATFORMS=.*\)\s*$", "", str(exc)).strip().rstrip(".")
            said = said or (
                "no such backend here: is its plugin installed (e.g. jax[cuda12] for cuda) "
                "and the device visible?"
            )
            raise ConfigError(
                f"JAX_PLATFORMS={platforms!r} names a backend JAX cannot start on this "
                f"machine ({said}). Unset it to let JAX choose: "
                f"{_unset_advice('JAX_PLATFORMS')}; or name a backend this machine has "
                "(JAX_PLATFORMS=cpu)."
            ) from None


def _jit_kept_on():
    """A context for the command: where `JAX_DISABLE_JIT` is set (or `jax_disable_jit` is
    on), jit stays on inside it and one line on stderr says so; else nothing.

    The solver loop is compiled ahead of time (`flows._compile.compile_program`), which JAX
    refuses with jit disabled ("Disable jit is not supported in the AOT path"); run without
    compiling, each step is a Python loop over single operations (measured: 9 s instead of
    0.02 s for 145 gradient evaluations of a 20-unit net). The command line runs no user
    code that jit would hide from a debugger, so it runs compiled."""
    import contextlib

    if "jax" not in sys.modules and not os.environ.get("JAX_DISABLE_JIT"):
        return contextlib.nullcontext()
    import jax

    if not jax.config.jax_disable_jit:  # pyright: ignore[reportAttributeAccessIssue]
        return contextlib.nullcontext()
    print(
        "flows: warning: JAX_DISABLE_JIT is set; flows compiles its solver ahead of time "
        "and runs it compiled (uncompiled it is ~100x slower). To silence this: "
        f"{_unset_advice('JAX_DISABLE_JIT')}.",
        file=sys.stderr,
    )
    return jax.disable_jit(False)
