"""Execute the notebooks and store them with their outputs (figures included).

    python notebooks/execute.py                  # all of them, at full (paper) size
    python notebooks/execute.py multistage       # one
    python notebooks/execute.py --size small     # the test suite's size (for a quick look)

Each notebook runs top to bottom in a fresh kernel, in a temporary working directory with
`FLOWS_NOTEBOOK_OUT` pointing into it (the figures a notebook writes go there, not into the
repository), and is written back in place with:

- every code cell's outputs and execution count (no per-cell timings; figures scaled down
  and stored with a palette, `shrink_figures`; the temporary folder's path as `<tmp>`);
- in the notebook's metadata under `flows`: the size it ran at, the seconds it took, and a
  short hash of each code cell's source. `tests/test_notebooks.py` recomputes the hashes, so
  a cell edited without re-executing the notebook fails there with the cell's number.

A failing cell stops the run and leaves the stored file as it was. The docs' examples
gallery (`docs/_notebooks.py`) renders the stored outputs; nothing is executed at docs build
time.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: How long one cell may run (s) before the execution is abandoned.
CELL_TIMEOUT = 3600
#: Widest PNG stored (px): wider figures (the toolkit saves at 200 dpi) are scaled down to it.
MAX_PNG_WIDTH = 1000


def source_hash(source: str) -> str:
    """The short hash of a code cell's source stored in the notebook's metadata."""
    return hashlib.sha256(source.strip().encode("utf-8")).hexdigest()[:12]


def _scrub(nb, tmp: Path) -> None:
    """Drop what differs between identical reruns, and the temporary folder's path."""
    pattern = re.compile(re.escape(str(tmp)) + r"[^\s'\"]*")
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        for out in cell.get("outputs", []):
            if "text" in out:
                out["text"] = pattern.sub("<tmp>", out["text"])
            data = out.get("data", {})
            if isinstance(data.get("text/plain"), str):
                data["text/plain"] = pattern.sub("<tmp>", data["text/plain"])


def shrink_figures(nb, max_width: int = MAX_PNG_WIDTH) -> None:
    """Store every PNG output small: scaled down to `max_width` px when wider, and reduced
    to a 256-colour palette (line plots have few colours; the palette keeps them exact)
    when that is smaller."""
    import base64
    import io

    from PIL import Image

    for cell in nb.cells:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if "image/png" not in data:
                continue
            raw = base64.b64decode(data["image/png"])
            img = Image.open(io.BytesIO(raw))
            if img.width > max_width:
                height = round(img.height * max_width / img.width)
                img = img.resize((max_width, height), Image.Resampling.LANCZOS)
                # the display size the kernel asked for, if any, scaled alike
                meta = out.get("metadata", {}).get("image/png")
                if isinstance(meta, dict) and meta.get("width", 0) > max_width:
                    meta["height"] = round(meta.get("height", height) * max_width / meta["width"])
                    meta["width"] = max_width
            palette = img.convert("RGB").quantize(
                colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE
            )
            buf = io.BytesIO()
            palette.save(buf, format="PNG", optimize=True)
            if len(buf.getvalue()) < len(raw):
                data["image/png"] = base64.b64encode(buf.getvalue()).decode("ascii")


def execute(path: Path, size: str) -> float:
    """Execute the notebook `path` at `size` ("full" or "small") and store it in place;
    returns the seconds it took."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    with tempfile.TemporaryDirectory(prefix=f"flows-nb-{path.stem}-") as tmp:
        env = {"FLOWS_NOTEBOOK_SIZE": size, "FLOWS_NOTEBOOK_OUT": str(Path(tmp) / "out")}
        saved = {k: os.environ.get(k) for k in (*env, "MPLBACKEND")}
        os.environ.update(env)
        os.environ.pop("MPLBACKEND", None)  # the kernel uses its inline backend
        start = time.perf_counter()
        try:
            NotebookClient(
                nb,
                timeout=CELL_TIMEOUT,
                kernel_name="python3",
                record_timing=False,
                resources={"metadata": {"path": tmp}},
            ).execute()
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        seconds = time.perf_counter() - start
        _scrub(nb, Path(tmp).resolve())
        _scrub(nb, Path(tmp))
    shrink_figures(nb)
    nb.metadata["flows"] = {
        **nb.metadata.get("flows", {}),
        "size": size,
        "seconds": round(seconds),
        "sources": [source_hash(c.source) for c in nb.cells if c.cell_type == "code"],
    }
    nbformat.write(nb, path)
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "names", nargs="*", help="notebooks to run, by stem (default: all in notebooks/)"
    )
    parser.add_argument(
        "--size",
        choices=("full", "small"),
        default="full",
        help="FLOWS_NOTEBOOK_SIZE for the run (default: full, what is stored)",
    )
    args = parser.parse_args(argv)
    paths = [HERE / f"{n.removesuffix('.ipynb')}.ipynb" for n in args.names] or sorted(
        HERE.glob("*.ipynb")
    )
    for path in paths:
        if not path.is_file():
            parser.error(f"no notebook {path.name} in {HERE}")
    for path in paths:
        print(f"{path.name}: executing at size {args.size} …", flush=True)
        seconds = execute(path, args.size)
        kb = path.stat().st_size / 1024
        print(f"{path.name}: stored ({seconds:.0f} s, {kb:.0f} kB)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
