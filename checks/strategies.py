"""Shared Hypothesis strategies and helpers for the theorem checks."""
from __future__ import annotations

from functools import lru_cache

from hypothesis import settings
from hypothesis import strategies as st

from numerics.theorem.closed_forms import ClosedForms
from numerics.theorem.series import SeriesEvaluator
from theory.setting import Setting

lengths_st = st.sampled_from(["positive", "nonnegative"])
step_st = st.floats(min_value=1e-3, max_value=3.0, allow_nan=False, allow_infinity=False)


@lru_cache(maxsize=None)
def setting(d, lengths="positive", loss="squared", p=None):
    return Setting(d, p=p, lengths=lengths, loss=loss)


@lru_cache(maxsize=None)
def evaluator(d, lengths="positive", loss="squared", p=None, tol=1e-12, backend="float"):
    return SeriesEvaluator(setting(d, lengths, loss, p), tol=tol, backend=backend)


@lru_cache(maxsize=None)
def floor_c(d, lengths="positive"):
    return float(ClosedForms(setting(d, lengths)).output_only_floor())


def examples(n: int):
    """Hypothesis settings with n examples under the default profile, scaled with the active profile's
    max_examples (conftest.py: ``thorough`` draws 8 times as many)."""
    return settings(max_examples=max(1, n * settings.default.max_examples // 100))
