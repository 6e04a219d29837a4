"""Is any "holds" an artefact of the grid it was sampled on? Every paper's `--quick` check
run twice in one process: as shipped, and with every grid a universal claim is read on
made 10× finer —

- the save times of every `flows.simulate` and `flows.simulate_nonsmooth` call the papers
  make (`ts` refined 10× between its points, `n_save` → 10·(n_save − 1) + 1: the old
  saves are a subset), so a sup or inf over t is taken on 10× the points;
- every `flows.claims.ForAll` search: a 10× larger start grid and a 10× finer
  resolution;
- bias-plateau's interpolation grid (`n_alpha`, which also starts Theorem 1's
  words search) and its trend runs' saves (`trend_n_save`).

The sweeps' batched runs (`simulate_batch`: first crossings on 401 saves, not universal
claims) are left as they are. A row whose verdict differs is listed; "overturned" is a
`holds` (of any kind) that is not `holds` on the finer grids.

    python benchmarks/bench_finer_search.py [paper ...]   # default: all four

Writes `benchmarks/results/finer_search.md` and `.json`.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).parent / "results"
FACTOR = 10
PATCHED = ("simulate", "simulate_nonsmooth")


def _refine(ts, factor: int = FACTOR) -> np.ndarray:
    """`ts` with `factor` − 1 evenly spaced points inserted in every interval."""
    ts = np.asarray(ts, dtype=float)
    parts = [np.linspace(a, b, factor + 1)[:-1] for a, b in zip(ts[:-1], ts[1:], strict=True)]
    return np.concatenate([*parts, ts[-1:]])


def _finer_saves(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kw):
        if kw.get("ts") is not None:
            kw["ts"] = _refine(kw["ts"])
        elif kw.get("n_save") is not None:
            kw["n_save"] = FACTOR * (int(kw["n_save"]) - 1) + 1
        return fn(*args, **kw)

    return wrapper


class Finer:
    """Within the block: finer saves in every paper module, finer ForAll searches."""

    def __enter__(self):
        from flows.claims import ForAll

        self.undo = []
        for name, mod in list(sys.modules.items()):
            if not name.startswith("flows.experiments"):
                continue
            for attr in PATCHED:
                fn = getattr(mod, attr, None)
                if callable(fn) and getattr(fn, "__module__", "").startswith("flows"):
                    setattr(mod, attr, _finer_saves(fn))
                    self.undo.append((mod, attr, fn))
        judge = ForAll.judge

        def finer_judge(self_):
            finer = dataclasses.replace(
                self_, grid=self_.grid * FACTOR, resolution=self_.resolution / FACTOR
            )
            return judge(finer)

        ForAll.judge = finer_judge
        self.undo.append((ForAll, "judge", judge))
        return self

    @property
    def patched(self) -> list[str]:
        return [f"{getattr(o, '__name__', o)}.{a}" for o, a, _ in self.undo]

    def __exit__(self, *exc):
        for obj, attr, fn in reversed(self.undo):
            setattr(obj, attr, fn)


def _config(exp, finer: bool):
    cfg = exp.default_config(quick=True)
    if finer and exp.name == "bias-plateau":
        cfg = dataclasses.replace(
            cfg,
            n_alpha=FACTOR * cfg.n_alpha,
            trend_n_save=FACTOR * (cfg.trend_n_save - 1) + 1,
        )
    return cfg


def _run(exp, finer: bool) -> tuple[list[dict], float]:
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        if finer:
            with Finer() as f:
                print(f"{exp.name}: finer saves through {', '.join(f.patched)}", flush=True)
                report = exp.run(_config(exp, True), Path(tmp), progress=False)
        else:
            report = exp.run(_config(exp, False), Path(tmp), progress=False)
        wall = time.perf_counter() - start
    rows = [
        {"claim": c.claim, "source": c.source, "verdict": c.verdict, "margin": c.margin}
        for c in report.checks
    ]
    return rows, wall


def _key(row: dict) -> tuple[str, str]:
    """A row's identity across the two runs: its source and claim, the grid size a claim
    names ('(grid of 50)') left out."""
    return row["source"], re.sub(r"grid of \d+", "grid of N", row["claim"])


def _holds(v: str) -> bool:
    return v.startswith("holds")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "papers", nargs="*", help="papers to measure (default: all four; the others keep "
        "their last row in the results file)"
    )  # fmt: skip
    argv = parser.parse_args(argv).papers
    # import every paper's modules first, so that the patch reaches them
    import flows.experiments.bias_plateau  # noqa: F401
    import flows.experiments.deep_linear  # noqa: F401
    import flows.experiments.linear_teacher  # noqa: F401
    import flows.experiments.multistage  # noqa: F401
    from flows.experiments import EXPERIMENTS

    names = argv or sorted(EXPERIMENTS)
    path = RESULTS / "finer_search.json"
    # papers not named keep their last measurement (one table for all four)
    out = json.loads(path.read_text()) if argv and path.exists() else {"papers": {}}
    out["factor"] = FACTOR
    for name in names:
        exp = EXPERIMENTS[name]
        base, w0 = _run(exp, False)
        fine, w1 = _run(exp, True)
        by_claim = {_key(r): r for r in fine}
        changed = [(r, by_claim.get(_key(r))) for r in base]
        changed = [(r, f) for r, f in changed if f is None or f["verdict"] != r["verdict"]]
        overturned = [
            (r, f) for r, f in changed if _holds(r["verdict"]) and not (f and _holds(f["verdict"]))
        ]
        out["papers"][name] = {
            "rows": len(base),
            "changed": [
                {"claim": r["claim"], "source": r["source"], "shipped": r["verdict"],
                 "finer": None if f is None else f["verdict"]}
                for r, f in changed
            ],
            "overturned": len(overturned),
            "wall_s": [w0, w1],
        }  # fmt: skip
        print(f"{name}: {len(changed)} changed, {len(overturned)} overturned", flush=True)
    RESULTS.mkdir(exist_ok=True)
    path.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    (RESULTS / "finer_search.md").write_text(_markdown(out), encoding="utf-8")
    return 0


def _markdown(out: dict) -> str:
    lines = [
        "# Universal claims on 10× finer grids",
        "",
        "`python benchmarks/bench_finer_search.py` (see its docstring): every paper's "
        "`--quick` check as shipped and with every save grid, `ForAll` search and "
        f"interpolation grid {out['factor']}× finer. Overturned: a `holds` that is not "
        "`holds` on the finer grids.",
        "",
        "| paper | rows | verdicts changed | holds overturned | wall (s) shipped / finer |",
        "|---|---|---|---|---|",
    ]
    details = []
    for name, p in sorted(out["papers"].items()):
        w0, w1 = p["wall_s"]
        lines.append(
            f"| {name} | {p['rows']} | {len(p['changed'])} | {p['overturned']} | "
            f"{w0:.0f} / {w1:.0f} |"
        )
        details += [
            f"- {name}: [{c['source']}] {c['claim']}: {c['shipped']} → "
            f"{c['finer'] or '(no such row)'}"
            for c in p["changed"]
        ]
    lines += ["", "Rows whose verdict changed:", ""] + (details or ["- none"])
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
