"""The closed forms evaluated from their cached source (theory.compiled) equal the SymPy expressions
lambdified afresh, bit for bit, and keep SymPy off the main job's import path."""
from __future__ import annotations

import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import theory  # noqa: F401  # isort: skip  (first: pins SymPy's ground types)
import pytest
import sympy as sp

from numerics.theorem.closed_forms import ClosedForms, ClosedFormsBase
from theory import cache, compiled
from theory import symbolic
from theory.setting import Setting

ROOT = Path(__file__).resolve().parents[2]

# (method, keyword values): every named form ClosedForms evaluates from its source
NAMED = [("balanced_p", {}), ("risk_floor", {}), ("eta1_max", {}), ("kappa", {"eta_1": 0.7}),
         ("u_min", {"epsilon": 1e-3}), ("eta2_min", {"epsilon": 1e-3, "eta_1": 0.7}),
         ("phase1_beta", {"eta_1": 0.7}), ("phase2_gradient", {"eta_1": 0.7}),
         ("phase2_alpha", {"eta_1": 0.7, "eta_2": 30.0}), ("uniform_attention_quadratic", {}),
         ("output_only_floor", {}), ("output_only_floor", {"balanced": True})]


class _SympyPath(ClosedForms):
    """ClosedForms with ``form`` taken from the base class: the SymPy expression through ``expr``."""

    def form(self, name, *args, index=None, **symbols):
        return ClosedFormsBase.form(self, name, *args, index=index, **symbols)


@pytest.mark.parametrize("d,lengths", [(3, "positive"), (50, "positive"), (7, "nonnegative")])
def test_named_forms_from_source_equal_the_sympy_expressions(d, lengths):
    setting = Setting(d, lengths=lengths)
    fast, slow = ClosedForms(setting, dps=30), _SympyPath(setting, dps=30)
    for method, kw in NAMED:
        got, want = getattr(fast, method)(**kw), getattr(slow, method)(**kw)
        assert got == want, (method, got, want)  # the same function: equal to the last bit
        assert got != 0 or method == "risk_floor"


def test_balancing_p_is_the_exact_rational_root():
    for lengths in ("positive", "nonnegative"):
        expr = symbolic.balanced_p(lengths)
        for d in (2, 3, 10, 49, 1000, 10**6 + 1):
            val = sp.nsimplify(expr.subs(symbolic.d, d))
            assert compiled.rational("balanced_p", (lengths,), d) == Fraction(int(val.p), int(val.q))
    with pytest.raises(ValueError, match="not a rational function of d"):
        compiled.rational("eta1_max", ("positive",), 5)  # it reads p


def test_the_source_cache_shares_the_derivation_key():
    """The key is computed without SymPy, yet equals the derivations' key: an edit of theory/symbolic.py
    or another SymPy version selects a new file for both."""
    assert cache.light_key("theory.symbolic") == cache.cache_key("theory.symbolic")


@pytest.mark.slow  # subprocesses
def test_run_imports_no_sympy_once_the_forms_are_cached(tmp_path):
    """The main job, its forms cached (by a first run), imports neither SymPy nor pyplot (--no-plot)."""
    args = ["run", "--d", "5", "--no-plot", "--quiet", "--out", str(tmp_path)]
    code = ("import sys; from app.cli import main; main(%r); "
            "print(sorted(m for m in ('sympy', 'matplotlib.pyplot') if m in sys.modules))" % args)
    # a cache of this test's own: the user's is shared with the other test processes, whose concurrent merges
    # could drop the first run's entries before the second reads them
    env = {**os.environ, "OCC_CACHE_DIR": str(tmp_path / "cache")}
    for _ in range(2):  # the first run fills the cache when it is cold
        out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                             env=env)
    assert out.stdout.strip().splitlines()[-1] == "[]"
