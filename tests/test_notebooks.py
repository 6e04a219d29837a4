"""Every notebook in notebooks/ runs top to bottom at a small size (FLOWS_NOTEBOOK_SIZE=small)."""

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


@pytest.mark.notebook
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes(path, tmp_path, monkeypatch):
    monkeypatch.setenv("FLOWS_NOTEBOOK_SIZE", "small")
    monkeypatch.setenv("FLOWS_NOTEBOOK_OUT", str(tmp_path))
    monkeypatch.delenv("MPLBACKEND", raising=False)  # the kernel uses its inline backend
    nb = nbformat.read(path, as_version=4)
    NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    shown = any(
        "image/png" in out.get("data", {})
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
    )
    assert shown or any(p.suffix == ".png" for p in tmp_path.iterdir()), "no figure produced"
