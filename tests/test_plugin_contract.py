"""The plug-in contract (`flows.plugin`, docs/plugin.md): the public modules declare their
surface (`__all__`), each name of it is importable from one public module, importing the
contract loads no paper, names that left it still resolve for one release with a
`DeprecationWarning` naming their new place, and a plug-in package that fails to import
is one warning in `flows check`, never a traceback."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PUBLIC = (
    "flows",
    "flows.plugin",
    "flows.claims",
    "flows.claims.coverage",
    "flows.models",
    "flows.figures",
    "flows.experiments",
)


def _run(code: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        cwd=ROOT,
        timeout=300,
    )


@pytest.mark.parametrize("name", PUBLIC)
def test_every_public_module_declares_its_surface(name):
    module = importlib.import_module(name)
    assert isinstance(module.__all__, list | tuple) and module.__all__, name
    assert len(set(module.__all__)) == len(module.__all__), f"{name}.__all__ repeats a name"
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # none of them is deprecated
        missing = [n for n in module.__all__ if not hasattr(module, n)]
    assert not missing, f"{name}.__all__ names what it does not have: {missing}"


def test_the_plugin_surface_is_the_documented_one():
    import flows.plugin

    page = (ROOT / "docs" / "plugin.md").read_text(encoding="utf-8")
    undocumented = [n for n in flows.plugin.__all__ if f"`{n}`" not in page]
    assert not undocumented, f"docs/plugin.md does not name {undocumented}"
    assert "plugin.md" in (ROOT / "mkdocs.yml").read_text(encoding="utf-8")


def test_a_name_of_the_contract_has_one_public_home():
    """What `flows.plugin` declares is declared by no other public module (the surface of
    the engine, the claim kit, the models and the figures stays theirs)."""
    import flows.plugin

    mine = set(flows.plugin.__all__)
    for name in PUBLIC:
        if name != "flows.plugin":
            both = mine & set(importlib.import_module(name).__all__)
            assert not both, f"{sorted(both)} are declared by flows.plugin and {name}"


def test_importing_the_contract_loads_no_paper():
    code = (
        "import sys\n"
        "from flows.plugin import AbstractExperiment\n"
        "import flows.experiments\n"
        "papers = [m for m in sys.modules if m.startswith('flows.experiments.')]\n"
        "assert not papers, papers\n"
        "from flows.experiments import EXPERIMENTS\n"  # the first use discovers
        "assert 'deep-linear' in EXPERIMENTS and 'flows.experiments.deep_linear' in sys.modules\n"
        "assert isinstance(EXPERIMENTS['deep-linear'], AbstractExperiment)\n"
    )
    out = _run(code)
    assert out.returncode == 0, out.stderr[-3000:]


#: (module, old name, where the warning must say it went)
MOVED = [
    ("flows.plugin", "hdf5_hazard", "flows._io"),
    ("flows.plugin", "two_layer_bytes", "flows.experiments.multistage"),
    ("flows.plugin", "experiment_report", "flows._report"),
    ("flows.plugin", "Curve", "flows._report"),
    ("flows.plugin", "add_owned_file", "OutputDir"),
    ("flows.plugin", "MANIFEST", "flows._io.MANIFEST"),
    ("flows.plugin", "parse_seeds", "flows.plugin.parse_prng_seeds"),
    ("flows.experiments", "AbstractExperiment", "flows.plugin.AbstractExperiment"),
    ("flows.experiments", "Report", "flows.plugin.Report"),
    ("flows.experiments.base", "write_results_json", "flows.plugin.write_results_json"),
    ("flows.experiments.base", "save_figure", "flows.figures.save_figure"),
    ("flows.experiments.base", "COLORS", "flows.figures.COLORS"),
]


@pytest.mark.parametrize(("module", "name", "where"), MOVED, ids=lambda v: str(v))
def test_a_name_that_left_still_works_for_one_release(module, name, where):
    mod = importlib.import_module(module)
    with pytest.warns(DeprecationWarning, match="deprecated") as caught:
        value = getattr(mod, name)
    assert len(caught) == 1 and where in str(caught[0].message), str(caught[0].message)
    assert caught[0].filename == __file__  # the warning points at the caller's line
    assert value is not None and name not in getattr(mod, "__all__", ())


def test_the_moved_names_are_the_same_objects():
    import flows.figures
    import flows.plugin
    from flows.experiments.multistage.config import two_layer_bytes

    with pytest.warns(DeprecationWarning):
        from flows.experiments import AbstractExperiment
    assert AbstractExperiment is flows.plugin.AbstractExperiment
    with pytest.warns(DeprecationWarning):
        from flows.experiments.base import figure_style
    assert figure_style is flows.figures.figure_style
    with pytest.warns(DeprecationWarning):
        old = flows.plugin.two_layer_bytes
    assert old(10, 3, batch=2, itemsize=4) == two_layer_bytes(10, 3, batch=2, itemsize=4)


def test_an_unknown_name_is_still_an_attribute_error():
    import flows.experiments
    import flows.plugin

    for mod in (flows.plugin, flows.experiments):
        with pytest.raises(AttributeError, match="no_such_name"):
            _ = mod.no_such_name


def test_a_plugin_that_fails_to_import_is_one_warning_not_a_traceback(tmp_path):
    """An installed package whose module raises on import: `flows check --help` still
    lists every paper, and says once which plug-in it skipped."""
    site = tmp_path / "site"
    info = site / "broken_paper-0.1.dist-info"
    info.mkdir(parents=True)
    (site / "broken_paper.py").write_text("import numpy\nraise RuntimeError('boom at import')\n")
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-paper\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[flows.papers]\nbroken = broken_paper:EXPERIMENT\n")
    path = os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])
    out = subprocess.run(
        [sys.executable, "-m", "flows", "check", "--help"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": path},
        cwd=tmp_path,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "deep-linear" in out.stdout
    assert "Traceback" not in out.stderr + out.stdout
    skipped = [line for line in out.stderr.splitlines() if "plug-in 'broken'" in line]
    assert len(skipped) == 1 and "boom at import" in skipped[0], out.stderr
