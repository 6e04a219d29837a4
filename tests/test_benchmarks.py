"""The benchmark scripts stay runnable and use only public names of `flows` (the notebooks
too); the work-precision package keeps its files small. No timing assertions here; the
work-precision quick run is in test_bench_work_precision.py."""

import ast
import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
BENCH = ROOT / "benchmarks"
SCRIPTS = sorted(BENCH.glob("bench_*.py"))
SOURCES = sorted(BENCH.rglob("*.py"))


def _load(path: Path):
    name = path.stem
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses need the module registered
    spec.loader.exec_module(mod)
    return mod


def _private(part: str) -> bool:
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


def private_uses(source: str) -> list[str]:
    """Private names of `flows` that `source` imports or reads: `flows._x`, `from flows
    import _x`, `from flows._x import …`, `<alias of a flows module>._x`, and the
    `experiment` submodules of the papers (import their names via the package)."""
    tree = ast.parse(source)
    roots: set[str] = set()  # local names bound to flows or one of its modules
    bad: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "flows":
                    roots.add((a.asname or a.name).split(".")[0])
                    if any(_private(p) for p in a.name.split(".")):
                        bad.append(f"line {node.lineno}: import {a.name}")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "flows":
            parts = node.module.split(".")
            if any(_private(p) for p in parts) or (
                parts[:2] == ["flows", "experiments"] and parts[-1] == "experiment"
            ):
                bad.append(f"line {node.lineno}: from {node.module} import …")
            for a in node.names:
                roots.add(a.asname or a.name)
                if _private(a.name):
                    bad.append(f"line {node.lineno}: from {node.module} import {a.name}")
    inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and id(node) not in inner:  # whole chains only
            chain, cur = [], node
            while isinstance(cur, ast.Attribute):
                chain.append(cur.attr)
                cur = cur.value
            if isinstance(cur, ast.Name) and cur.id in roots:
                if any(_private(p) for p in chain):
                    bad.append(f"line {node.lineno}: {cur.id}.{'.'.join(reversed(chain))}")
    return sorted(set(bad))


def test_private_use_detector():
    src = (
        "import flows\nfrom flows._solve import simulate as _simulate\n"
        "from flows._io import write_atomic\n"
        "from flows.experiments import multistage as ms\n"
        "from flows.experiments.multistage.experiment import run\n"
        "flows._solve.trajectory.write_atomic\nms._helper\nflows.SOLVERS\nflows.__version__\n"
    )
    bad = private_uses(src)
    assert len(bad) == 5, bad
    assert private_uses("import flows\nflows.simulate\nx._private\n") == []


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(BENCH)))
def test_benchmarks_use_only_public_names(path):
    assert private_uses(path.read_text()) == []


@pytest.mark.parametrize("path", sorted((ROOT / "notebooks").glob("*.ipynb")), ids=lambda p: p.name)
def test_notebooks_use_only_public_names(path):
    cells = json.loads(path.read_text())["cells"]
    code = [
        "".join(c["source"]) for c in cells if c["cell_type"] == "code"
    ]  # IPython magics would not parse; the notebooks have none
    assert private_uses("\n".join(code)) == []


def test_work_precision_package_files_are_small():
    files = sorted((BENCH / "work_precision").glob("*.py")) + [BENCH / "bench_work_precision.py"]
    assert len(files) >= 5
    for f in files:
        assert len(f.read_text().splitlines()) <= 600, f


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_benchmark_scripts_import_and_parse_help(path, monkeypatch, capsys):
    mod = _load(path)
    monkeypatch.setattr(sys, "argv", [path.name, "--help"])
    with pytest.raises(SystemExit) as e:
        mod.main()
    assert e.value.code == 0
    assert "usage:" in capsys.readouterr().out
