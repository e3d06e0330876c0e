"""SymPy derivations of the population quantities of the occurrence-language setting.

This module only derives: every public function returns SymPy expressions (memoised in memory and
on disk by ``theory.cache.derivation``; an edit of this file invalidates the disk cache).  Titles,
notes and display forms for the docs live in ``theory.catalogue``; numbers at a setting come from
``numerics.theorem.closed_forms.ClosedForms``.

Notation (shared with docs/derivations.md):

* ``d``: alphabet size, ``pi = 1/d`` the probability of the marked symbol a at each position.
* ``n``: the length, geometric with parameter ``p``; ``c``: the number of occurrences of a, so
  c | n ~ Binomial(n, 1/d); ``r = c/n`` is the share of a in the string (defined for n >= 1).
* ``y = +1`` iff c >= 1.  Hence ``r > 0`` forces ``y = +1``: every expectation of ``y * h(r)``
  with a polynomial ``h`` reduces to ``E[h(r)] - 2 h(0) P(c = 0, n >= 1)``.
* ``L_s = E[1{n>=1} n^{-s}]``: the inverse length moments. Under the default law they are
  ``p/(1-p) Li_s(1-p)`` (``-p log p / (1-p)`` for s = 1), obtained by SymPy's summation.

Parameters symmetric in the d-1 unmarked symbols are written ``alpha = (alpha_a, alpha_b, ..., alpha_b)``
and ``beta = (beta_a, beta_b, ..., beta_b)``; gradients with respect to ``alpha_b``/``beta_b`` are
per coordinate (one unmarked symbol), exactly as gradient descent in R^d uses them.  Zero
initialisation and the symmetry of the data keep every training plan inside this class.

The closed forms are for the squared loss (the default); for the logistic variant only the
zero-initialisation gradients and the phase-1 output weights are polynomial, and those are given too.
"""
from __future__ import annotations

import sympy as sp

from theory.cache import derivation
from theory.validation import check_loss, check_variant

# ----------------------------------------------------------------------------------------------
# symbols
d = sp.Symbol("d", positive=True)
p = sp.Symbol("p", positive=True)
eta1, eta2, eta3 = sp.symbols("eta_1 eta_2 eta_3", positive=True)
eps = sp.Symbol("epsilon", positive=True)
u = sp.Symbol("u", positive=True)  # u = exp(alpha_a - alpha_b)
T_steps = sp.Symbol("T", integer=True, nonnegative=True)  # number of phase-3 steps
n_ = sp.Symbol("n", integer=True, positive=True)
c_ = sp.Symbol("c", integer=True, nonnegative=True)
r = sp.Symbol("r", nonnegative=True)  # r = c / n
beta_a, beta_b = sp.symbols("beta_a beta_b", real=True)

PI = 1 / d


def _first_branch(expr: sp.Expr) -> sp.Expr:
    """Take the convergent branch of a Piecewise produced by summation, and unpolarify.

    SymPy guards sum_{n} x^n / n^s with |x| <= 1; for x = 1 - p with p in (0, 1] that branch holds.
    """
    expr = sp.piecewise_fold(expr)
    if isinstance(expr, sp.Piecewise):
        expr = expr.args[0][0]
    expr = expr.replace(lambda e: isinstance(e, sp.Piecewise), lambda e: e.args[0][0])
    expr = expr.subs(sp.exp_polar(sp.I * sp.pi), -1)
    expr = sp.unpolarify(expr)
    return tidy(expr)


def tidy(expr: sp.Expr) -> sp.Expr:
    """Canonical display form: collect on log p and the polylogarithms, factor each coefficient."""
    expr = sp.expand_log(sp.sympify(expr), force=True)
    expr = expr.subs(sp.exp_polar(sp.I * sp.pi), -1)
    expr = expr.replace(lambda e: isinstance(e, sp.polylog), lambda e: sp.polylog(e.args[0], sp.expand(e.args[1])))
    atoms = sorted({a for a in sp.expand(expr).atoms(sp.log, sp.polylog)}, key=sp.default_sort_key)
    if not atoms:
        return sp.factor(sp.simplify(expr))
    collected = sp.collect(sp.expand(expr), atoms, evaluate=False)
    return sp.Add(*[sp.factor(sp.simplify(coeff)) * (1 if key == 1 else key) for key, coeff in collected.items()])


def length_pmf(lengths: str = "positive") -> tuple[sp.Expr, int]:
    """P(n = n_) as a SymPy expression in the symbol ``n_``, and the lower end of the support.

    >>> length_pmf("nonnegative")
    (p*(1 - p)**n, 0)
    """
    check_variant(lengths)
    if lengths == "positive":
        return p * (1 - p) ** (n_ - 1), 1
    return p * (1 - p) ** n_, 0


@derivation
def prob_no_marked(lengths: str = "positive") -> sp.Expr:
    """P(y = -1) = P(c = 0) = E[((d-1)/d)^n], summed by SymPy."""
    pmf, lo = length_pmf(lengths)
    nn = sp.Symbol("m", integer=True, nonnegative=True)
    s = sp.summation(pmf.subs(n_, nn) * ((d - 1) / d) ** nn, (nn, lo, sp.oo))
    return sp.simplify(_first_branch(s))


@derivation
def prob_empty(lengths: str = "positive") -> sp.Expr:
    """P(n = 0): 0 under the default law, p under the nonnegative variant."""
    check_variant(lengths)
    return sp.Integer(0) if lengths == "positive" else p


@derivation
def balanced_p(lengths: str = "positive") -> sp.Expr:
    """Solve P(y = +1) = 1/2 for p; the unique root in (0, 1].

    >>> balanced_p(), balanced_p("nonnegative")
    (1/(d - 1), 1/(d + 1))
    """
    sols = sp.solve(sp.Eq(prob_no_marked(lengths), sp.Rational(1, 2)), p)
    sols = [sp.simplify(s) for s in sols]
    # P(y = -1) is a Moebius function of p, so there is one root; keep it only if it is a probability
    good = [s for s in sols if 0 < s.subs(d, 7) <= 1]
    if len(good) != 1:  # pragma: no cover - a derivation failure must be loud
        raise RuntimeError(f"balance equation gave {sols}")
    return sp.factor(good[0])


@derivation
def inverse_length_moment(s: int, lengths: str = "positive") -> sp.Expr:
    """L_s = E[1{n>=1} n^{-s}] for integer s >= 0, summed by SymPy (log / polylog closed forms)."""
    pmf, _ = length_pmf(lengths)
    if s == 0:
        return sp.simplify(1 - prob_empty(lengths))
    val = sp.summation(pmf / n_**s, (n_, 1, sp.oo))
    val = _first_branch(val)
    val = val.replace(lambda e: isinstance(e, sp.polylog) and e.args[0] == 1, lambda e: -sp.log(1 - e.args[1]))
    return tidy(val)


def _falling(nn: sp.Expr, j: int) -> sp.Expr:
    out = sp.Integer(1)
    for i in range(j):
        out *= nn - i
    return out


@derivation
def ratio_moment(k: int, lengths: str = "positive") -> sp.Expr:
    """E[1{n>=1} r^k], r = c/n, from binomial factorial moments and the L_s.

    E[c^k | n] = sum_j S(k, j) n^(j falling) pi^j; dividing by n^k gives a polynomial in 1/n.
    """
    if k == 0:
        return inverse_length_moment(0, lengths)
    m = sp.Symbol("m_inv", positive=True)  # m = 1/n
    poly = sum(sp.functions.combinatorial.numbers.stirling(k, j) * PI**j * _falling(1 / m, j) * m**k
               for j in range(1, k + 1))
    poly = sp.Poly(sp.expand(poly), m)
    total = sp.Integer(0)
    for (power,), coeff in poly.terms():
        total += coeff * inverse_length_moment(power, lengths)
    return tidy(total)


def expect_poly(h: sp.Expr, lengths: str = "positive", with_label: bool = False) -> sp.Expr:
    """E[1{n>=1} h(r)] (or E[1{n>=1} y h(r)] with ``with_label``) for a polynomial h in the symbol r."""
    poly = sp.Poly(sp.expand(h), r)
    plain = sum(coeff * ratio_moment(power, lengths) for (power,), coeff in poly.terms())
    if not with_label:
        return plain
    h0 = sp.expand(h).subs(r, 0)
    q_neg = prob_no_marked(lengths) - prob_empty(lengths)  # P(c = 0, n >= 1)
    return plain - 2 * h0 * q_neg


# ----------------------------------------------------------------------------------------------
# uniform attention (alpha = 0): f = beta_b + (beta_a - beta_b) r on n >= 1, f = 0 on the empty string


def uniform_output(ba: sp.Expr = beta_a, bb: sp.Expr = beta_b) -> sp.Expr:
    """f = beta_b + (beta_a - beta_b) r: the output at alpha = 0 on a string of length n >= 1, share r of a."""
    return bb + (ba - bb) * r


@derivation
def uniform_attention_risk(lengths: str = "positive") -> sp.Expr:
    """R(0, beta) for symmetric beta, squared loss: a quadratic in (beta_a, beta_b)."""
    f = uniform_output()
    e_f2 = expect_poly(f**2, lengths)
    e_yf = expect_poly(f, lengths, with_label=True)
    return sp.Rational(1, 2) * (e_f2 - 2 * e_yf + 1)


@derivation
def zero_init_risk(lengths: str = "positive") -> sp.Expr:
    """R(0, 0): f = 0 on every string, so the squared risk is E[y^2]/2 = 1/2."""
    return sp.simplify(uniform_attention_risk(lengths).subs({beta_a: 0, beta_b: 0}))


@derivation
def uniform_attention_quadratic(lengths: str = "positive") -> tuple[sp.Expr, sp.Expr, sp.Expr, sp.Expr]:
    """R(0, beta) = beta^T A beta / 2 - b^T beta + 1/2 for arbitrary beta in R^d.

    Returns (A_diag_extra, A_all, b_a, b_b) with A = A_diag_extra * I + A_all * 1 1^T,
    b = (b_a, b_b, ..., b_b): A_kl = E[w_k w_l], b_k = E[y w_k] where w_k = c_k / n.
    """
    L1 = inverse_length_moment(1, lengths)
    nu = inverse_length_moment(0, lengths)
    a_diag = PI * L1
    a_all = PI**2 * (nu - L1)
    b_a = ratio_moment(1, lengths)
    q_neg = prob_no_marked(lengths) - prob_empty(lengths)
    b_b = PI * nu - 2 * q_neg / (d - 1)
    return a_diag, a_all, b_a, b_b


@derivation
def uniform_attention_minimiser(lengths: str = "positive") -> tuple[sp.Expr, sp.Expr]:
    """argmin over (beta_a, beta_b) of R(0, beta), squared loss."""
    R = uniform_attention_risk(lengths)
    sol = sp.solve([sp.diff(R, beta_a), sp.diff(R, beta_b)], [beta_a, beta_b], dict=True)[0]
    return sp.simplify(sol[beta_a]), sp.simplify(sol[beta_b])


@derivation
def uniform_attention_min_risk(lengths: str = "positive", balanced: bool = True) -> sp.Expr:
    """c(d, p) = inf_beta R(0, beta): the floor of output-only training (squared loss).

    By convexity and the symmetry of the data, the infimum over all beta in R^d is attained at a
    symmetric beta, so this two-variable minimum is the infimum over R^d.
    """
    R = uniform_attention_risk(lengths)
    ba_s, bb_s = uniform_attention_minimiser(lengths)
    val = sp.factor(sp.cancel(sp.together(R.subs({beta_a: ba_s, beta_b: bb_s}))))
    if balanced:
        val = sp.expand_log(sp.simplify(sp.expand_log(val.subs(p, balanced_p(lengths)), force=True)), force=True)
    return val


# ----------------------------------------------------------------------------------------------
# the three-phase plan from zero, squared loss unless stated


@derivation
def zero_init_gradients(lengths: str = "positive", loss: str = "squared") -> dict[str, sp.Expr]:
    """Population gradients at (alpha, beta) = (0, 0).

    Returns a dict with keys grad_beta_a, grad_beta_b, grad_alpha_a, grad_alpha_b.  At beta = 0
    the attention gradient vanishes identically: df/dalpha_k = w_k (beta_k - f) = 0.
    With f = 0, the derivative of the loss in f is -y (squared) and -y/2 (logistic).
    """
    check_loss(loss)
    scale = 1 if loss == "squared" else sp.Rational(1, 2)
    g_a = -scale * expect_poly(r, lengths, with_label=True)
    g_b = -scale * expect_poly(1 - r, lengths, with_label=True) / (d - 1)
    return {"grad_beta_a": sp.simplify(g_a), "grad_beta_b": sp.simplify(g_b),
            "grad_alpha_a": sp.Integer(0), "grad_alpha_b": sp.Integer(0)}


@derivation
def phase1_beta(lengths: str = "positive", loss: str = "squared") -> tuple[sp.Expr, sp.Expr]:
    """Output weights after one output step of size eta_1 from zero."""
    g = zero_init_gradients(lengths, loss)
    return sp.simplify(-eta1 * g["grad_beta_a"]), sp.simplify(-eta1 * g["grad_beta_b"])


@derivation
def phase2_attention_gradient(lengths: str = "positive") -> tuple[sp.Expr, sp.Expr]:
    """Attention gradient at (alpha, beta) = (0, beta^(1)), squared loss.

    grad_alpha_a = E[(f - y) r (beta_a - f)], with beta_a - f = (beta_a - beta_b)(1 - r);
    softmax is shift invariant, so the gradient sums to zero: grad_alpha_b = -grad_alpha_a / (d - 1).
    """
    b1a, b1b = phase1_beta(lengths)
    f = uniform_output(b1a, b1b)
    h = r * (1 - r) * (b1a - b1b)
    g_a = expect_poly(f * h, lengths) - expect_poly(h, lengths, with_label=True)
    g_a = tidy(g_a)
    return g_a, tidy(-g_a / (d - 1))


@derivation
def phase2_alpha(lengths: str = "positive") -> tuple[sp.Expr, sp.Expr]:
    """Attention weights after one attention step of size eta_2 at (0, beta^(1))."""
    g_a, g_b = phase2_attention_gradient(lengths)
    return -eta2 * g_a, -eta2 * g_b


@derivation
def attention_gap_rate(lengths: str = "positive") -> sp.Expr:
    """kappa(eta_1) = (alpha_a - alpha_b) / eta_2 after phase 2: the log-attention gap per unit eta_2."""
    g_a, _ = phase2_attention_gradient(lengths)
    return tidy(-g_a * d / (d - 1))


@derivation
def attention_gap_rate_balanced(lengths: str = "positive") -> sp.Expr:
    """kappa(eta_1) at the balancing p (a function of d and eta_1), collected on ln and Li_2."""
    val = tidy(sp.simplify(attention_gap_rate(lengths).subs(p, balanced_p(lengths))))
    return val.replace(lambda e: isinstance(e, sp.polylog), lambda e: sp.polylog(e.args[0], sp.factor(e.args[1])))


@derivation
def eta1_max(lengths: str = "positive") -> sp.Expr:
    """Supremum of the eta_1 with max(beta^(1)_a, beta^(1)_b) < 1 (as a function of d, p).

    On that range f < 1 everywhere after phase 1, so f - y < 0 whenever 0 < r < 1 and the
    attention step moves alpha_a up (kappa > 0).  beta^(1)_a = eta_1 E[r] > 0 always.
    """
    b1a, b1b = phase1_beta(lengths)
    return 1 / sp.Max(sp.simplify(b1a / eta1), sp.simplify(b1b / eta1))


@derivation
def eta1_max_balanced(lengths: str = "positive") -> sp.Expr:
    """eta1_max at the balancing p: d under the default law, d + 1 under the variant.

    SymPy decides the Max only with d >= 2 made explicit: write d = 2 + k with k >= 0, then back.
    """
    k = sp.Symbol("k", nonnegative=True)
    at_balance = eta1_max(lengths).subs(p, balanced_p(lengths))
    return sp.simplify(sp.simplify(at_balance.subs(d, k + 2)).subs(k, d - 2))


@derivation
def shifted_second_length_moment(lengths: str = "positive") -> sp.Expr:
    """B_2 = E[1{n>=1} (n - 1)^2], used in the bound inf_beta R(alpha, beta) <= floor + 2 B_2 / u^2."""
    pmf, _ = length_pmf(lengths)
    return sp.simplify(_first_branch(sp.summation(pmf * (n_ - 1) ** 2, (n_, 1, sp.oo))))


@derivation
def risk_floor(lengths: str = "positive") -> sp.Expr:
    """Irreducible squared risk: the empty string (variant) has f = 0 and y = -1, costing P(n=0)/2."""
    return prob_empty(lengths) / 2


@derivation
def u_min(lengths: str = "positive") -> sp.Expr:
    """u_min(epsilon) = 2 sqrt(B_2 / epsilon): a gap u = exp(alpha_a - alpha_b) >= u_min gives
    inf_beta R <= floor + epsilon / 2.

    Proof: take beta = (1, -1, ..., -1).  Strings without a give f = -1 = y exactly; a string
    with c >= 1 has 1 - g = (n - c)/(c u + n - c) <= (n - 1)/u, so its loss is 2 (1 - g)^2 <= 2 (n-1)^2 / u^2.
    """
    return 2 * sp.sqrt(shifted_second_length_moment(lengths) / eps)


@derivation
def eta2_min(lengths: str = "positive") -> sp.Expr:
    """eta_2 >= max(log u_min(epsilon), 0) / kappa(eta_1) makes the phase-2 gap at least u_min.

    The gap u = exp(alpha_a - alpha_b) is at least 1 after phase 2 (kappa > 0), so u_min <= 1 needs no
    attention step: hence the max with 0.
    """
    return sp.Max(sp.log(u_min(lengths)), 0) / attention_gap_rate(lengths)


# ----------------------------------------------------------------------------------------------
# phase 3: fixed attention, output gradient descent on a quadratic


def attention_share_on_marked() -> sp.Expr:
    """g(n, c; u) = c u / (c u + n - c): the attention mass on a when alpha_a - alpha_b = log u."""
    return c_ * u / (c_ * u + n_ - c_)


@derivation
def phase3_series(lengths: str = "positive") -> tuple[sp.ImmutableMatrix, sp.ImmutableMatrix]:
    """The phase-3 population quantities as explicit double series (SymPy ``Sum`` objects).

    With phi = (g, 1 - g), the reduced risk is R = E[(phi . beta - y)^2]/2 and its gradient is
    M beta - m with M = E[phi phi^T], m = E[y phi]; gradient descent in R^d moves
    (beta_a, beta_b) by -eta_3 D (M beta - m), D = diag(1, 1/(d-1)).  These series have no finite
    closed form in general; numerics/theorem/series.py evaluates them with a truncation bound.
    """
    pmf, _ = length_pmf(lengths)
    weight = pmf * sp.binomial(n_, c_) * (d - 1) ** (n_ - c_) / d**n_  # P(n) P(c | n), c | n ~ Bin(n, 1/d)
    g = attention_share_on_marked()
    h = (n_ - c_) / (c_ * u + n_ - c_)  # 1 - g, the attention mass on the unmarked symbols
    y = 2 * sp.sign(c_) - 1  # the label: +1 iff c >= 1 (c is a nonnegative integer)

    def expect(expr: sp.Expr) -> sp.Sum:
        return sp.Sum(sp.Sum(weight * expr, (c_, 0, n_)), (n_, 1, sp.oo))

    M = sp.ImmutableMatrix([[expect(g**2), expect(g * h)], [expect(g * h), expect(h**2)]])
    m = sp.ImmutableMatrix([expect(g), expect(y * h)])  # y g = g because g = 0 when c = 0
    return M, m


def phase3_symbols() -> tuple[sp.MatrixSymbol, sp.MatrixSymbol, sp.MatrixSymbol, sp.MatrixSymbol]:
    """The matrix symbols (M, m, D, beta_0) of the phase-3 closed forms."""
    return (sp.MatrixSymbol("M", 2, 2), sp.MatrixSymbol("m", 2, 1), sp.MatrixSymbol("D", 2, 2),
            sp.MatrixSymbol("beta_0", 2, 1))


def phase3_closed_form(T: sp.Expr = T_steps) -> sp.MatrixExpr:
    """beta_T = beta* + (I - eta_3 D M)^T (beta_0 - beta*), beta* = M^{-1} m (when M is invertible).

    beta_0 = beta^(1) (phase 3 starts from the phase-1 output weights), D = diag(1, 1/(d-1)).
    """
    Ms, ms, Ds, b0 = phase3_symbols()
    bstar = Ms.I * ms
    return bstar + sp.MatPow(sp.Identity(2) - eta3 * Ds * Ms, T) * (b0 - bstar)


def phase3_gradient(T: sp.Expr = T_steps) -> sp.MatrixExpr:
    """Per-coordinate output gradient after t = T phase-3 steps: D (M beta_T - m) = D M (I - eta_3 D M)^T (beta_0 - beta*).

    At T = 0 it is the output gradient at (alpha^(2), beta^(1)), the start of phase 3.
    """
    Ms, ms, Ds, b0 = phase3_symbols()
    bstar = Ms.I * ms
    return Ds * Ms * sp.MatPow(sp.Identity(2) - eta3 * Ds * Ms, T) * (b0 - bstar)


# ----------------------------------------------------------------------------------------------
# joint gradient descent from zero: the first steps and the small-step leading terms

eta_att, eta_out = sp.symbols("eta_att eta_out", positive=True)
t_ = sp.Symbol("t", integer=True, nonnegative=True)  # a step count of joint GD
beta0_a, beta0_b = sp.symbols("beta_0a beta_0b", real=True)  # a non-zero readout start (the control)


def uniform_output_gradient(ba: sp.Expr, bb: sp.Expr, lengths: str = "positive") -> tuple[sp.Expr, sp.Expr]:
    """Per-coordinate output gradient at alpha = 0 and symmetric beta: (A beta - b) on a and on each unmarked
    coordinate, with A and b of ``uniform_attention_quadratic`` (R(0, beta) is that quadratic exactly)."""
    a_diag, a_all, b_a, b_b = uniform_attention_quadratic(lengths)
    total = ba + (d - 1) * bb
    return a_diag * ba + a_all * total - b_a, a_diag * bb + a_all * total - b_b


def uniform_attention_gradient(ba: sp.Expr, bb: sp.Expr, lengths: str = "positive") -> tuple[sp.Expr, sp.Expr]:
    """Attention gradient at alpha = 0 and symmetric beta (squared loss): E[(f - y) r (beta_a - f)] on a, with
    beta_a - f = (beta_a - beta_b)(1 - r), and minus its (d - 1)-th part on each unmarked coordinate."""
    f = uniform_output(ba, bb)
    h = r * (1 - r) * (ba - bb)
    g_a = expect_poly(f * h, lengths) - expect_poly(h, lengths, with_label=True)
    return g_a, -g_a / (d - 1)


@derivation
def joint_first_steps(lengths: str = "positive") -> dict[str, sp.Expr]:
    """The first two steps of joint GD from (alpha, beta) = (0, 0) with step sizes eta_att and eta_out.

    Step 1: the attention gradient vanishes at beta = 0, so alpha_1 = 0, and beta_1 = -eta_out grad_beta(0, 0).
    Step 2: alpha_1 = 0 still, so both gradients are those at uniform attention, which are polynomial in
    beta_1: alpha_2 - alpha_1 = -eta_att grad_alpha(0, beta_1), beta_2 - beta_1 = -eta_out grad_beta(0, beta_1).
    Keys: ``beta1_a``, ``beta1_b``, ``alpha1_a``, ``alpha1_b``, ``dalpha2_a``, ``dalpha2_b``, ``dbeta2_a``,
    ``dbeta2_b`` (the d-prefixed ones are the moves of step 2).
    """
    g0a, g0b = uniform_output_gradient(sp.Integer(0), sp.Integer(0), lengths)
    b1a, b1b = sp.expand(-eta_out * g0a), sp.expand(-eta_out * g0b)
    z0a, z0b = uniform_attention_gradient(sp.Integer(0), sp.Integer(0), lengths)
    a1a, a1b = sp.expand(-eta_att * z0a), sp.expand(-eta_att * z0b)
    ga, gb = uniform_attention_gradient(b1a, b1b, lengths)
    oa, ob = uniform_output_gradient(b1a, b1b, lengths)
    return {"beta1_a": b1a, "beta1_b": b1b, "alpha1_a": a1a, "alpha1_b": a1b,
            "dalpha2_a": sp.expand(-eta_att * ga), "dalpha2_b": sp.expand(-eta_att * gb),
            "dbeta2_a": sp.expand(-eta_out * oa), "dbeta2_b": sp.expand(-eta_out * ob)}


@derivation
def joint_first_step_from(lengths: str = "positive") -> dict[str, sp.Expr]:
    """The first step of joint GD from alpha = 0 and a readout start (beta_0a, beta_0b): the control.

    alpha_1 - alpha_0 = -eta_att grad_alpha(0, beta_0) is first order in eta_att as soon as beta_0a != beta_0b:
    the gating of the zero start (attention waits for the readout) is a property of beta_0 = 0.
    Keys: ``dalpha1_a``, ``dalpha1_b``, ``dbeta1_a``, ``dbeta1_b``.
    """
    ga, gb = uniform_attention_gradient(beta0_a, beta0_b, lengths)
    oa, ob = uniform_output_gradient(beta0_a, beta0_b, lengths)
    return {"dalpha1_a": sp.expand(-eta_att * ga), "dalpha1_b": sp.expand(-eta_att * gb),
            "dbeta1_a": sp.expand(-eta_out * oa), "dbeta1_b": sp.expand(-eta_out * ob)}


def step_order(expr: sp.Expr) -> sp.Expr:
    """The lowest total degree in (eta_att, eta_out) of a polynomial in the step sizes (oo for 0).

    >>> step_order(eta_att * eta_out * (3 + eta_out)), step_order(sp.Integer(0))
    (2, oo)
    """
    poly = sp.Poly(sp.expand(expr), eta_att, eta_out)
    if poly.is_zero:
        return sp.oo
    return sp.Integer(min(sum(m) for m in poly.monoms()))


def step_coefficient(expr: sp.Expr, i: int, j: int) -> sp.Expr:
    """The coefficient of eta_att^i eta_out^j in a polynomial in the step sizes (a function of d and p)."""
    return sp.Poly(sp.expand(expr), eta_att, eta_out).coeff_monomial(eta_att**i * eta_out**j)


@derivation
def joint_leading_rates(lengths: str = "positive") -> dict[str, sp.Expr]:
    """The leading coefficients of joint GD from zero (functions of d and p).

    ``beta_a``, ``beta_b``: the readout's first step per unit eta_out; ``alpha_a``, ``alpha_b``: the coefficient
    of eta_att eta_out in the attention's first move alpha_2 - alpha_1; ``alpha_a_2``: that of
    eta_att eta_out^2 (the move has no other term); ``gap``: the gap alpha_a - alpha_b per eta_att eta_out.
    """
    steps = joint_first_steps(lengths)
    out = {"beta_a": step_coefficient(steps["beta1_a"], 0, 1), "beta_b": step_coefficient(steps["beta1_b"], 0, 1),
           "alpha_a": step_coefficient(steps["dalpha2_a"], 1, 1), "alpha_b": step_coefficient(steps["dalpha2_b"], 1, 1),
           "alpha_a_2": step_coefficient(steps["dalpha2_a"], 1, 2)}
    out["gap"] = out["alpha_a"] - out["alpha_b"]
    return {k: tidy(v) for k, v in out.items()}


@derivation
def joint_gap_rate_balanced(lengths: str = "positive") -> sp.Expr:
    """The gap per eta_att eta_out of the attention's first move at the balancing p (a function of d)."""
    val = tidy(sp.simplify(joint_leading_rates(lengths)["gap"].subs(p, balanced_p(lengths))))
    return val.replace(lambda e: isinstance(e, sp.polylog), lambda e: sp.polylog(e.args[0], sp.factor(e.args[1])))


@derivation
def joint_small_step_leading(lengths: str = "positive") -> dict[str, sp.Expr]:
    """The leading terms of each block's displacement after t steps of joint GD from zero, for small steps.

    Both gradients are analytic in the parameters.  To first order in the steps, beta_t = t eta_out g with g
    the readout's first step per unit eta_out (the output gradient moves by O(eta) along the way), and the
    attention gradient at (alpha_s, beta_s) is K beta_s plus terms of second order (it is 0 at beta = 0 for
    every alpha, so it has no term in alpha alone), K beta_s = s eta_out K g.  Hence
    alpha_t = eta_att sum_{s < t} s eta_out k + O(eta^3) = binomial(t, 2) eta_att eta_out k, k the coefficient
    of eta_att eta_out in alpha_2 - alpha_1, for fixed t as eta_att and eta_out go to 0 at a fixed ratio.
    Keys as ``joint_leading_rates`` (beta_a, beta_b, alpha_a, alpha_b, gap), each the leading term in t.
    """
    rates = joint_leading_rates(lengths)
    s_ = sp.Symbol("s", integer=True, nonnegative=True)
    beta_sum = t_ * eta_out
    alpha_sum = sp.factor(sp.summation(s_, (s_, 0, t_ - 1))) * eta_att * eta_out
    return {"beta_a": beta_sum * rates["beta_a"], "beta_b": beta_sum * rates["beta_b"],
            "alpha_a": alpha_sum * rates["alpha_a"], "alpha_b": alpha_sum * rates["alpha_b"],
            "gap": alpha_sum * rates["gap"]}


@derivation
def small_step_lag_ratio() -> sp.Expr:
    """The lag ratio t_half(attention) / t_half(readout) of the small-step limit, as the budget T grows.

    With the leading terms of ``joint_small_step_leading`` each block moves along a fixed direction, so the
    displacement ratios are r_out(t) = t / T and r_att(t) = t (t - 1) / (T (T - 1)); r = 1/2 is reached at
    t = T / 2 and at the root t* of t (t - 1) = T (T - 1) / 2, and t* / (T / 2) tends to sqrt 2 (whatever
    eta_att / eta_out is).
    """
    T = sp.Symbol("T", positive=True)
    tt = sp.Symbol("t", positive=True)
    roots = [s for s in sp.solve(sp.Eq(tt * (tt - 1), T * (T - 1) / 2), tt) if s.subs(T, 10) > 0]
    return sp.limit(roots[0] / (T / 2), T, sp.oo)
