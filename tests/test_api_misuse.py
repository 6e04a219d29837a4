"""API misuse is named: θ(0) may be any pytree, and every other misuse — a user's
function that cannot be traced or returns the wrong thing, something that is not a Problem,
a size that cannot be allocated — is a `ConfigError` naming the argument and what to do,
raised before anything is compiled or allocated.

Fast: tiny problems; the misuse cases fail before any solve.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import xarray as xr
from _matrix import default_and_ci

import flows
from flows._solve import arguments as _arguments
from flows._solve import baselines as _baselines
from flows._solve import problem as _problem
from flows._solve.trajectory import param_names
from flows._validate import MAX_SAVES, MAX_STEPS, check_log_save_grid
from flows.models import FunctionModel, TwoLayer

ConfigError = flows.ConfigError

RNG = np.random.default_rng(0)
X = RNG.normal(size=(12, 2))
DATA = flows.from_arrays(X, np.sin(X[:, 0]))
W0 = 0.3 * RNG.normal(size=(2, 3))
V0 = 0.3 * RNG.normal(size=3)


def _net(W, v, x):
    return jnp.tanh(x @ W) @ v


def _dict_net(p, x):
    return _net(p["W"], p["v"], x)


# θ(0) as every kind of pytree, with the same flow: (model, θ(0), names in results)
PYTREES = {
    "tuple": (lambda p, x: _net(p[0], p[1], x), (W0, V0), ["0", "1"]),
    "list": (lambda p, x: _net(p[0], p[1], x), [W0, V0], ["0", "1"]),
    "nested dict": (
        lambda p, x: _net(p["layer1"]["W"], p["layer2"]["v"], x),
        {"layer1": {"W": W0}, "layer2": {"v": V0}},
        ["layer1.W", "layer2.v"],
    ),
    "list of dicts": (
        lambda p, x: _net(p[0]["W"], p[1]["v"], x),
        [{"W": W0}, {"v": V0}],
        ["0.W", "1.v"],
    ),
    "bare array": (lambda p, x: jnp.tanh(x @ p), W0[:, 0], ["theta"]),
}


@pytest.fixture(scope="module")
def dict_problem():
    return flows.make_problem(_dict_net, DATA, theta0={"W": W0, "v": V0})


@pytest.fixture
def problem(dict_problem):
    return dict_problem


# ---------------------------------------------------------------------------------------
# θ(0) any pytree: simulate, GD, the batch, saving and loading


@pytest.mark.parametrize("kind", default_and_ci(PYTREES, default=["list", "nested dict"]))
def test_any_pytree_theta0_runs_everywhere_and_saves_by_path(kind, dict_problem, tmp_path):
    fn, theta0, names = PYTREES[kind]
    p = flows.make_problem(fn, DATA, theta0=theta0)
    leaves = jax.tree_util.tree_leaves(theta0)
    flow = flows.simulate(p, t1=1.0, n_save=3, save_params="all")
    assert list(flow.params) == names
    for name, leaf in zip(names, leaves, strict=True):
        assert flow.params[name].shape == (3, *np.shape(leaf))
        np.testing.assert_array_equal(flow.params[name][0], leaf)
    gd = flows.gradient_descent(p, learning_rate=0.1, t1=1.0, n_save=3, save_params="all")
    assert list(gd.params) == names
    batch = flows.simulate_batch([p, p], t1s=[1.0, 0.5], n_save=3, save_params="ends")
    assert [list(b.params) for b in batch] == [names, names]
    np.testing.assert_allclose(batch[0].loss, flow.loss, rtol=1e-12)  # vmapped: round-off
    if kind != "bare array":  # the same flow as the dict θ(0): same numbers
        ref = flows.simulate(dict_problem, t1=1.0, n_save=3)
        np.testing.assert_allclose(flow.loss, ref.loss, rtol=1e-12)
    path = flow.save(tmp_path / "flow.nc")
    with xr.open_dataset(path) as ds:
        for name in names:
            np.testing.assert_array_equal(ds[name].values, flow.params[name])
    with xr.open_dataset(gd.save(tmp_path / "gd.nc")) as ds:
        assert set(names) <= set(ds.data_vars)


@pytest.mark.parametrize("kind", ["tuple", "bare array"])
def test_sgd_takes_any_pytree_theta0(kind):
    fn, theta0, names = PYTREES[kind]
    y = np.where(X[:, 0] > 0, 1.0, -1.0)
    p = flows.make_problem(fn, flows.from_arrays(X, y), theta0=theta0, loss_fn=flows.logistic)
    res = flows.sgd_to_epsilon(p, epsilon=1e-9, learning_rate=0.1, max_epochs=2, theta0=theta0)
    assert list(res.params) == names and res.epochs_run == 2
    with pytest.raises(ConfigError, match="theta0.*structure"):
        flows.sgd_to_epsilon(p, epsilon=0.1, learning_rate=0.1, theta0={"W": W0})


def test_parameter_names_follow_paths_and_clashes_are_refused(tmp_path):
    haiku = {"mlp/~/linear": {"w": W0, "b": np.zeros(3)}}
    p = flows.make_problem(
        lambda q, x: jnp.tanh(x @ q["mlp/~/linear"]["w"]) @ V0, DATA, theta0=haiku
    )
    flow = flows.simulate(p, t1=0.5, n_save=2)
    assert list(flow.params) == ["mlp.~.linear.b", "mlp.~.linear.w"]  # '/' is netCDF's
    with xr.open_dataset(flow.save(tmp_path / "t.nc")) as ds:
        assert "mlp.~.linear.w" in ds
    with pytest.raises(ConfigError, match=r"theta0.*both be saved as 'a\.b'"):
        flows.make_problem(lambda q, x: x[:, 0], DATA, theta0={"a.b": V0, "a": {"b": V0}})
    # a parameter named like the data is saved as theta.<name>
    p = flows.make_problem(lambda q, x: x @ q["x"], DATA, theta0={"x": W0[:, 0]})
    with xr.open_dataset(flows.simulate(p, t1=0.5, n_save=2).save(tmp_path / "x.nc")) as ds:
        assert ds["x"].dims == ("sample", "dim")
        assert ds["theta.x"].attrs["parameter"] == "x"
    # an observable named like a parameter (bias-plateau's b(t) beside the parameter b):
    # the parameter keeps the contract's name, the observable is saved as obs.<name>
    p = flows.make_problem(lambda q, x: x @ q["v"], DATA, theta0={"v": W0[:, 0]})
    flow = flows.simulate(p, t1=0.5, n_save=3, observables=lambda pb, q, t: {"v": q["v"]})
    with xr.open_dataset(flow.save(tmp_path / "v.nc")) as ds:
        assert ds["v"].dims == ("time", "v_dim1") and int(ds["param_saved"].sum()) == 2
        assert ds["obs.v"].attrs["observable"] == "v"
        np.testing.assert_array_equal(ds["obs.v"].values, flow.observables["v"])


@pytest.mark.parametrize("kind", ["tuple", "nested dict"])
def test_the_loss_clock_saves_any_pytree_theta(kind):
    fn, theta0, _ = PYTREES[kind]
    p = flows.make_problem(fn, DATA, theta0=theta0)
    tr = flows.simulate(p, t1=1.0, n_save=3, clock="loss")
    ref = flows.simulate(p, t1=1.0, n_save=3, clock="loss", save_params="none")
    assert sorted(tr.params) == sorted(param_names(theta0))
    np.testing.assert_allclose(tr.loss, ref.loss, rtol=1e-12)
    assert tr.loss[-1] < tr.loss[0]


# ---------------------------------------------------------------------------------------
# Something that is not a Problem


def _entry(name):
    return {
        "simulate": lambda p, **kw: flows.simulate(p, t1=1.0, n_save=3, **kw),
        "gradient_descent": lambda p, **kw: flows.gradient_descent(
            p, learning_rate=0.1, t1=1.0, n_save=3, **kw
        ),
        "simulate_batch": lambda p, **kw: flows.simulate_batch([p], t1s=[1.0], n_save=3, **kw),
        "sgd_to_epsilon": lambda p, **kw: flows.sgd_to_epsilon(
            p, epsilon=0.1, learning_rate=0.1, **kw
        ),
    }[name]


@pytest.mark.parametrize(
    "entry", ["simulate", "gradient_descent", "simulate_batch", "sgd_to_epsilon"]
)
@pytest.mark.parametrize(
    "bad", ["abc", None, {"theta0": 1.0}, DATA], ids=lambda v: type(v).__name__
)
def test_not_a_problem_is_named(entry, bad):
    with pytest.raises(
        ConfigError, match=r"`problem(s\[0\])?` must be a flows\.Problem.*make_problem"
    ):
        _entry(entry)(bad)


def test_simulate_batch_refuses_one_problem_and_bad_sizes(problem):
    with pytest.raises(ConfigError, match="`problems` must be a list.*\\[problem\\]"):
        flows.simulate_batch(problem, t1s=[1.0])
    with pytest.raises(ConfigError, match=r"`t1s\[1\]`"):
        flows.simulate_batch([problem, problem], t1s=[1.0, "2"])
    with pytest.raises(ConfigError, match="`dt0`"):
        flows.simulate_batch([problem], t1s=[1.0], dt0=-1.0)


# ---------------------------------------------------------------------------------------
# A user's functions: checked on a first evaluation


def _raises(problem, theta, t):
    raise ValueError("boom")


BAD_OBSERVABLES = {
    "raises": (_raises, "raised ValueError.*boom"),
    "returns a list": (lambda p, th, t: [1.0], "must return a dict.*returned list"),
    "returns a string": (lambda p, th, t: "loss", "must return a dict.*returned str"),
    "a string value": (lambda p, th, t: {"a": "x"}, "value of 'a' is str"),
    "a nested value": (lambda p, th, t: {"a": {"b": 1.0}}, "value of 'a' is dict"),
    "a complex value": (lambda p, th, t: {"a": 1j * p.loss(th)}, "real values.*complex"),
    "a '/' in a name": (lambda p, th, t: {"a/b": 1.0}, "without '/'"),
    "not callable": (3, "must be a function"),
}


@pytest.mark.parametrize("entry", ["simulate", "gradient_descent", "simulate_batch"])
@pytest.mark.parametrize("case", list(BAD_OBSERVABLES))
def test_bad_observables_are_named(entry, case, problem):
    obs, match = BAD_OBSERVABLES[case]
    with pytest.raises(ConfigError, match=f"`observables`.*{match}"):
        _entry(entry)(problem, observables=obs)


BAD_STOPS = {
    "a vector": (lambda p, th, t: th["v"], r"returned an array of shape \(3,\).*jnp\.min"),
    "a bool": (lambda p, th, t: p.loss(th) < 0.1, "returned a bool.*jnp.where"),
    "a string": (lambda p, th, t: "loss", "returned str"),
    "not callable": (0.1, "must be a function.*got 0.1"),
    "raises": (_raises, "raised ValueError"),
}


@pytest.mark.parametrize("entry", ["simulate", "gradient_descent"])
@pytest.mark.parametrize("case", list(BAD_STOPS))
def test_bad_stop_conditions_are_named(entry, case, problem):
    stop, match = BAD_STOPS[case]
    with pytest.raises(ConfigError, match=f"`stop`.*{match}"):
        _entry(entry)(problem, stop=stop)


BAD_MODELS = {
    "returns a tuple": (lambda p, x: (x[:, 0], x[:, 1]), "returned tuple.*jnp.stack"),
    "returns one number": (lambda p, x: jnp.sum(x @ p["W"]), r"returned shape \(\)"),
    "transposed": (lambda p, x: (x @ p["W"]).T, r"returned shape \(3, 12\).*x @ W.T"),
    "integer outputs": (lambda p, x: jnp.round(x @ p["W"] @ p["v"]).astype(int), "int64"),
    "complex outputs": (lambda p, x: 1j * (x @ p["W"] @ p["v"]), "complex outputs"),
    "raises": (lambda p, x: p["nope"], "raised KeyError.*'nope'"),
}


@pytest.mark.parametrize("case", list(BAD_MODELS))
def test_bad_models_are_named(case):
    fn, match = BAD_MODELS[case]
    with pytest.raises(ConfigError, match=f"`model`.*{match}"):
        flows.make_problem(fn, DATA, theta0={"W": W0, "v": V0})


BAD_LOSSES = {
    "one value per sample": (lambda pred, y: (pred - y) ** 2, r"shape \(12,\).*jnp\.mean"),
    "complex": (lambda pred, y: (1 + 1j) * jnp.mean((pred - y) ** 2), "complex value"),
    "integer": (lambda pred, y: jnp.sum(pred > y), "dtype int64"),
    "a tuple": (lambda pred, y: (jnp.mean(pred), jnp.mean(y)), "returned tuple"),
    "raises": (lambda pred, y: pred.foo, "raised AttributeError"),
}


@pytest.mark.parametrize("case", list(BAD_LOSSES))
def test_bad_losses_are_named(case):
    loss, match = BAD_LOSSES[case]
    with pytest.raises(ConfigError, match=f"`loss_fn`.*{match}"):
        flows.make_problem(_dict_net, DATA, theta0={"W": W0, "v": V0}, loss_fn=loss)


# Code JAX cannot trace, and the advice that goes with each error
TRACER_MISTAKES = {
    "np on traced values": (
        lambda v: np.tanh(v),
        jax.errors.TracerArrayConversionError,
        "`np.` function.*jax.numpy",
    ),
    "python if": (
        lambda v: v if v[0] > 0 else -v,
        jax.errors.TracerBoolConversionError,
        r"Python \(`if`.*jnp\.where",
    ),
    "float()": (
        lambda v: v * float(v[0]),
        jax.errors.ConcretizationTypeError,
        "concrete value.*jnp.where",
    ),
    "range()": (
        lambda v: v * len(range(v[0].astype(int))),
        jax.errors.TracerIntegerConversionError,
        "Python integer",
    ),
}


def _in_model(bad):
    return {"model": lambda p, x: bad(jnp.tanh(x @ p["W"]) @ p["v"])}


def _in_loss(bad):
    return {"loss_fn": lambda pred, y: jnp.mean(bad(pred - y) ** 2)}


@pytest.mark.parametrize("where", ["model", "loss_fn", "observables", "stop"])
@pytest.mark.parametrize("mistake", list(TRACER_MISTAKES))
def test_untraceable_user_code_is_explained(where, mistake, problem):
    bad, error, advice = TRACER_MISTAKES[mistake]
    match = f"`{where}` cannot be traced by JAX.*{advice}"
    with pytest.raises(ConfigError, match=match) as info:
        if where == "model":
            flows.make_problem(_in_model(bad)["model"], DATA, theta0={"W": W0, "v": V0})
        elif where == "loss_fn":
            flows.make_problem(_dict_net, DATA, theta0={"W": W0, "v": V0}, **_in_loss(bad))
        elif where == "observables":
            flows.simulate(problem, t1=1.0, observables=lambda p, th, t: {"o": bad(th["v"])})
        else:
            flows.simulate(problem, t1=1.0, stop=lambda p, th, t: jnp.sum(bad(th["v"])))
    assert isinstance(info.value.__cause__, error)


def test_a_problem_built_by_hand_with_untraceable_code_is_explained():
    """`Problem(...)` directly skips make_problem's first evaluation: the check of θ(0)
    before a run explains the tracer error all the same."""
    fn = lambda p, x: np.tanh(x @ p["W"]) @ p["v"]  # noqa: E731
    theta0 = {"W": jnp.asarray(W0), "v": jnp.asarray(V0)}
    p = flows.Problem(
        model=FunctionModel.of(fn, theta0),
        x=jnp.asarray(X),
        y=jnp.asarray(DATA.y),
        theta0=theta0,
        loss_fn=flows.squared_error,
        data_name="hand",
    )
    with pytest.raises(ConfigError, match="cannot be differentiated.*jax.numpy") as info:
        flows.simulate(p, t1=1.0)
    assert isinstance(info.value.__cause__, jax.errors.TracerArrayConversionError)


# ---------------------------------------------------------------------------------------
# Sizes: checked, with a stated limit, before anything is allocated


@pytest.mark.parametrize("entry", ["simulate", "gradient_descent", "simulate_batch"])
@pytest.mark.parametrize("n_save", [10**13, "the limit + 1"])
def test_absurd_save_counts_are_refused_before_allocation(entry, n_save, problem, monkeypatch):
    limit = MAX_SAVES
    if n_save == "the limit + 1":  # a limit that runs in milliseconds if it is not enforced
        limit = 4
        monkeypatch.setattr(_arguments, "MAX_SAVES", limit)
        n_save = limit + 1
    call = {
        "simulate": lambda: flows.simulate(problem, t1=1.0, n_save=n_save),
        "gradient_descent": lambda: flows.gradient_descent(
            problem, learning_rate=0.1, t1=1.0, n_save=n_save
        ),
        "simulate_batch": lambda: flows.simulate_batch([problem], t1s=[1.0], n_save=n_save),
    }[entry]
    with pytest.raises(ConfigError, match=rf"`n_save` must be an integer in \[2, {limit}\]"):
        call()


def test_a_long_ts_grid_is_refused(problem, monkeypatch):
    monkeypatch.setattr(_arguments, "MAX_SAVES", 4)
    with pytest.raises(ConfigError, match="`ts` holds 5 save times; at most 4"):
        flows.simulate(problem, t1=1.0, ts=np.linspace(0.0, 1.0, 5))


@pytest.mark.parametrize("entry", ["simulate", "simulate_batch"])
@pytest.mark.parametrize("max_steps", [MAX_STEPS + 1, 2**64])
def test_absurd_step_budgets_are_refused(entry, max_steps, problem):
    with pytest.raises(ConfigError, match=rf"`max_steps` must be an integer in \[1, {MAX_STEPS}\]"):
        _entry(entry)(problem, max_steps=max_steps)


@pytest.mark.parametrize("lr", [1e-300, 5e-324])
def test_gradient_descent_with_too_many_steps_is_refused(lr, problem, monkeypatch):
    with pytest.raises(ConfigError, match=r"t1/η = .* steps.*at most 1e\+12.*larger learning"):
        flows.gradient_descent(problem, learning_rate=lr, t1=1.0)
    # the limit itself, at a size that runs in milliseconds if it is not enforced
    monkeypatch.setattr(_baselines, "MAX_STEPS", 100)
    with pytest.raises(ConfigError, match=r"t1/η = 1e\+03 steps"):
        flows.gradient_descent(problem, learning_rate=1e-3, t1=1.0)


def test_sgd_epoch_budget_has_a_limit():
    y = np.where(X[:, 0] > 0, 1.0, -1.0)
    p = flows.make_problem(
        _dict_net, flows.from_arrays(X, y), theta0={"W": W0, "v": V0}, loss_fn=flows.logistic
    )
    with pytest.raises(ConfigError, match="`max_epochs` must be an integer in"):
        flows.sgd_to_epsilon(p, epsilon=0.1, learning_rate=0.1, max_epochs=10**13)


@pytest.mark.parametrize("entry", ["simulate", "gradient_descent", "simulate_batch"])
def test_saves_that_cannot_fit_in_memory_are_refused(entry, monkeypatch):
    wide = flows.make_problem(TwoLayer(m=50, d=1, alpha=1.0), flows.paper_data(n=10), key=0)
    monkeypatch.setattr(_problem, "_available_bytes", lambda: 50_000)
    with pytest.raises(ConfigError, match="saving 100 times.*GiB.*save_params='ends'"):
        {
            "simulate": lambda: flows.simulate(wide, t1=1.0, n_save=100, save_params="all"),
            "gradient_descent": lambda: flows.gradient_descent(
                wide, learning_rate=0.01, t1=1.0, n_save=100, save_params="all"
            ),
            "simulate_batch": lambda: flows.simulate_batch(
                [wide], t1s=[1.0], n_save=100, save_params="all"
            ),
        }[entry]()


BAD_LOG_GRIDS = [
    ((-1.0, 5), "`t1` must be > 0"),
    ((0.0, 5), "`t1` must be > 0"),
    ((float("nan"), 5), "`t1` must be a finite number"),
    ((float("inf"), 5), "`t1` must be a finite number"),
    ((10.0, 10**13), r"`n_save` must be an integer in \[2, "),
    ((10.0, 5, 20.0), "`t1` must be > t0"),
    ((10.0, 5, 0.0, 0.0), "`first` must be > 0"),
]


@pytest.mark.parametrize("args, match", BAD_LOG_GRIDS, ids=repr)
def test_log_save_grid_refuses_non_finite_and_non_positive_horizons(args, match):
    full = (*args, *(5, 0.0, 1.0)[len(args) - 1 :])
    with pytest.raises(ConfigError, match=match):
        check_log_save_grid(*full)
    assert check_log_save_grid(100, np.int64(5), 0, 1.0) == (100.0, 5, 0.0, 1.0)


@pytest.mark.parametrize("t1", [-1.0, 0.0, float("nan")])
def test_log_save_times_refuses_a_bad_horizon(t1):
    with pytest.raises(ConfigError, match="`t1`"):
        flows.log_save_times(t1, 5)


# ---------------------------------------------------------------------------------------
# The event flow's entry point refuses the same misuse, before compiling anything


def test_simulate_nonsmooth_names_misuse_before_compiling():
    from flows.experiments.linear_teacher.data import symmetric_gaussians
    from flows.models import LeakyReLUNet

    data = symmetric_gaussians(10, 2, mean=1.0, seed=0)
    p = flows.make_problem(LeakyReLUNet(k=2, d=2, slope=0.1), data.train, key=0)
    with pytest.raises(ConfigError, match="`problem` must be a flows.Problem"):
        flows.simulate_nonsmooth("abc", t1=1.0)
    with pytest.raises(ConfigError, match="`n_save`"):
        flows.simulate_nonsmooth(p, t1=1.0, n_save=10**13)
    with pytest.raises(ConfigError, match="`max_steps`"):
        flows.simulate_nonsmooth(p, t1=1.0, max_steps=2**64)
    with pytest.raises(ConfigError, match="`observables` must return"):
        flows.simulate_nonsmooth(p, t1=1.0, observables=lambda problem, theta, t: [1.0])


@pytest.mark.parametrize("rtol", [1e-30, 1e-17])
def test_an_rtol_below_the_unit_roundoff_is_refused_before_compiling(rtol, tmp_path, capsys):
    """rtol below float64's rounding cannot be met: refused at once (it used to run until
    max_steps, ~70 s, then exit 3), in Python and on the command line (exit 2)."""
    import flows
    from flows._cli.app import main

    x = np.linspace(-1, 1, 6)[:, None]
    problem = flows.make_problem(
        flows.models.TwoLayer(m=3, d=1, alpha=0.5), flows.from_arrays(x, x), 0
    )
    with pytest.raises(flows.ConfigError, match="unit roundoff"):
        flows.simulate(problem, t1=1.0, rtol=rtol)
    flows.simulate(problem, t1=0.1, rtol=2.3e-16, atol=1e-18, max_steps=100_000, throw=False)
    argv = [
        "simulate",
        "multistage",
        "--m",
        "5",
        "--rtol",
        f"{rtol:g}",
        "--out",
        str(tmp_path / "o"),
    ]
    assert main(argv) == 2
    assert "unit roundoff" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_a_trajectory_prints_as_one_line():
    """`repr(traj)` summarizes (it printed ~20 kB of arrays); GD's trajectory too."""
    import flows

    x = np.linspace(-1, 1, 6)[:, None]
    problem = flows.make_problem(
        flows.models.TwoLayer(m=3, d=1, alpha=0.5), flows.from_arrays(x, x), 0
    )
    for traj in (
        flows.simulate(problem, t1=1.0, save_params="all"),
        flows.gradient_descent(problem, learning_rate=0.1, t1=1.0),
    ):
        text = repr(traj)
        assert "\n" not in text and len(text) < 300, text
        assert text.startswith("Trajectory(") and f"{len(traj.times)} saves" in text
        assert f"{traj.loss[0]:.6g} → {traj.loss[-1]:.6g}" in text


def test_the_initial_state_check_compiles_once_per_structure():
    """`check_initial_state` (run by every solve and GD run) evaluates the loss and gradient
    at θ(0) by one compiled program per structure: further problems of the same shapes do
    not call the model again; a non-finite θ(0) still gets the op-by-op message."""
    calls = []

    def linear(p, x):
        calls.append(1)  # a Python call: a trace, or an op-by-op evaluation
        return x @ p["A"].T

    rng = np.random.default_rng(0)
    data = flows.from_arrays(rng.normal(size=(20, 3)), rng.normal(size=(20, 2)))
    probs = [
        flows.make_problem(linear, data, theta0={"A": rng.normal(size=(2, 3))}) for _ in range(3)
    ]
    huge = flows.make_problem(linear, data, theta0={"A": np.full((2, 3), 1e200)})
    _arguments.check_initial_state(probs[0])
    before = len(calls)
    _arguments.check_initial_state(probs[1])
    _arguments.check_initial_state(probs[2])
    assert len(calls) == before
    with pytest.raises(flows.ConfigError, match="not finite at θ"):
        _arguments.check_initial_state(huge)
    assert len(calls) > before  # the refusal's message comes from the op-by-op check
