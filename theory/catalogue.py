"""The presentation catalogue: every derived expression with its key, title, note and display form.

``theory.symbolic`` derives; this module only names and presents.  docs/derivations.md, the LaTeX
export, ``values`` and ``ClosedForms.value(key)`` all read :func:`all_derivations`.

Fields of a :class:`Derivation`:

* ``key``: the name used by ``ClosedForms.value``, ``latex --only`` and the claims table;
* ``title`` and ``note``: plain text (no TeX, no Markdown markup), so they render unchanged in
  Markdown, in LaTeX text mode and in a terminal;
* ``lhs``: LaTeX of the left-hand side;
* ``expr``: the derived SymPy expression (what gets evaluated);
* ``display``: LaTeX of the right-hand side as a paper would write it, when SymPy's own printing of
  ``expr`` is not grouped well; then ``form`` is the same grouping as a SymPy expression, and
  ``tests/theory/test_catalogue.py`` checks symbolically that ``form`` equals ``expr``.

>>> [d.key for d in all_derivations()][:3]
['prob_negative', 'balanced_p', 'L1']
>>> entry("eta1_max_balanced").expr
d
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import sympy as sp

from theory import symbolic
from theory.validation import SettingError, check_variant

FORBIDDEN_IN_TEXT = set("<>^_\\$&%#{}~|*`")
"""Characters that titles and notes must not contain outside their formulas (they break Markdown or LaTeX text
mode).  A formula is written between backticks (`` `r = c/n` ``) and becomes inline math (``app.render.latex``)."""
FORBIDDEN_IN_FORMULA = set("\\$&%#{}~|*`")
"""Characters a formula between backticks must not contain (``^``, ``_``, ``<``, ``>`` are its scripts and
relations)."""


@dataclass(frozen=True)
class Derivation:
    """A named derived expression for the docs, the LaTeX export and ``values``."""

    key: str
    title: str  # plain text
    lhs: str  # LaTeX of the left-hand side
    expr: sp.Expr
    note: str = ""  # plain text
    display: str = ""  # LaTeX shown instead of the printed expr (expr is still what gets evaluated)
    form: sp.Expr | None = None  # the grouping of ``display`` as SymPy, checked equal to expr


@dataclass(frozen=True)
class Display:
    """A displayed formula without a value (the phase-3 series and matrix closed forms)."""

    title: str  # plain text
    lhs: str  # LaTeX
    tex: str  # LaTeX of the right-hand side

    @property
    def equation(self) -> str:
        """``lhs = tex``, the LaTeX of the whole display."""
        return f"{self.lhs} = {self.tex}"


def _floor_forms(lengths: str) -> tuple[sp.Expr, str, sp.Expr, str]:
    """Grouped forms of c(d, p) and of c(d) at the balancing p, as SymPy and as LaTeX."""
    d, p = symbolic.d, symbolic.p
    core = 2 * (d - 1) * p / ((d - 1) * p + 1) ** 2 * (1 + (1 - p) / sp.log(p))
    core_tex = r"\frac{2(d-1)\,p}{\big((d-1)p+1\big)^2}\left(1+\frac{1-p}{\ln p}\right)"
    if lengths == "positive":
        bal = (1 - (d - 2) / ((d - 1) * sp.log(d - 1))) / 2
        return core, core_tex, bal, r"\frac12\left(1-\frac{d-2}{(d-1)\ln(d-1)}\right)"
    general = p / 2 + (1 - p) * core
    bal = 1 / (2 * (d + 1)) + (d - 1) / (2 * d) * (1 - d / ((d + 1) * sp.log(d + 1)))
    return (general, r"\frac p2+(1-p)\," + core_tex, bal,
            r"\frac{1}{2(d+1)}+\frac{d-1}{2d}\left(1-\frac{d}{(d+1)\ln(d+1)}\right)")


def all_derivations(lengths: str = "positive") -> list[Derivation]:
    """Every derived expression of the length law ``lengths``, in the order the docs present them."""
    return list(_derivations(check_variant(lengths)))


@lru_cache(maxsize=None)
def _derivations(lengths: str) -> tuple[Derivation, ...]:
    zg = symbolic.zero_init_gradients(lengths)
    zgl = symbolic.zero_init_gradients(lengths, "logistic")
    b1a, b1b = symbolic.phase1_beta(lengths)
    g2a, g2b = symbolic.phase2_attention_gradient(lengths)
    a2a, a2b = symbolic.phase2_alpha(lengths)
    a_diag, a_all, bq_a, bq_b = symbolic.uniform_attention_quadratic(lengths)
    c_form, c_tex, cb_form, cb_tex = _floor_forms(lengths)
    variant_note = ("The floor p/2 of the empty string plus (1 - p) times the default-law floor at the same d and p."
                    if lengths == "nonnegative" else "")
    out = [
        Derivation("prob_negative", "Probability of the negative class", r"P(y=-1)", symbolic.prob_no_marked(lengths),
                   "Summed over the geometric length law."),
        Derivation("balanced_p", "Balancing geometric parameter", r"p^\star", symbolic.balanced_p(lengths),
                   "Unique root in (0, 1] of `P(y = +1) = 1/2`."),
    ]
    for s in (1, 2, 3):
        out.append(Derivation(f"L{s}", f"Inverse length moment of order {s}",
                              rf"L_{s} = \mathbb{{E}}[\mathbf 1\{{n\ge1\}}\, n^{{-{s}}}]",
                              symbolic.inverse_length_moment(s, lengths)))
    for k in (1, 2, 3):
        out.append(Derivation(f"r{k}", f"Moment of order {k} of the share `r = c/n`", rf"\mathbb{{E}}[r^{k}]",
                              symbolic.ratio_moment(k, lengths)))
    out += [
        Derivation("risk_zero", "Risk at zero initialisation (squared loss)", r"R(0,0)", symbolic.zero_init_risk(lengths)),
        Derivation("grad_beta_a_0", "Output gradient at zero, marked coordinate", r"\partial_{\beta_a} R(0,0)",
                   zg["grad_beta_a"]),
        Derivation("grad_beta_b_0", "Output gradient at zero, each unmarked coordinate", r"\partial_{\beta_b} R(0,0)",
                   zg["grad_beta_b"]),
        Derivation("grad_alpha_0", "Attention gradient at zero output weights (any attention)",
                   r"\nabla_{\alpha} R(\alpha,0)", sp.Integer(0),
                   ("The derivative of f in an attention weight is the attention on that symbol times its output weight "
                    "minus f, which vanishes when all output weights are 0: attention cannot move first.")),
        Derivation("grad_beta_a_0_log", "Logistic variant: output gradient at zero, marked coordinate",
                   r"\partial_{\beta_a} R_{\log}(0,0)", zgl["grad_beta_a"]),
        Derivation("grad_beta_b_0_log", "Logistic variant: output gradient at zero, unmarked coordinate",
                   r"\partial_{\beta_b} R_{\log}(0,0)", zgl["grad_beta_b"]),
        Derivation("beta1_a", "Phase 1: output weight on a", r"\beta^{(1)}_a", b1a),
        Derivation("beta1_b", "Phase 1: output weight on each unmarked symbol", r"\beta^{(1)}_b", b1b),
        Derivation("eta1_max", "Largest admissible phase-1 step size", r"\eta_1^{\max}", symbolic.eta1_max(lengths),
                   "Below it both phase-1 output weights stay under 1, so the attention step raises the weight on a."),
        Derivation("eta1_max_balanced", "Largest admissible phase-1 step size at the balancing p",
                   r"\eta_1^{\max}\big|_{p=p^\star}", symbolic.eta1_max_balanced(lengths)),
        Derivation("grad_alpha_a_1", "Phase 2: attention gradient after phase 1, marked coordinate",
                   r"\partial_{\alpha_a} R(0,\beta^{(1)})", g2a),
        Derivation("grad_alpha_b_1", "Phase 2: attention gradient after phase 1, unmarked coordinate",
                   r"\partial_{\alpha_b} R(0,\beta^{(1)})", g2b),
        Derivation("alpha2_a", "Phase 2: attention weight on a", r"\alpha^{(2)}_a", a2a),
        Derivation("alpha2_b", "Phase 2: attention weight on each unmarked symbol", r"\alpha^{(2)}_b", a2b),
        Derivation("kappa", "Phase 2: attention gap per unit of the phase-2 step size",
                   r"\kappa(\eta_1) = (\alpha^{(2)}_a-\alpha^{(2)}_b)/\eta_2", symbolic.attention_gap_rate(lengths)),
        Derivation("kappa_balanced", "Phase 2: gap rate at the balancing p", r"\kappa(\eta_1)\big|_{p=p^\star}",
                   symbolic.attention_gap_rate_balanced(lengths)),
        Derivation("A_diag", "Uniform-attention quadratic: coefficient of the identity",
                   r"a_I", a_diag, ("`R(0, beta) = beta^T A beta/2 - b^T beta + 1/2`, where the matrix A is this coefficient times the identity "
                    "plus the next one times the all-ones matrix.")),
        Derivation("A_all", "Uniform-attention quadratic: coefficient of the all-ones matrix", r"a_{\mathbf 1}", a_all),
        Derivation("b_a", "Uniform-attention quadratic: linear coefficient on a", r"b_a = \mathbb{E}[y\, w_a]", bq_a),
        Derivation("b_b", "Uniform-attention quadratic: linear coefficient on each unmarked symbol",
                   r"b_b = \mathbb{E}[y\, w_k]", bq_b),
        Derivation("c_general", "Output-only floor `c(d, p)`, the infimum over all output weights of `R(0, beta)`",
                   r"c(d,p)", symbolic.uniform_attention_min_risk(lengths, balanced=False), variant_note,
                   display=c_tex, form=c_form),
        Derivation("c_balanced", "Output-only floor at the balancing p", r"c(d)", symbolic.uniform_attention_min_risk(lengths),
                   display=cb_tex, form=cb_form),
        Derivation("B2", "Shifted second length moment", r"B_2=\mathbb{E}[\mathbf 1\{n\ge1\}(n-1)^2]",
                   symbolic.shifted_second_length_moment(lengths)),
        Derivation("floor", "Irreducible risk (empty string, `f = 0`)", r"R_{\mathrm{floor}}", symbolic.risk_floor(lengths)),
        Derivation("u_min", "Attention ratio sufficient for `inf_beta R <= R_floor + epsilon/2`",
                   r"u_{\min}(\epsilon)", symbolic.u_min(lengths),
                   "u, the exponential of the attention gap, is the ratio of the attention on a to that on an unmarked symbol."),
        Derivation("eta2_min", "Phase-2 step size sufficient for that ratio", r"\eta_2^{\min}(\epsilon,\eta_1)",
                   symbolic.eta2_min(lengths), "With the ratio and the gap rate kappa above; any larger phase-2 step gives a larger gap.",
                   display=r"\frac{\max(\ln u_{\min}(\epsilon),\, 0)}{\kappa(\eta_1)}"),
    ]
    return tuple(out + _joint_derivations(lengths))


def _joint_derivations(lengths: str) -> list[Derivation]:
    """The first steps of joint GD from zero under the step sizes eta_att and eta_out, as coefficients in d and p
    (the steps themselves, polynomials in the step sizes, are displayed by ``joint_display``)."""
    steps = symbolic.joint_first_steps(lengths)
    rates = symbolic.joint_leading_rates(lengths)
    control = symbolic.joint_first_step_from(lengths)
    att, out = r"\eta_{\mathrm{att}}", r"\eta_{\mathrm{out}}"
    move = r"(\alpha_{2,a}-\alpha_{1,a})"
    return [
        Derivation("joint_beta_rate_a", "Joint GD from zero: the readout's first step on a, per unit of its step size",
                   rf"\beta_{{1,a}}/{out}", rates["beta_a"],
                   "The readout moves at first order: after t small steps it has moved by `t eta_out` times this, to leading order."),
        Derivation("joint_beta_rate_b", "Joint GD from zero: the readout's first step on each unmarked symbol",
                   rf"\beta_{{1,b}}/{out}", rates["beta_b"]),
        Derivation("joint_alpha_step1", "Joint GD from zero: the attention's first step",
                   r"\alpha_{1}-\alpha_{0}", steps["alpha1_a"],
                   "The attention gradient vanishes at zero output weights, so the attention stays at 0 for one step."),
        Derivation("joint_alpha_rate_a", "Joint GD from zero: the attention's first move on a, per unit of `eta_att eta_out`",
                   rf"[{att}{out}]\,{move}", rates["alpha_a"],
                   ("The coefficient of the product of the two step sizes in the second step; with the next entry it "
                    "is the whole move, since the step is linear in the attention's step size and quadratic in the "
                    "readout's. After t small steps the attention has moved by `t(t - 1)/2 eta_att eta_out` times "
                    "this, to leading order.")),
        Derivation("joint_alpha_rate_b", "Joint GD from zero: the attention's first move on each unmarked symbol",
                   rf"[{att}{out}]\,(\alpha_{{2,b}}-\alpha_{{1,b}})", rates["alpha_b"]),
        Derivation("joint_alpha_rate_a_2", "Joint GD from zero: the attention's first move on a, second-order part",
                   rf"[{att}{out}^2]\,{move}", rates["alpha_a_2"]),
        Derivation("joint_gap_rate", "Joint GD from zero: the attention gap's first move per unit of `eta_att eta_out`",
                   rf"\kappa_1 = [{att}{out}]\,(\alpha_{{2,a}}-\alpha_{{2,b}})", rates["gap"],
                   "The slope at 0 of the phase-2 gap rate kappa as a function of the phase-1 step size."),
        Derivation("joint_gap_rate_balanced", "Joint GD from zero: that gap rate at the balancing p",
                   r"\kappa_1\big|_{p=p^\star}", symbolic.joint_gap_rate_balanced(lengths)),
        Derivation("joint_readout_order", "Joint GD from zero: order of the readout's first move in the step sizes",
                   rf"\operatorname{{ord}}_{{({att},{out})}}(\beta_1-\beta_0)", symbolic.step_order(steps["beta1_a"]),
                   "The lowest total degree of the move as a polynomial in the two step sizes."),
        Derivation("joint_attention_order", "Joint GD from zero: order of the attention's first move in the step sizes",
                   rf"\operatorname{{ord}}_{{({att},{out})}}(\alpha_2-\alpha_0)", symbolic.step_order(steps["dalpha2_a"]),
                   "Second order: the attention waits one step for the readout, then moves by their product."),
        Derivation("joint_control_order", "Control: order of the attention's first move from a non-zero readout",
                   rf"\operatorname{{ord}}_{{({att},{out})}}(\alpha_1-\alpha_0)\big|_{{\beta_0\neq0}}",
                   symbolic.step_order(control["dalpha1_a"]),
                   ("From `alpha = 0` and output weights `beta_0` whose entries on a and on the unmarked symbols "
                    "differ, the attention moves at the first step, at first order: the gating is a property of the "
                    "zero start.")),
        Derivation("small_step_lag_ratio", "Small-step limit of the lag ratio as the budget grows",
                   r"\lim_{T\to\infty}\lim_{\eta\to0} t_{1/2}(\alpha)/t_{1/2}(\beta)", symbolic.small_step_lag_ratio(),
                   ("To leading order the readout's displacement grows like t and the attention's like t(t - 1), "
                    "whatever the ratio of the two step sizes.")),
    ]


def joint_display(lengths: str = "positive") -> list[Display]:
    """The first steps of joint GD from zero at the balancing p, the small-step leading terms after t steps and
    the structure of the attention's first move (docs/lag.md shows them; checks/test_lag_theory.py checks the
    structure against the derivation)."""
    steps = symbolic.joint_first_steps(lengths)
    lead = symbolic.joint_small_step_leading(lengths)
    pstar = symbolic.balanced_p(lengths)
    att, out = r"\eta_{\mathrm{att}}", r"\eta_{\mathrm{out}}"
    move = r"(\alpha_{2,a}-\alpha_{1,a})"

    def tex(expr):
        expr = sp.factor(sp.simplify(expr.subs(symbolic.p, pstar)))
        return sp.latex(expr, ln_notation=True).replace(r"\eta_{att}", att).replace(r"\eta_{out}", out)

    return [
        Display("Step 1: readout weight on a", r"\beta_{1,a}", tex(steps["beta1_a"])),
        Display("Step 1: readout weight on each unmarked symbol", r"\beta_{1,b}", tex(steps["beta1_b"])),
        Display("Step 1: attention", r"\alpha_{1}", tex(steps["alpha1_a"])),
        Display("Step 2: the attention's move on a, every p (k_a and k_a^(2) are the coefficients "
                "joint_alpha_rate_a and joint_alpha_rate_a_2 below)", move,
                rf"{att}{out}\,\big(k_a + {out}\,k_a^{{(2)}}\big)"),
        Display("After t small steps: the readout on a", r"\beta_{t,a}", tex(lead["beta_a"]) + r" + O(\eta^2)"),
        Display("After t small steps: the attention gap", r"\alpha_{t,a}-\alpha_{t,b}",
                tex(lead["gap"]) + r" + O(\eta^3)"),
    ]


def entry(key: str, lengths: str = "positive") -> Derivation:
    """The catalogue entry ``key``; a SettingError names the known keys otherwise."""
    ders = _derivations(check_variant(lengths))
    for der in ders:
        if der.key == key:
            return der
    raise SettingError(f"unknown closed form {key!r}; known: {sorted(d.key for d in ders)}")


def phase3_series_display(lengths: str = "positive") -> list[Display]:
    """The five distinct entries of M = E[phi phi'] and m = E[y phi] as SymPy writes the double series."""
    M, m = symbolic.phase3_series(lengths)
    entries = [
        ("Phase 3: curvature on the marked coordinate", "M_{11}", M[0, 0]),
        ("Phase 3: cross curvature", "M_{12} = M_{21}", M[0, 1]),
        ("Phase 3: curvature on the unmarked coordinates", "M_{22}", M[1, 1]),
        ("Phase 3: label correlation of the attention on a", "m_1", m[0]),
        ("Phase 3: label correlation of the attention on the unmarked symbols", "m_2", m[1]),
    ]
    return [Display(title, lhs, sp.latex(e, ln_notation=True)) for title, lhs, e in entries]


def phase3_display() -> list[Display]:
    """The phase-3 matrix closed forms (output weights and gradient after T steps)."""
    T = symbolic.T_steps
    return [
        Display("Phase 3: output weights after T steps", r"\beta^{(2+T)}", sp.latex(symbolic.phase3_closed_form(T))),
        Display("Phase 3: per-coordinate output gradient after T steps", r"\nabla_{\beta} R(\alpha^{(2)}, \beta^{(2+T)})",
                sp.latex(symbolic.phase3_gradient(T))),
    ]
