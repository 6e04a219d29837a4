"""One paper registry (`flows.experiments.EXPERIMENTS`): the built-in papers, then the
`flows.papers` entry points of installed packages — a paper from outside the repository
is added with zero edits to `flows/` (shown here by the example package
`examples/toy_paper`, installed by pip and driven through the real command line), and a
broken plug-in is skipped with a warning, never stopping the others."""

import json
import os
import shutil
import subprocess
import sys
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from flows.experiments import BUILTIN, ENTRY_POINT_GROUP, EXPERIMENTS, discover

#: The example paper package: its own pyproject.toml declares the entry point.
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "toy_paper"


@pytest.fixture(scope="module")
def toy_distribution(tmp_path_factory):
    """`examples/toy_paper` installed by pip into a folder of its own (a copy is built, so
    the example's tree stays clean): the package and its dist-info, whose entry_points.txt
    registers it in the `flows.papers` group."""
    tmp = tmp_path_factory.mktemp("toy")
    src, site = tmp / "src", tmp / "site"
    shutil.copytree(EXAMPLE, src, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    pip = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", "--target", site, src],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert pip.returncode == 0, pip.stdout[-2000:] + pip.stderr[-2000:]
    (info,) = site.glob("*.dist-info")
    assert f"[{ENTRY_POINT_GROUP}]" in (info / "entry_points.txt").read_text()
    return site


def _flows(site, *args, cwd):
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.run(
        [sys.executable, "-m", "flows", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=600,
    )


def test_builtin_papers_are_the_registry():
    assert list(EXPERIMENTS)[: len(BUILTIN)] == [
        n.replace("_", "-") for n in BUILTIN
    ]  # sub-package names spell the CLI names with '_'
    from reduced import derive

    # `reduced.derive` finds its papers' modules itself (reduced never imports flows): the
    # same papers, the same modules as the experiments declare
    declared = {n: e.identities for n, e in EXPERIMENTS.items() if e.identities}
    assert sorted(declared) == list(derive.PAPERS)
    assert all(declared[p] == f"reduced.derive.{p.replace('-', '_')}" for p in derive.PAPERS)


@pytest.mark.e2e  # pip builds and installs a package, then three commands run: ~15 s
def test_an_installed_paper_joins_the_command_line_without_editing_flows(
    toy_distribution, tmp_path
):
    argv = ["check", "toy-paper", "--quick", "--out", "res", "--no-report", "--format", "json"]
    out = _flows(toy_distribution, *argv, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    results = json.loads((tmp_path / "res" / "toy-paper" / "results.json").read_text())
    assert results["experiment"] == "toy-paper" and results["loss_final"] > 0
    (paper,) = json.loads(out.stdout)["experiments"]
    assert paper["name"] == "toy-paper" and not paper["failed"]
    assert [(c["claim"], c["verdict"]) for c in paper["checks"]] == [
        ("L(t) ≤ L(0)·exp(−2 λ_min t)", "holds"),
        ("L(t) is non-increasing", "holds"),
    ]
    help_out = _flows(toy_distribution, "check", "--help", cwd=tmp_path)
    assert "toy-paper" in help_out.stdout
    derive = _flows(toy_distribution, "derive", "toy-paper", cwd=tmp_path)
    assert derive.returncode == 0, derive.stderr[-2000:]
    assert "solves dL/dt" in derive.stdout


class _EP:
    """An entry point whose `load` returns or raises what the test says."""

    def __init__(self, name, obj=None, error=None):
        self.name, self.value, self.group = name, f"somewhere:{name}", ENTRY_POINT_GROUP
        self._obj, self._error = obj, error

    def load(self):
        if self._error:
            raise self._error
        return self._obj


def test_broken_plugins_are_skipped_with_a_warning_each():
    good = EXPERIMENTS["deep-linear"]
    eps = [
        _EP("missing", error=ImportError("No module named 'nowhere'")),
        _EP("not-an-experiment", obj=object()),
        _EP("wrong-name", obj=good),  # registered under another name than its own
        _EP("deep-linear", obj=type(good)()),  # takes a built-in's name
    ]
    with pytest.warns(UserWarning) as caught:
        found = discover(eps)
    assert list(found) == list(EXPERIMENTS)[: len(BUILTIN)]
    messages = [str(w.message) for w in caught]
    assert len(messages) == 4
    for ep, text in zip(
        eps,
        [
            "nowhere",
            "not a flows.plugin.AbstractExperiment",
            "its name is 'deep-linear'",
            "taken by another paper",
        ],
        strict=True,
    ):
        assert any(f"plug-in {ep.name!r}" in m and text in m for m in messages), (ep.name, messages)


def test_a_real_entry_point_object_is_accepted():
    ep = EntryPoint("deep-linear", "flows.experiments.deep_linear:EXPERIMENT", ENTRY_POINT_GROUP)
    assert discover([ep])["deep-linear"] is EXPERIMENTS["deep-linear"]


def test_every_builtin_paper_has_a_docs_page_in_the_navigation():
    """The docs follow the registry: a page per shipped paper, listed in mkdocs.yml."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    nav = (root / "mkdocs.yml").read_text(encoding="utf-8")
    for name in [n.replace("_", "-") for n in BUILTIN]:
        assert (root / "docs" / "papers" / f"{name}.md").is_file(), name
        assert f"papers/{name}.md" in nav, f"mkdocs.yml's nav lacks papers/{name}.md"
