"""The layering as contracts, read from the sources' import statements (relative imports
resolved):

- the engine (`flows` outside `flows.experiments`) never imports a paper — only the
  command line, which is generated from the paper registry;
- `reduced` (pure theory) never imports `flows`;
- the papers (`flows.experiments`) import only public names: `flows`, `flows.claims`,
  `flows.plugin`, `flows.models`, `flows.figures` and their own package — no `flows._x`
  module and no `_private` name of the engine, so a paper outside the repository can be
  written with what the shipped papers use;
- tests and benchmarks reach into the engine's private modules only where listed in
  `INTERNALS` (one place; unit tests of solver internals, the command line's `main`, …) —
  a ratchet both ways: a new private import fails here, and so does a listed module a file
  no longer imports (shrink the list).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: The engine's private packages (and private modules of public packages) each test or
#: benchmark file imports. Most are unit tests of internals (solver tableaux, the Filippov
#: kink tables, the output folder's ownership rules) or drive the command line in-process
#: (`flows._cli.app.main`).
INTERNALS: dict[str, frozenset[str]] = {
    k: frozenset(v)
    for k, v in {
        "tests/conftest.py": {"flows._compile"},
        "tests/guards/guard_nonsmooth.py": {"flows._nonsmooth"},
        "tests/test_api_misuse.py": {"flows._cli", "flows._solve", "flows._validate"},
        "tests/test_browser.py": {"flows._report"},
        "tests/test_claims.py": {"flows.claims._checks"},
        "tests/test_check_budget.py": {"flows._cli"},
        "tests/test_cli.py": {"flows._cli"},
        "tests/test_cli_bad_input.py": {"flows._cli", "flows._sweep"},
        "tests/test_cli_check_jobs.py": {"flows._cli"},
        "tests/test_cli_check_progress.py": {"flows._cli"},
        "tests/test_cli_environment.py": {"flows._cli"},
        "tests/test_cli_live.py": {"flows._cli", "flows._solve"},
        "tests/test_cli_start.py": {"flows._cli"},
        "tests/test_compile_cache.py": {
            "flows._cli",
            "flows._compile",
            "flows._io",
            "flows._solve",
            "flows._solvers",
        },
        "tests/test_crashes_messages.py": {"flows._cli", "flows._solve"},
        "tests/test_deep_linear.py": {"flows._cli"},
        "tests/test_dense_output.py": {"flows._solvers"},
        "tests/test_error_norm_cli.py": {"flows._cli"},
        "tests/test_figure_style.py": {"flows._sweep"},
        "tests/test_fused.py": {"flows._solve"},
        "tests/test_map_limit.py": {"flows._compile", "flows._nonsmooth", "flows._solvers"},
        "tests/test_nonsmooth.py": {"flows._nonsmooth", "flows.models._kinks"},
        "tests/test_nonsmooth_compile.py": {"flows._nonsmooth"},
        "tests/test_nonsmooth_units.py": {"flows._nonsmooth"},
        "tests/test_observable_floors.py": {"flows._solve"},
        "tests/test_output_safety.py": {"flows._cli", "flows._io"},
        "tests/test_progress.py": {"flows._solve"},
        "tests/test_read_back.py": {"flows._compile", "flows._io"},
        "tests/test_readme_blocks.py": {"flows._cli"},
        "tests/test_reliability.py": {"flows._cli", "flows._io"},
        "tests/test_report.py": {"flows._cli", "flows._report", "flows.claims._checks"},
        "tests/test_report_math.py": {"flows._report"},
        "tests/test_report_simulate.py": {"flows._cli", "flows._report"},
        "tests/test_report_svg_math.py": {"flows._report"},
        "tests/test_rkc.py": {"flows._solvers"},
        "tests/test_significance.py": {"flows._cli", "flows._solve"},
        "tests/test_solvers_auto.py": {"flows._solvers"},
        "tests/test_solvers_eserk.py": {"flows._solvers"},
        "tests/test_solvers_etd.py": {"flows._solvers"},
        "tests/test_solvers_krylov.py": {"flows._solvers"},
        "tests/test_solvers_robustness.py": {"flows._solve", "flows._solvers"},
        "tests/test_solvers_rock4.py": {"flows._solvers"},
        "tests/test_solvers_tolerance.py": {"flows._solvers"},
        "tests/test_sweep.py": {"flows._cli", "flows._solve", "flows._sweep"},
        "tests/test_sweep_global_error.py": {"flows._sweep"},
        "tests/test_sweep_integrity.py": {"flows._io", "flows._solve", "flows._sweep"},
        "tests/test_sweep_papers.py": {"flows._cli", "flows._sweep"},
        "tests/test_validation_api.py": {"flows._solve", "flows._validate"},
    }.items()
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path) -> set[str]:
    """Absolute names of every module `path` imports (`from x import y` gives x and x.y,
    since y may be a module)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join([*base, node.module] if node.module else base)
            else:
                mod = node.module or ""
            out.add(mod)
            out.update(f"{mod}.{a.name}" for a in node.names)
    return out


def _sources(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def test_the_import_reader_resolves_relative_imports(tmp_path):
    pkg = tmp_path / "flows" / "experiments" / "paper"
    pkg.mkdir(parents=True)
    (pkg / "checks.py").write_text(
        "from ...claims._checks import Check\nfrom . import runs\n"
        "from .. import base\nimport numpy\n"
    )
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        got = imports(pkg / "checks.py")
    finally:
        ROOT = saved
    assert {"flows.claims._checks", "flows.experiments.paper.runs", "flows.experiments.base"} <= got
    assert "numpy" in got
    assert "flows.experiments" in imports(ROOT / "flows/_cli/app.py")


#: The engine: `flows` without its papers and without the command line (`flows._cli.app*`,
#: generated from the paper registry, so the one part of the engine that imports it).
ENGINE = [
    p
    for p in _sources("flows")
    if not _module_name(p).startswith(("flows.experiments", "flows._cli"))
]


@pytest.mark.parametrize("path", ENGINE, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_engine_imports_no_paper(path):
    name = _module_name(path)
    bad = sorted(m for m in imports(path) if m.startswith("flows.experiments"))
    assert not bad, f"{name} imports {bad}"


@pytest.mark.parametrize("path", _sources("reduced"), ids=lambda p: str(p.relative_to(ROOT)))
def test_reduced_never_imports_flows(path):
    bad = sorted(m for m in imports(path) if m == "flows" or m.startswith("flows."))
    assert not bad, f"{_module_name(path)} imports {bad}"


def _private(m: str) -> bool:
    """Whether the imported name `m` is private to the engine: a `flows._x` module, or a
    `_name` reached in any `flows` module outside the papers."""
    parts = m.split(".")
    if parts[0] != "flows" or len(parts) < 2 or parts[1] == "experiments":
        return False
    return any(p.startswith("_") for p in parts[1:])


@pytest.mark.parametrize(
    "path", _sources("flows/experiments"), ids=lambda p: str(p.relative_to(ROOT))
)
def test_papers_import_public_names_only(path):
    bad = sorted(m for m in imports(path) if _private(m))
    assert not bad, (
        f"{_module_name(path)} imports {bad}: a paper uses public names only (`flows`, "
        "`flows.claims`, `flows.plugin`, `flows.models`, `flows.figures`); export what it "
        "needs there"
    )


def test_the_private_test_flags_what_a_paper_must_not_import():
    assert _private("flows.claims._checks") and _private("flows.claims._checks.Check")
    assert _private("flows._cli.flags") and _private("flows.claims._clean")
    assert not _private("flows.claims.Bound") and not _private("flows.plugin.as_float")
    assert not _private("flows.experiments.base._default") and not _private("numpy._core")


def _private_module(m: str) -> str | None:
    """The first private module or package on the path of an imported name
    (`flows._solve` for `flows._solve.stats.SolveStats`, `flows.claims._checks` for
    `flows.claims._checks.Check`), or None when it has none."""
    parts = m.split(".")
    for k in range(2, len(parts) + 1):
        prefix = ".".join(parts[:k])
        if parts[k - 1].startswith("_") and _is_module(prefix):
            return prefix
    return None


def _internals_used() -> dict[str, frozenset[str]]:
    used = {}
    for path in [*_sources("tests"), *_sources("benchmarks")]:
        mods = {_private_module(m) for m in imports(path) if _private(m)}
        mods.discard(None)
        if mods:
            used[str(path.relative_to(ROOT))] = frozenset(mods)
    return used


def test_tests_and_benchmarks_reach_internals_only_where_listed():
    used = _internals_used()
    new = {f: sorted(m - INTERNALS.get(f, frozenset())) for f, m in used.items()}
    new = {f: m for f, m in new.items() if m}
    assert not new, f"private engine modules imported but not listed in INTERNALS: {new}"


def test_the_internals_list_shrinks_when_a_file_stops_needing_a_module():
    used = _internals_used()
    stale = {f: sorted(m - used.get(f, frozenset())) for f, m in INTERNALS.items()}
    stale = {f: m for f, m in stale.items() if m}
    assert not stale, f"no longer imported: remove from INTERNALS: {stale}"


#: The event flow's modules in the order data flows; each imports only earlier ones.
NONSMOOTH_ORDER = ("_net", "_pattern", "_sliding", "_decision", "_loop", "_api")


def test_the_event_flow_package_imports_in_one_direction():
    pkg = ROOT / "flows" / "_nonsmooth"
    found = sorted(p.stem for p in pkg.glob("_*.py") if p.name != "__init__.py")
    assert found == sorted(NONSMOOTH_ORDER), "list the new module in NONSMOOTH_ORDER"
    for k, name in enumerate(NONSMOOTH_ORDER):
        inside = {
            m.split(".")[2]
            for m in imports(pkg / f"{name}.py")
            if m.startswith("flows._nonsmooth.")
        }
        later = sorted(inside & set(NONSMOOTH_ORDER[k + 1 :]))
        assert not later, f"flows._nonsmooth.{name} imports the later {later}"


@pytest.mark.parametrize("module", ["flows/_solve/simulate.py", "flows/_solve/batch.py"])
def test_the_solves_know_no_solver_family(module):
    """What differs between solver families (own evaluation counts, run-time tolerances,
    a stability cap on the first step, Hessian-vector products) is declared by the solvers
    package (`counts_own_evals`, `runtime_solver`, `has_stability_cap`, `solver_report`);
    the solves ask it instead of testing classes."""
    tree = ast.parse((ROOT / module).read_text())
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    names |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    family = {"AbstractStabilizedSolver", "AbstractImplicitSolver", "RKC2", "ESERK4", "ROCK4"}
    assert not names & family, f"{module} tests solver classes: {sorted(names & family)}"


# --- the house: folders that show the architecture ---------------------------------------

#: The most modules `flows/` may keep at its top level (the public modules and the few
#: private ones every package shares); the rest lives in packages, one per concept.
TOP_LEVEL_MAX = 12


def test_the_top_level_keeps_few_modules():
    top = sorted(p.name for p in (ROOT / "flows").glob("*.py"))
    assert len(top) <= TOP_LEVEL_MAX, f"{len(top)} modules at flows/'s top level: {top}"


def _home(module: str) -> str:
    """The package a module belongs to: `flows._solve` for `flows._solve.flow`; a module
    at the top level is its own home."""
    parts = module.split(".")
    if len(parts) >= 3 or (len(parts) == 2 and (ROOT / "flows" / parts[1]).is_dir()):
        return ".".join(parts[:2])
    return module


def _is_module(name: str) -> bool:
    path = ROOT / name.replace(".", "/")
    return path.with_suffix(".py").exists() or path.is_dir()


def private_reaches(path: Path) -> list[str]:
    """`_name`s that `path` takes from another package's modules: imported (`from
    flows._solve.stats import _x`) or reached as an attribute of an imported module
    (`stats._x`). Private modules themselves are not counted (a package's modules are
    private by name); the names inside them that other packages use must not be."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(), str(path))
    aliases: dict[str, str] = {}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join([*base, node.module] if node.module else base)
            else:
                mod = node.module or ""
            if not mod.startswith("flows"):
                continue
            for a in node.names:
                full = f"{mod}.{a.name}"
                if _is_module(full):
                    aliases[a.asname or a.name] = full
                elif a.name.startswith("_") and _home(mod) != _home(name):
                    out.append(f"{full}")
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("flows") and a.asname:
                    aliases[a.asname] = a.name
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
            and _home(aliases[node.value.id]) != _home(name)
        ):
            out.append(f"{aliases[node.value.id]}.{node.attr}")
    return sorted(set(out))


@pytest.mark.parametrize("path", _sources("flows"), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_package_reaches_into_another_packages_private_names(path):
    bad = private_reaches(path)
    assert not bad, (
        f"{_module_name(path)} uses {bad}: a name another package needs is public in its "
        "module (no leading underscore) or re-exported by its package's __init__"
    )


def test_the_reach_reader_sees_imports_and_attributes(tmp_path):
    pkg = tmp_path / "flows" / "_cli"
    (tmp_path / "flows" / "_solve").mkdir(parents=True)
    pkg.mkdir()
    (tmp_path / "flows" / "_solve" / "stats.py").write_text("")
    (pkg / "helper.py").write_text("")
    (pkg / "app.py").write_text(
        "from .._solve.stats import _hidden, shown\nfrom .._solve import stats\n"
        "from . import helper\nstats._other\nhelper._fine\n"
    )
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        got = private_reaches(pkg / "app.py")
    finally:
        ROOT = saved
    assert got == ["flows._solve.stats._hidden", "flows._solve.stats._other"]
