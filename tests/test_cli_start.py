"""`flows`, `flows --help` and `flows --version` answer from the launcher without importing
JAX or the package, with the same text the full parser prints."""

import subprocess
import sys

import pytest

_PROBE = """
import sys, _flows_launch
sys.argv = ["flows", *sys.argv[1:]]
try:
    _flows_launch.entry()
except SystemExit as exc:
    code = exc.code
print("EXIT", code, "jax" in sys.modules, "flows" in sys.modules)
"""


@pytest.mark.parametrize("argv, code", [(["--help"], 0), (["-h"], 0), (["--version"], 0), ([], 2)])
def test_top_level_answers_without_jax(argv, code):
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, *argv], capture_output=True, text=True, timeout=120
    )
    assert out.stdout.strip().splitlines()[-1] == f"EXIT {code} False False", out
    if argv == ["--version"]:
        import flows

        assert out.stdout.startswith(f"flows {flows.__version__}")
    if code == 2:
        assert "the following arguments are required: command" in out.stderr


def test_top_level_help_is_the_full_parsers():
    from flows._cli.app import build_parser

    out = subprocess.run(
        [sys.executable, "-c", _PROBE, "--help"], capture_output=True, text=True, timeout=120
    )
    help_text = out.stdout.rsplit("EXIT", 1)[0]
    assert help_text == build_parser().format_help()


def test_check_help_names_the_default():
    from flows._cli.app import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices["check"]
    assert "default: every paper" in sub.format_help()


def test_check_says_it_started_before_importing_jax():
    """`flows check`, `flows sweep` and `flows simulate --progress` print one line on stderr
    before the seconds of imports (stdout stays clean for --format json); their help, a
    quiet sweep and a simulate without progress do not."""
    probe = (
        "import sys, _flows_launch\n"
        "for argv in (['check', '--quick'], ['check', '--help'], ['simulate', 'x'],\n"
        "             ['simulate', 'x', '--progress'], ['sweep', 'x', '--out', 'o'],\n"
        "             ['sweep', 'x', '--quiet'], ['sweep', '-h'], []):\n"
        "    _flows_launch._say_starting(argv)\n"
        "print('jax' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "False"
    assert out.stderr.splitlines() == [
        "flows check: starting (loading JAX and the papers)",
        "flows simulate: starting (loading JAX)",
        "flows sweep: starting (loading JAX)",
    ]
