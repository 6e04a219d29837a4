"""One paper registry (`flows.experiments.EXPERIMENTS`): the built-in papers, then the
`flows.papers` entry points of installed packages — a paper from outside the repository
is added with zero edits to `flows/` (shown here by an installed-looking distribution on
the path, driven through the real command line), and a broken plug-in is skipped with a
warning, never stopping the others."""

import json
import os
import subprocess
import sys
import textwrap
from importlib.metadata import EntryPoint

import pytest

from flows.experiments import BUILTIN, ENTRY_POINT_GROUP, EXPERIMENTS, discover

TOY = textwrap.dedent(
    '''
    """A paper outside the toolkit: the loss of a small tanh net decreases."""
    import json
    from pathlib import Path

    import numpy as np

    import flows
    from flows.experiments import AbstractExperiment, Report, Simulated
    from flows.models import TwoLayer


    def problem():
        x = np.linspace(-1, 1, 8)[:, None]
        data = flows.from_arrays(x, np.tanh(2 * x))
        return flows.make_problem(TwoLayer(m=4, d=1, alpha=0.5), data, 0)


    class Toy(AbstractExperiment):
        name = "toy-paper"
        title = "A toy paper"
        files = ("results.json",)
        simulate_flags = ()
        identities = "toy_paper_identities"

        def default_config(self, quick=False):
            return {"t1": 0.5 if quick else 1.0}

        def run(self, cfg, out, *, progress=True):
            traj = flows.simulate(problem(), t1=cfg["t1"])
            drop = float(traj.loss[0] - traj.loss[-1])
            check = flows.Check.compare(
                "the loss decreases", "toy", holds=drop > 0, predicted="> 0", measured=f"{drop:.3g}"
            )
            folder = Path(out) / self.name
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "results.json").write_text(json.dumps({"drop": drop}))
            return Report(self.name, [check], [folder / "results.json"], {"drop": drop})

        def simulate(self, options, *, progress=False):
            return Simulated(flows.simulate(problem(), t1=0.5), rtol=1e-6)


    EXPERIMENT = Toy()
    '''
)

IDENTITIES = textwrap.dedent(
    """
    import sympy as sp
    from reduced.derive import Identity

    x = sp.Symbol("x", real=True)
    IDENTITIES = [
        Identity(
            "toy: d/dx tanh = 1 - tanh^2",
            "toy-paper",
            "the derivative of tanh",
            lambda: sp.diff(sp.tanh(x), x) - (1 - sp.tanh(x) ** 2),
            (x,),
        )
    ]
    """
)


@pytest.fixture
def toy_distribution(tmp_path):
    """`toy_paper` as pip would leave it: the module, and a dist-info whose
    entry_points.txt registers it in the `flows.papers` group."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "toy_paper.py").write_text(TOY)
    (site / "toy_paper_identities.py").write_text(IDENTITIES)
    info = site / "toy_paper-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-paper\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\ntoy-paper = toy_paper:EXPERIMENT\n"
    )
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

    # `reduced.derive` keeps its own list (reduced never imports flows): the same papers,
    # the same modules as the experiments declare
    declared = {n: e.identities for n, e in EXPERIMENTS.items() if e.identities}
    assert list(declared) == list(derive.PAPERS)
    assert all(declared[p] == f"reduced.derive.{p.replace('-', '_')}" for p in derive.PAPERS)


@pytest.mark.e2e  # installs a package and runs the command in a new process: ~12 s
def test_an_installed_paper_joins_the_command_line_without_editing_flows(
    toy_distribution, tmp_path
):
    argv = ["check", "toy-paper", "--quick", "--out", "res", "--no-report", "--format", "json"]
    out = _flows(toy_distribution, *argv, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads((tmp_path / "res" / "toy-paper" / "results.json").read_text())["drop"] > 0
    (paper,) = json.loads(out.stdout)["experiments"]
    assert paper["name"] == "toy-paper" and not paper["failed"]
    assert [(c["claim"], c["verdict"]) for c in paper["checks"]] == [
        ("the loss decreases", "holds")
    ]
    help_out = _flows(toy_distribution, "check", "--help", cwd=tmp_path)
    assert "toy-paper" in help_out.stdout
    derive = _flows(toy_distribution, "derive", "toy-paper", cwd=tmp_path)
    assert derive.returncode == 0, derive.stderr[-2000:]
    assert "toy: d/dx tanh" in derive.stdout


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
            "not a flows.experiments.AbstractExperiment",
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
