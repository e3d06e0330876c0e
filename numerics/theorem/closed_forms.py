"""mpmath evaluation of the SymPy closed forms at one setting and one precision.

``ClosedForms(setting, dps)`` binds the setting once: every closed form of ``theory.symbolic`` (and
every entry of the catalogue ``theory.catalogue``) is then evaluated by name, at d and the exact p of
the setting (a Fraction stays a Fraction until it becomes an mpf at the working precision).

Closed forms contain log p and the polylogarithms Li_s(1 - p), evaluated by mpmath to the working
precision (no truncation involved).  The only infinite series they stand for, the inverse length
moments L_s = E[1{n>=1} n^-s], can also be summed directly with
``ClosedForms.inverse_length_moment_series``, which returns a partial sum and a rigorous bound on the
tail, for cross-checking.

The named forms (``eta1_max``, ``kappa``, ...) are evaluated from their cached Python source
(``theory.compiled``), so a command that needs only those imports no SymPy; ``expr`` and the
catalogue evaluate any SymPy expression (and import SymPy).

>>> from theory.setting import Setting
>>> cf = ClosedForms(Setting(5), dps=30)
>>> cf.balanced_p()
mpf('0.25')
>>> float(cf.eta1_max())
5.0
"""
from __future__ import annotations

import math
import numbers
from fractions import Fraction
from functools import lru_cache
from typing import Sequence, Union

from typing import TYPE_CHECKING

import mpmath

from theory import compiled
from theory.setting import LengthLaw, Setting
from theory.validation import (
    SettingError,
    check_epsilon,
    check_step,
    check_steps_count,
    check_vector,
)

if TYPE_CHECKING:
    import sympy as sp

Number = Union[int, float, Fraction, mpmath.mpf]
"""A real value the closed forms accept for a symbol (converted exactly to an mpf at the working precision)."""

SYMBOL_NAMES = compiled.ARGS[2:]
"""The symbols a closed form may need besides d and p, by the keyword that gives them."""


def _sym():
    """``theory.symbolic`` (imports SymPy: only for forms given as SymPy expressions)."""
    from theory import symbolic

    return symbolic


def require_geometric(setting: Setting, what: str) -> None:
    """A SettingError unless the setting's length law is the geometric one (what ``what`` is derived for)."""
    if not setting.geometric:
        raise SettingError(f"{what} derived for the geometric length law, the setting has "
                           f"{setting.law.describe()}; use numerics.theorem.series.SeriesEvaluator")


def to_mpf(x: Number) -> mpmath.mpf:
    """x as an mpf at the current mpmath precision; a Fraction is divided exactly there (never via float)."""
    if isinstance(x, Fraction):
        return mpmath.mpf(x.numerator) / x.denominator
    return mpmath.mpf(x)


@lru_cache(maxsize=512)
def _compiled(expr: sp.Expr):
    import sympy as sp

    sym = _sym()
    return sp.lambdify((sym.d, sym.p, sym.eta1, sym.eta2, sym.eta3, sym.eps, sym.u, sym.beta_a, sym.beta_b),
                       expr, modules="mpmath")


def _check_symbol(name: str, value: Number) -> Number:
    """Validate one symbol value by its meaning (step sizes >= 0, epsilon > 0, u > 0, beta finite)."""
    if name.startswith("eta_"):
        return check_step(name, value)
    if name == "epsilon":
        return check_epsilon(value)
    if not isinstance(value, numbers.Real) or isinstance(value, bool) or not math.isfinite(float(value)):
        raise SettingError(f"{name} must be a finite real number, got {value!r}")
    if name == "u" and not float(value) > 0:
        raise SettingError(f"the attention ratio u = exp(alpha_a - alpha_b) must be > 0, got {value!r}")
    return value


class ClosedFormsBase:
    """The named closed forms of ``theory.symbolic`` at one setting, written once for every number type.

    A subclass supplies ``expr(expr, **symbols)``, the evaluation of a SymPy expression in d, p and the
    named symbols: ``ClosedForms`` in mpmath at ``dps`` digits, ``numerics.theorem.certify.ArbClosedForms`` as
    arb balls.  Each named form below is then the same SymPy statement in either number type.
    """

    setting: Setting

    @property
    def lengths(self) -> str:
        """The length variant of the setting ("positive" or "nonnegative")."""
        return self.setting.lengths

    def expr(self, expr: sp.Expr, **symbols: Number):  # pragma: no cover - supplied by the subclasses
        raise NotImplementedError

    def form(self, name: str, *args, index=None, **symbols: Number):
        """The derivation ``theory.symbolic.<name>(*args)`` (item ``index`` of a tuple or dict) at this
        setting: ``expr`` of the SymPy expression; ``ClosedForms`` evaluates its cached source instead."""
        return self.expr(compiled.derived(name, args, index), **symbols)

    def value(self, key: str, **symbols: Number):
        """Evaluate the catalogue entry ``key`` (as listed in docs/derivations.md), e.g. "kappa", "eta1_max"."""
        from theory import catalogue

        return self.expr(catalogue.entry(key, self.lengths).expr, **symbols)

    def balanced_p(self):
        """p* = the root of P(y = +1) = 1/2 from the SymPy solution (1/(d-1), or 1/(d+1) under the variant)."""
        return self.form("balanced_p", self.lengths)

    def prob_positive(self):
        """P(y = +1) at this setting's p."""
        return self.expr(1 - _sym().prob_no_marked(self.lengths))

    def risk_floor(self):
        """Irreducible squared risk P(n = 0)/2 (0 under the default length law)."""
        return self.form("risk_floor", self.lengths)

    def risk_zero(self):
        """R(0, 0) from the closed-form risk at uniform attention."""
        sym = _sym()
        return self.expr(sym.uniform_attention_risk(self.lengths).subs({sym.beta_a: 0, sym.beta_b: 0}))

    def output_only_floor(self, balanced: bool = False):
        """c(d, p) = inf over all beta in R^d of R(0, beta), squared loss; ``balanced`` evaluates the form
        with p = p* substituted, c(d) (equal to c(d, p) at the balancing p)."""
        if self.setting.loss != "squared":
            raise SettingError("the closed-form floor c(d, p) is derived for the squared loss")
        if balanced:  # called as theory.symbolic.all_derivations does, to share its cache
            return self.form("uniform_attention_min_risk", self.lengths)
        return self.form("uniform_attention_min_risk", self.lengths, False)

    def zero_gradients(self) -> dict:
        """Output and attention gradients at (0, 0): grad_beta_a, grad_beta_b, grad_alpha_a, grad_alpha_b."""
        return {k: self.expr(v) for k, v in _sym().zero_init_gradients(self.lengths).items()}

    def eta1_max(self):
        """Supremum of the admissible phase-1 step sizes eta_1 (max(beta^(1)) < 1 below it)."""
        return self.form("eta1_max", self.lengths)

    def kappa(self, eta_1: Number):
        """kappa(eta_1) = (alpha^(2)_a - alpha^(2)_b) / eta_2: the phase-2 log-attention gap per unit eta_2."""
        return self.form("attention_gap_rate", self.lengths, eta_1=eta_1)

    def u_min(self, epsilon: Number):
        """u_min(epsilon): an attention ratio u >= u_min gives inf_beta R <= floor + epsilon/2."""
        return self.form("u_min", self.lengths, epsilon=epsilon)

    def eta2_min(self, epsilon: Number, eta_1: Number):
        """max(ln u_min(epsilon), 0) / kappa(eta_1): a phase-2 step size reaching the gap u_min.

        Defined where kappa(eta_1) > 0, which holds for 0 < eta_1 < eta1_max.
        """
        if not self.kappa(eta_1) > 0:
            raise SettingError(f"eta2_min needs kappa(eta_1) > 0, which fails at eta_1 = {eta_1!r} "
                               f"(the regime is 0 < eta_1 < {float(self.eta1_max()):.6g})")
        return self.form("eta2_min", self.lengths, epsilon=epsilon, eta_1=eta_1)

    def phase1_beta(self, eta_1: Number) -> tuple:
        """(beta_a, beta_b) after one output step of size eta_1 from zero (loss of the setting)."""
        return tuple(self.form("phase1_beta", self.lengths, self.setting.loss, index=i, eta_1=eta_1) for i in range(2))

    def phase2_gradient(self, eta_1: Number) -> tuple:
        """Attention gradient at (0, beta^(1)): (marked coordinate, each unmarked coordinate), squared loss."""
        return tuple(self.form("phase2_attention_gradient", self.lengths, index=i, eta_1=eta_1) for i in range(2))

    def phase2_alpha(self, eta_1: Number, eta_2: Number) -> tuple:
        """(alpha_a, alpha_b) after the attention step of size eta_2 at (0, beta^(1)), squared loss."""
        return tuple(self.form("phase2_alpha", self.lengths, index=i, eta_1=eta_1, eta_2=eta_2) for i in range(2))

    def uniform_attention_quadratic(self) -> tuple:
        """(a_I, a_1, b_a, b_b) with R(0, beta) = beta^T (a_I I + a_1 11^T) beta / 2 - b^T beta + 1/2."""
        return tuple(self.form("uniform_attention_quadratic", self.lengths, index=i) for i in range(4))


class ClosedForms(ClosedFormsBase):
    """The closed forms of ``theory.symbolic`` evaluated at one setting, as mpmath numbers at ``dps`` digits.

    Symbols other than d and p (eta_1, eta_2, eta_3, epsilon, u, beta_a, beta_b) are passed by keyword;
    a symbol an expression needs but that is not given, or a value outside its range, raises a
    SettingError naming it.  Closed forms are stated for p < 1; at p = 1 evaluation raises.
    """

    def __init__(self, setting: Setting, dps: int = 50):
        if not isinstance(setting, Setting):
            raise SettingError(f"setting must be a theory.setting.Setting, got {setting!r}")
        require_geometric(setting, "the closed forms are")
        if isinstance(dps, bool) or not isinstance(dps, numbers.Integral) or not 5 <= dps <= 100_000:
            raise SettingError(f"dps (decimal digits) must be an integer in [5, 100000], got {dps!r}")
        self.setting = setting
        self.dps = int(dps)

    def __repr__(self) -> str:
        return f"ClosedForms({self.setting!r}, dps={self.dps})"

    # -- evaluation ------------------------------------------------------------------------------

    def expr(self, expr: sp.Expr, **symbols: Number) -> mpmath.mpf:
        """Evaluate a SymPy expression in the symbols of ``theory.symbolic`` at this setting.

        >>> from theory import symbolic as sym
        >>> cf = ClosedForms(Setting(4), dps=20)
        >>> cf.expr(sym.phase1_beta()[0], eta_1=2)
        mpf('0.5')
        """
        import sympy as sp

        self._check_symbols(symbols)
        expr = sp.sympify(expr)
        return self._evaluate(lambda: _compiled(expr), {str(s) for s in expr.free_symbols} - {"d", "p"}, symbols)

    def form(self, name: str, *args, index=None, **symbols: Number) -> mpmath.mpf:
        """The derivation ``theory.symbolic.<name>(*args)[index]`` from its cached source
        (``theory.compiled``: the function lambdify makes of it, without SymPy once cached)."""
        self._check_symbols(symbols)
        src = compiled.source(name, args, index)
        if src is None:  # pragma: no cover - every named form compiles; kept for new ones
            return super().form(name, *args, index=index, **symbols)
        return self._evaluate(lambda: compiled.function(src), set(src.free), symbols)

    def _check_symbols(self, symbols) -> None:
        unknown = set(symbols) - set(SYMBOL_NAMES)
        if unknown:
            raise SettingError(f"unknown symbol(s) {sorted(unknown)}; expected some of {SYMBOL_NAMES}")
        if self.setting.p_value == 1:
            raise SettingError("closed forms are stated for p < 1 (at p = 1 every string has length 1 and "
                               "log p / (p - 1) is a removable singularity); use the series evaluator for p = 1")

    def _evaluate(self, function, free: set, symbols) -> mpmath.mpf:
        """The compiled form (``function()`` gives it) at d, p and ``symbols``, after the checks."""
        missing = free - set(symbols)
        if missing:
            raise SettingError(f"expression needs values for {sorted(missing)}")
        checked = {k: _check_symbol(k, v) for k, v in symbols.items()}
        with mpmath.workdps(self.dps):
            args = [mpmath.mpf(self.setting.d), to_mpf(self.setting.p_value)]
            args += [to_mpf(checked[k]) if k in checked else mpmath.mpf(0) for k in SYMBOL_NAMES]
            try:
                return +mpmath.mpf(function()(*args))  # round to working precision
            except ZeroDivisionError:
                raise SettingError(f"the closed form is undefined at {symbols} (division by zero)") from None

    def all(self, **symbols: Number) -> list[tuple[str, str, mpmath.mpf | None, list[str]]]:
        """[(key, title, value, missing)] for every catalogue entry, in the order of the docs.

        ``value`` is None, and ``missing`` names the symbols, where the entry needs a symbol
        (eta_1, eta_2, epsilon, ...) not given; symbols an entry does not use are ignored for it.
        """
        import sympy as sp

        from theory import catalogue

        unknown = set(symbols) - set(SYMBOL_NAMES)
        if unknown:
            raise SettingError(f"unknown symbol(s) {sorted(unknown)}; expected some of {SYMBOL_NAMES}")
        out = []
        for der in catalogue.all_derivations(self.lengths):
            free = {str(s) for s in sp.sympify(der.expr).free_symbols} - {"d", "p"}
            missing = sorted(free - set(symbols))
            if missing:
                out.append((der.key, der.title, None, missing))
            else:
                out.append((der.key, der.title, self.expr(der.expr, **{k: v for k, v in symbols.items() if k in free}), []))
        return out

    def uniform_attention_risk(self, beta: Sequence[Number]) -> mpmath.mpf:
        """R(0, beta) for an arbitrary beta in R^d, from the closed-form quadratic (squared loss)."""
        beta = check_vector("beta", beta, self.setting.d)
        a_i, a_1, b_a, b_b = self.uniform_attention_quadratic()
        with mpmath.workdps(self.dps):
            bt = [to_mpf(x) for x in beta]
            s1 = mpmath.fsum(bt)
            quad = a_i * mpmath.fsum(x * x for x in bt) + a_1 * s1 * s1
            lin = b_a * bt[0] + b_b * mpmath.fsum(bt[1:])
            return quad / 2 - lin + mpmath.mpf(1) / 2

    def inverse_length_moment_series(self, s: int, N: int) -> tuple[mpmath.mpf, mpmath.mpf]:
        """Partial sum of L_s = E[1{n>=1} n^-s] over 1 <= n <= N, and a bound on the omitted tail.

        Tail: sum_{n>N} P(n) n^-s <= P(n > N) / (N + 1)^s, summed directly from the length law.
        """
        check_steps_count("s", s)
        check_steps_count("N", N)
        with mpmath.workdps(self.dps):
            law = LengthLaw(to_mpf(self.setting.p_value), self.setting.law.start)
            total = mpmath.fsum(law.pmf(n) / mpmath.mpf(n) ** s for n in range(1, N + 1))
            return +total, law.tail(N) / mpmath.mpf(N + 1) ** s


