"""A short command pays only for what it uses (issue 33): `import flows` loads neither
xarray (pandas) nor Dask, `Trajectory.save` writes trajectory.nc without xarray — the same
file, variable for variable and attribute for attribute, as the xarray writer — and
`make_problem` builds the same problem, bit for bit, with fewer small programs."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import h5py
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import xarray as xr

import flows
from flows.models import DeepFCN, Homogeneous, LeakyReLUNet, TwoLayer

# ---------------------------------------------------------------------------------------
# trajectory.nc without xarray


def _trajectory(kind: str) -> flows.Trajectory:
    """Hand-made runs covering what `to_dataset` can hold: observables of several dtypes
    and ranks, parameters at some times (NaN elsewhere) with and without dimension names,
    renamed observables and parameters, data with 1-d and 2-d targets."""
    rng = np.random.default_rng(3)
    t = np.linspace(0.0, 5.0, 11)
    obs = {
        "loss": np.exp(-t),
        "energy": 1 - np.exp(-t),
        "energy_residual": np.abs(rng.normal(size=11)) * 1e-9,
        "norm_a": rng.normal(size=11),
    }
    params = {"a": rng.normal(size=(2, 4)), "w": rng.normal(size=(2, 4, 3))}
    dims = {"a": ("neuron",), "w": ("neuron", "dim")}
    data = {"x": rng.normal(size=(6, 3)), "y": rng.normal(size=6)}
    config = {
        "method": "gradient flow (tsit5)",
        "solver": "tsit5",
        "rtol": 1e-6,
        "atol": 1e-9,
        "problem": {"loss": "R = 1/(2n) sum_i (f(x_i) - y_i)^2", "n_params": 16},
        "odd": {1, 2},  # saved through json's default=str
    }
    stats = {"result": "successful", "steps": 12, "wall_s": 0.25, "stopped_at": float("nan")}
    param_times = t[[0, -1]]
    if kind == "dtypes":  # every dtype the plain writer takes, ranks 1–3
        obs |= {
            "f32": rng.normal(size=11).astype(np.float32),
            "i64": np.arange(11, dtype=np.int64),
            "i32": np.arange(11, dtype=np.int32) - 5,
            "i16": np.arange(11, dtype=np.int16),
            "i8": (np.arange(11) % 3).astype(np.int8),
            "curve": rng.normal(size=(11, 4)),
            "cube": rng.normal(size=(11, 2, 3)).astype(np.float32),
            "with_nan": np.where(t > 2, np.nan, t),
        }
    elif kind == "renamed":  # an observable named like a parameter, a parameter like data
        obs["a"] = rng.normal(size=11)
        params["x"] = rng.normal(size=(2, 5))
        data = {"x": rng.normal(size=(6, 3)), "y": rng.integers(0, 3, size=(6, 2))}
    elif kind == "no params":
        params, dims, param_times = {}, {}, np.array([])
    elif kind == "all params":
        params = {"W": rng.normal(size=(11, 2, 3)), "b": rng.normal(size=(11, 2))}
        dims = {"W": ("class", "dim"), "b": ("class",)}
        param_times = t
    elif kind == "gradient descent":  # no solver settings among the attributes
        config = {"method": "gradient descent", "learning_rate": 0.01, "problem": {}}
    else:
        assert kind == "plain"
    return flows.Trajectory(
        times=t,
        observables=obs,
        param_times=param_times,
        params=params,
        stats=stats,
        config=config,
        param_dims=dims,
        data=data,
    )


KINDS = ["plain", "dtypes", "renamed", "no params", "all params", "gradient descent"]


def _reference(traj: flows.Trajectory, path) -> None:
    """The xarray writer `Trajectory.save` used before (and still uses for other data)."""
    ds = traj.to_dataset()
    flows.write_netcdf(path, ds, {v: {"zlib": True, "complevel": 4} for v in ds.data_vars})


def _hdf5_content(path) -> list:
    """Everything an HDF5 reader sees in the file (except the library-version stamp
    `_NCProperties`): every object in creation order with its type, shape, chunks, filters,
    fill value, raw bytes and attributes (references given as the names they point to)."""
    out: list = []
    with h5py.File(path, "r") as f:

        def attrs(obj) -> list:
            found = []
            for key in obj.attrs:
                if key == "_NCProperties":
                    continue
                v = obj.attrs[key]
                if isinstance(v, np.ndarray) and v.dtype.names:  # REFERENCE_LIST
                    v = sorted((f[ref].name, int(i)) for ref, i in v)
                elif isinstance(v, np.ndarray) and v.dtype == object:  # DIMENSION_LIST
                    v = [tuple(f[r].name for r in np.ravel(item)) for item in v]
                elif isinstance(v, np.ndarray):
                    v = (v.dtype.str, v.shape, v.tobytes())
                else:
                    v = (type(v).__name__, repr(v))
                found.append((key, v))
            return found

        out.append(("/", attrs(f), list(f)))
        for name in f:
            obj = f[name]
            assert isinstance(obj, h5py.Dataset)
            out.append(
                (
                    name,
                    obj.dtype.str,
                    obj.shape,
                    obj.chunks,
                    obj.compression,
                    obj.compression_opts,
                    obj.shuffle,
                    repr(obj.fillvalue),
                    obj[()].tobytes() if obj.size else b"",
                    attrs(obj),
                )
            )
    return out


def _same_dataset(a: xr.Dataset, b: xr.Dataset) -> None:
    assert a.identical(b)
    assert list(a.variables) == list(b.variables) and list(a.dims) == list(b.dims)
    assert list(a.attrs) == list(b.attrs)
    for name in a.variables:
        assert a[name].dtype == b[name].dtype, name
        assert list(a[name].attrs) == list(b[name].attrs), name
        assert a[name].encoding.get("dtype") == b[name].encoding.get("dtype"), name
        np.testing.assert_array_equal(a[name].values, b[name].values)
        assert a[name].values.tobytes() == b[name].values.tobytes(), name


@pytest.mark.parametrize("kind", KINDS)
def test_save_writes_the_file_the_xarray_writer_wrote(kind, tmp_path):
    traj = _trajectory(kind)
    new, old = tmp_path / "new.nc", tmp_path / "old.nc"
    assert traj.save(new) == new
    _reference(traj, old)
    assert _hdf5_content(new) == _hdf5_content(old)
    for decode in (True, False):  # decoded (NaN fill values) and raw
        with (
            xr.open_dataset(new, decode_cf=decode) as a,
            xr.open_dataset(old, decode_cf=decode) as b,
        ):
            _same_dataset(a.load(), b.load())
    # and what was written is what the run holds
    with xr.open_dataset(new) as ds:
        for name, arr in traj.observables.items():
            var = f"obs.{name}" if f"obs.{name}" in ds else name
            assert ds[var].values.tobytes() == np.asarray(arr).tobytes()
            assert ds[var].dtype == np.asarray(arr).dtype
        assert json.loads(ds.attrs["config"]) == json.loads(json.dumps(traj.config, default=str))
        np.testing.assert_array_equal(ds["time"].values, traj.times)


@pytest.mark.parametrize(
    "extra",
    [
        {"flag": np.array([True, False] * 5 + [True])},  # bool: xarray encodes it as int8
        {"u8": np.arange(11, dtype=np.uint8)},
        {"f16": np.arange(11, dtype=np.float16)},
    ],
    ids=["bool", "uint8", "float16"],
)
def test_other_dtypes_go_through_xarray_unchanged(extra, tmp_path):
    traj = _trajectory("plain")
    traj.observables.update(extra)
    new, old = tmp_path / "new.nc", tmp_path / "old.nc"
    traj.save(new)
    _reference(traj, old)
    assert _hdf5_content(new) == _hdf5_content(old)
    with xr.open_dataset(new) as a, xr.open_dataset(old) as b:
        _same_dataset(a.load(), b.load())


@pytest.mark.parametrize("name", ["neuron", "time", "sample"])
def test_an_observable_named_like_a_dimension_is_left_to_xarray(name, tmp_path):
    traj = _trajectory("plain")
    traj.observables[name] = np.arange(11.0)
    outcomes = []
    for write, path in ((traj.save, tmp_path / "new.nc"), (_reference, tmp_path / "old.nc")):
        try:
            write(path) if write == traj.save else write(traj, path)
            outcomes.append(_hdf5_content(path))
        except Exception as exc:  # noqa: BLE001 - the two writers must fail alike
            outcomes.append((type(exc), str(exc)))
    assert outcomes[0] == outcomes[1]


def test_save_is_still_atomic_and_refuses_a_folder_in_the_way(tmp_path):
    traj = _trajectory("plain")
    (tmp_path / "t.nc").mkdir()
    with pytest.raises(flows.WriteError, match="folder"):
        traj.save(tmp_path / "t.nc")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.nc"]  # no temporary left


def _run(code: str) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.split()


HEAVY = ("xarray", "pandas", "dask", "distributed", "scipy", "matplotlib", "sympy", "h5py")


def test_import_flows_loads_no_heavy_package_it_does_not_use():
    loaded = _run(
        f"""
        import sys
        import flows
        print(*[m for m in {HEAVY!r} if m in sys.modules])
        """
    )
    assert loaded == []


def test_saving_a_trajectory_loads_neither_xarray_nor_dask(tmp_path):
    loaded = _run(
        f"""
        import sys
        import numpy as np
        import flows
        t = np.linspace(0, 1, 5)
        traj = flows.Trajectory(
            times=t, observables={{"loss": t, "energy": t}}, param_times=t[[0, -1]],
            params={{"a": np.ones((2, 3))}}, stats={{"steps": 3}}, config={{"rtol": 1e-6}},
            param_dims={{"a": ("neuron",)}}, data={{"x": np.ones((4, 1)), "y": np.ones(4)}},
        )
        traj.save({str(tmp_path / "t.nc")!r})
        print(*[m for m in ("xarray", "pandas", "dask", "distributed") if m in sys.modules])
        """
    )
    assert loaded == []
    with xr.open_dataset(tmp_path / "t.nc") as ds:
        assert ds["a"].dims == ("time", "neuron") and np.isnan(ds["a"].values[1:-1]).all()


# ---------------------------------------------------------------------------------------
# make_problem: the same problem, bit for bit


def _old_problem_arrays(model, data, seed, loss_fn, dtype):
    """θ(0), x and y as `make_problem` computed them before (op by op, with the target
    cast as a separate step)."""
    dt = {"float64": jnp.float64, "float32": jnp.float32}[dtype]
    theta0 = jax.tree_util.tree_map(
        lambda v: jnp.asarray(v, dtype=dt), model.init(jax.random.key(seed))
    )
    x = jnp.asarray(data.x, dtype=dt)
    kind = getattr(loss_fn, "targets", None)
    y = data.y
    if kind == "classes":
        y = np.asarray(y).astype(np.int64)
    y = jnp.asarray(y)
    if jnp.issubdtype(y.dtype, jnp.floating):
        y = y.astype(dt)
    return theta0, x, y


def _bits(tree) -> list:
    return [
        (
            np.asarray(v).dtype.str,
            np.shape(v),
            np.asarray(v).tobytes(),
            getattr(v, "weak_type", None),
        )
        for v in jax.tree_util.tree_leaves(tree)
    ]


def _cases():
    rng = np.random.default_rng(0)
    x1 = rng.uniform(-1, 1, (40, 1))
    x3 = rng.normal(size=(30, 3))
    y3 = np.sin(x3.sum(1))
    labels = rng.integers(0, 4, 30)
    signs = np.where(x3[:, 0] > 0, 1.0, -1.0)
    return [
        ("tanh", TwoLayer(m=20, d=1, alpha=1.0), flows.from_arrays(x1, np.tanh(3 * x1[:, 0])), {}),
        ("erf bias", TwoLayer(m=7, d=3, alpha=0.75, activation="erf", bias=True),
         flows.from_arrays(x3, y3), {}),
        ("float32", TwoLayer(m=20, d=1, alpha=1.0), flows.from_arrays(x1, x1[:, 0]),
         {"dtype": "float32"}),
        ("logistic", TwoLayer(m=5, d=3, alpha=1.0), flows.from_arrays(x3, signs),
         {"loss_fn": flows.logistic}),
        ("homogeneous", Homogeneous(k=4, d=3, r=2, delta=0.1), flows.from_arrays(x3, labels),
         {"loss_fn": flows.cross_entropy}),
        ("deep", DeepFCN(d=3, k=4, depth=3, width=5), flows.from_arrays(x3, labels),
         {"loss_fn": flows.cross_entropy}),
        ("leaky", LeakyReLUNet(k=5, d=3), flows.from_arrays(x3, y3), {}),
    ]  # fmt: skip


@pytest.mark.parametrize("case", _cases(), ids=lambda c: c[0])
@pytest.mark.parametrize("seed", [0, 5])
def test_make_problem_is_bit_identical(case, seed):
    _, model, data, kw = case
    p = flows.make_problem(model, data, seed, **kw)
    theta0, x, y = _old_problem_arrays(
        model, data, seed, kw.get("loss_fn", flows.squared_error), kw.get("dtype", "float64")
    )
    assert _bits(p.theta0) == _bits(theta0)
    assert _bits(p.x) == _bits(x)
    assert _bits(p.y) == _bits(y)
    assert float(p.loss(p.theta0)).hex() == float(p.loss_fn(model(theta0, x), y)).hex()
