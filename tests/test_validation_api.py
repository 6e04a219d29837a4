"""Bad input to the data / model / problem layer is refused with a `ConfigError` naming the
argument, and every valid numeric type (Python, NumPy, 0-d JAX) is accepted.

Fast: nothing here integrates a flow.
"""

import dataclasses
import decimal
import fractions
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import flows
from flows._solve import problem as _problem
from flows._validate import MAX_SEED, as_key
from flows.experiments import linear_teacher as lt
from flows.experiments.bias_plateau import data as _classification_data
from flows.experiments.bias_plateau.data import (
    check_labels,
    class_sum_cross_entropy,
    orthogonal_data,
)
from flows.experiments.linear_teacher import data as _separable_data
from flows.models import DeepFCN, Homogeneous, LeakyReLUNet, TwoLayer
from flows.plugin import as_bool, as_choice, as_float, as_int, as_real_array, as_seed, as_tolerance

ConfigError = flows.ConfigError

# ---------------------------------------------------------------------------------------
# The shared validators

FLOATS_OK = [
    1,
    1.5,
    np.float32(0.5),
    np.float64(0.5),
    np.float16(0.5),
    np.int64(3),
    np.asarray(2.0),
    jnp.asarray(2.0),
    jnp.asarray(2.0, dtype=jnp.float32),
    fractions.Fraction(1, 2),
    decimal.Decimal("0.5"),
]

NOT_NUMBERS = [
    True,
    np.bool_(False),
    jnp.asarray(True),
    "1.0",
    b"1",
    None,
    1 + 1j,
    np.complex128(1.0),
    jnp.asarray(1.0 + 0j),
    np.array([1.0, 2.0]),
    np.array([1.0]),
    jnp.array([1.0, 2.0]),
    [1.0],
    object(),
]


@pytest.mark.parametrize("value", FLOATS_OK, ids=repr)
def test_as_float_accepts_every_real_number_type(value):
    v = as_float("x", value)
    assert type(v) is float and v == pytest.approx(float(value))


@pytest.mark.parametrize("value", [*NOT_NUMBERS, np.nan, np.inf, -np.inf, np.float32("nan")])
def test_as_float_refuses_non_numbers_and_non_finite(value):
    with pytest.raises(ConfigError, match="`rate`"):
        as_float("rate", value)


def test_as_float_bounds_and_huge_ints():
    assert as_float("x", 0, nonnegative=True) == 0.0
    with pytest.raises(ConfigError, match="> 0"):
        as_float("x", 0, positive=True)
    with pytest.raises(ConfigError, match="≥ 0"):
        as_float("x", -1e-300, nonnegative=True)
    with pytest.raises(ConfigError, match=r"`x` must lie in \[0, 1\]"):
        as_float("x", 2, lo=0, hi=1)
    # one-sided bounds: the message names only the bound that exists (no "None")
    with pytest.raises(ConfigError, match="`x` must be ≥ 0; got -1.0") as info:
        as_float("x", -1, lo=0)
    assert "None" not in str(info.value)
    with pytest.raises(ConfigError, match="`x` must be ≤ 1"):
        as_float("x", 2, hi=1)
    # a Python int beyond float range is a ConfigError, not an OverflowError
    with pytest.raises(ConfigError, match="finite"):
        as_float("x", 10**400)


def test_as_float_refuses_traced_values_with_a_message():
    with pytest.raises(ConfigError, match="traced"):
        jax.jit(lambda t: as_float("t1", t))(1.0)


@pytest.mark.parametrize(
    "value",
    [3, np.int64(3), np.int32(3), np.uint8(3), np.asarray(3), jnp.asarray(3)],
    ids=repr,
)
def test_as_int_accepts_every_integer_type(value):
    v = as_int("n", value)
    assert type(v) is int and v == 3


@pytest.mark.parametrize(
    "value", [*NOT_NUMBERS, 2.5, np.float32(3.0), jnp.asarray(3.0), np.nan, np.inf]
)
def test_as_int_refuses_non_integers(value):
    with pytest.raises(ConfigError, match="`n` must be an integer"):
        as_int("n", value)


def test_as_int_refuses_integral_floats_and_says_what_to_pass():
    with pytest.raises(ConfigError, match=r"integral float.*int\(3.0\)"):
        as_int("n", 3.0)
    assert as_int("n", 2**70) == 2**70  # Python ints of any size (no maximum asked)
    with pytest.raises(ConfigError, match=r"in \[1, 9\]"):
        as_int("n", 10, minimum=1, maximum=9)
    with pytest.raises(ConfigError, match="≥ 1"):
        as_int("n", 0, minimum=1)


@pytest.mark.parametrize("seed", [-1, 2**63, 2**64, 2**70, 99999999999999999999999, -(2**70)])
def test_as_seed_out_of_range_is_a_config_error_not_overflow(seed):
    with pytest.raises(ConfigError, match="`seed`"):
        as_seed("seed", seed)


def test_as_seed_accepts_the_whole_range():
    assert as_seed("seed", 0) == 0
    assert as_seed("seed", np.int64(MAX_SEED)) == MAX_SEED
    assert as_seed("seed", np.uint64(7)) == 7
    assert as_seed("seed", jnp.asarray(5)) == 5


@pytest.mark.parametrize(
    "value", [0, -1e-6, 1, 1.0, 1e300, np.nan, np.inf, "1e-6", None, True, [1e-6], 1e-6j]
)
def test_as_tolerance_refuses(value):
    with pytest.raises(ConfigError, match="rtol"):
        as_tolerance("rtol", value, example="1e-6")


@pytest.mark.parametrize("value", [1e-6, np.float32(1e-4), jnp.asarray(1e-8), 0.5])
def test_as_tolerance_accepts(value):
    assert type(as_tolerance("rtol", value, example="1e-6")) is float


def test_as_bool_and_as_choice():
    for v in (True, np.bool_(True), jnp.asarray(True), np.asarray(True)):
        assert as_bool("bias", v) is True
    for v in ("False", "yes", 1, 0, None, np.array([True])):
        with pytest.raises(ConfigError, match="`bias` must be True or False"):
            as_bool("bias", v)
    assert as_choice("dtype", "float32", ("float64", "float32")) == "float32"
    for v in (["float32"], "float16", None, 32):
        with pytest.raises(ConfigError, match="`dtype` must be one of 'float64', 'float32'"):
            as_choice("dtype", v, ("float64", "float32"))


def test_as_real_array_accepts_real_and_bool_and_refuses_the_rest():
    np.testing.assert_array_equal(as_real_array("x", [True, False]), [1.0, 0.0])
    assert as_real_array("x", [1, 2]).dtype == np.float64
    assert as_real_array("y", [1, 2], dtype=None).dtype.kind == "i"
    assert as_real_array("y", [True], dtype=None).dtype == np.int64
    np.testing.assert_array_equal(as_real_array("x", jnp.arange(3.0)), [0.0, 1.0, 2.0])
    np.testing.assert_array_equal(as_real_array("x", np.array([1, 2.5], dtype=object)), [1, 2.5])
    for bad, match in (
        (None, "None"),
        ("abc", "string"),
        (["a", "b"], "strings"),
        ([1 + 1j, 2], "complex"),
        (np.array([1, 1j], dtype=object), "complex"),
        ([[1, 2], [3]], "ragged"),
        ([1.0, None], "None"),
        ([1.0, np.nan], "non-finite.*index 1"),
        ([[1.0, 2.0], [np.inf, 0.0]], r"non-finite.*index \[1, 0\]"),
    ):
        with pytest.raises(ConfigError, match=match):
            as_real_array("x", bad)
    assert np.isnan(as_real_array("x", [np.nan], finite=False)[0])


def test_as_key_accepts_keys_and_seeds():
    want = jax.random.key_data(jax.random.key(3))
    for v in (3, np.int64(3), jnp.asarray(3)):
        np.testing.assert_array_equal(jax.random.key_data(as_key("key", v)), want)
    k = jax.random.key(5)
    assert as_key("key", k) is k
    legacy = jax.random.PRNGKey(5)
    np.testing.assert_array_equal(as_key("key", legacy), legacy)
    with pytest.raises(ConfigError, match="one PRNG key"):
        as_key("key", jax.random.split(k, 2))
    for bad in (-1, 2**63, 1.5, "3", None, True):
        with pytest.raises(ConfigError, match="`key`"):
            as_key("key", bad)


# ---------------------------------------------------------------------------------------
# 1. Labels: cross-entropy needs integers in [0, k), the logistic loss needs ±1


def _orth(y=None):
    ds = orthogonal_data(k=3, n_per_class=2, d=4)
    return ds if y is None else dataclasses.replace(ds, y=np.asarray(y))


HOMOG = Homogeneous(k=3, d=4, r=3, delta=0.1)


@pytest.mark.parametrize(
    "label, match",
    [(7, "out of range"), (3, "out of range"), (-1, "out of range"), (0.5, "not an integer")],
)
@pytest.mark.parametrize(
    "loss", [class_sum_cross_entropy, flows.cross_entropy, _classification_data.mean_cross_entropy]
)
def test_make_problem_refuses_bad_class_labels(label, match, loss):
    # before: 7 gave a NaN loss, −1 wrapped to class k − 1, 0.5 was truncated to 0
    y = np.array([0.0, 0.0, 1.0, 1.0, 2.0, 2.0])
    y[0] = label
    with pytest.raises(ConfigError, match=match):
        flows.make_problem(HOMOG, _orth(y), loss_fn=loss)


def test_make_problem_takes_integral_float_and_bool_labels_as_classes():
    p = flows.make_problem(
        HOMOG, _orth([0.0, 0.0, 1.0, 1.0, 2.0, 2.0]), loss_fn=flows.cross_entropy
    )
    assert jnp.issubdtype(p.y.dtype, jnp.integer)
    assert np.isfinite(float(p.loss(p.theta0)))
    two = Homogeneous(k=2, d=4, r=3, delta=0.1)
    data = flows.from_arrays(np.eye(4), np.array([True, False, True, False]))
    p2 = flows.make_problem(two, data, loss_fn=flows.cross_entropy)
    np.testing.assert_array_equal(p2.y, [1, 0, 1, 0])


def test_make_problem_refuses_nan_one_hot_and_regression_models_for_cross_entropy():
    ds = _orth()
    with pytest.raises(ConfigError, match="not an integer"):
        check_labels(np.array([0.0, np.nan]), 3)
    one_hot = np.eye(3)[ds.y]
    with pytest.raises(ConfigError, match="one-hot.*argmax"):
        flows.make_problem(HOMOG, dataclasses.replace(ds, y=one_hot), loss_fn=flows.cross_entropy)
    with pytest.raises(ConfigError, match="k class outputs"):
        flows.make_problem(TwoLayer(m=3, d=4, alpha=1.0), ds, loss_fn=class_sum_cross_entropy)
    with pytest.raises(ConfigError, match="`y`"):
        check_labels(["a", "b"], 3)
    with pytest.raises(ConfigError, match="complex"):
        check_labels([0, 1j], 3)


def test_make_problem_refuses_zero_one_labels_for_the_logistic_loss():
    data = flows.from_arrays([[1.0], [2.0], [-1.0]], [0.0, 1.0, 0.0])
    with pytest.raises(ConfigError, match=r"−1 or \+1.*\{0, 1\}.*2·y − 1"):
        flows.make_problem(LeakyReLUNet(k=2, d=1), data, loss_fn=flows.logistic)
    with pytest.raises(ConfigError, match=r"−1 or \+1"):
        lt.check_separable([[1.0], [2.0]], [0.0, 1.0])
    ok = flows.from_arrays([[1.0], [-1.0]], [1.0, -1.0])
    p = flows.make_problem(LeakyReLUNet(k=2, d=1), ok, loss_fn=flows.logistic)
    assert np.isfinite(float(p.loss(p.theta0)))


def test_classification_constructors_call_the_label_check(monkeypatch):
    calls = []
    real = _classification_data.check_labels

    def spy(y, k):
        calls.append(k)
        return real(y, k)

    monkeypatch.setattr(_classification_data, "check_labels", spy)
    assert orthogonal_data(k=3, d=4).y.dtype == np.int64
    assert _classification_data.digits_data("test", n_per_class=2).y.dtype == np.int64
    assert calls == [3, 10]
    monkeypatch.setattr(_problem, "check_labels", spy)
    flows.make_problem(HOMOG, _orth(), loss_fn=class_sum_cross_entropy)
    assert calls[-1] == 3


# ---------------------------------------------------------------------------------------
# 2. Data


def test_paper_and_assumption_data_need_integer_sizes():
    with pytest.raises(ConfigError, match="`n` must be an integer"):
        flows.paper_data(n=2.5)
    with pytest.raises(ConfigError, match="`n`"):
        flows.assumption_data(n=2.5)
    with pytest.raises(ConfigError, match="`target`"):
        flows.paper_data(["f1"])  # unhashable: was a TypeError
    with pytest.raises(ConfigError, match="`lo`"):
        flows.paper_data(lo="a")
    with pytest.raises(ConfigError, match="`lo`"):
        flows.paper_data(lo=np.nan)
    with pytest.raises(ConfigError, match="`seed`"):
        flows.assumption_data(d=2, n=20, seed=-1)  # was numpy's ValueError
    a = flows.paper_data(n=np.int64(10), lo=np.float32(-1), hi=jnp.asarray(1.0))
    assert a.n == 10 and json.dumps(a.meta)
    b = flows.assumption_data(n=np.int64(20), d=np.int32(2), seed=np.int64(1))
    assert b.n == 20 and json.dumps(b.meta)


def test_assumption_data_honours_odd_n_in_several_dimensions():
    # before: n = 37 silently gave 36 points
    ds = flows.assumption_data("f2", n=37, d=3, seed=1)
    assert ds.n == 37 and ds.meta["n"] == 37
    assert flows.moments(ds).a12


@pytest.mark.parametrize(
    "x, match",
    [
        (["a"], "`x`.*strings"),
        ([1 + 1j], "`x` must be real"),
        (None, "`x`.*None"),
        ([[1.0, 2.0], [3.0]], "`x` is ragged"),
        ([np.inf], "`x` contains non-finite"),
        ([[[1.0]]], "shape"),
    ],
)
def test_from_arrays_refuses_bad_inputs_with_config_error(x, match):
    y = [1.0] * (len(x) if x is not None else 1)
    with pytest.raises(ConfigError, match=match):
        flows.from_arrays(x, y)


def test_from_arrays_refuses_complex_and_nan_targets_and_takes_bool_and_jax():
    with pytest.raises(ConfigError, match="`y` must be real"):
        flows.from_arrays([1.0, 2.0], np.array([1.0, 2.0 + 1e-3j]))
    with pytest.raises(ConfigError, match="`y` contains non-finite"):
        flows.from_arrays([1.0, 2.0], [1.0, np.nan])
    ds = flows.from_arrays(jnp.array([True, False]), jnp.arange(2, dtype=jnp.float32))
    assert ds.x.dtype == np.float64 and ds.x[:, 0].tolist() == [1.0, 0.0]
    assert ds.y.dtype == np.float64


def test_dataset_constructor_checks_its_arrays():
    with pytest.raises(ConfigError, match="`x` must have shape \\(n, d\\)"):
        flows.Dataset(x=np.zeros(3), y=np.zeros(3), name="v")
    with pytest.raises(ConfigError, match="one row per sample"):
        flows.Dataset(x=np.zeros((3, 1)), y=np.zeros(2), name="v")
    with pytest.raises(ConfigError, match="`x` must be real"):
        flows.Dataset(x=np.zeros((3, 1), complex), y=np.zeros(3), name="v")
    ds = flows.Dataset(x=[[1.0], [2.0]], y=[0, 1], name="v")
    assert ds.x.dtype == np.float64 and ds.y.dtype.kind == "i"


def test_data_generators_accept_numpy_numbers_and_refuse_bad_ones():
    assert orthogonal_data(k=np.int64(3), d=np.int64(4), sigma=np.float32(0.1)).n == 30
    assert lt.symmetric_gaussians(n=np.int64(10), std=np.float32(1.0)).train.n == 10
    assert lt.teacher_ball(n=np.int64(5), margin=jnp.asarray(0.1)).train.n == 5
    assert lt.digits_pair(a=np.int64(0), b=np.int32(1), n_train=np.int64(20)).train.n == 20
    for make, match in (
        (lambda: orthogonal_data(k=3, d=4, seed=-1), "`seed`"),
        (lambda: orthogonal_data(k=3, d=4, sigma="0.1"), "`sigma`"),
        (lambda: orthogonal_data(k=3.0, d=4), "`k`"),
        (lambda: lt.symmetric_gaussians(std="1"), "`std`"),
        (
            lambda: lt.symmetric_gaussians(n=10, n_test=3),
            "`n_test` must be even",
        ),
        (
            lambda: lt.symmetric_gaussians(n=10, mean=[1.0, 2.0, 3.0]),
            "`mean`",
        ),
        (lambda: lt.teacher_ball(margin=np.nan), "`margin`"),
        (lambda: lt.digits_pair(a=1.0), "`a`"),
        (lambda: lt.digits_pair(a=0, b=10), "`b`"),
        (lambda: lt.antipodal_with_outlier(mean=0.0), "`mean`"),
        (
            lambda: lt.antipodal_with_outlier(outlier=["a", "b"]),
            "`outlier`",
        ),
        (lambda: _classification_data.digits_data(split=["train"]), "`split`"),
        (lambda: _classification_data.digits_data(subset_seed=-1), "`subset_seed`"),
    ):
        with pytest.raises(ConfigError, match=match):
            make()


def test_teacher_ball_gives_up_on_an_unreachable_margin(monkeypatch):
    # before: the rejection loop never ended for a margin no point of the ball reaches
    monkeypatch.setattr(_separable_data, "_MAX_REJECTION_DRAWS", 10**4)
    with pytest.raises(ConfigError, match="`margin`.*too large"):
        lt.teacher_ball(n=10, d=200, margin=0.9)


def test_antipodal_teacher_is_finite():
    ao = lt.antipodal_with_outlier(mean=np.float32(3.0))
    assert np.all(np.isfinite(ao.teacher))


# ---------------------------------------------------------------------------------------
# 3. Models and keys: NumPy / JAX numbers accepted, stored as Python numbers

MODELS = [
    (TwoLayer, {"m": 10, "d": 1, "alpha": 1.0}, ("m", "d"), ()),
    (Homogeneous, {"k": 3, "d": 4, "r": 3, "delta": 0.1}, ("k", "d", "r"), ("delta",)),
    (DeepFCN, {"d": 4, "k": 3, "depth": 3, "width": 5}, ("d", "k", "depth", "width"), ("delta",)),
    (
        LeakyReLUNet,
        {"k": 2, "d": 2, "slope": 0.2, "v": 1.0, "init_scale": 1e-3},
        ("k", "d"),
        ("slope", "v", "init_scale"),
    ),
]


@pytest.mark.parametrize("cls, kw, ints, floats", MODELS, ids=lambda v: getattr(v, "__name__", ""))
def test_models_accept_numpy_and_jax_numbers(cls, kw, ints, floats):
    ref = cls(**kw)
    for conv_i, conv_f in (
        (np.int64, np.float32),
        (np.int32, np.float64),
        (jnp.asarray, jnp.asarray),
        (np.asarray, np.asarray),
    ):
        args = dict(kw)
        for name in ints:
            args[name] = conv_i(kw[name])
        for name in floats:
            args[name] = conv_f(kw.get(name, 1e-3))
        model = cls(**args)
        for name in ints:
            assert type(getattr(model, name)) is int
        for name in floats:
            assert type(getattr(model, name)) is float
        assert json.dumps(model.describe())
        if conv_f is np.float32:  # 0.2 in float32 is another number: only the types agree
            continue
        # static fields as Python numbers: one treedef (one compiled solve) for equal models
        assert jax.tree_util.tree_structure(model) == jax.tree_util.tree_structure(ref)
        if cls is not TwoLayer:  # TwoLayer's α is an array leaf, so it is not hashable
            assert model == ref and hash(model) == hash(ref)


@pytest.mark.parametrize("cls, kw, ints, floats", MODELS, ids=lambda v: getattr(v, "__name__", ""))
def test_models_refuse_bad_numbers(cls, kw, ints, floats):
    for name in ints:
        for bad in (2.5, 3.0, True, "3", None, np.array([[3, 3]]), 0):
            with pytest.raises(ConfigError, match=f"`{name}`"):
                cls(**{**kw, name: bad})
    for name in floats:
        for bad in ("0.1", None, np.nan, np.inf, 1j, True, -1.0):
            with pytest.raises(ConfigError, match=f"`{name}`"):
                cls(**{**kw, name: bad})


def test_model_switches_and_choices_refuse_strings_and_unhashables():
    # before: bias="False" is truthy, so it silently added biases
    with pytest.raises(ConfigError, match="`bias` must be True or False"):
        TwoLayer(m=3, d=1, alpha=1.0, bias="False")
    with pytest.raises(ConfigError, match="`bias`"):
        LeakyReLUNet(k=2, d=2, bias="yes")
    with pytest.raises(ConfigError, match="`bias`"):
        DeepFCN(d=4, k=3, depth=3, bias=1)
    assert TwoLayer(m=3, d=1, alpha=1.0, bias=np.bool_(True)).bias is True
    with pytest.raises(ConfigError, match="`activation`"):
        DeepFCN(d=4, k=3, depth=3, activation=["relu"])
    with pytest.raises(ConfigError, match="`activation`"):
        TwoLayer(m=3, d=1, alpha=1.0, activation=["tanh"])
    assert TwoLayer(m=3, d=1, alpha=1.0, activation=jnp.tanh).activation is jnp.tanh
    with pytest.raises(ConfigError, match="`alpha`"):
        TwoLayer(m=3, d=1, alpha="1.0")  # was silently parsed by jnp.asarray
    with pytest.raises(ConfigError, match="`slope`.*\\[0, 1\\)"):
        LeakyReLUNet(k=2, d=2, slope=np.float32(1.0))
    deep = DeepFCN(d=4, k=3, depth=3, width=[np.int64(5), jnp.asarray(6)])
    assert deep.width == (5, 6) and all(type(w) is int for w in deep.width)
    with pytest.raises(ConfigError, match="`width`"):
        DeepFCN(d=4, k=3, depth=3, width=(5, 2.5))


def test_alpha_may_still_be_traced():
    alphas = jax.vmap(lambda a: TwoLayer(m=3, d=1, alpha=a).alpha)(jnp.array([0.5, 1.0]))
    np.testing.assert_array_equal(alphas, [0.5, 1.0])


def test_check_positive_int_is_gone():
    import flows.models.homogeneous as hom

    assert not hasattr(hom, "check_positive_int")


DATA1 = flows.paper_data(n=10)
NET = TwoLayer(m=3, d=1, alpha=1.0)


@pytest.mark.parametrize("key", [np.int64(3), np.int32(3), jnp.asarray(3), np.asarray(3)], ids=repr)
def test_make_problem_accepts_numpy_and_jax_integer_keys(key):
    ref = flows.make_problem(NET, DATA1, key=3)
    p = flows.make_problem(NET, DATA1, key=key)
    np.testing.assert_array_equal(p.theta0["a"], ref.theta0["a"])


def test_make_problem_still_accepts_made_keys():
    ref = flows.make_problem(NET, DATA1, key=3)
    typed = flows.make_problem(NET, DATA1, key=jax.random.key(3))
    np.testing.assert_array_equal(typed.theta0["w"], ref.theta0["w"])
    legacy = flows.make_problem(NET, DATA1, key=jax.random.PRNGKey(3))
    assert legacy.theta0["w"].shape == (3, 1)


@pytest.mark.parametrize("key", [-1, 2**63, 2**64, 99999999999999999999999, 1.5, "3", True])
def test_make_problem_refuses_bad_seeds_with_config_error(key):
    # before: −1 was accepted (wrapped), 2**64 raised OverflowError
    with pytest.raises(ConfigError, match="`key`"):
        flows.make_problem(NET, DATA1, key=key)


# ---------------------------------------------------------------------------------------
# 4. Other input make_problem used to take into a traceback or a wrong result


def test_make_problem_refuses_targets_that_would_broadcast():
    # before: y of shape (n, 1) against outputs (n,) broadcast to an (n, n) wrong loss
    bad = flows.Dataset(x=DATA1.x, y=DATA1.y[:, None], name="col")
    with pytest.raises(ConfigError, match=r"shape \(10, 1\).*\(10,\)"):
        flows.make_problem(NET, bad)


def test_make_problem_checks_theta0():
    good = {"a": np.zeros(3), "w": np.ones((3, 1))}
    p = flows.make_problem(NET, DATA1, theta0=good)
    assert p.theta0["a"].dtype == jnp.float64
    with pytest.raises(ConfigError, match=r"theta0\['a'\].*\(3,\)"):
        flows.make_problem(NET, DATA1, theta0={"a": np.zeros(4), "w": np.ones((4, 1))})
    with pytest.raises(ConfigError, match="structure"):
        flows.make_problem(NET, DATA1, theta0={"a": np.zeros(3)})
    with pytest.raises(ConfigError, match="non-finite"):
        flows.make_problem(NET, DATA1, theta0={"a": np.full(3, np.nan), "w": np.ones((3, 1))})


def test_make_problem_refuses_wrong_objects_and_takes_dtype_objects():
    with pytest.raises(ConfigError, match="`data`.*from_arrays"):
        flows.make_problem(NET, (DATA1.x, DATA1.y))
    with pytest.raises(ConfigError, match="`model`"):
        flows.make_problem("TwoLayer", DATA1)
    with pytest.raises(ConfigError, match="`loss_fn`"):
        flows.make_problem(NET, DATA1, loss_fn="squared_error")
    with pytest.raises(ConfigError, match="`dtype`"):
        flows.make_problem(NET, DATA1, dtype=["float32"])
    with pytest.raises(ConfigError, match="`vector_field`"):
        flows.make_problem(NET, DATA1, vector_field=["fused"])
    assert flows.make_problem(NET, DATA1, dtype=np.float32).dtype == jnp.float32
    assert flows.make_problem(NET, DATA1, dtype=jnp.float64).dtype == jnp.float64


def test_make_problem_refuses_a_model_too_big_for_memory(monkeypatch):
    monkeypatch.setattr(_problem, "_available_bytes", lambda: 1000)
    with pytest.raises(ConfigError, match="GiB.*smaller"):
        flows.make_problem(TwoLayer(m=1000, d=1, alpha=1.0), DATA1)


def test_problem_describe_is_json_with_numpy_inputs():
    model = Homogeneous(k=np.int64(3), d=np.int64(4), r=np.int64(3), delta=np.float64(0.1))
    p = flows.make_problem(model, _orth(), key=np.int64(1), loss_fn=class_sum_cross_entropy)
    assert json.loads(json.dumps(p.describe()))["model"]["k"] == 3
