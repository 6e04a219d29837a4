"""A results folder is data, never instructions; a write that fails is an error, not a crash.

- The manifest (`.flows-owned.json`) cannot make flows remove or overwrite a file it cannot
  prove it wrote: entries carry size and SHA-256, absolute paths, `../`, links and files
  edited since are not ours.
- The stale-staging cleanup touches only folders with flows' sealed marker, and in them only
  the experiment's own file names.
- Disk full / file too large → `WriteError` (exit 3) naming the file, the previous file
  untouched, no temporary left (HDF5 writing straight to such a file crashed the process).
- Odd paths (a dangling symlink `--out`, an empty `--out`, a folder where a file belongs, a
  symlink or folder `.lock`) → exit 2 before anything is computed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import flows
import flows._io as _io
from flows._cli import app as _cli
from flows._io import MANIFEST
from flows.experiments import EXPERIMENTS, Report
from flows.plugin import OutputDir

NAMES = ("a.png", "trajectory.nc", "results.json")


def _write(final: Path, tag: str, names=NAMES) -> list[Path]:
    od = OutputDir(final, NAMES, "exp")
    for n in names:
        od.path(n).write_text(f"{tag} {n}")
    return od.commit()


def _manifest(final: Path) -> dict:
    return json.loads((final / MANIFEST).read_text())


def _tamper(final: Path, **entries) -> None:
    """Add entries to the folder's manifest, each with the digest of the file it names
    (the strongest forgery: the digest matches whatever is there)."""
    man = _manifest(final)
    for name, target in entries.items():
        man["files"][name] = _io.file_digest(target)
    (final / MANIFEST).write_text(json.dumps(man))


# ---------------------------------------------------------------------------------------
# The manifest proves, it does not instruct


def test_manifest_records_size_and_digest_of_what_was_written(tmp_path):
    final = tmp_path / "exp"
    _write(final, "one")
    man = _manifest(final)
    assert man["complete"] and sorted(man["files"]) == sorted(NAMES)
    for n in NAMES:
        assert man["files"][n] == _io.file_digest(final / n)
        assert man["files"][n]["size"] == len(f"one {n}")


def test_absolute_path_in_manifest_is_never_removed(tmp_path):
    """The reproduced data loss: an absolute path added to the manifest, then a rerun that
    does not rewrite it, deleted that file."""
    final = tmp_path / "exp"
    thesis = tmp_path / "thesis.tex"
    thesis.write_text("years of work")
    _write(final, "one")
    man = _manifest(final)
    man["files"][str(thesis)] = _io.file_digest(thesis)
    (final / MANIFEST).write_text(json.dumps(man))
    _write(final, "two", names=("results.json",))  # a.png, trajectory.nc become stale
    assert thesis.read_text() == "years of work"
    assert not (final / "a.png").exists()  # ours, proven: removed as before
    assert str(thesis) not in _manifest(final)["files"]


@pytest.mark.parametrize("entry", ["notes.txt", "../notes.txt", "sub/notes.txt", "."])
def test_manifest_entries_naming_a_users_file_are_ignored(tmp_path, entry):
    final = tmp_path / "exp"
    _write(final, "one")
    (final / "sub").mkdir()
    for where in (final / "notes.txt", tmp_path / "notes.txt", final / "sub" / "notes.txt"):
        where.write_text("keep")
    target = final / entry if entry != "." else final / "notes.txt"
    _tamper(final, **{entry: target})
    _write(final, "two", names=("results.json",))
    for where in (final / "notes.txt", tmp_path / "notes.txt", final / "sub" / "notes.txt"):
        assert where.read_text() == "keep"


def test_a_file_edited_since_is_not_ours(tmp_path):
    final = tmp_path / "exp"
    _write(final, "one")
    (final / "results.json").write_text("my annotated copy")
    with pytest.raises(flows.ConfigError, match="cannot prove it wrote"):
        OutputDir(final, NAMES, "exp")
    assert (final / "results.json").read_text() == "my annotated copy"
    # ours again (same content); edited while a run computes, which then does not rewrite
    # it: kept, and dropped from the manifest
    (final / "results.json").write_text("one results.json")
    od = OutputDir(final, NAMES, "exp")
    (final / "a.png").write_text("edited figure")
    od.path("results.json").write_text("two results.json")
    od.commit()
    assert (final / "a.png").read_text() == "edited figure"
    assert not (final / "trajectory.nc").exists()  # ours, unchanged, not rewritten: removed
    assert sorted(_manifest(final)["files"]) == ["results.json"]


def test_a_users_file_under_one_of_our_names_with_forged_entry_is_refused(tmp_path):
    """A manifest entry whose digest does not match the file there proves nothing."""
    final = tmp_path / "exp"
    final.mkdir()
    (final / "a.png").write_text("my figure")
    (final / MANIFEST).write_text(
        json.dumps(
            {"format": 2, "complete": True, "files": {"a.png": {"size": 9, "sha256": "0" * 64}}}
        )
    )
    with pytest.raises(flows.ConfigError, match="a.png"):
        OutputDir.preflight(final, NAMES, "exp")
    assert (final / "a.png").read_text() == "my figure"


def test_symlink_under_one_of_our_names_is_refused_not_followed(tmp_path):
    final = tmp_path / "exp"
    _write(final, "one")
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    (final / "a.png").unlink()
    (final / "a.png").symlink_to(outside)
    _tamper(final, **{"a.png": outside})
    with pytest.raises(flows.ConfigError, match="a.png"):
        OutputDir(final, NAMES, "exp")
    assert outside.read_text() == "keep"


@pytest.mark.parametrize(
    "text", ["not json", "[]", '{"files": ["a.png"]}', '{"format": 2, "files": 3}']
)
def test_unreadable_or_foreign_manifest_owns_nothing(tmp_path, text):
    final = tmp_path / "exp"
    _write(final, "one")
    (final / MANIFEST).write_text(text)
    with pytest.raises(flows.ConfigError):
        OutputDir(final, NAMES, "exp")
    assert (final / "a.png").read_text() == "one a.png"


def test_check_cli_with_tampered_manifest_deletes_nothing(tmp_path, monkeypatch):
    """`flows check deep-linear --out D` after an absolute path and a note were added to
    D/deep-linear/.flows-owned.json: exit 0 and both files survive."""
    name = "deep-linear"
    exp = EXPERIMENTS[name]
    files = exp.files

    def fake_run(cfg, out, written=files):
        od = OutputDir(Path(out) / name, files, name)
        for n in written:
            od.path(n).write_text("x")
        return Report(name, [], od.commit(), {})

    monkeypatch.setattr(exp, "run", fake_run)
    argv = ["check", name, "--quick", "--no-report", "--out", str(tmp_path)]
    assert _cli.main(argv) == 0
    home = tmp_path / "home"
    home.mkdir()
    (home / "thesis.tex").write_text("thesis")
    (tmp_path / name / "notes.txt").write_text("notes")
    forged = {str(home / "thesis.tex"): home / "thesis.tex"}
    _tamper(tmp_path / name, **forged, **{"notes.txt": tmp_path / name / "notes.txt"})
    monkeypatch.setattr(exp, "run", lambda cfg, out: fake_run(cfg, out, written=("results.json",)))
    assert _cli.main(argv) == 0
    assert (home / "thesis.tex").read_text() == "thesis"
    assert (tmp_path / name / "notes.txt").read_text() == "notes"


# ---------------------------------------------------------------------------------------
# Stale staging folders


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_a_users_dot_folder_shaped_like_staging_is_kept(tmp_path):
    pid = _dead_pid()
    mine = tmp_path / ".exp.abcdefgh"  # the shape mkdtemp gives ours
    mine.mkdir()
    (mine / ".flows-tmp-pid").write_text(str(pid))  # the old, unsealed marker
    (mine / "results.json").write_text("mine")
    (mine / "diary.txt").write_text("mine")
    OutputDir(tmp_path / "exp", NAMES, "exp").abort()
    assert sorted(p.name for p in mine.iterdir()) == [".flows-tmp-pid", "diary.txt", "results.json"]


def test_sealed_staging_folder_keeps_what_is_not_ours(tmp_path):
    """Even with flows' own sealed marker of a dead process, only the experiment's file
    names and the marker are removed; anything else keeps the folder."""
    pid = _dead_pid()
    d = tmp_path / ".exp.abcdefgh"
    d.mkdir()
    (d / ".flows-tmp-pid").write_text(_io.output._staging_mark(d.name, pid))
    (d / "a.png").write_text("half")
    (d / "diary.txt").write_text("mine")
    other = tmp_path / ".exp.zyxwvuts"  # a marker copied from another folder: not sealed for it
    other.mkdir()
    (other / ".flows-tmp-pid").write_text(_io.output._staging_mark(d.name, pid))
    (other / "a.png").write_text("mine")
    OutputDir(tmp_path / "exp", NAMES, "exp").abort()
    assert sorted(p.name for p in d.iterdir()) == ["diary.txt"]
    assert (other / "a.png").read_text() == "mine"


def test_staging_folder_of_a_live_process_is_kept(tmp_path):
    d = tmp_path / ".exp.abcdefgh"
    d.mkdir()
    (d / ".flows-tmp-pid").write_text(_io.output._staging_mark(d.name, os.getppid()))
    (d / "a.png").write_text("in progress")
    OutputDir(tmp_path / "exp", NAMES, "exp").abort()
    assert (d / "a.png").read_text() == "in progress"


# ---------------------------------------------------------------------------------------
# Write failures: an error naming the file, never a crash, nothing half-written

_FSIZE_SCRIPT = textwrap.dedent(
    """
    import os, resource, sys
    import numpy as np, xarray as xr
    import flows
    path = sys.argv[1]
    ds = xr.Dataset({"a": ("t", np.random.default_rng(0).normal(size=50_000))})
    resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))
    try:
        flows.write_netcdf(path, ds, {"a": {"zlib": True}})
    except flows.WriteError as exc:
        print("WriteError", exc.errno, exc)
        sys.exit(0)
    print("no error")
    """
)


def test_file_size_limit_is_a_write_error_not_a_segfault(tmp_path):
    """RLIMIT_FSIZE (EFBIG) during a netCDF write: HDF5 writing straight to the file
    crashed the process with a segmentation fault (exit -11)."""
    target = tmp_path / "trajectory.nc"
    target.write_text("the previous complete file")
    run = subprocess.run(
        [sys.executable, "-c", _FSIZE_SCRIPT, str(target)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("WriteError 27"), run.stdout
    assert str(target) in run.stdout and "File too large" in run.stdout
    assert target.read_text() == "the previous complete file"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trajectory.nc"]


def test_disk_full_in_write_atomic_is_a_write_error(tmp_path):
    """ENOSPC from any writer: the temporary is removed, the old file kept."""
    import errno

    target = tmp_path / "results.json"
    target.write_text("old")

    def full(tmp):
        Path(tmp).write_text("partial")
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(flows.WriteError, match="No space left") as info:
        flows.write_atomic(target, full)
    assert info.value.errno == errno.ENOSPC and str(target) in str(info.value)
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]


def test_write_atomic_refuses_to_replace_a_folder(tmp_path):
    (tmp_path / "trajectory.nc").mkdir()
    with pytest.raises(flows.WriteError, match="folder"):
        flows.write_atomic(tmp_path / "trajectory.nc", lambda tmp: Path(tmp).write_text("x"))
    assert (tmp_path / "trajectory.nc").is_dir()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trajectory.nc"]


def test_simulate_cli_disk_error_exits_3(tmp_path, monkeypatch, capsys):
    """The trajectory cannot be written: exit 3 naming the file, nothing left behind."""
    import errno

    exp = EXPERIMENTS["multistage"]

    class FakeTraj:
        times = [0.0, 1.0]
        loss = [1.0, 0.5]
        stats = {"certificate": {"ok": True}, "vf_evals": 3, "wall_s": 0.0}
        observables: dict = {}
        config: dict = {}

        def save(self, path):
            def full(tmp):
                Path(tmp).write_bytes(b"\0" * 10)
                raise OSError(errno.ENOSPC, "No space left on device")

            return flows.write_atomic(path, full)

    class Run:
        traj = FakeTraj()
        rtol = 1e-6

    monkeypatch.setattr(exp, "simulate", lambda options, progress=False: Run())
    out = tmp_path / "run"
    assert _cli.main(["simulate", "multistage", "--out", str(out)]) == 3
    err = capsys.readouterr().err
    assert "trajectory.nc" in err and "No space left on device" in err
    assert sorted(p.name for p in out.iterdir()) == [".lock"]  # no temporary, no .nc


# ---------------------------------------------------------------------------------------
# Odd paths: refused before computing (exit 2)


@pytest.fixture
def no_compute(monkeypatch):
    """The experiments' runs replaced by a failure: a refusal must come before them."""

    def boom(*a, **k):
        raise AssertionError("computed before refusing the path")

    for exp in EXPERIMENTS.values():
        monkeypatch.setattr(exp, "simulate", boom)
        monkeypatch.setattr(exp, "run", boom)


def _simulate(out, *extra):
    return _cli.main(["simulate", "deep-linear", "--out", str(out), *extra])


def test_dangling_symlink_out_is_refused(tmp_path, no_compute, capsys):
    link = tmp_path / "results"
    link.symlink_to(tmp_path / "nowhere")
    assert _simulate(link) == 2
    assert "symbolic link to a missing target" in capsys.readouterr().err
    assert _cli.main(["check", "deep-linear", "--out", str(link)]) == 2
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    assert _simulate(loop / "sub") == 2
    assert not (tmp_path / "nowhere").exists()


def test_empty_out_is_refused(tmp_path, no_compute, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert _simulate("") == 2
    assert "`--out` is empty" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("overwrite", [False, True])
def test_folder_where_the_trajectory_goes_is_refused(tmp_path, no_compute, capsys, overwrite):
    (tmp_path / "trajectory.nc").mkdir()
    extra = ("--overwrite",) if overwrite else ()
    assert _simulate(tmp_path, *extra) == 2
    assert "is a folder" in capsys.readouterr().err
    assert (tmp_path / "trajectory.nc").is_dir()


@pytest.mark.parametrize("kind", ["loop", "dir", "link"])
def test_odd_lock_is_refused(tmp_path, no_compute, capsys, kind):
    lock = tmp_path / ".lock"
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    if kind == "loop":
        lock.symlink_to(lock)
    elif kind == "dir":
        lock.mkdir()
    else:
        lock.symlink_to(victim)
    assert _simulate(tmp_path) == 2
    assert ".lock" in capsys.readouterr().err
    assert victim.read_text() == "keep"
    with pytest.raises(flows.ConfigError, match="lock"):
        with _io.lock_folder(tmp_path):
            pass


def test_odd_manifest_is_refused_before_computing(tmp_path, no_compute, capsys):
    (tmp_path / "deep-linear").mkdir()
    (tmp_path / "deep-linear" / MANIFEST).mkdir()
    assert _cli.main(["check", "deep-linear", "--out", str(tmp_path)]) == 2
    assert MANIFEST in capsys.readouterr().err
