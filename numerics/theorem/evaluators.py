"""Which exact evaluator a command uses: the series (``numerics.theorem.series``) or the integral
representation (``numerics.theorem.integral``), by the rule stated here and nowhere else.

* ``series``: the enumerated series in float64 (any loss, any parameters; about 1100 d terms at
  tol 1e-12, so its cost and memory grow linearly in d).
* ``integral``: three one-dimensional arb integrals (squared loss, p < 1, parameters symmetric in the
  unmarked symbols; certified balls at ``dps`` digits; the same cost whatever d is).
* ``auto`` (the default of ``occ-companion run``): the integral when it applies and d >= ``INTEGRAL_FROM_D``,
  where the series needs over a million terms per evaluation; the series otherwise.

>>> from theory.setting import Setting
>>> choose_method(Setting(50)), choose_method(Setting(10_000)), choose_method(Setting(10_000, loss="logistic"))
('series', 'integral', 'series')
"""
from __future__ import annotations

from theory.setting import Setting
from theory.validation import SettingError, check_choice

METHODS = ("auto", "series", "integral")
INTEGRAL_FROM_D = 1000
"""From this d on, ``auto`` takes the integral: the float series then sums about 1.1e6 terms per
evaluation, after building its enumeration once, while the integral needs no build and costs the same
at every d."""
INTEGRAL_DPS = 16
"""Digits of the integral when it stands in for the float series (its balls are then ~1e-20 wide)."""
TAYLOR_ORDER = 5
"""Order of the integral's Taylor models in u (``numerics.theorem.integral.TaylorModel``) when it stands in for the
series: runs of small attention steps (the joint plan at large d) are answered from one model instead of
three integrals a step; the values are enclosures either way."""


def integral_applies(setting: Setting) -> bool:
    """The integral representation covers the squared loss with the geometric law and p < 1."""
    return setting.loss == "squared" and setting.geometric and setting.p_value != 1


def choose_method(setting: Setting, method: str = "auto") -> str:
    """"series" or "integral" for ``method`` in METHODS; "integral" where it does not apply is an error."""
    check_choice("method", method, METHODS)
    if method == "auto":
        return "integral" if integral_applies(setting) and setting.d >= INTEGRAL_FROM_D else "series"
    if method == "integral" and not integral_applies(setting):
        raise SettingError("the integral evaluator covers the squared loss with p < 1; use the series")
    return method


def population_evaluator(setting: Setting, method: str = "auto", *, tol: float = 1e-12,
                         max_terms: int = 3_000_000, dps: int = INTEGRAL_DPS):
    """The evaluator ``choose_method`` picks: a float ``SeriesEvaluator(setting, tol, max_terms)`` or an
    ``IntegralEvaluator(setting, dps, taylor_order=TAYLOR_ORDER)``."""
    if choose_method(setting, method) == "integral":
        from numerics.theorem.integral import IntegralEvaluator

        return IntegralEvaluator(setting, dps=dps, taylor_order=TAYLOR_ORDER)
    from numerics.theorem.series import SeriesEvaluator

    return SeriesEvaluator(setting, tol=tol, max_terms=max_terms)
