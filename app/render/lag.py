"""docs/lag.md: why attention lags the readout under joint GD from zero, the derivation of the first steps, and
the lag ratio certified per d (``numerics.theorem.lag``).  ``occ-companion docs`` writes it with the other
generated pages (``app.render.report.generated_docs``) and ``docs --check`` fails when it is stale; the page
computes its certified table when rendered (once per process: ``page`` is memoised).
"""
from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path

from numerics.theorem import lag
from numerics.theorem.closed_forms import ClosedForms
from theory import catalogue
from theory.setting import Setting
from theory.validation import SettingError

from app.render.latex import text_with_math

PAGE = Path("docs") / "lag.md"
VALUE_DS = (3, 5, 10, 50, 1000)
"""The d of the table of leading coefficients."""
LONG_BUDGET_DS = (3, 10, 20, 50, 100)
"""The d at which the page estimates the ratio over a budget of 4 d steps (float series)."""
CERTIFICATE = Path("docs") / "certificate" / "certificate.json"
"""The certificate record whose ``lag_crossover`` items the crossover table shows (``occ-companion prove
--lag-crossover``)."""
JOINT_KEYS = ("joint_beta_rate_a", "joint_beta_rate_b", "joint_alpha_step1", "joint_alpha_rate_a",
              "joint_alpha_rate_b", "joint_alpha_rate_a_2", "joint_gap_rate", "joint_gap_rate_balanced",
              "joint_readout_order", "joint_attention_order", "joint_control_order", "small_step_lag_ratio")


def _ratio(res: lag.LagResult) -> str:
    lo, hi = res.ratio_bounds
    if hi is not None and lo == hi:
        return f"{lo.numerator}/{lo.denominator} = {float(lo):.3f}"
    return f"[{float(lo):.3f}, {'inf' if hi is None else f'{float(hi):.3f}'}]"


def _half(h: lag.HalfTime) -> str:
    return str(h.low) if h.decided else f"[{h.low}, {h.high if h.high is not None else '?'}]"


def _cost(res: lag.LagResult) -> str:
    if res.method == "integral":
        return f"{res.evaluations} steps x 3 arb integrals"
    return f"{res.evaluations} steps x the arb series (omitted mass {lag.SERIES_TOL:g})"


def certified_table() -> list[str]:
    """The certified lag ratio at every d of ``numerics.theorem.lag.GRID`` (default budget and shared step)."""
    rows = ["| d | gradients from | precision (bits) | t_half(attention) | t_half(readout) | lag ratio | ratio > 1 |",
            "|---|---|---|---|---|---|---|"]
    for d in lag.GRID:
        res = lag.certify_lag(d)
        rows.append(f"| {d} | {_cost(res)} | {res.prec_bits} | {_half(res.attention)} | {_half(res.readout)} | "
                    f"{_ratio(res)} | {res.verdict} |")
    return rows


def crossover_items(root: Path | None = None) -> tuple[dict | None, list[dict]]:
    """The certificate record of the checkout and its certified ``lag_crossover`` items, by d (none when the
    record is absent or was written without --lag-crossover)."""
    from app.checkout import ROOT

    path = (root or ROOT) / CERTIFICATE
    if not path.exists():
        return None, []
    record = json.loads(path.read_text())
    items = [c for c in record["certificates"] if c["claim"] == "lag_crossover" and c["status"] != "SKIP"]
    return record, sorted(items, key=lambda c: c["d"])


def _bracket(item: dict) -> tuple[int, int]:
    """The grid exponents (k, k + 1) of a PASS item: its ball spans [(5/4)^k, (5/4)^(k + 1)]."""
    mid, rad = item["ball"]
    k = round(math.log(mid - rad) / math.log(lag.CROSSOVER_FACTOR))
    return k, k + 1


def crossover_table(items: list[dict]) -> list[str]:
    """The certified bracket of rho* at each d of the record, with the linear gap G at both ends."""
    factor = lag.CROSSOVER_FACTOR
    rows = [f"| d | rho_low = ({factor})^k | rho_high | certified runs at the two ends | G(rho_low), G(rho_high) | "
            "ratio crosses 1 |", "|---|---|---|---|---|---|"]
    for c in items:
        if c["status"] != "PASS":
            rows.append(f"| {c['d']} | | | {c['note']} | | {c['status']} |")
            continue
        k, _ = _bracket(c)
        lo, hi = factor ** k, factor ** (k + 1)
        gaps = f"{lag.linear_gap(c['d'], lo):.3g}, {lag.linear_gap(c['d'], hi):.3g}"
        rows.append(f"| {c['d']} | {float(lo):.4g} (k = {k}) | {float(hi):.4g} | {c['note']} | {gaps} | "
                    f"yes (PASS) |")
    return rows


def crossover_section(root: Path | None = None) -> list[str]:
    """The crossover rho*(d) from the certificate record, the fitted growth (an estimate) and the leading-order law."""
    record, items = crossover_items(root)
    head = ["### Where the ratio crosses 1 as the attention's step grows", "",
            ("With $\\eta_{\\mathrm{att}} = \\rho\\,\\eta_{\\mathrm{out}}$, $\\eta_{\\mathrm{out}} = 1$ and the same "
             f"budget $T = {lag.DEFAULT_STEPS}$, on the grid $\\rho = (5/4)^k$: the ratio is certified above 1 at "
             "$\\rho_{\\mathrm{low}}$ and not above 1 at $\\rho_{\\mathrm{high}} = \\tfrac54 \\rho_{\\mathrm{low}}$, so "
             "it crosses 1 at some $\\rho^*$ in between (claim `lag_crossover`; the ratio need not be monotone in "
             "$\\rho$, so this is a crossing, found by a float search from $\\rho = 1$ and certified at its two ends "
             "only: `numerics.theorem.lag.certify_crossover`). Each certified run is the trajectory in balls of the "
             "table above; a run whose balls grow wider than "
             f"$2^{{{round(math.log2(lag.RADIUS_CAP))}}}$ is abandoned at once and run again at doubled precision. "
             "$G = \\binom T2 \\rho\\,\\kappa_1(d)$ is the gap $\\alpha_a - \\alpha_b$ the small-step law "
             "predicts at the end of the budget (`numerics.theorem.lag.linear_gap`). Each item's note gives the half "
             "times at both ends, the precision each run needed and what the crossover cost at that d (float search "
             "and certified runs, in CPU seconds)."), ""]
    if record is None or not items:
        return head + [f"No certified crossover in {CERTIFICATE}: run `occ-companion prove --lag-crossover "
                       "--out docs/certificate`.", ""]
    out = head + [f"From `{record['command']}` (the certificate record {CERTIFICATE}):", "",
                  *crossover_table(items), ""]
    points = {c["d"]: tuple(float(lag.CROSSOVER_FACTOR ** k) for k in _bracket(c)) for c in items
              if c["status"] == "PASS"}
    try:
        fit = lag.crossover_fit(points)
    except SettingError:
        return out
    gaps = [lag.linear_gap(d, math.sqrt(lo * hi)) for d, (lo, hi) in sorted(points.items())]
    fitted = gaps[-sum(d >= lag.CROSSOVER_FIT_FROM_D for d in points):]
    out += ["**The growth of $\\rho^*(d)$ (an estimate, not certified).** A least-squares fit of "
            "$\\ln \\rho^*_{\\mathrm{mid}} = \\ln C + a \\ln d$ ($\\rho^*_{\\mathrm{mid}}$ the geometric middle of "
            f"the bracket) over the certified d from {fit['from_d']:.0f} to {fit['to_d']:.0f} gives "
            f"$\\rho^* \\approx {fit['constant']:.3g}\\, d^{{{fit['exponent']:.2f}}}$ (largest residual in "
            f"$\\ln \\rho$: {fit['max_log_residual']:.3f}, against $\\ln(5/4) = 0.22$ for the bracket's width).", "",
            "**The leading-order law.** For small steps both blocks move along fixed directions, the readout like $t$ "
            "and the gap like $\\binom t2$, and the ratio tends to $\\sqrt 2$ *whatever* $\\rho$ is "
            "(`small_step_lag_ratio`): at leading order there is no crossover. The ratio falls to 1 only once the "
            "gap has grown to order 1 within the budget, where the attention concentrates on the marked symbol and "
            "the small-step law ends. The gap the law predicts at $T$ is $G = \\binom T2 \\rho\\,\\kappa_1(d)$ with "
            "$\\kappa_1(d) = ((d-2) - \\ln(d-1))/(d(d-1)(d-2))$, so the crossover sits near a fixed $G^*$: "
            "$\\rho^*(d) \\approx G^* / (\\binom T2 \\kappa_1(d))$, which is $\\approx 2 G^* d^2 / T^2$ for large d "
            "(exponent 2). At the middles of the brackets $G$ = "
            + ", ".join(f"{g:.3g} (d = {d})" for g, d in zip(gaps, sorted(points))) + f"; from d = "
            f"{fit['from_d']:.0f} on it drifts slowly, from {max(fitted):.2f} to {min(fitted):.2f}, which is why "
            "the fitted exponent is a little below 2. At small d the readout on the marked symbol also saturates "
            "within the budget and the crossover comes at $G \\gg 1$: the law is a large-d law.", "",
            "At large d the upper end of each bracket has both half times late in the budget and within a step of "
            "each other, while at the lower end the readout's comes far earlier (the table): once the attention "
            "concentrates, the readout's largest moves come in the same last steps, so both blocks pass half their "
            "displacement together and the ratio reaches 1 rather than the attention running ahead early.", ""]
    return out


def long_budget_table() -> list[str]:
    """Float estimates of the ratio over budgets of T = 50 and T = 4 d steps (not certified)."""
    rows = ["| d | T = 50: t_half ratio | T = 4 d | T = 4 d: t_half(attention), t_half(readout) | T = 4 d: ratio |",
            "|---|---|---|---|---|"]
    for d in LONG_BUDGET_DS:
        a50, o50 = lag.float_lag(d, steps=50)
        a, o = lag.float_lag(d, steps=4 * d)
        rows.append(f"| {d} | {a50 / o50:.3f} | {4 * d} | {a}, {o} | {a / o:.3f} |")
    return rows


def value_table() -> list[str]:
    """The leading coefficients at a few d (balancing p, 15 digits)."""
    keys = ("joint_beta_rate_a", "joint_beta_rate_b", "joint_alpha_rate_a", "joint_gap_rate")
    rows = ["| d | " + " | ".join(f"`{k}`" for k in keys) + " |", "|---" * (len(keys) + 1) + "|"]
    for d in VALUE_DS:
        cf = ClosedForms(Setting(d), dps=30)
        rows.append(f"| {d} | " + " | ".join(f"{float(cf.value(k)):.15g}" for k in keys) + " |")
    return rows


INTRO = """\
# Attention lags the readout under joint GD from zero

Generated by `occ-companion docs` from `theory/catalogue.py` (the derivations of `theory/symbolic.py`) and
`numerics/theorem/lag.py` (the certified trajectories); do not edit by hand. The claim is `lag_from_zero` of
the claims table, checked by `checks/test_lag_theory.py`.

Joint gradient descent from $(\\alpha, \\beta) = (0, 0)$ on the squared risk, with one step size per block:
$\\alpha_{t+1} = \\alpha_t - \\eta_{\\mathrm{att}} \\nabla_\\alpha R$, $\\beta_{t+1} = \\beta_t - \\eta_{\\mathrm{out}}
\\nabla_\\beta R$, parameters symmetric in the unmarked symbols ($\\alpha_a, \\alpha_b, \\beta_a, \\beta_b$, gradients
per coordinate of $\\mathbb{R}^d$), geometric lengths at the balancing $p$ unless stated.
"""

MECHANISM = """\
## The mechanism

1. **The attention waits one step.** The derivative of $f$ in an attention weight is the attention on that
   symbol times its output weight minus $f$; at $\\beta = 0$ it vanishes for every $\\alpha$. So the first step
   moves only the readout, by $\\eta_{\\mathrm{out}}$ times the output gradient at zero: first order in the step
   sizes (`joint_readout_order` = 1), while $\\alpha_1 = \\alpha_0 = 0$ (`joint_alpha_step1`).
2. **Then it moves at second order.** At step 2 the attention is still uniform, so its gradient is a polynomial
   in $\\beta_1$, itself proportional to $\\eta_{\\mathrm{out}}$: the move is
   $\\eta_{\\mathrm{att}}\\eta_{\\mathrm{out}}(k_a + \\eta_{\\mathrm{out}} k_a^{(2)})$, of order 2
   (`joint_attention_order`), and the gap $\\alpha_a - \\alpha_b$ opens by $\\eta_{\\mathrm{att}}\\eta_{\\mathrm{out}}
   \\kappa_1$ to first order in $\\eta_{\\mathrm{out}}$, with $\\kappa_1 = ((d-2) - \\ln(d-1)) / (d(d-1)(d-2)) > 0$ at
   the balancing $p$ for every $d \\ge 3$ (as $x - 1 > \\ln x$ for $x = d - 1 > 1$).
3. **For small steps the gap grows like $t^2$, the readout like $t$.** To leading order $\\beta_t = t\\,
   \\eta_{\\mathrm{out}} g$ and the attention gradient is linear in $\\beta$ (it has no term in $\\alpha$ alone), so
   $\\alpha_t = \\binom t2 \\eta_{\\mathrm{att}}\\eta_{\\mathrm{out}} k$. Each block then moves along a fixed direction,
   with displacement ratios $r_\\beta(t) = t/T$ and $r_\\alpha(t) = t(t-1)/(T(T-1))$ over a budget of $T$ steps:
   the half times are $T/2$ and about $T/\\sqrt2$, so the lag ratio tends to $\\sqrt 2$ (`small_step_lag_ratio`),
   whatever $\\eta_{\\mathrm{att}}/\\eta_{\\mathrm{out}}$ is.
4. **The gating is a property of the zero start.** From $\\alpha = 0$ and output weights $\\beta_0$ with
   $\\beta_{0a} \\ne \\beta_{0b}$ the attention gradient is not 0, and the attention moves at the first step, at
   first order in $\\eta_{\\mathrm{att}}$ (`joint_control_order` = 1): the control of the check, where the
   criterion fails.

At finite steps the lag ratio is not $\\sqrt 2$: the readout on $a$ saturates while the gap keeps growing, which
raises it at small $d$, and the unmarked readout weights, whose gradient per coordinate is $1/(d-1)$ of
their class's, keep moving over about $d$ steps and weigh $\\sqrt{d-1}$ times in the norm of $\\mathbb{R}^d$,
which lowers it at large $d$ when the budget is long (the last table).
"""


def page() -> str:
    """The text of docs/lag.md."""
    return _page()


@lru_cache(maxsize=1)
def _page() -> str:
    out = [INTRO, MECHANISM, "## The derivation", "",
           "The first steps from zero at the balancing $p$ and the leading terms for small steps",
           "(`theory.catalogue.joint_display`; the structure of step 2 holds for every $p$ and is checked against the",
           "derivation by `checks/test_lag_theory.py`):", ""]
    for disp in catalogue.joint_display():
        out += [f"**{text_with_math(disp.title, markdown=True)}**", "", "$$", disp.equation, "$$", ""]
    out += ["The coefficients, for every $p$ (docs/derivations.md shows them under the variant too):", ""]
    by_key = {der.key: der for der in catalogue.all_derivations()}
    from app.render.latex import aligned

    for key in JOINT_KEYS:
        der = by_key[key]
        out += [f"**{text_with_math(der.title, markdown=True)}** (`{key}`)", ""]
        if der.note:
            out += [text_with_math(der.note, markdown=True), ""]
        out += ["$$", aligned(der.lhs, der.expr, der.display), "$$", ""]
    out += ["Values at the balancing $p$:", "", *value_table(), ""]
    eta = lag.DEFAULT_ETA
    out += ["## The certified table", "",
            (f"Joint GD from zero with one shared step $\\eta_{{\\mathrm{{att}}}} = \\eta_{{\\mathrm{{out}}}} = {eta}$ over "
             f"a budget of $T = {lag.DEFAULT_STEPS}$ steps (`numerics.theorem.lag.DEFAULT_STEPS`). Displacements are "
             "Euclidean norms in $\\mathbb{R}^d$, $r_P(t) = |P_t - P_0| / |P_T - P_0|$, and $t_{1/2}(P)$ is the first "
             "step with $r_P \\ge 1/2$, as in `numerics/experiments/lag.py`. Every state is an arb ball enclosing the "
             "exact population trajectory (the arb series below "
             f"d = {lag.INTEGRAL_FROM_D}, the integral representation from there on, whose cost per step does not "
             "depend on d); each comparison $4|P_t - P_0|^2 \\ge |P_T - P_0|^2$ is decided on the balls, a half time "
             "the balls leave open is shown as an interval, and the verdict is *holds* only when every ratio the "
             "intervals allow is above 1. A run left undecided is repeated at doubled precision up to "
             f"{lag.MAX_PREC_BITS} bits."), "",
            *certified_table(), "",
            *crossover_section(),
            "### Longer budgets (float estimates, not certified)", "",
            ("The verdict depends on the budget. Over $T = 4d$ steps the unmarked readout weights travel most of their "
             "way and dominate the readout's displacement, and at large $d$ the ratio is no longer above 1. These "
             "numbers come from the float evaluator (`numerics.theorem.lag.float_lag`), whose comparisons are not "
             "checked against its error: they are estimates."), "",
            *long_budget_table(), ""]
    return "\n".join(out).rstrip("\n") + "\n"

