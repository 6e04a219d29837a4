"""Believe nothing read back, lose nothing that is not ours.

- a sweep point file whose values are invalid for their kind (a loss that is NaN, ±inf,
  negative or near float64's overflow; a time that is infinite or negative; a count that
  is negative) is not a finished point: rejected with one line naming the file and the
  variable, recomputed, never merged into sweep.nc;
- a cached program is checked against what this run asks (its key recomputed, an owner
  tag over key and payload, the key inside the program): another program's payload with
  its key and digest rewritten is traced again, never run;
- a `.lock`, a temporary or a staging folder that flows did not create is never written
  to, truncated or removed; cache trimming touches only files the cache wrote.

The sweep points are computed by a stand-in (no solve), as in `test_sweep_integrity.py`.
"""

import hashlib
import json
import os
import subprocess
import sys
import time
import warnings

import h5py
import numpy as np
import pytest

import flows
import flows._io as _io
from flows import _compile
from flows._io import OutputDir
from flows.experiments.multistage import sweep as msweep

GRID = dict(m="20", alpha="0.75,1.0", seeds="0")
SETTINGS = dict(target="f2", data="assumption", n=30, n_save=41, batch_size=2)
VICTIM = "m20_alpha1.0_seed0.nc"


def _run(out, **kw):
    return msweep.descent_sweep(out, **{**GRID, **SETTINGS, "plot": False, "progress": False, **kw})


@pytest.fixture
def computed(monkeypatch):
    """`run_points` replaced by a stand-in recording the points asked for (valid values)."""
    calls = []
    extra = {}

    def fake_run_points(config, specs, pad_to=0):
        cfg = msweep.SweepConfig.from_dict(config)
        calls.extend(tuple(p) for p in specs)
        recs = []
        for m, alpha, seed in specs:
            rec = msweep._blank_record(cfg, m, alpha, seed)
            rec.update(status="ok", T_d=1.0 + alpha, T_p=0.5, vf_evals=120.0, steps=20.0)
            rec["tau"] = np.linspace(0.0, rec["tau1"], cfg.n_save)
            rec["t"] = rec["tau"].copy()
            rec["loss"] = np.linspace(1.0, 0.0, cfg.n_save)
            rec["K_hat"] = np.linspace(0.0, 1.0, cfg.n_save)
            rec.update(extra)
            recs.append(rec)
        return recs

    monkeypatch.setattr(msweep, "run_points", fake_run_points)
    return calls, extra


def _poke(path, name, value, index=None) -> None:
    with h5py.File(path, "r+") as f:
        if index is None:
            f[name][()] = value
        else:
            f[name][index] = value


BAD = [
    ("loss", 5, np.nan),
    ("loss", 5, np.inf),
    ("loss", 0, -np.inf),
    ("loss", 3, -1.0),
    ("loss", 7, 1e308),
    ("loss_final", None, -1.0),
    ("loss_initial", None, np.inf),
    ("T_d", None, np.inf),
    ("T_d", None, -5.0),
    ("vf_evals", None, -7.0),
    ("vf_evals", None, 2.5),
    ("steps", None, np.inf),
]


@pytest.mark.parametrize(("name", "index", "value"), BAD)
def test_a_point_with_invalid_values_is_recomputed_not_believed(
    tmp_path, computed, capsys, name, index, value
):
    calls, _ = computed
    out = tmp_path / "sweep"
    assert _run(out).ok
    calls.clear()
    _poke(out / "points" / VICTIM, name, value, index)
    result = _run(out, progress=True)
    text = capsys.readouterr().out
    assert calls == [(20, 1.0, 0)]  # the poked point only, recomputed
    lines = [ln for ln in text.splitlines() if "rejected" in ln and VICTIM in ln]
    assert len(lines) == 1, text
    where = name if index is None else f"{name}[{index}]"
    assert f"rejected points/{VICTIM}: {where} = " in lines[0]
    assert "marked ok" in lines[0] and "recomputing it" in lines[0]
    assert [r["file"] for r in result.rejected] == [f"points/{VICTIM}"]
    ds = result.dataset()
    assert (ds["status"] == "ok").all()
    v = ds[name].sel(m=20, alpha=1.0, seed=0).values
    assert not (np.isnan(v).any() if np.isnan(value) else (v == value).any())  # not merged
    assert _run(out).rejected == []  # the recomputed file is clean


def test_valid_edge_values_are_believed(tmp_path, computed):
    """NaN where it means 'not reached / not recorded', zeros, 1e300: still done."""
    calls, _ = computed
    out = tmp_path / "sweep"
    _run(out)
    calls.clear()
    path = out / "points" / VICTIM
    _poke(path, "T_d", np.nan)
    _poke(path, "vf_evals", 0.0)
    _poke(path, "loss_final", np.nan)
    _poke(path, "loss", 1e300, 0)
    _poke(path, "loss", 0.0, 40)
    result = _run(out)
    assert calls == [] and result.rejected == [] and result.n_skipped == 2


def test_a_computed_point_with_invalid_values_is_recorded_as_failed(tmp_path, computed):
    calls, extra = computed
    extra["vf_evals"] = -7.0
    result = _run(tmp_path / "sweep")
    assert not result.ok and len(result.failed) == 2
    assert all("vf_evals = -7.0" in r["error"] for r in result.failed)
    assert "invalid result" in result.failed[0]["error"]


# ---------------------------------------------------------------------------------------
# Locks, temporaries and staging folders flows did not create


def test_a_users_lock_file_is_never_written_and_the_sweep_refuses(tmp_path, computed):
    calls, _ = computed
    out = tmp_path / "sweep"
    out.mkdir()
    (out / ".lock").write_text("my lock notes\n")
    with pytest.raises(flows.ConfigError, match="not empty"):  # only `.lock`: not empty
        _run(out)
    assert (out / ".lock").read_text() == "my lock notes\n"
    with pytest.raises(flows.ConfigError, match="not a lock file of flows"):
        with _io.lock_folder(out):
            pass
    assert (out / ".lock").read_text() == "my lock notes\n"
    assert calls == [] and sorted(p.name for p in out.iterdir()) == [".lock"]


def test_a_users_lock_file_in_a_sweep_folder_is_refused_before_computing(tmp_path, computed):
    calls, _ = computed
    out = tmp_path / "sweep"
    _run(out)
    calls.clear()
    (out / ".lock").write_text("12ab\n")  # replaced by a file of the user's
    with pytest.raises(flows.ConfigError, match=r"\.lock"):
        _run(out, m="30")
    assert (out / ".lock").read_text() == "12ab\n" and calls == []


def test_flows_lock_file_records_the_holder_and_an_older_one_is_not_written(tmp_path):
    with _io.lock_folder(tmp_path):
        text = (tmp_path / ".lock").read_bytes()
        assert text == _io.locks._LOCK_MAGIC + f"{os.getpid()}\n".encode()
    with _io.lock_folder(tmp_path):  # ours again: reused
        pass
    legacy = tmp_path / "old"
    legacy.mkdir()
    (legacy / ".lock").write_text("4242\n")  # as flows wrote it before the lock line
    with _io.lock_folder(legacy):
        assert (legacy / ".lock").read_text() == "4242\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".lock", "old"]  # no debris


def test_user_files_named_like_temporaries_are_kept(tmp_path, computed):
    out = tmp_path / "sweep"
    _run(out)
    names = [
        f".{VICTIM}.abcd1234.tmp",  # the shape of an old flows temporary
        f".{VICTIM}.abcd1234.0123456789abcdef.tmp",  # today's shape, a tag not ours
        ".sweep.nc.abcd1234.tmp",
    ]
    for n in names[:2]:
        (out / "points" / n).write_text("mine")
    (out / names[2]).write_text("mine")
    result = _run(out)
    assert result.n_run == 0
    assert all((out / "points" / n).read_text() == "mine" for n in names[:2])
    assert (out / names[2]).read_text() == "mine"


def test_a_folder_with_a_file_named_like_a_temporary_is_not_taken_for_empty(tmp_path, computed):
    out = tmp_path / "sweep"
    out.mkdir()
    (out / ".notes.abcd1234.tmp").write_text("mine")
    with pytest.raises(flows.ConfigError, match="not empty"):
        _run(out)
    assert (out / ".notes.abcd1234.tmp").read_text() == "mine"


def test_killed_writes_are_still_cleaned_up(tmp_path):
    """A temporary flows created (a valid owner tag) is proven and removed."""
    tmp = _io.create_owned_temporary(tmp_path, "result.nc")
    assert _io.proven_temporary_target(os.path.basename(tmp)) == "result.nc"
    assert _io.remove_stale_temporaries(tmp_path, {"result.nc"}.__contains__) == [
        tmp_path / os.path.basename(tmp)
    ]


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_staging_folder_with_a_forged_seal_keeps_its_results(tmp_path):
    """The seal an earlier flows used was a public recipe (SHA-256 of name and pid): a
    folder carrying it, or any seal not made with this user's key, is not flows'."""
    pid = _dead_pid()
    d = tmp_path / ".exp.abcdefgh"
    d.mkdir()
    seal = hashlib.sha256(f"flows-staging\0{d.name}\0{pid}".encode()).hexdigest()
    mark = {"written_by": "flows", "folder": d.name, "pid": pid, "seal": seal}
    (d / ".flows-tmp-pid").write_text(json.dumps(mark))
    (d / "results.json").write_text("mine")
    OutputDir(tmp_path / "exp", ("results.json",), "exp").abort()
    assert (d / "results.json").read_text() == "mine"
    # the same folder with flows' own seal is a killed run's, and is cleaned
    (d / ".flows-tmp-pid").write_text(_io.output._staging_mark(d.name, pid))
    OutputDir(tmp_path / "exp", ("results.json",), "exp").abort()
    assert not d.exists()


# ---------------------------------------------------------------------------------------
# The compilation cache: trimming, and entries checked against the request


def test_trimming_touches_only_what_the_cache_wrote(tmp_path):
    folder = tmp_path / "mine"
    programs = folder / _compile.PROGRAMS_DIR
    programs.mkdir(parents=True)
    user = {
        folder / "notes-cache": b"x" * 4000,
        folder / f"x-{'a' * 64}-cache": b"plain text, not a JAX entry" * 100,
        programs / "draft.tmp": b"y" * 4000,
        programs / f".f-{'b' * 48}-program.abcd1234.tmp": b"z" * 10,
        programs / f"f-{'c' * 48}-program": b"not an entry" * 100,
    }
    for p, data in user.items():
        p.write_bytes(data)
    jax_entry = folder / f"jit_f-{'d' * 64}-cache"
    jax_entry.write_bytes(b"\x28\xb5\x2f\xfd" + b"\0" * 5000)
    program = programs / f"f-{'e' * 48}-program"
    program.write_bytes(_compile.jax_cache._MAGIC + b"\0" * 5000)
    old = time.time() - 7200
    for p in [*user, jax_entry, program]:
        os.utime(p, (old, old))
    assert _compile.trim_cache(folder, max_bytes=1000) == 2
    assert all(p.read_bytes() == data for p, data in user.items())
    assert not jax_entry.exists() and not program.exists()


def test_the_cache_probe_never_touches_a_users_file(tmp_path):
    mine = tmp_path / f".flows-probe-{os.getpid()}"
    mine.write_text("mine")
    assert _compile.jax_cache._usable_folder(tmp_path) is None
    assert mine.read_text() == "mine"


def _entry(folder, fn):
    (path,) = [p for p in folder.iterdir() if p.name.startswith(f"{fn.__name__}-")]
    return path


def _forge(victim, donor, *, with_key: bool) -> None:
    """Put `donor`'s payload into `victim`, its key and digest rewritten to the victim's;
    the owner tag copied from the donor, or (`with_key`: a forger holding the user's key)
    made afresh, so that only the key inside the program can tell."""
    head, _, rest = victim.read_bytes().partition(b"\n")
    key = rest.partition(b"\n")[0].decode()
    rest = donor.read_bytes().partition(b"\n")[2]
    _, _, rest = rest.partition(b"\n")  # the donor's key
    _, _, rest = rest.partition(b"\n")  # its digest
    tag, _, payload = rest.partition(b"\n")
    digest = hashlib.sha256(payload).hexdigest()
    if with_key:
        tag = _io.owner_tag("program", key, digest).encode()
    lines = (head, key.encode(), digest.encode(), tag, payload)
    victim.write_bytes(b"\n".join(lines))


@pytest.mark.parametrize("with_key", [False, True])
def test_another_programs_entry_is_traced_again_never_run(tmp_path, with_key):
    import jax.numpy as jnp

    x = jnp.linspace(0.1, 1.0, 5)
    for fn in (jnp.sin, jnp.cos):
        assert _compile.persisted_program(fn, (x,), tmp_path) is not None
    _forge(_entry(tmp_path, jnp.sin), _entry(tmp_path, jnp.cos), with_key=with_key)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        program = _compile.persisted_program(jnp.sin, (x,), tmp_path)
    np.testing.assert_array_equal(np.asarray(program(x)), np.asarray(jnp.sin(x)))
    (w,) = [w for w in caught if "persistent cache" in str(w.message)]
    assert "cannot be used" in str(w.message)
    why = "another program" if with_key else "owner tag"
    assert why in str(w.message)
    # rewritten: the next read is a silent, correct hit
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        program = _compile.persisted_program(jnp.sin, (x,), tmp_path)
    assert not [w for w in caught if "persistent cache" in str(w.message)]
    np.testing.assert_array_equal(np.asarray(program(x)), np.asarray(jnp.sin(x)))


def test_trimming_removes_the_oldest_real_entries_first(tmp_path):
    programs = tmp_path / _compile.PROGRAMS_DIR
    programs.mkdir()
    for i in range(4):
        entry = tmp_path / f"jit_f{i}-{str(i) * 64}-cache"
        entry.write_bytes(b"\x78\x9c" + b"x" * 98)  # a zlib header, as JAX compresses
        os.utime(entry, (1000 + 2 * i, 1000 + 2 * i))
        program = programs / f"f-{str(i) * 48}{_compile.PROGRAM_SUFFIX}"
        program.write_bytes(
            _compile.jax_cache._MAGIC + b"y" * (100 - len(_compile.jax_cache._MAGIC))
        )
        os.utime(program, (1001 + 2 * i, 1001 + 2 * i))
    stale = _io.create_owned_temporary(programs, f"f-{'9' * 48}{_compile.PROGRAM_SUFFIX}")
    os.utime(stale, (1000, 1000))
    assert _compile.trim_cache(tmp_path, 800) == 0 and not os.path.exists(stale)
    assert _compile.trim_cache(tmp_path, 400) == 5  # 800 bytes down to 300: oldest first
    assert sorted(p.name[:4] for p in programs.iterdir()) == ["f-22", "f-33"]
    assert [p.name[:6] for p in tmp_path.iterdir() if p.is_file()] == ["jit_f3"]


def test_a_cache_entry_that_does_not_fit_is_compiled_afresh(monkeypatch, tmp_path):
    """JAX's persistent-cache entries swapped between keys made JAX fail on its own output
    layout (`AssertionError: (4, 52)`, 13 of 15 swaps): the program is compiled again with
    the cache off, with a warning, and the cache is back on afterwards. (By hand, on a real
    swap of the flow's and the loss floors' entries: the run finishes with the same loss to
    the last bit, one warning line.)"""
    import jax

    monkeypatch.setattr(_compile.jax_cache, "_ENABLED", tmp_path)
    seen = []

    class Lowered:
        def compile(self):
            seen.append(jax.config.jax_enable_compilation_cache)
            if len(seen) == 1:
                raise AssertionError((4, 52))
            return "compiled"

    with pytest.warns(RuntimeWarning, match="does not fit the program asked for"):
        assert _compile.compile_lowered(Lowered()) == "compiled"
    assert seen == [True, False] and jax.config.jax_enable_compilation_cache
    # without the cache the error is not the cache's: it is raised as it is
    monkeypatch.setattr(_compile.jax_cache, "_ENABLED", None)
    seen.clear()
    with pytest.raises(AssertionError):
        _compile.compile_lowered(Lowered())
