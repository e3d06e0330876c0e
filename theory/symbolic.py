"""SymPy derivations of the population quantities of the occurrence-language setting.

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

from dataclasses import dataclass
from functools import lru_cache

import sympy as sp

from .validation import check_loss, check_variant

# ----------------------------------------------------------------------------------------------
# symbols
d = sp.Symbol("d", positive=True)
p = sp.Symbol("p", positive=True)
eta1, eta2, eta3 = sp.symbols("eta_1 eta_2 eta_3", positive=True)
eps = sp.Symbol("epsilon", positive=True)
u = sp.Symbol("u", positive=True)  # u = exp(alpha_a - alpha_b)
n_ = sp.Symbol("n", integer=True, positive=True)
c_ = sp.Symbol("c", integer=True, nonnegative=True)
r = sp.Symbol("r", nonnegative=True)  # r = c / n
beta_a, beta_b = sp.symbols("beta_a beta_b", real=True)
x_ = sp.Symbol("x", positive=True)  # generic ratio in geometric sums

PI = 1 / d


def _first_branch(expr):
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


def tidy(expr):
    """Canonical display form: collect on log p and the polylogarithms, factor each coefficient."""
    expr = sp.expand_log(sp.sympify(expr), force=True)
    expr = expr.subs(sp.exp_polar(sp.I * sp.pi), -1)
    expr = expr.replace(lambda e: isinstance(e, sp.polylog), lambda e: sp.polylog(e.args[0], sp.expand(e.args[1])))
    atoms = sorted({a for a in sp.expand(expr).atoms(sp.log, sp.polylog)}, key=sp.default_sort_key)
    if not atoms:
        return sp.factor(sp.simplify(expr))
    collected = sp.collect(sp.expand(expr), atoms, evaluate=False)
    return sp.Add(*[sp.factor(sp.simplify(coeff)) * (1 if key == 1 else key) for key, coeff in collected.items()])


def length_pmf(lengths: str = "positive"):
    """P(n = n_) as a SymPy expression, and the lower end of the support."""
    check_variant(lengths)
    if lengths == "positive":
        return p * (1 - p) ** (n_ - 1), 1
    return p * (1 - p) ** n_, 0


@lru_cache(maxsize=None)
def prob_no_marked(lengths: str = "positive"):
    """P(y = -1) = P(c = 0) = E[((d-1)/d)^n], summed by SymPy."""
    pmf, lo = length_pmf(lengths)
    nn = sp.Symbol("m", integer=True, nonnegative=True)
    s = sp.summation(pmf.subs(n_, nn) * ((d - 1) / d) ** nn, (nn, lo, sp.oo))
    return sp.simplify(_first_branch(s))


@lru_cache(maxsize=None)
def prob_empty(lengths: str = "positive"):
    """P(n = 0): 0 under the default law, p under the nonnegative variant."""
    check_variant(lengths)
    return sp.Integer(0) if lengths == "positive" else p


@lru_cache(maxsize=None)
def balanced_p(lengths: str = "positive"):
    """Solve P(y = +1) = 1/2 for p; the unique root in (0, 1]."""
    sols = sp.solve(sp.Eq(prob_no_marked(lengths), sp.Rational(1, 2)), p)
    sols = [sp.simplify(s) for s in sols]
    # P(y = -1) is a Moebius function of p, so there is one root; keep it only if it is a probability
    good = [s for s in sols if 0 < s.subs(d, 7) <= 1]
    if len(good) != 1:  # pragma: no cover - a derivation failure must be loud
        raise RuntimeError(f"balance equation gave {sols}")
    return sp.factor(good[0])


@lru_cache(maxsize=None)
def inverse_length_moment(s: int, lengths: str = "positive"):
    """L_s = E[1{n>=1} n^{-s}] for integer s >= 0, summed by SymPy (log / polylog closed forms)."""
    pmf, _ = length_pmf(lengths)
    if s == 0:
        return sp.simplify(1 - prob_empty(lengths))
    val = sp.summation(pmf / n_**s, (n_, 1, sp.oo))
    val = _first_branch(val)
    val = val.replace(lambda e: isinstance(e, sp.polylog) and e.args[0] == 1, lambda e: -sp.log(1 - e.args[1]))
    return tidy(val)


def _falling(nn, j):
    out = sp.Integer(1)
    for i in range(j):
        out *= nn - i
    return out


@lru_cache(maxsize=None)
def ratio_moment(k: int, lengths: str = "positive"):
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


def expect_poly(h, lengths: str = "positive", with_label: bool = False):
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


def uniform_output(ba=beta_a, bb=beta_b):
    return bb + (ba - bb) * r


@lru_cache(maxsize=None)
def uniform_attention_risk(lengths: str = "positive"):
    """R(0, beta) for symmetric beta, squared loss: a quadratic in (beta_a, beta_b)."""
    f = uniform_output()
    e_f2 = expect_poly(f**2, lengths)
    e_yf = expect_poly(f, lengths, with_label=True)
    return sp.Rational(1, 2) * (e_f2 - 2 * e_yf + 1)


@lru_cache(maxsize=None)
def uniform_attention_quadratic(lengths: str = "positive"):
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


@lru_cache(maxsize=None)
def uniform_attention_minimiser(lengths: str = "positive"):
    """argmin over (beta_a, beta_b) of R(0, beta), squared loss."""
    R = uniform_attention_risk(lengths)
    sol = sp.solve([sp.diff(R, beta_a), sp.diff(R, beta_b)], [beta_a, beta_b], dict=True)[0]
    return sp.simplify(sol[beta_a]), sp.simplify(sol[beta_b])


@lru_cache(maxsize=None)
def uniform_attention_min_risk(lengths: str = "positive", balanced: bool = True):
    """c(d, p) = inf_beta R(0, beta): the floor of output-only training (squared loss).

    By convexity and the symmetry of the data, the infimum over all beta in R^d is attained at a
    symmetric beta, so this two-variable minimum is the infimum over R^d.
    """
    R = uniform_attention_risk(lengths)
    ba_s, bb_s = uniform_attention_minimiser(lengths)
    val = sp.factor(sp.cancel(sp.together(R.subs({beta_a: ba_s, beta_b: bb_s}))))
    if balanced:
        val = sp.simplify(sp.expand_log(val.subs(p, balanced_p(lengths)), force=True))
    return val


# ----------------------------------------------------------------------------------------------
# the three-phase plan from zero, squared loss unless stated


@lru_cache(maxsize=None)
def zero_init_gradients(lengths: str = "positive", loss: str = "squared"):
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


@lru_cache(maxsize=None)
def phase1_beta(lengths: str = "positive", loss: str = "squared"):
    """Output weights after one output step of size eta_1 from zero."""
    g = zero_init_gradients(lengths, loss)
    return sp.simplify(-eta1 * g["grad_beta_a"]), sp.simplify(-eta1 * g["grad_beta_b"])


@lru_cache(maxsize=None)
def phase2_attention_gradient(lengths: str = "positive"):
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


@lru_cache(maxsize=None)
def phase2_alpha(lengths: str = "positive"):
    """Attention weights after one attention step of size eta_2 at (0, beta^(1))."""
    g_a, g_b = phase2_attention_gradient(lengths)
    return -eta2 * g_a, -eta2 * g_b


@lru_cache(maxsize=None)
def attention_gap_rate(lengths: str = "positive"):
    """kappa(eta_1) = (alpha_a - alpha_b) / eta_2 after phase 2: the log-attention gap per unit eta_2."""
    g_a, _ = phase2_attention_gradient(lengths)
    return tidy(-g_a * d / (d - 1))


@lru_cache(maxsize=None)
def eta1_max(lengths: str = "positive"):
    """Supremum of the eta_1 with max(beta^(1)_a, beta^(1)_b) < 1 (as a function of d, p).

    On that range f < 1 everywhere after phase 1, so f - y < 0 whenever 0 < r < 1 and the
    attention step moves alpha_a up (kappa > 0).  beta^(1)_a = eta_1 E[r] > 0 always.
    """
    b1a, b1b = phase1_beta(lengths)
    return 1 / sp.Max(sp.simplify(b1a / eta1), sp.simplify(b1b / eta1))


@lru_cache(maxsize=None)
def shifted_second_length_moment(lengths: str = "positive"):
    """B_2 = E[1{n>=1} (n - 1)^2], used in the bound inf_beta R(alpha, beta) <= floor + 2 B_2 / u^2."""
    pmf, _ = length_pmf(lengths)
    return sp.simplify(_first_branch(sp.summation(pmf * (n_ - 1) ** 2, (n_, 1, sp.oo))))


@lru_cache(maxsize=None)
def risk_floor(lengths: str = "positive"):
    """Irreducible squared risk: the empty string (variant) has f = 0 and y = -1, costing P(n=0)/2."""
    return prob_empty(lengths) / 2


@lru_cache(maxsize=None)
def u_min(lengths: str = "positive"):
    """u_min(epsilon) = 2 sqrt(B_2 / epsilon): a gap u = exp(alpha_a - alpha_b) >= u_min gives
    inf_beta R <= floor + epsilon / 2.

    Proof: take beta = (1, -1, ..., -1).  Strings without a give f = -1 = y exactly; a string
    with c >= 1 has 1 - g = (n - c)/(c u + n - c) <= (n - 1)/u, so its loss is 2 (1 - g)^2 <= 2 (n-1)^2 / u^2.
    """
    return 2 * sp.sqrt(shifted_second_length_moment(lengths) / eps)


@lru_cache(maxsize=None)
def eta2_min(lengths: str = "positive"):
    """eta_2 >= max(log u_min(epsilon), 0) / kappa(eta_1) makes the phase-2 gap at least u_min.

    The gap u = exp(alpha_a - alpha_b) is at least 1 after phase 2 (kappa > 0), so u_min <= 1 needs no
    attention step: hence the max with 0.
    """
    return sp.Max(sp.log(u_min(lengths)), 0) / attention_gap_rate(lengths)


# ----------------------------------------------------------------------------------------------
# phase 3: fixed attention, output gradient descent on a quadratic


def attention_share_on_marked():
    """g(n, c; u) = c u / (c u + n - c): the attention mass on a when alpha_a - alpha_b = log u."""
    return c_ * u / (c_ * u + n_ - c_)


def phase3_series(lengths: str = "positive"):
    """The phase-3 population quantities as explicit double series (SymPy ``Sum`` objects).

    With phi = (g, 1 - g), the reduced risk is R = E[(phi . beta - y)^2]/2 and its gradient is
    M beta - m with M = E[phi phi^T], m = E[y phi]; gradient descent in R^d moves
    (beta_a, beta_b) by -eta_3 D (M beta - m), D = diag(1, 1/(d-1)).  These series have no finite
    closed form in general; numerics/series.py evaluates them with a truncation bound.
    """
    pmf, _ = length_pmf(lengths)
    weight = pmf * sp.binomial(n_, c_) * PI**c_ * (1 - PI) ** (n_ - c_)
    g = attention_share_on_marked()
    y = sp.Piecewise((-1, sp.Eq(c_, 0)), (1, True))

    def E(expr):
        return sp.Sum(sp.Sum(weight * expr, (c_, 0, n_)), (n_, 1, sp.oo))

    M = sp.Matrix([[E(g**2), E(g * (1 - g))], [E(g * (1 - g)), E((1 - g) ** 2)]])
    m = sp.Matrix([E(y * g), E(y * (1 - g))])
    return M, m


def phase3_series_display(lengths: str = "positive"):
    """[(lhs, LaTeX)] of the five distinct entries of M and m as SymPy writes the double series."""
    M, m = phase3_series(lengths)
    entries = [("M_{11}", M[0, 0]), ("M_{12} = M_{21}", M[0, 1]), ("M_{22}", M[1, 1]), ("m_1", m[0]), ("m_2", m[1])]
    return [(lhs, sp.latex(e)) for lhs, e in entries]


def phase3_symbols():
    """The matrix symbols (M, m, D, beta_0) of the phase-3 closed forms."""
    return (sp.MatrixSymbol("M", 2, 2), sp.MatrixSymbol("m", 2, 1), sp.MatrixSymbol("D", 2, 2),
            sp.MatrixSymbol("beta_0", 2, 1))


def phase3_closed_form(T=sp.Symbol("T", integer=True, nonnegative=True)):
    """beta_T = beta* + (I - eta_3 D M)^T (beta_0 - beta*), beta* = M^{-1} m (when M is invertible).

    beta_0 = beta^(1) (phase 3 starts from the phase-1 output weights), D = diag(1, 1/(d-1)).
    """
    Ms, ms, Ds, b0 = phase3_symbols()
    bstar = Ms.I * ms
    return bstar + sp.MatPow(sp.Identity(2) - eta3 * Ds * Ms, T) * (b0 - bstar)


def phase3_gradient(T=sp.Symbol("T", integer=True, nonnegative=True)):
    """Per-coordinate output gradient after t = T phase-3 steps: D (M beta_T - m) = D M (I - eta_3 D M)^T (beta_0 - beta*).

    At T = 0 it is the output gradient at (alpha^(2), beta^(1)), the start of phase 3.
    """
    Ms, ms, Ds, b0 = phase3_symbols()
    bstar = Ms.I * ms
    return Ds * Ms * sp.MatPow(sp.Identity(2) - eta3 * Ds * Ms, T) * (b0 - bstar)


def phase3_display():
    """[(title, LaTeX)] of the phase-3 matrix closed forms, for the docs and the LaTeX export."""
    T = sp.Symbol("T", integer=True, nonnegative=True)
    return [
        ("Phase 3: output weights after T steps", r"\beta^{(2+T)} = " + sp.latex(phase3_closed_form(T))),
        ("Phase 3: per-coordinate output gradient after T steps", r"\nabla_{\beta} R(\alpha^{(2)}, \beta^{(2+T)}) = "
         + sp.latex(phase3_gradient(T))),
    ]


# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Derivation:
    """A named derived expression for the docs and LaTeX export."""

    key: str
    title: str
    lhs: str  # LaTeX of the left-hand side
    expr: object
    note: str = ""
    display: str = ""  # LaTeX shown instead of the expanded expr (expr is still what gets evaluated)


def all_derivations(lengths: str = "positive") -> list[Derivation]:
    """Every derived expression, in the order the docs present them."""
    check_variant(lengths)
    zg = zero_init_gradients(lengths)
    zgl = zero_init_gradients(lengths, "logistic")
    b1a, b1b = phase1_beta(lengths)
    g2a, g2b = phase2_attention_gradient(lengths)
    a2a, a2b = phase2_alpha(lengths)
    A_diag, A_all, bq_a, bq_b = uniform_attention_quadratic(lengths)
    pb = balanced_p(lengths)
    out = [
        Derivation("prob_negative", "Probability of the negative class", r"P(y=-1)", prob_no_marked(lengths),
                   "Summed over the geometric length law."),
        Derivation("balanced_p", "Balancing geometric parameter", r"p^\star", pb,
                   "Unique root in (0, 1] of P(y=+1) = 1/2."),
    ]
    for s in (1, 2, 3):
        out.append(Derivation(f"L{s}", f"Inverse length moment L_{s}", rf"L_{s} = \mathbb{{E}}[\mathbf 1\{{n\ge1\}}\, n^{{-{s}}}]",
                              inverse_length_moment(s, lengths)))
    for k in (1, 2, 3):
        out.append(Derivation(f"r{k}", f"Moment of the share r = c/n, order {k}", rf"\mathbb{{E}}[r^{k}]",
                              ratio_moment(k, lengths)))
    out += [
        Derivation("risk_zero", "Risk at zero initialisation (squared loss)", r"R(0,0)",
                   uniform_attention_risk(lengths).subs({beta_a: 0, beta_b: 0})),
        Derivation("grad_beta_a_0", "Output gradient at zero, marked coordinate", r"\partial_{\beta_a} R(0,0)", zg["grad_beta_a"]),
        Derivation("grad_beta_b_0", "Output gradient at zero, each unmarked coordinate", r"\partial_{\beta_b} R(0,0)", zg["grad_beta_b"]),
        Derivation("grad_alpha_0", "Attention gradient at beta = 0 (any alpha)", r"\nabla_{\alpha} R(\alpha,0)", sp.Integer(0),
                   "df/dalpha_k = w_k (beta_k - f) vanishes when beta = 0: attention cannot move first."),
        Derivation("grad_beta_a_0_log", "Logistic variant: output gradient at zero, marked coordinate",
                   r"\partial_{\beta_a} R_{\log}(0,0)", zgl["grad_beta_a"]),
        Derivation("grad_beta_b_0_log", "Logistic variant: output gradient at zero, unmarked coordinate",
                   r"\partial_{\beta_b} R_{\log}(0,0)", zgl["grad_beta_b"]),
        Derivation("beta1_a", "Phase 1: output weight on a", r"\beta^{(1)}_a", b1a),
        Derivation("beta1_b", "Phase 1: output weight on each unmarked symbol", r"\beta^{(1)}_b", b1b),
        Derivation("grad_alpha_a_1", "Phase 2: attention gradient at (0, beta^(1)), marked coordinate",
                   r"\partial_{\alpha_a} R(0,\beta^{(1)})", g2a),
        Derivation("grad_alpha_b_1", "Phase 2: attention gradient at (0, beta^(1)), unmarked coordinate",
                   r"\partial_{\alpha_b} R(0,\beta^{(1)})", g2b),
        Derivation("alpha2_a", "Phase 2: attention weight on a", r"\alpha^{(2)}_a", a2a),
        Derivation("alpha2_b", "Phase 2: attention weight on each unmarked symbol", r"\alpha^{(2)}_b", a2b),
        Derivation("kappa", "Phase 2: attention gap per unit eta_2", r"\kappa(\eta_1) = (\alpha^{(2)}_a-\alpha^{(2)}_b)/\eta_2",
                   attention_gap_rate(lengths)),
        Derivation("kappa_balanced", "Phase 2 gap rate at the balancing p", r"\kappa(\eta_1)\big|_{p=p^\star}",
                   sp.simplify(attention_gap_rate(lengths).subs(p, pb))),
        Derivation("A_diag", "Uniform attention quadratic: A = a_I I + a_1 11^T, a_I", r"a_I", A_diag),
        Derivation("A_all", "Uniform attention quadratic: a_1", r"a_{\mathbf 1}", A_all),
        Derivation("b_a", "Uniform attention quadratic: b_a = E[y w_a]", r"b_a", bq_a),
        Derivation("b_b", "Uniform attention quadratic: b_b = E[y w_k], k unmarked", r"b_b", bq_b),
        Derivation("c_general", "Output-only floor c(d, p) = inf_beta R(0, beta)", r"c(d,p)",
                   uniform_attention_min_risk(lengths, balanced=False)),
        Derivation("c_balanced", "Output-only floor at the balancing p", r"c(d)", uniform_attention_min_risk(lengths)),
        Derivation("B2", "Shifted second length moment", r"B_2=\mathbb{E}[\mathbf 1\{n\ge1\}(n-1)^2]",
                   shifted_second_length_moment(lengths)),
        Derivation("floor", "Irreducible risk (empty string, f = 0)", r"R_{\mathrm{floor}}", risk_floor(lengths)),
        Derivation("u_min", "Attention gap sufficient for inf_beta R <= floor + epsilon/2", r"u_{\min}(\epsilon)",
                   u_min(lengths)),
        Derivation("eta2_min", "Phase-2 step size sufficient for that gap", r"\eta_2^{\min}(\epsilon,\eta_1)", eta2_min(lengths),
                   "With u_min and kappa as above; any larger eta_2 gives a larger gap.",
                   display=r"\frac{\max(\ln u_{\min}(\epsilon),\, 0)}{\kappa(\eta_1)}"),
    ]
    return out
