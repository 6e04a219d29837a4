"""Sweep folders that stay consistent: one sweep at a time, nothing written for settings
that cannot run, no debris of killed writes, no silent or unsafe reading of point files,
Ctrl-C that always stops, a clean message for a bad scheduler.

The points are computed by a stand-in for `run_points` (no solve, no compilation): these
tests are about the folder, which `tests/test_sweep.py` checks with real solves.
"""

import gc
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import h5py
import numpy as np
import pytest
import xarray as xr

import flows
import flows._io as _io
from flows._solve import trajectory as _trajectory
from flows._sweep import engine as _sweep
from flows.experiments.multistage import sweep as msweep

GRID = dict(m="20", alpha="0.75,1.0", seeds="0-1")
SETTINGS = dict(target="f2", data="assumption", n=30, n_save=41, batch_size=2)
POINTS = [
    "m20_alpha0.75_seed0.nc",
    "m20_alpha0.75_seed1.nc",
    "m20_alpha1.0_seed0.nc",
    "m20_alpha1.0_seed1.nc",
]
SECRET = 4242.0  # what a crafted file would smuggle into sweep.nc


def _run(out, **kw):
    return msweep.descent_sweep(out, **{**GRID, **SETTINGS, "plot": False, "progress": False, **kw})


def _fake_T_d(m, alpha, seed) -> float:
    return 1.0 + alpha + 0.01 * seed + 1e-4 * m


@pytest.fixture(autouse=True)
def python_sigint():
    """SIGINT handled as in an interactive Python (it is ignored in some background jobs,
    and a sweep leaves an ignored SIGINT alone)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.fixture
def computed(monkeypatch):
    """`run_points` replaced by a stand-in that records the points asked for; each point
    gets T_d = `_fake_T_d` and a loss curve from 1 down to 0."""
    calls = []

    def fake_run_points(config, specs, pad_to=0):
        cfg = msweep.SweepConfig.from_dict(config)
        calls.append([tuple(p) for p in specs])
        recs = []
        for m, alpha, seed in specs:
            rec = msweep._blank_record(cfg, m, alpha, seed)
            rec.update(status="ok", T_d=_fake_T_d(m, alpha, seed), T_p=0.5)
            rec["tau"] = np.linspace(0.0, rec["tau1"], cfg.n_save)
            rec["t"] = rec["tau"].copy()
            rec["loss"] = np.linspace(1.0, 0.0, cfg.n_save)
            rec["K_hat"] = np.linspace(0.0, 1.0, cfg.n_save)
            recs.append(rec)
        return recs

    monkeypatch.setattr(msweep, "run_points", fake_run_points)
    return calls


def _ran(calls) -> list:
    return sorted(p for batch in calls for p in batch)


def _files(folder) -> dict:
    return {
        str(p.relative_to(folder)): p.stat().st_mtime_ns
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


# ---------------------------------------------------------------------------------------
# One sweep at a time


def test_second_sweep_on_a_running_folder_is_refused(tmp_path, computed, monkeypatch):
    """Sweep B starts while sweep A runs on the same folder: with other widths (same
    settings) while A computes, and with another rtol in the window before A's manifest
    exists. B is refused and A's folder stays A's alone."""
    out = tmp_path / "sweep"
    refusals = []
    real_run_points = msweep.run_points

    started = []

    def meanwhile_other_widths(config, specs, pad_to=0):
        if not started:
            started.append(specs)
            with pytest.raises(flows.ConfigError) as err:
                _run(out, m="30")
            refusals.append(str(err.value))
        return real_run_points(config, specs, pad_to)

    monkeypatch.setattr(msweep, "run_points", meanwhile_other_widths)
    result = _run(out)
    assert result.ok and len(refusals) == 1
    assert f"another sweep is running on {out} (process {os.getpid()})" in refusals[0]
    assert "another --out" in refusals[0]
    ds = result.dataset()
    assert list(ds["m"].values) == [20] and (ds["status"] == "ok").all()
    assert sorted(p.name for p in (out / "points").iterdir()) == POINTS

    # the race at the start: both folders look fresh until the first manifest is written
    out2 = tmp_path / "race"
    real_write_text = _sweep._write_text_atomic

    def manifest_late(path, text):
        if path.name == "manifest.json" and len(refusals) == 1:
            with pytest.raises(flows.ConfigError) as err:
                _run(out2, rtol=1e-7)
            refusals.append(str(err.value))
        return real_write_text(path, text)

    monkeypatch.setattr(_sweep, "_write_text_atomic", manifest_late)
    _run(out2)
    assert "another sweep is running" in refusals[1]
    assert json.loads((out2 / "manifest.json").read_text())["config"]["rtol"] == 1e-6
    # once A is done the lock is free: the other widths are added (same settings)
    assert _run(out, m="30").ok
    assert list(xr.load_dataset(out / "sweep.nc")["m"].values) == [20, 30]


def test_lock_is_released_by_a_crash_and_by_a_killed_process(tmp_path, computed, monkeypatch):
    out = tmp_path / "sweep"

    def crash(config, specs, pad_to=0):
        raise OSError(28, "No space left on device")

    real_run_points = msweep.run_points
    monkeypatch.setattr(msweep, "run_points", crash)
    with pytest.raises(OSError, match="No space left") as err:  # not taken for a lock error
        _run(out)
    assert not isinstance(err.value, flows.ConfigError)
    monkeypatch.setattr(msweep, "run_points", real_run_points)
    assert _run(out).ok  # the crashed sweep's lock went with it

    # another process holds the lock, then is killed: the folder is free again
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from flows._io import lock_folder\n"
            "with lock_folder(sys.argv[1]):\n"
            "    print('locked', flush=True)\n"
            "    time.sleep(120)\n",
            str(out),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(flows.ConfigError, match=rf"\(process {holder.pid}\)"):
            _run(out, alpha="1.25")
    finally:
        holder.kill()
        holder.wait()
    assert _run(out, alpha="1.25").ok


# ---------------------------------------------------------------------------------------
# Nothing written for settings that cannot run


def test_settings_every_point_would_refuse_write_nothing(tmp_path, computed):
    """float32 cannot meet rtol 1e-8 (simulate refuses it): the sweep is refused before
    the folder exists, so the corrected command then runs into it."""
    out = tmp_path / "f32"
    with pytest.raises(flows.ConfigError, match=r"rtol.*1e-08.*float32"):
        _run(out, dtype="float32", rtol=1e-8)
    assert not out.exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(flows.ConfigError, match="float32"):
        _run(empty, dtype="float32", rtol=1e-8)
    assert list(empty.iterdir()) == []  # not even a lock file
    (tmp_path / "file").write_text("mine")
    with pytest.raises(flows.ConfigError, match="cannot create the folder or its lock file"):
        _run(tmp_path / "file" / "sweep")
    assert (tmp_path / "file").read_text() == "mine"
    assert computed == []
    result = _run(out, dtype="float32", rtol=1e-6)
    assert result.ok and result.n_run == 4
    assert json.loads((out / "manifest.json").read_text())["config"]["dtype"] == "float32"


# ---------------------------------------------------------------------------------------
# Temporaries of killed writes; fsync


def _killed_write(path) -> None:
    """A process killed (SIGKILL) inside `write_atomic`, after writing its temporary."""
    code = textwrap.dedent(
        """
        import os, signal, sys
        from flows._io import write_atomic

        def write(tmp):
            with open(tmp, "wb") as fh:
                fh.write(b"half a file")
            os.kill(os.getpid(), signal.SIGKILL)

        write_atomic(sys.argv[1], write)
        """
    )
    proc = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True)
    assert proc.returncode == -signal.SIGKILL


def test_temporaries_of_killed_writes_are_removed_on_the_next_run(tmp_path, computed, capsys):
    out = tmp_path / "sweep"
    _run(out)
    _killed_write(out / "sweep.nc")
    _killed_write(out / "points" / "m20_alpha1.0_seed0.nc")
    debris = sorted(p.name for p in out.rglob(".*.tmp"))
    assert len(debris) == 2
    assert {_io.temporary_target(n) for n in debris} == {"sweep.nc", "m20_alpha1.0_seed0.nc"}
    # shaped like temporaries but not of files the sweep writes, or not shaped exactly so
    foreign = [
        out / ".notes.txt.abcd1234.tmp",
        out / ".sweep.nc.abc.tmp",
        out / "points" / ".m20_alpha1.0_seed0.nc.TOOLONG99.tmp",
        out / "points" / "keep.tmp",
    ]
    for p in foreign:
        p.write_text("not the sweep's")
    (out / ".manifest.json.zzzzzzzz.tmp").mkdir()  # a folder is never removed
    before = _files(out)
    result = _run(out, progress=True)
    text = capsys.readouterr().out
    assert result.n_run == 0
    assert "removed 2 temporary files left by an interrupted write" in text
    assert not any(
        _io.temporary_target(p.name) in ("sweep.nc", "m20_alpha1.0_seed0.nc")
        for p in out.rglob(".*.tmp")
    )
    assert all(p.read_text() == "not the sweep's" for p in foreign)
    assert (out / ".manifest.json.zzzzzzzz.tmp").is_dir()
    assert _files(out)["points/m20_alpha0.75_seed0.nc"] == before["points/m20_alpha0.75_seed0.nc"]


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
def test_write_atomic_fsyncs_the_file_before_the_rename_and_the_folder_after(tmp_path, monkeypatch):
    assert _trajectory.write_atomic is _io.write_atomic  # one writer for every file
    target = tmp_path / "sub" / "result.nc"
    synced = []
    real_fsync = os.fsync

    def recording(fd):
        synced.append((os.readlink(f"/proc/self/fd/{fd}"), target.exists()))
        return real_fsync(fd)

    monkeypatch.setattr(_io.atomic.os, "fsync", recording)
    _io.write_atomic(target, lambda tmp: open(tmp, "wb").close())
    (tmp_name, existed), (folder, existed_after) = synced
    assert _io.temporary_target(os.path.basename(tmp_name)) == "result.nc" and not existed
    assert folder == str(target.parent) and existed_after
    assert list(target.parent.iterdir()) == [target]


# ---------------------------------------------------------------------------------------
# Point files read back


def test_corrupt_point_files_are_reported_and_recomputed(tmp_path, computed, capsys):
    out = tmp_path / "sweep"
    _run(out)
    computed.clear()
    garbage = out / "points" / "m20_alpha0.75_seed1.nc"
    garbage.write_bytes(b"garbage")
    truncated = out / "points" / "m20_alpha1.0_seed0.nc"
    truncated.write_bytes(truncated.read_bytes()[:2000])
    result = _run(out, progress=True)
    text = capsys.readouterr().out
    assert _ran(computed) == [(20, 0.75, 1), (20, 1.0, 0)]
    for name in (garbage.name, truncated.name):
        assert f"rejected points/{name}: not a readable HDF5/netCDF-4 file" in text
    assert text.count("recomputing it") == 2 and "2 point files rejected" in text
    assert [r["file"] for r in result.rejected] == [
        f"points/{garbage.name}",
        f"points/{truncated.name}",
    ]
    assert "REJECTED point files (2" in result.summary
    assert (result.dataset()["status"] == "ok").all()
    assert _run(out).rejected == []  # recomputed files are clean


def _secret_h5(folder):
    path = folder / "secret.h5"
    with h5py.File(path, "w") as f:
        f["data"] = np.full(41, SECRET)
    return path


def _replace_loss(f, make) -> None:
    """Put `make(f)` where the point's `loss` was, attached to the `save` dimension as
    netCDF expects, so that a reader that does not look would take it for the curve."""
    attrs = dict(f["loss"].attrs)
    del f["loss"]
    make(f)
    if isinstance(f.get("loss", getlink=True), h5py.HardLink):
        f["loss"].dims[0].attach_scale(f["save"])
        for k in ("_Netcdf4Coordinates", "_FillValue"):
            f["loss"].attrs[k] = attrs[k]


def _external_storage(f, folder):
    raw = folder / "secret.bin"
    raw.write_bytes(np.full(41, SECRET).tobytes())
    _replace_loss(
        f, lambda f: f.create_dataset("loss", (41,), "f8", external=[(str(raw), 0, 41 * 8)])
    )


def _virtual(f, folder):
    layout = h5py.VirtualLayout(shape=(41,), dtype="f8")
    layout[:] = h5py.VirtualSource(str(_secret_h5(folder)), "data", shape=(41,))
    _replace_loss(f, lambda f: f.create_virtual_dataset("loss", layout, fillvalue=np.nan))


def _soft_link(f, folder):
    _replace_loss(f, lambda f: f.__setitem__("loss", h5py.SoftLink("/K_hat")))


def _external_link(f, folder):
    path = str(_secret_h5(folder))
    _replace_loss(f, lambda f: f.__setitem__("loss", h5py.ExternalLink(path, "/data")))


def _nested_soft_link(f, folder):
    f.create_group("extra")["alias"] = h5py.SoftLink("/loss")


def _longer_curve(f, folder):
    _replace_loss(f, lambda f: f.create_dataset("loss", data=np.full(40, SECRET)))


def _float32_curve(f, folder):
    _replace_loss(f, lambda f: f.create_dataset("loss", data=np.full(41, SECRET, "f4")))


def _extra_variable(f, folder):
    f["smuggled"] = np.full(3, SECRET)


def _missing_variable(f, folder):
    del f["T_d"]


def _curve_as_scalar(f, folder):
    del f["T_d"]
    f["T_d"] = np.full(41, SECRET)


def _other_settings(f, folder):
    cfg = json.loads(f.attrs["config"])
    f.attrs["config"] = json.dumps({**cfg, "rtol": 1e-9})


def _other_point(f, folder):
    f.attrs["id"] = "m20_alpha1.0_seed1"
    f.attrs["seed"] = 1


def _not_a_grid_point(f, folder):
    f.attrs["alpha"] = float("nan")


CRAFTED = {
    "external storage": (_external_storage, "uses external storage"),
    "virtual dataset": (_virtual, "is a virtual dataset"),
    "soft link": (_soft_link, "'/loss' is a soft link"),
    "external link": (_external_link, "'/loss' is an external link"),
    "nested soft link": (_nested_soft_link, "'/extra/alias' is a soft link"),
    "longer curve": (_longer_curve, "'loss' is float64 of shape (40,)"),
    "float32 curve": (_float32_curve, "'loss' is float32 of shape (41,)"),
    "extra variable": (_extra_variable, "unexpected ['smuggled']"),
    "missing variable": (_missing_variable, "missing ['T_d']"),
    "curve as scalar": (_curve_as_scalar, "'T_d' is float64 of shape (41,)"),
    "other settings": (_other_settings, "written with other settings (rtol=1e-09"),
    "other point": (_other_point, "not the point its name says"),
    "not a grid point": (_not_a_grid_point, "not a grid point (--alpha: nan is not a finite"),
}


@pytest.mark.parametrize("kind", list(CRAFTED))
def test_crafted_point_files_are_refused_never_merged(tmp_path, computed, kind):
    """A point file changed after the sweep wrote it: external storage, virtual datasets
    and links could make the reader copy any readable file into sweep.nc; the others do
    not have a point's schema or are not this point of this sweep. Each is reported and
    recomputed."""
    out = tmp_path / "sweep"
    _run(out)
    computed.clear()
    point = out / "points" / "m20_alpha1.0_seed0.nc"
    craft, reason = CRAFTED[kind]
    with h5py.File(point, "r+") as f:
        craft(f, tmp_path)
    result = _run(out)
    ds = xr.load_dataset(out / "sweep.nc")
    assert not np.any(np.asarray(ds["loss"]) == SECRET)
    assert float(ds["T_d"].sel(m=20, alpha=1.0, seed=0)) == _fake_T_d(20, 1.0, 0)
    assert (ds["status"] == "ok").all()
    assert _ran(computed) == [(20, 1.0, 0)]
    ((rejected),) = result.rejected
    assert rejected["file"] == "points/m20_alpha1.0_seed0.nc" and reason in rejected["reason"]


def test_hdf5_hazard(tmp_path):
    plain = tmp_path / "plain.h5"
    with h5py.File(plain, "w") as f:
        f.create_group("g")["x"] = np.arange(3.0)
        f["alias"] = f["g/x"]  # a second hard link: still one self-contained file
    assert _io.hdf5_hazard(plain) is None
    with open(plain, "rb") as fh:
        assert _io.hdf5_hazard(fh) is None
    linked = tmp_path / "linked.h5"
    with h5py.File(linked, "w") as f:
        f.create_group("a/b")["c"] = h5py.ExternalLink("/etc/passwd", "/x")
    assert "'/a/b/c' is an external link (to '/x' in '/etc/passwd')" == _io.hdf5_hazard(linked)
    assert "not a readable HDF5" in _io.hdf5_hazard(tmp_path / "missing.h5")


def test_plot_refuses_a_crafted_combined_file(tmp_path, computed):
    out = tmp_path / "sweep"
    _run(out)
    with h5py.File(out / "sweep.nc", "r+") as f:
        f["alias"] = h5py.SoftLink("/T_d")
    with pytest.raises(flows.ConfigError, match="refusing to read .* soft link"):
        msweep.plot_descent_sweep(out / "sweep.nc", tmp_path / "fig.png")
    assert not (tmp_path / "fig.png").exists()


# ---------------------------------------------------------------------------------------
# Ctrl-C


class _SwallowsInterrupt:
    """Receives SIGINT inside `__del__`, where Python prints the KeyboardInterrupt and
    drops it, as it does in a garbage-collector callback (where JAX's swallowed one)."""

    def __del__(self):
        signal.raise_signal(signal.SIGINT)


def test_interrupt_swallowed_by_a_callback_still_stops_the_sweep(tmp_path, computed, monkeypatch):
    unraisable = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: unraisable.append(u.exc_type))
    real_run_points = msweep.run_points

    def interrupted_in_a_callback(config, specs, pad_to=0):
        obj = _SwallowsInterrupt()
        del obj
        return real_run_points(config, specs, pad_to)

    monkeypatch.setattr(msweep, "run_points", interrupted_in_a_callback)
    before = signal.getsignal(signal.SIGINT)
    out = tmp_path / "sweep"
    with pytest.raises(KeyboardInterrupt):
        _run(out)
    assert unraisable == [KeyboardInterrupt]  # the signal was indeed swallowed there
    assert len(computed) == 1  # the second batch never started
    assert len(list((out / "points").glob("*.nc"))) == 1  # the finished point is kept
    assert signal.getsignal(signal.SIGINT) is before

    # and an interrupt that is not swallowed stops the sweep where it lands
    def interrupted(config, specs, pad_to=0):
        signal.raise_signal(signal.SIGINT)
        raise AssertionError("not reached")

    monkeypatch.setattr(msweep, "run_points", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _run(out)
    assert signal.getsignal(signal.SIGINT) is before


def test_ctrl_c_stops_a_cli_sweep_with_status_130(tmp_path):
    out = tmp_path / "sweep"
    code = textwrap.dedent(
        """
        import signal, sys, time
        from flows._cli import app as _cli
        from flows.experiments.multistage import sweep as msweep

        signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal

        def slow(config, specs, pad_to=0):
            time.sleep(120)

        msweep.run_points = slow
        sys.exit(_cli.main(sys.argv[1:]))
        """
    )
    args = ["sweep", "multistage", "--m", "20", "--alpha", "1.0", "--target", "f2"]
    args += ["--data", "assumption", "--n", "30", "--no-plot", "--out", str(out)]
    proc = subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        for line in proc.stdout:  # the header comes once the folder is locked
            if line.startswith("[sweep] multistage"):
                break
        time.sleep(0.5)  # into the stand-in's sleep
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err


# ---------------------------------------------------------------------------------------
# Dask scheduler addresses


def test_bad_scheduler_address_gives_the_message_only(tmp_path, monkeypatch):
    """A client whose connection failed used to be left to the garbage collector, whose
    `__del__` printed a TimeoutError traceback after the message (and waited for it)."""
    pytest.importorskip("distributed")
    unraisable = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: unraisable.append(u.exc_value))
    with pytest.raises(flows.ConfigError, match="cannot reach the Dask scheduler") as err:
        _sweep._connect("foo://bar", 1.0)
    assert err.value.__cause__ is None and err.value.__suppress_context__
    del err
    gc.collect()
    assert unraisable == []

    out = tmp_path / "never"
    proc = subprocess.run(
        [sys.executable, "-m", "flows", "sweep", "multistage", "--m", "20", "--alpha", "1.0"]
        + ["--n", "50", "--out", str(out), "--scheduler", "foo://bar", "--connect-timeout", "1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "flows: error: cannot reach the Dask scheduler at 'foo://bar'" in proc.stderr
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr
    assert not out.exists()


# ---------------------------------------------------------------------------------------
# Odd paths in a sweep folder: refused before computing, never read or written through


def test_a_folder_where_a_point_file_goes_is_refused_before_computing(tmp_path, computed):
    out = tmp_path / "sweep"
    _run(out, alpha="0.75")
    (out / "points" / "m20_alpha1.0_seed1.nc").mkdir()
    with pytest.raises(flows.ConfigError, match="m20_alpha1.0_seed1.nc.*is a folder"):
        _run(out)
    assert len(computed) == 1  # only the first sweep computed
    (out / "points" / "m20_alpha1.0_seed1.nc").rmdir()
    (out / "sweep.nc").unlink()
    (out / "sweep.nc").symlink_to(tmp_path / "elsewhere.nc")
    with pytest.raises(flows.ConfigError, match="sweep.nc.*symbolic link"):
        _run(out)
    assert not (tmp_path / "elsewhere.nc").exists() and len(computed) == 1


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_in_points_is_rejected_not_read(tmp_path, computed, capsys):
    """Reading a FIFO blocks until a writer comes: the sweep hung. It is rejected unread."""
    out = tmp_path / "sweep"
    _run(out)
    os.mkfifo(out / "points" / "m20_alpha2.0_seed0.nc")  # not in the grid: left out
    result = _run(out, progress=True)
    text = capsys.readouterr().out
    assert result.n_run == 0
    assert "rejected points/m20_alpha2.0_seed0.nc: not a regular file" in text


def test_grids_too_large_are_refused_before_anything_is_built(tmp_path, computed):
    with pytest.raises(flows.ConfigError, match="100,000,001 seeds"):
        _run(tmp_path / "sweep", seeds="0-100000000")
    with pytest.raises(flows.ConfigError, match="at most 100,000"):
        _run(tmp_path / "sweep", m=",".join(str(20 + i) for i in range(400)), seeds="0-299")
    assert not (tmp_path / "sweep").exists() and not computed


def test_a_point_records_the_machine_that_computed_it(monkeypatch):
    """Each record leaves `_compute_batch` — the one function that computes a batch, in the
    sweep's process and as a Dask task on a worker — with the `flows.machine()` of the
    process that ran it, which its point file then keeps (not the writing driver's)."""
    from flows._sweep import batches

    class Spec:
        def run_batch(self, points, pad_to):
            return [{"id": f"p{p[0]}", "status": "ok"} for p in points]

    monkeypatch.setattr(_io, "machine", lambda: {"cpu_cores": 99})
    recs = batches._compute_batch(Spec(), [(1,), (2,)], 2)
    assert recs == [
        {"id": "p1", "status": "ok", "machine": {"cpu_cores": 99}},
        {"id": "p2", "status": "ok", "machine": {"cpu_cores": 99}},
    ]
