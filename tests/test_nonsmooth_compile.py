"""What the event flow's program is made of: the parts whose copies set its compile time
(`benchmarks/results/nonsmooth_profile.md`, "Compilation") are traced once."""

from __future__ import annotations

import jax
import jax.numpy as jnp

import flows
from flows._nonsmooth import _api, _decision, _loop, _sliding
from flows._nonsmooth._net import Net
from flows.experiments.linear_teacher.data import symmetric_gaussians
from flows.models import LeakyReLUNet


def _net_and_state():
    data = symmetric_gaussians(20, 2, mean=1.0, seed=0)
    pb = flows.make_problem(
        LeakyReLUNet(k=2, d=2, slope=0.1, init_scale=1.0), data.train, key=0, loss_fn=flows.logistic
    )
    problem, run = _api.NonsmoothRun.validate(
        pb, t1=1.0, t0=0.0, rtol=1e-6, atol=1e-9, ts=None, n_save=3, save_params="ends",
        observables=None, clock="physical", max_steps=100, max_events=100, max_sliding=4,
        max_candidates=4, slots=4, kink_tol=1e-9, storm_window=10, storm_span=1e-9,
        error_norm="rms", throw=True,
    )  # fmt: skip
    net = Net.build(problem, run.settings, run.layout, (run.rtol, run.atol))
    ts, mask = jnp.asarray(run.ts), jnp.asarray(run.pts_mask)
    carry = _loop.start(net, problem.theta0, ts, mask, 0.0, 1.0)
    return net, carry


def _count(monkeypatch, module, name) -> list:
    calls = []
    orig = getattr(module, name)

    def counted(*args, **kwargs):
        calls.append(name)
        return orig(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


def test_decision_traces_one_solve_of_the_sides(monkeypatch):
    """The active set, the own-condition test, the bracketing bisection and the final
    solve share one `solve_sides` (one iteration of the decision's loop each)."""
    net, carry = _net_and_state()
    calls = _count(monkeypatch, _decision, "solve_sides")
    jax.make_jaxpr(lambda y, pat: _decision.decide(net, y, pat))(carry.y, carry.pat)
    assert len(calls) == 1


def test_newton_steps_are_loops(monkeypatch):
    """The equivalent control's Newton steps (the field's two, `sliding_jacobian`'s up to
    three) trace ż once each, not once per step."""
    net, carry = _net_and_state()
    y, pat = carry.y, carry.pat
    calls = _count(monkeypatch, _sliding, "zdot_sliding")
    jax.make_jaxpr(lambda th: _sliding.equivalent_control(net, th, pat))(y[0])
    assert len(calls) == 1
    calls = _count(monkeypatch, _sliding, "_zdot_sliding_scaled")
    jax.make_jaxpr(lambda th: _sliding.sliding_jacobian(net, th, pat, pat[6]))(y[0])
    # the loop's residual and its Jacobian (the loop's last is the Jacobian at the λ
    # returned); `jac_columns` traces its function twice (its output's shape, then the JVP)
    assert len(calls) == 3
