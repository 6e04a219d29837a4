"""netCDF files written and read back: the writers, the refusal of HDF5 files that would
make a reader follow paths out of the file, and the versions saved with every result."""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO, Any

from .atomic import write_atomic


def write_netcdf(path: str | os.PathLike, ds, encoding: dict | None = None) -> Path:
    """Write the xarray Dataset `ds` as netCDF-4 (h5netcdf) at `path`, atomically
    (`write_atomic`).

    The file is serialized in memory first and then written with ordinary file writes: HDF5
    writing straight to a file that hits a full disk or a file-size limit crashed the whole
    process (segmentation fault in its close, measured with h5py 3.16); an ordinary write
    fails with `OSError`, which becomes a `WriteError` naming the file and the cause. The
    cost is one copy of the file in memory while it is written.

    **Returns:** `path`, as a `Path`.
    """
    data = ds.to_netcdf(None, engine="h5netcdf", encoding=encoding or {})

    def write(tmp: str) -> None:
        with open(tmp, "wb") as f:
            f.write(data)

    return write_atomic(path, write)


#: The array kinds `write_netcdf_arrays` writes itself (floats get a NaN `_FillValue`, as
#: xarray gives them; integers none): `netcdf_arrays_writable` says no to anything else.
_PLAIN_FLOATS = ("float32", "float64")
_PLAIN_INTS = ("int8", "int16", "int32", "int64")


def netcdf_arrays_writable(variables: dict, attrs: dict) -> bool:
    """Whether `write_netcdf_arrays` writes these variables and attributes exactly as
    xarray would (plain float and signed-integer arrays, text attributes, names without
    `/`, one length per dimension, a variable named like a dimension only as its
    coordinate); when not, build an xarray Dataset and use `write_netcdf` (which writes
    the rest, or refuses it with xarray's message)."""
    import numpy as np

    sizes: dict[str, int] = {}
    for name, (dims, arr, var_attrs) in variables.items():
        if "/" in name or any("/" in d for d in dims) or len(dims) != np.ndim(arr):
            return False
        for dim, size in zip(dims, np.shape(arr), strict=True):
            if sizes.setdefault(dim, size) != size:
                return False
        if np.asarray(arr).dtype.name not in _PLAIN_FLOATS + _PLAIN_INTS:
            return False
        if not all(isinstance(v, str) for v in var_attrs.values()):
            return False
    if any(name in sizes and dims != (name,) for name, (dims, _, _) in variables.items()):
        return False
    return all(isinstance(v, str) for v in attrs.values())


def write_netcdf_arrays(
    path: str | os.PathLike,
    variables: dict[str, tuple[tuple[str, ...], Any, dict[str, str]]],
    attrs: dict[str, str],
    *,
    compress: frozenset[str] | set[str] = frozenset(),
    complevel: int = 4,
) -> Path:
    """Write plain arrays as netCDF-4 (h5netcdf) at `path`, atomically (`write_atomic`),
    without xarray: the file `write_netcdf(path, xr.Dataset(...), encoding)` writes for the
    same variables, attribute for attribute, with none of xarray's import cost (xarray
    loads pandas, and with Dask installed `dask.array`, `scipy.fftpack` and `distributed`
    on the way to a write: most of a short command's saving time).

    **Arguments:** `variables`, `{name: (dims, array, attributes)}` in the order xarray
    lists a Dataset's variables (data variables in insertion order, then coordinates);
    `attrs`, the file's attributes; `compress`, the variables written with zlib at
    `complevel` (xarray's `{"zlib": True, "complevel": complevel}` encoding). Only what
    `netcdf_arrays_writable` accepts (else `ValueError`).

    Like `write_netcdf`, the file is serialized in memory first and then written with
    ordinary file writes (a full disk is a `WriteError`, never a crash in HDF5).

    **Returns:** `path`, as a `Path`.
    """
    import io

    import h5netcdf
    import numpy as np

    if not netcdf_arrays_writable(variables, attrs):
        raise ValueError(
            "write_netcdf_arrays writes float and signed-integer arrays with text "
            "attributes only; build an xarray Dataset and use write_netcdf."
        )
    buf = io.BytesIO()
    # the calls xarray's h5netcdf backend makes, in its order: file attributes, then the
    # dimensions (in the order the variables name them), then every variable (created with
    # its fill value, then its attributes), then the data
    with h5netcdf.File(
        buf, mode="w", invalid_netcdf=False, decode_vlen_strings=True, format="NETCDF4"
    ) as f:
        for key, value in attrs.items():
            f.attrs[key] = value
        sizes: dict[str, int] = {}
        for dims, arr, _ in variables.values():
            sizes |= dict(zip(dims, np.shape(arr), strict=True))
        for dim, size in sizes.items():
            f.dimensions[dim] = size
        targets = []
        for name, (dims, arr, var_attrs) in variables.items():
            arr = np.asarray(arr)
            kwargs: dict = {}
            if arr.shape:  # xarray sets no filters or chunks on scalars
                kwargs["chunks"] = None
                if name in compress:
                    kwargs.update(compression="gzip", compression_opts=complevel)
            fill = arr.dtype.type(np.nan) if arr.dtype.name in _PLAIN_FLOATS else None
            var = f.create_variable(
                name, dimensions=dims, dtype=arr.dtype, fillvalue=fill, **kwargs
            )
            for key, value in var_attrs.items():
                var.attrs[key] = value
            targets.append((var, arr))
        for var, arr in targets:
            var[...] = arr
    data = buf.getvalue()

    def write(tmp: str) -> None:
        with open(tmp, "wb") as out:
            out.write(data)

    return write_atomic(path, write)


def hdf5_hazard(source: str | os.PathLike | IO[bytes]) -> str | None:
    """Why the HDF5 (netCDF-4) file `source` must not be read back, or None when it is a
    plain, self-contained file.

    A file is refused when reading it could make HDF5 open or read other files: a dataset
    with external storage (its bytes live in any file named inside it, which a reader
    would then copy out), a virtual dataset (mapped onto other files), or a soft or
    external link anywhere in the file. Links are inspected, never followed. A file that
    HDF5 cannot open is refused too.

    **Arguments:** `source` a path or a binary file object (e.g. `io.BytesIO` of the bytes
    that will then be parsed, so that the file checked is the file read).

    **Returns:** a sentence naming the object and what it does, or None.
    """
    import h5py

    try:
        with h5py.File(source, "r") as f:
            return _hazard_in(f)
    except Exception as exc:  # noqa: BLE001 - any failure to parse: not a readable file
        return f"not a readable HDF5/netCDF-4 file ({type(exc).__name__}: {exc})"


def _hazard_in(f) -> str | None:
    import h5py

    def links_of(group) -> str | None:
        for name in group:
            link = group.get(name, getlink=True)
            if isinstance(link, h5py.HardLink):
                continue
            where = f"{group.name.rstrip('/')}/{name}"
            if isinstance(link, h5py.SoftLink):
                return f"{where!r} is a soft link (to {link.path!r})"
            if isinstance(link, h5py.ExternalLink):
                return f"{where!r} is an external link (to {link.path!r} in {link.filename!r})"
            return f"{where!r} is a link of an unsupported kind ({type(link).__name__})"
        return None

    def visit(name, obj) -> str | None:
        if isinstance(obj, h5py.Group):
            return links_of(obj)
        if isinstance(obj, h5py.Dataset):
            if obj.is_virtual:
                return f"dataset {obj.name!r} is a virtual dataset (its data lives in other files)"
            if obj.external:
                files = sorted({str(entry[0]) for entry in obj.external})
                return f"dataset {obj.name!r} uses external storage (its data lives in {files})"
        return None

    # `visititems` reaches every object through hard links (each once), never through soft
    # or external links, so the links themselves are checked group by group
    return links_of(f) or f.visititems(visit)


def usable_cores() -> int:
    """The CPU cores this process may run on: its affinity mask where the OS has one (a
    container or `taskset` limited to 2 of 64 cores counts 2), else the machine's count.
    XLA sizes its CPU thread pool by the same mask."""
    count = getattr(os, "process_cpu_count", None)  # Python ≥ 3.13
    if count is not None:
        return max(count() or 1, 1)
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except (AttributeError, OSError):
        return max(os.cpu_count() or 1, 1)


def machine() -> dict[str, Any]:
    """Where a result was computed, as far as it decides the result's last digits (saved
    with every result beside `versions`): Python, the OS and processor kind, JAX's backend,
    and `cpu_cores`, the cores this process may use. XLA on CPU splits its reductions over
    a thread pool sized by those cores, so the same run on another core count agrees only
    to rounding (measured: the multi-stage check on 1 core against 2, 855 numbers of
    results.json differ, by 1.5e-6 relative at most outside a difference of near-equal
    numbers; no verdict moved — Limits page, "Reproducibility across machines")."""
    import platform
    import sys

    jax = sys.modules.get("jax")  # JAX's backend only if JAX is loaded: no import here
    backend = "not loaded"
    if jax is not None:
        try:
            backend = jax.default_backend()
        except Exception:  # noqa: BLE001 - no backend could start: say so, do not fail a save
            backend = "unavailable"
    return {
        "python": platform.python_version(),
        "platform": sys.platform,
        "processor": platform.machine(),
        "cpu_cores": usable_cores(),
        "jax_backend": backend,
    }


def versions() -> dict[str, str]:
    """Versions of the libraries a result depends on (saved with every result)."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("flows-theory", "jax", "jaxlib", "diffrax", "equinox", "numpy", "sympy", "xarray"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "not installed"
    return out
