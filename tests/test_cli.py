"""The command line: exit codes, files written, nothing half-written on failure."""

import dataclasses
import re
import subprocess
import sys

import pytest
import xarray as xr

from flows._cli import app as _cli
from flows.experiments import multistage as ex


@pytest.mark.e2e
def test_simulate_writes_trajectory(tmp_path, capsys):
    out = tmp_path / "run"
    code = _cli.main(
        [
            "simulate",
            "multistage",
            "--m",
            "50",
            "--n",
            "100",
            "--t1",
            "0.5",
            "--n-save",
            "21",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    ds = xr.open_dataset(out / "trajectory.nc")
    assert ds["loss"].dims == ("time",) and ds.sizes["time"] == 21
    assert ds["a"].dims == ("time", "neuron") and ds.sizes["neuron"] == 50
    assert "tsit5" in ds.attrs["solver"]
    assert "wrote:" in capsys.readouterr().out


def test_simulate_gd(tmp_path):
    out = tmp_path / "gd"
    code = _cli.main(
        [
            "simulate",
            "multistage",
            "--m",
            "20",
            "--n",
            "50",
            "--t1",
            "0.05",
            "--method",
            "gd",
            "--lr",
            "1e-3",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    assert "gradient descent" in xr.open_dataset(out / "trajectory.nc").attrs["config"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--alpha", "1", "--t1", "-1"], "t1"),
        (["--t1", "0"], "t1"),
        (["--rtol", "0"], "rtol"),
        (["--atol=-1e-9"], "atol"),
        (["--solver", "euler"], "solver"),
        (["--target", "f9"], "target"),
        (["--m", "0"], "m"),
    ],
)
def test_simulate_bad_input_exit_2(tmp_path, capsys, args, message):
    out = tmp_path / "bad"
    code = _cli.main(["simulate", "multistage", "--out", str(out), *args])
    assert code == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.e2e
def test_solver_failure_exit_3(tmp_path, capsys):
    out = tmp_path / "fail"
    code = _cli.main(
        [
            "simulate",
            "multistage",
            "--m",
            "20",
            "--n",
            "50",
            "--t1",
            "5",
            "--max-steps",
            "3",
            "--out",
            str(out),
        ]
    )
    assert code == 3
    err = capsys.readouterr().err
    assert "stopped at t = " in err and "max_steps" in err
    assert not (out / "trajectory.nc").exists()


def test_argparse_errors_exit_2(capsys):
    assert _cli.main(["check", "nonexistent"]) == 2
    assert "nonexistent" in capsys.readouterr().err
    assert _cli.main(["--help"]) == 0


@pytest.mark.e2e
def test_check_exit_codes(tmp_path, monkeypatch, capsys):
    tiny = ex.Config(
        m=200,
        data="assumption",
        target="f2",
        n=50,
        t1=12.0,
        sweep_m=(100, 400),
        sweep_alpha=(1.0, 1.25),
        sweep_seeds=(0,),
        sweep_n=40,
        targets=(),
    )
    monkeypatch.setattr(ex.EXPERIMENT, "default_config", lambda quick=False: tiny)
    code = _cli.main(["check", "multistage", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert "claim" in out and "verdict" in out
    assert (tmp_path / "multistage" / "results.json").exists()
    assert code == (1 if "FAILS" in out else 0)
    # a failing applicable check gives exit 1
    broken = dataclasses.replace(tiny, slope_tol=1e-9)
    monkeypatch.setattr(ex.EXPERIMENT, "default_config", lambda quick=False: broken)
    assert _cli.main(["check", "multistage", "--out", str(tmp_path)]) == 1


def test_derive_exit_codes(capsys):
    # a generous budget: whether an identity is "proved" must not depend on the machine's load
    assert _cli.main(["derive", "multistage", "--time-budget", "600"]) == 0
    out = capsys.readouterr().out
    summary = re.search(r"(\d+) identities: (\d+) proved, (\d+) checked numerically", out)
    assert summary and summary.group(1) == summary.group(2) != "0", out
    assert _cli.main(["derive", "no-such-paper"]) == 2


def test_python_dash_m_is_the_same_program():
    res = subprocess.run([sys.executable, "-m", "flows", "--help"], capture_output=True, text=True)
    assert res.returncode == 0 and "check" in res.stdout and "simulate" in res.stdout


@pytest.mark.e2e
def test_simulate_bias_plateau_contract(tmp_path):
    out = tmp_path / "bp"
    assert _cli.main(["simulate", "bias-plateau", "--k", "3", "--out", str(out)]) == 0
    ds = xr.open_dataset(out / "trajectory.nc")
    assert ds["W"].dims[0] == "time" and ds["b"].dims[0] == "time"
    assert ds["loss"].dims == ("time",)


@pytest.mark.e2e
def test_simulate_linear_teacher_contract(tmp_path):
    out = tmp_path / "lt"
    code = _cli.main(["simulate", "linear-teacher", "--k", "3", "--t1", "100", "--out", str(out)])
    assert code == 0
    ds = xr.open_dataset(out / "trajectory.nc")
    assert ds["w"].dims[0] == "time" and ds["u"].dims[0] == "time"
    assert float(ds["time"][-1]) == pytest.approx(100.0)


def test_simulate_other_bad_input_exit_2(tmp_path):
    assert _cli.main(["simulate", "bias-plateau", "--k", "1", "--out", str(tmp_path / "a")]) == 2
    code = _cli.main(["simulate", "linear-teacher", "--slope", "1.5", "--out", str(tmp_path / "b")])
    assert code == 2
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
