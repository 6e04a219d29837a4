"""Classification data of the bias-plateau paper, and its objective.

- `orthogonal_data`: §4's synthetic data x = e_c + ξ, ξ ~ N(0, σ²/d I), k balanced classes.
- `digits_data`: scikit-learn's 8×8 digits (10 classes, ships inside the package), a fixed
  stratified train/test split, inputs scaled so that ‖x‖ ≤ 1 (Theorem 1's assumption).
- `class_sum_cross_entropy`: the objective (k/N) Σ_x CE = k · mean CE integrated by
  gradient flow (§4: "run gradient flow on (k/N) L(W, b)").

Labels are integers in [0, k), stored as int64 in `Dataset.y`.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, cast

import jax.numpy as jnp
import numpy as np

from flows import ConfigError, Dataset, cross_entropy
from flows.plugin import as_choice, as_float, as_int, as_seed, check_labels

if TYPE_CHECKING:
    from sklearn.utils import Bunch

__all__ = [
    "orthogonal_data",
    "digits_data",
    "check_labels",
    "class_counts",
    "is_balanced",
    "balance_reason",
    "scale_to_unit_ball",
    "class_sum_cross_entropy",
    "mean_cross_entropy",
]


_K_HINT = "`k` is the number of classes."
_N_HINT = "`n_per_class` is the number of samples per class."


def class_counts(y, k: int) -> np.ndarray:
    """Samples per class, shape (k,)."""
    return np.bincount(check_labels(y, k), minlength=k)


def is_balanced(y, k: int) -> bool:
    """Every class has exactly N/k samples (the balance §4 and Theorem 1's 1 − 1/k assume)."""
    c = class_counts(y, k)
    return bool(np.all(c == c[0]) and c[0] > 0)


def balance_reason(y, k: int) -> str:
    """'' when balanced, else a sentence for a not-applicable check."""
    if is_balanced(y, k):
        return ""
    c = class_counts(y, k)
    return f"classes are not balanced (counts {c.tolist()}); the theory assumes N/k per class"


def orthogonal_data(
    k: int = 4,
    n_per_class: int = 10,
    d: int = 16,
    sigma: float = 0.1,
    seed: int = 0,
) -> Dataset:
    """§4's synthetic data: class c has `n_per_class` samples x = e_c + ξ, ξ ~ N(0, σ²/d I).

    **Arguments:** `k` ≥ 2 classes; `n_per_class` ≥ 1 (N = k · n_per_class, balanced);
    `d` ≥ k input dimensions (the class features e_0 … e_{k−1} must be orthonormal);
    `sigma` ≥ 0 noise level; `seed` of NumPy's generator.

    **Returns:** a `Dataset` (x (N, d) float64, y (N,) int64 sorted by class) whose `meta`
    holds `k`, `sigma`, `seed` and the noise `xi` (N, d) (so ⟨W_i, ξ_x⟩ can be observed).
    """
    k = as_int("k", k, minimum=2, hint=_K_HINT)
    n_per_class = as_int("n_per_class", n_per_class, minimum=1, hint=_N_HINT)
    d = as_int("d", d, minimum=1, hint="`d` is the input dimension.")
    if d < k:
        raise ConfigError(
            f"`d` must be ≥ k = {k} so that the class features e_1 … e_k are orthonormal; "
            f"got d = {d}."
        )
    sigma = as_float("sigma", sigma, nonnegative=True, hint="`sigma` is the noise level.")
    seed = as_seed("seed", seed)
    rng = np.random.default_rng(seed)
    y = check_labels(np.repeat(np.arange(k, dtype=np.int64), n_per_class), k)
    xi = rng.standard_normal((y.size, d)) * (sigma / np.sqrt(d))
    x = np.eye(d)[y] + xi
    return Dataset(
        x=x,
        y=y,
        name=f"orthogonal-k{k}-d{d}-n{y.size}-sigma{sigma:g}",
        meta={"k": k, "n_per_class": n_per_class, "d": d, "sigma": sigma, "seed": seed, "xi": xi},
    )


def scale_to_unit_ball(data: Dataset) -> Dataset:
    """Divide every input by max_x ‖x‖, so ‖x‖ ≤ 1 (Theorem 1's assumption); labels unchanged.

    `meta["input_scale"]` records the divisor (noise `xi`, when present, is scaled too).
    """
    if not isinstance(data, Dataset):
        raise ConfigError(f"`data` must be a Dataset; got {type(data).__name__}.")
    s = float(np.max(np.linalg.norm(data.x, axis=1)))
    if not s > 0:
        raise ConfigError("all inputs are zero; cannot scale them to the unit ball.")
    meta = dict(data.meta)
    meta["input_scale"] = s
    if "xi" in meta:
        meta["xi"] = meta["xi"] / s
    return dataclasses.replace(data, x=data.x / s, name=data.name + "-unit", meta=meta)


#: Fixed split of the digits (stratified, 25 % test, scikit-learn's `random_state` 0).
DIGITS_TEST_FRACTION = 0.25
DIGITS_SPLIT_SEED = 0


def digits_data(
    split: str = "train", n_per_class: int | None = 20, subset_seed: int = 0
) -> Dataset:
    """scikit-learn's 8×8 digits (1797 images, 10 classes, d = 64, ships with the package).

    Fixed stratified split (25 % test, `random_state=0`); pixels (0…16) are divided by the
    largest ‖x‖ over the whole set, so ‖x‖ ≤ 1 on train and test alike.

    **Arguments:** `split` 'train' or 'test'; `n_per_class`: keep exactly this many samples
    of every class (a balanced subset drawn with `subset_seed`; `None` keeps the whole
    split, which is only roughly balanced).

    **Returns:** a `Dataset` (x (N, 64), y (N,) int64 sorted by class).
    """
    try:
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split
    except ImportError as exc:  # pragma: no cover - scikit-learn is a dependency
        raise ConfigError("the digits data need scikit-learn: `pip install scikit-learn`.") from exc
    split = as_choice("split", split, ("train", "test"))
    subset_seed = as_seed("subset_seed", subset_seed)
    raw = cast("Bunch", load_digits())  # without return_X_y/as_frame: a Bunch of arrays
    x_all = np.asarray(raw.data, dtype=np.float64)
    y_all = np.asarray(raw.target, dtype=np.int64)
    x_all = x_all / np.max(np.linalg.norm(x_all, axis=1))
    x_tr, x_te, y_tr, y_te = train_test_split(
        x_all,
        y_all,
        test_size=DIGITS_TEST_FRACTION,
        random_state=DIGITS_SPLIT_SEED,
        stratify=y_all,
    )
    x, y = (x_tr, y_tr) if split == "train" else (x_te, y_te)
    if n_per_class is not None:
        n_per_class = as_int(
            "n_per_class", n_per_class, minimum=1, hint=_N_HINT + " None keeps all."
        )
        counts = np.bincount(y, minlength=10)
        if n_per_class > counts.min():
            raise ConfigError(
                f"`n_per_class` = {n_per_class} exceeds the smallest class of the {split} split "
                f"({counts.min()} samples); choose ≤ {counts.min()} or None."
            )
        rng = np.random.default_rng(subset_seed)
        idx = np.concatenate(
            [
                np.sort(rng.choice(np.flatnonzero(y == c), n_per_class, replace=False))
                for c in range(10)
            ]
        )
        x, y = x[idx], y[idx]
    else:
        order = np.argsort(y, kind="stable")
        x, y = x[order], y[order]
    return Dataset(
        x=x,
        y=check_labels(y, 10),
        name=f"digits-{split}-n{y.size}",
        meta={"k": 10, "split": split, "n_per_class": n_per_class, "subset_seed": subset_seed},
    )


def class_sum_cross_entropy(logits, labels):
    """(k/N) Σ_x CE(f(x), y_x) = k · (mean softmax cross-entropy), k = logits.shape[-1].

    The objective of §4 ("gradient flow on (k/N) L(W, b)"); with it the biases obey
    ḃ_i = 1 − (k/N) Σ_x u_i(x) exactly. Wraps `flows.cross_entropy` (logsumexp form: finite
    for any logits).
    """
    return logits.shape[-1] * cross_entropy(logits, labels)


class_sum_cross_entropy.targets = "classes"
class_sum_cross_entropy.description = (
    "(k/N) * sum_x [logsumexp(f(x)) - f(x)[y_x]] = k * mean cross-entropy "
    "(bias-plateau paper, section 4)"
)


def mean_cross_entropy(logits, labels):
    """Average cross-entropy per sample, (1/N) Σ_x CE: the 'training loss' of the
    interpolation curves (log k at zero logits)."""
    return cross_entropy(logits, labels)


mean_cross_entropy.description = cross_entropy.description
mean_cross_entropy.targets = "classes"


def as_jax_labels(y) -> jnp.ndarray:
    """Labels as a JAX int array."""
    return jnp.asarray(np.asarray(y, dtype=np.int64))
