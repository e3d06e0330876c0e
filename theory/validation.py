"""Input validation shared by every layer of the suite.

Every public entry point funnels its numeric inputs through these helpers so that a bad value
fails early with a message that names the parameter, the value and the accepted range.
"""
from __future__ import annotations

import math
import numbers

LENGTH_VARIANTS = ("positive", "nonnegative")
"""Supported length laws: ``positive`` is n ~ Geometric(p) on {1, 2, ...} (the default);
``nonnegative`` is n ~ Geometric(p) on {0, 1, ...}, the empty string being labelled -1."""

LOSSES = ("squared", "logistic")
"""Supported losses: ``squared`` is (f - y)^2 / 2 (the default); ``logistic`` is log(1 + exp(-y f))."""


class SettingError(ValueError):
    """Raised for an input outside the setting of the suite (bad d, p, step size, ...)."""


def _is_real(x) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def check_d(d) -> int:
    """Alphabet size: an integer d >= 2."""
    if isinstance(d, bool) or not isinstance(d, numbers.Integral):
        if _is_real(d) and float(d).is_integer():
            d = int(d)
        else:
            raise SettingError(f"alphabet size d must be an integer >= 2, got {d!r}")
    d = int(d)
    if d < 2:
        raise SettingError(f"alphabet size d must be an integer >= 2, got {d}")
    return d


def check_p(p, *, allow_one: bool = True) -> float:
    """Geometric parameter p in (0, 1] (p = 1 only when allowed: it means every length is minimal).

    p = 1 is the balanced choice for d = 2 under the default length law (n = 1 almost surely),
    which is why it is accepted; anything <= 0, > 1, or non-finite is refused.
    """
    if not _is_real(p) or not math.isfinite(float(p)):
        raise SettingError(f"geometric parameter p must be a finite real number in (0, 1), got {p!r}")
    if not (0.0 < float(p) < 1.0 or (allow_one and float(p) == 1.0)):
        rng = "(0, 1]" if allow_one else "(0, 1)"
        raise SettingError(f"geometric parameter p must lie in {rng}, got {p!r}")
    return p


def check_step(name: str, eta, *, allow_zero: bool = True):
    """A step size: finite, >= 0 (or > 0 when ``allow_zero`` is False)."""
    if not _is_real(eta) or not math.isfinite(float(eta)):
        raise SettingError(f"step size {name} must be a finite real number, got {eta!r}")
    if float(eta) < 0 or (not allow_zero and float(eta) == 0):
        bound = ">= 0" if allow_zero else "> 0"
        raise SettingError(f"step size {name} must be {bound}, got {eta!r}")
    return eta


def check_steps_count(name: str, T) -> int:
    """A number of iterations: a non-negative integer."""
    if isinstance(T, bool) or not isinstance(T, numbers.Integral) or int(T) < 0:
        raise SettingError(f"{name} must be a non-negative integer, got {T!r}")
    return int(T)


def check_epsilon(eps) -> float:
    """Target risk: finite and > 0."""
    if not _is_real(eps) or not math.isfinite(float(eps)) or float(eps) <= 0:
        raise SettingError(f"target risk epsilon must be a finite number > 0, got {eps!r}")
    return eps


def check_variant(lengths: str) -> str:
    if lengths not in LENGTH_VARIANTS:
        raise SettingError(f"length variant must be one of {LENGTH_VARIANTS}, got {lengths!r}")
    return lengths


def check_loss(loss: str) -> str:
    if loss not in LOSSES:
        raise SettingError(f"loss must be one of {LOSSES}, got {loss!r}")
    return loss


def check_vector(name: str, v, d: int):
    """A parameter vector of length d with finite real entries; returns a list."""
    try:
        vals = list(v)
    except TypeError:
        raise SettingError(f"{name} must be a sequence of {d} real numbers, got {v!r}") from None
    if len(vals) != d:
        raise SettingError(f"{name} must have length d = {d}, got length {len(vals)}")
    for i, x in enumerate(vals):
        try:
            fx = float(x)
        except (TypeError, ValueError):
            raise SettingError(f"{name}[{i}] must be a real number, got {x!r}") from None
        if not math.isfinite(fx):
            raise SettingError(f"{name}[{i}] must be finite, got {x!r}")
    return vals


def check_int(name: str, value, minimum: int = 1, maximum: int | None = None) -> int:
    """An integer in [minimum, maximum] (bools and non-integral numbers refused); returns it as int."""
    ok = not isinstance(value, bool) and isinstance(value, numbers.Integral)
    if ok:
        value = int(value)
        ok = value >= minimum and (maximum is None or value <= maximum)
    if not ok:
        if maximum is not None:
            rule = f"an integer in [{minimum}, {maximum}]"
        else:
            rule = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise SettingError(f"{name} must be {rule}, got {value!r}")
    return value


def check_real(name: str, value, low: float | None = None, high: float | None = None, *,
               closed: str = "") -> float:
    """A finite real number strictly inside (low, high); ``closed`` may contain "low" and/or "high" to admit
    the end points.  Returns it as float."""
    ok = _is_real(value) and math.isfinite(float(value))
    if ok:
        v = float(value)
        ok = ((low is None or v > low or ("low" in closed and v == low))
              and (high is None or v < high or ("high" in closed and v == high)))
    if not ok:
        left = "(-inf" if low is None else ("[" if "low" in closed else "(") + f"{low:g}"
        right = "inf)" if high is None else f"{high:g}" + ("]" if "high" in closed else ")")
        raise SettingError(f"{name} must be a finite number in {left}, {right}, got {value!r}")
    return float(value)


def check_choice(name: str, value, choices) -> str:
    """One of ``choices``."""
    if value not in tuple(choices):
        raise SettingError(f"{name} must be one of {tuple(choices)}, got {value!r}")
    return value
