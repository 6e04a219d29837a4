"""`--error-norm {rms,max}` on `flows simulate multistage` and `flows sweep multistage`: the
flag reaches the solve (the steps change), lands in the saved config, a bad value or one
that does not act is refused with exit 2 before anything is written, and a sweep folder
computed with the other norm is refused on resume."""

import json

import pytest
import xarray as xr

from flows._cli import app as _cli

SIM = ["simulate", "multistage", "--m", "20", "--n", "50", "--t1", "2", "--n-save", "5"]
SWEEP = [
    "sweep",
    "multistage",
    "--m",
    "20",
    "--alpha",
    "1.0",
    "--seeds",
    "0",
    "--target",
    "f2",
    "--data",
    "assumption",
    "--n",
    "30",
    "--n-save",
    "41",
    "--no-plot",
    "--quiet",
]


def _main(argv) -> int:
    try:
        return _cli.main(argv)
    except SystemExit as exc:  # argparse's own refusal
        return int(exc.code or 0)


def _saved(out) -> dict:
    with xr.open_dataset(out / "trajectory.nc") as ds:
        return json.loads(ds.attrs["config"])


@pytest.mark.e2e
def test_simulate_error_norm_is_used_and_recorded(tmp_path, capsys):
    runs = {}
    for norm in ("rms", "max", None):
        out = tmp_path / str(norm)
        flag = [] if norm is None else ["--error-norm", norm]
        assert _main(SIM + flag + ["--out", str(out), "--no-report"]) == 0
        runs[norm] = _saved(out)
    capsys.readouterr()
    assert runs["max"]["error_norm"] == "max" and runs["rms"]["error_norm"] == "rms"
    assert runs[None]["error_norm"] == "rms"  # the default
    assert runs["max"]["experiment"]["error_norm"] == "max"
    # the norm reached the controller: the max norm is stricter, so more steps
    steps = {k: _steps(tmp_path / str(k)) for k in runs}
    assert steps["rms"] == steps[None] < steps["max"]


def _steps(out) -> int:
    with xr.open_dataset(out / "trajectory.nc") as ds:
        return int(json.loads(ds.attrs["stats"])["steps"])


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--error-norm", "l2"], "--error-norm"),
        (["--error-norm", "MAX"], "--error-norm"),
        (["--method", "gd", "--error-norm", "max"], "--error-norm applies to --method flow"),
    ],
)
def test_simulate_bad_error_norm_exit_2(tmp_path, capsys, extra, message):
    out = tmp_path / "bad"
    assert _main(SIM + extra + ["--out", str(out)]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.e2e
def test_sweep_error_norm_recorded_and_resume_refused(tmp_path, capsys):
    out = tmp_path / "sweep"
    assert _main(SWEEP + ["--error-norm", "max", "--out", str(out)]) == 0
    config = json.loads((out / "manifest.json").read_text())["config"]
    assert config["error_norm"] == "max"
    with xr.open_dataset(out / "sweep.nc") as ds:
        assert ds.attrs["error_norm"] == "max"
    capsys.readouterr()
    before = {p.name: p.stat().st_mtime_ns for p in out.rglob("*")}
    assert _main(SWEEP + ["--out", str(out)]) == 2  # the default, rms
    err = capsys.readouterr().err
    assert "error_norm='max'" in err and "error_norm='rms'" in err
    assert {p.name: p.stat().st_mtime_ns for p in out.rglob("*")} == before
    assert _main(SWEEP + ["--error-norm", "max", "--out", str(out)]) == 0  # resumes
    assert "skipped" in capsys.readouterr().out
    assert _main(SWEEP + ["--error-norm", "sup", "--out", str(tmp_path / "bad")]) == 2
    assert "--error-norm" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()
