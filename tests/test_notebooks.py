"""The notebooks in notebooks/: stored executed, with their outputs, and still running.

- **Stored outputs** (default run, no kernel): every code cell of every stored notebook
  has an execution count (1, 2, … in order) and at least one output, none an error; its
  source still hashes to what `notebooks/execute.py` recorded when it executed the
  notebook (a cell edited without re-executing is named); each notebook shows a figure and
  names its gallery card (`metadata.flows.gallery`, read by `docs/_notebooks.py`); outputs
  stay small (PNG figures, no giant text, no temporary paths).
- **Execution** (`-m notebook`, run by `.ci/run`): each notebook runs top to bottom at a
  small size (FLOWS_NOTEBOOK_SIZE=small) in memory, without rewriting the stored file, and
  every code cell produces the same kinds of output as the stored, full-size run (text,
  figure), so stored outputs from a notebook whose cells now show something else fail.

To refresh the stored outputs: `python notebooks/execute.py [NAME …]`.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))

#: Size limits of what is stored: the whole file, one PNG, one text output.
MAX_NOTEBOOK_BYTES = 2_000_000
MAX_PNG_BYTES = 400_000
MAX_TEXT_LINES = 200
MAX_TEXT_CHARS = 25_000


def _execute_module():
    spec = importlib.util.spec_from_file_location(
        "flows_notebooks_execute", ROOT / "notebooks" / "execute.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _read(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def _code_cells(nb: dict) -> list[dict]:
    return [c for c in nb["cells"] if c["cell_type"] == "code"]


def _kinds(cell: dict) -> set[str]:
    """What a code cell shows: "text" (printed or a value's repr), "figure", "error".
    stderr (warnings, which may differ between sizes and machines) is left out."""
    kinds = set()
    for out in cell.get("outputs", []):
        kind = out["output_type"]
        if kind == "stream":
            if out.get("name") == "stdout" and _text(out.get("text", "")).strip():
                kinds.add("text")
        elif kind == "error":
            kinds.add("error")
        elif "image/png" in out.get("data", {}) or "image/svg+xml" in out.get("data", {}):
            kinds.add("figure")
        elif out.get("data"):
            kinds.add("text")
    return kinds


def test_there_are_notebooks():
    assert {p.stem for p in NOTEBOOKS} >= {
        "multistage",
        "bias_plateau",
        "linear_teacher",
        "deep_linear",
    }


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_stored_with_outputs(path):
    nb = _read(path)
    name = path.name
    cells = _code_cells(nb)
    counts = [c.get("execution_count") for c in cells]
    assert counts == list(range(1, len(cells) + 1)), (
        f"{name}: execution counts {counts}: store it executed top to bottom, in one kernel "
        f"(python notebooks/execute.py {path.stem})"
    )
    for i, cell in enumerate(cells, 1):
        assert cell.get("outputs"), f"{name}: code cell {i} has no stored output"
        assert "error" not in _kinds(cell), f"{name}: code cell {i} stored an error"
    assert any("figure" in _kinds(c) for c in cells), f"{name}: no figure stored"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_stored_outputs_match_the_sources(path):
    hashes = _read(path)["metadata"].get("flows", {}).get("sources")
    assert hashes, f"{path.name}: not stored by notebooks/execute.py (no metadata.flows.sources)"
    ex = _execute_module()
    now = [ex.source_hash(_text(c["source"])) for c in _code_cells(_read(path))]
    assert len(now) == len(hashes), (
        f"{path.name}: {len(now)} code cells, {len(hashes)} when executed: re-execute it "
        f"(python notebooks/execute.py {path.stem})"
    )
    stale = [i for i, (a, b) in enumerate(zip(now, hashes, strict=True), 1) if a != b]
    assert not stale, (
        f"{path.name}: code cells {stale} changed since the stored outputs were made: "
        f"re-execute it (python notebooks/execute.py {path.stem})"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_stored_outputs_are_small_and_self_contained(path):
    assert path.stat().st_size <= MAX_NOTEBOOK_BYTES, f"{path.name}: {path.stat().st_size} B"
    nb = _read(path)
    meta = nb["metadata"].get("flows", {})
    gallery = meta.get("gallery", {})
    assert gallery.get("description", "").endswith("."), (
        f"{path.name}: metadata.flows.gallery.description (one sentence, for the docs' "
        "examples gallery)"
    )
    assert meta.get("size") == "full", f"{path.name}: stored from a {meta.get('size')!r} run"
    for i, cell in enumerate(_code_cells(nb), 1):
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if "image/png" in data:
                png = base64.b64decode(_text(data["image/png"]))
                assert len(png) <= MAX_PNG_BYTES, f"{path.name}, cell {i}: PNG of {len(png)} B"
            for text in [out.get("text", ""), data.get("text/plain", "")]:
                text = _text(text)
                assert len(text) <= MAX_TEXT_CHARS, f"{path.name}, cell {i}: {len(text)} chars"
                assert text.count("\n") <= MAX_TEXT_LINES, f"{path.name}, cell {i}: long text"
                assert "/tmp/" not in text and "<tmp>" not in text, (
                    f"{path.name}, cell {i} prints a temporary path: {text[:200]!r}"
                )
    # nothing the reader does not have: the repository's own files and the papers by
    # title/authors/arXiv, not a local copy of them
    raw = path.read_text(encoding="utf-8")
    for ref in ("THEORY.md", "shared/papers", "papers/00"):
        assert ref not in raw, f"{path.name} refers to {ref}, which users do not have"


def test_kinds_of_output():
    cell = {
        "outputs": [
            {"output_type": "stream", "name": "stderr", "text": "a warning"},
            {"output_type": "stream", "name": "stdout", "text": "x"},
            {"output_type": "display_data", "data": {"image/png": "", "text/plain": "<F>"}},
        ]
    }
    assert _kinds(cell) == {"text", "figure"}
    assert _kinds({"outputs": [{"output_type": "error", "ename": "E"}]}) == {"error"}


@pytest.mark.notebook
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes(path, tmp_path, monkeypatch):
    import nbformat
    from nbclient import NotebookClient

    monkeypatch.setenv("FLOWS_NOTEBOOK_SIZE", "small")
    monkeypatch.setenv("FLOWS_NOTEBOOK_OUT", str(tmp_path))
    monkeypatch.delenv("MPLBACKEND", raising=False)  # the kernel uses its inline backend
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    stored = _read(path)
    nb = nbformat.read(path, as_version=4)
    NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    # executed in memory: the stored file (outputs of the full-size run) is left as it was
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before, f"{path.name} was rewritten"
    shown = [_kinds(c) for c in _code_cells(nb)]
    kept = [_kinds(c) for c in _code_cells(stored)]
    differ = [
        f"cell {i}: stored {sorted(k)}, now {sorted(s)}"
        for i, (k, s) in enumerate(zip(kept, shown, strict=True), 1)
        if k != s
    ]
    assert not differ, (
        f"{path.name}: the stored outputs are stale (re-execute: python notebooks/execute.py "
        f"{path.stem}): " + "; ".join(differ)
    )
