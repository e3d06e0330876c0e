"""docs/lag.md: the paper's claim that attention lags the readout, why it does under joint GD from zero, the
derivation of the first steps, the lag ratio certified per d (``numerics.theorem.lag``), and the lag map of every
Table 1 row (``numerics.experiments.lag_map``, from the record ``occ-companion lag`` writes, ``MAP_RECORD``).
``occ-companion docs`` writes it with the other generated pages (``app.render.report.generated_docs``) and
``docs --check`` fails when it is stale; ``occ-companion lag`` writes it too, with the map's record and figures.
The page computes its certified table when rendered (once per process and record: ``page`` is memoised).
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
MAP_DIR = Path("docs") / "lag_map"
"""The lag map's record and figures, beside the page (``occ-companion lag --out``'s default)."""
MAP_RECORD = MAP_DIR / "lag_map.json"
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


def page(root: Path | None = None) -> str:
    """The text of docs/lag.md of the checkout at ``root`` (its lag map from ``root / MAP_RECORD`` when that
    exists; None: no map)."""
    record = root / MAP_RECORD if root is not None else None
    text = record.read_text() if record is not None and record.exists() else ""
    return _page(text)


def page_with_record(record_text: str) -> str:
    """The page with the lag map of the record's text (what ``page`` renders once the record is committed)."""
    return _page(record_text)


def summary_lines(record: dict) -> list[str]:
    """A few lines for the terminal: per row, rho* of each measure at the first starting scale."""
    scale = str(record["start_scales"][0])
    out = []
    for name, row in record["rows"].items():
        ms = row["scales"][scale]["measures"]
        out.append(f"{name}: " + "; ".join(f"{m} rho = 1 {x['shared']}, rho* {_crossing(x)}" for m, x in ms.items()))
    return out


@lru_cache(maxsize=4)
def _page(record_text: str = "") -> str:
    out = [INTRO, CLAIM, MECHANISM, "## The derivation", "",
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
    if record_text:
        out += map_sections(json.loads(record_text), MAP_DIR.name)
    return "\n".join(out).rstrip("\n") + "\n"



CLAIM = """\
## The paper's claim

The paper states that *attention learning can lag output layer learning*: trained jointly, the readout takes its
share of the risk reduction first and the attention catches up later.  On the occurrence task from the zero
start this page derives why (the mechanism) and certifies the ratio along the exact population trajectory (the
certified table); the lag map at its end measures, on
every row of Table 1, how the lag depends on the one protocol choice it turns on, the ratio
$\\rho = \\eta_{\\mathrm{att}}/\\eta_{\\mathrm{out}}$ of the two blocks' step sizes, and on the readout's start.
"""


# ------------------------------------------------------------------------------------------------
# the lag map (numerics.experiments.lag_map)


MEASURE_NAMES = {"displacement": "displacement", "function": "function", "alignment": "alignment",
                 "attribution": "attribution"}
MEASURE_STYLE = {"displacement": ("#0072B2", "o"), "function": ("#D55E00", "s"), "alignment": ("#009E73", "^"),
                 "attribution": ("#CC79A7", "D")}
"""Colour (Okabe-Ito, colour-blind safe) and marker of each measure in the map's figures."""


def _num(x, digits: int = 3) -> str:
    if x is None:
        return "–"
    if isinstance(x, float) and math.isinf(x):
        return "inf"
    return f"{x:.{digits}g}"


def _rho(x) -> str:
    """A grid value of rho: 1/16 as "1/16", 4 as "4"."""
    if x is None:
        return "–"
    return f"1/{1 / x:.3g}" if x < 1 else f"{x:.3g}"


def slug(name: str) -> str:
    """A row's name as part of a file name: "AND (H=2)" -> "AND_H2"."""
    return "".join(c if c.isalnum() else "_" for c in name.replace("=", "")).strip("_").replace("__", "_")


def figure_name(row: str) -> str:
    return f"lag_{slug(row)}.png"


def _interval(c: dict) -> str:
    if c["mean"] is None:
        return "–"
    if c["low"] is None:
        return f"{_num(c['mean'])} (a seed without a ratio)"
    return f"{_num(c['mean'])} [{_num(c['low'])}, {_num(c['high'])}]"


def _crossing(x: dict) -> str:
    c = x["crossover"]
    if not c["bracketed"]:
        return f"not bracketed (every decided point {c['direction']})" if c["direction"] != "undecided" else \
            "not bracketed (no point decided)"
    more = f"; {len(c['crossings']) - 1} more crossing(s)" if len(c["crossings"]) > 1 else ""
    return f"{_num(c['rho_star'])} in [{_rho(c['bracket'][0])}, {_rho(c['bracket'][1])}], {c['direction']}{more}"


def crossover_rows_table(record: dict, scale: str) -> list[str]:
    """Per row and measure at one starting scale: the ratio at rho = 1, rho* with its bracket, the
    risk-optimal rho and the ratio's side there."""
    rhos = record["rhos"]
    i1 = rhos.index(1.0)
    out = ["| row | measure | ratio at rho = 1 [interval] | side at rho = 1 | rho* (bracket) | risk-optimal rho | "
           "side there |", "|---|---|---|---|---|---|---|"]
    for name, row in record["rows"].items():
        sc = row["scales"].get(scale)
        if sc is None:
            continue
        for m, x in sc["measures"].items():
            opt = x["risk_optimal"]
            out.append(f"| {name} | {m} | {_interval(x['ratio'][i1])} | {x['shared']} | {_crossing(x)} | "
                       f"{_rho(opt['rho'])} | {opt['side']} |")
    return out


def risk_table(record: dict, scale: str) -> list[str]:
    """Per row: the final test risk (mean over seeds) and the chosen common scale eta_out at every rho; a
    choice at the edge of its extended grid is marked "(edge)", a cell with a failed seed "failed"."""
    rhos = record["rhos"]
    out = ["| row | " + " | ".join(f"rho = {_rho(x)}" for x in rhos) + " |", "|---|" + "---|" * len(rhos)]
    for name, row in record["rows"].items():
        sc = row["scales"].get(scale)
        if sc is None:
            continue
        cells = []
        for i, rho in enumerate(rhos):
            if rho in sc["missing"]:
                cells.append("not run")
                continue
            edge = " (edge)" if sc["edge"][i] else ""
            risk = "failed" if rho in sc["diverged"] or sc["risk"][i] is None else _num(sc["risk"][i])
            cells.append(f"{risk}; eta_out {_num(sc['chosen'][i])}{edge}")
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    return out


def scale_table(record: dict) -> list[str]:
    """Per row and measure: the side at rho = 1 and rho* at every starting scale."""
    scales = [str(s) for s in record["start_scales"]]
    out = ["| row | measure | " + " | ".join(f"start {_num(float(s))}: rho = 1; rho*" for s in scales) + " |",
           "|---|---|" + "---|" * len(scales)]
    for name, row in record["rows"].items():
        measures = list(dict.fromkeys(m for s in scales for m in row["scales"][s]["measures"]))
        for m in measures:
            cells = []
            for s in scales:
                x = row["scales"][s]["measures"].get(m)
                if x is None:
                    cells.append("–")
                    continue
                c = x["crossover"]
                cells.append(f"{x['shared']}; " + (_num(c["rho_star"]) if c["bracketed"] else "not bracketed"))
            out.append(f"| {name} | {m} | " + " | ".join(cells) + " |")
    return out


def convention_words(record: dict, scale: str) -> list[str]:
    """One sentence per row: the verdict under one shared rate and under separately tuned rates (the
    risk-optimal rho), counted over the row's measures."""
    out = []
    for name, row in record["rows"].items():
        sc = row["scales"].get(scale)
        if sc is None or not sc["measures"]:
            continue
        ms = sc["measures"]
        shared = [m for m, x in ms.items() if x["shared"] == "lags"]
        opt = next(iter(ms.values()))["risk_optimal"]
        tuned = [m for m, x in ms.items() if x["risk_optimal"]["side"] == "lags"]
        lead = [m for m, x in ms.items() if x["risk_optimal"]["side"] == "leads"]

        def listed(xs):
            return ", ".join(xs) if xs else "none"
        rhos = record["rhos"]
        edge = (" (the grid's edge: the optimum may lie beyond it)" if opt["rho"] in (rhos[0], rhos[-1]) else "")
        out.append(f"* **{name}**: under one shared rate the attention lags by {len(shared)} of the {len(ms)} "
                   f"measures ({listed(shared)}); at the risk-optimal ratio rho = {_rho(opt['rho'])}{edge} it lags "
                   f"by {len(tuned)} ({listed(tuned)}) and leads by {len(lead)} ({listed(lead)}).")
    return out


def overall_words(record: dict, scale: str) -> str:
    """The verdict over every row and measure at one starting scale, in one paragraph."""
    pairs = [(name, m, x) for name, row in record["rows"].items()
             for m, x in row["scales"].get(scale, {"measures": {}})["measures"].items()]
    n = len(pairs)

    def count(pred):
        return sum(1 for p in pairs if pred(p[2]))
    crossings = [x["crossover"]["rho_star"] for _, _, x in pairs if x["crossover"]["bracketed"]]
    falls = count(lambda x: x["crossover"]["bracketed"] and x["crossover"]["direction"] == "lags to leads")
    text = (f"Over the {len(record['rows'])} rows and their {n} (row, measure) pairs: under one shared rate the "
            f"attention lags in {count(lambda x: x['shared'] == 'lags')}, leads in "
            f"{count(lambda x: x['shared'] == 'leads')} and is undecided in {count(lambda x: x['shared'] == 'undecided')}; "
            f"at the risk-optimal ratio it lags in {count(lambda x: x['risk_optimal']['side'] == 'lags')}, leads in "
            f"{count(lambda x: x['risk_optimal']['side'] == 'leads')} and is undecided in "
            f"{count(lambda x: x['risk_optimal']['side'] == 'undecided')}. The ratio crosses 1 within the grid in "
            f"{len(crossings)} pairs ({falls} of them from lagging at small rho to leading at large rho)")
    if crossings:
        text += f", at rho* between {_num(min(crossings))} and {_num(max(crossings))}"
    return text + "."


def remainder_words(record: dict) -> str:
    """The largest share of each row's decrease that the attribution leaves to its remainder."""
    parts = []
    for name, row in record["rows"].items():
        v = [x for sc in row["scales"].values() for x in sc.get("remainder", []) if x is not None]
        parts.append(f"{name} {_num(sorted(v)[len(v) // 2], 2)} ({_num(max(v), 2)})" if v else f"{name} –")
    return ("The attribution's remainder (the higher-order terms of the steps, credited to neither block) as "
            "|remainder| / decrease, the median over each row's cells (the largest over their seeds in each cell) "
            "and, in brackets, the largest: " + ", ".join(parts) + ". On the sampled rows the steps are taken on "
            "mini-batches and the decrease is the validation risk's: the noise of each step raises that risk at "
            "second order, and summed over a run this cost can exceed the net decrease. There the two parts are "
            "larger than the decrease they split, and the attribution's half times say which block lowered the "
            "risk first rather than how the net decrease is shared.")


def map_sections(record: dict, fig_dir: str) -> list[str]:
    """The page's sections on the lag map from its record (``occ-companion lag``), figures under ``fig_dir``."""
    cfg = record["config"]
    r = cfg["reading"]
    scales = [str(s) for s in record["start_scales"]]
    first = _num(record["start_scales"][0])
    quick = record.get("quick")
    out = ["## The lag map on every Table 1 row", "",
           ("Generated by `occ-companion lag" + (" --quick`" if quick else "`") + f" into `{MAP_RECORD}` and the "
            "figures beside it" + (": **a quick run** (a small alphabet, few seeds, short budgets) that shows the "
                                   "shape of the result, not the result at the paper's size" if quick else "") + "."),
           "",
           (f"Joint GD at d = {cfg['d']} with $\\eta_{{\\mathrm{{att}}}} = \\rho\\,\\eta_{{\\mathrm{{out}}}}$ for "
            f"$\\rho$ in {{{', '.join(_rho(x) for x in record['rhos'])}}} ($\\rho = 1$ is the shared rate of the "
            "default reading), the common scale $\\eta_{\\mathrm{out}}$ chosen per $\\rho$ on the tuning seeds by the "
            "reading's extending grid (factor " f"{r['grid_ratio']:g}, centred where Table 1's search centres joint "
            f"GD's rate), budget: plateau rule, at most {r['max_steps']} steps. The readout starts at 0 or at seeded "
            f"normal values of scale {', '.join(_num(x) for x in record['start_scales'][1:]) or '–'} (symmetric over the unmarked symbols on the "
            f"population tasks); the attention at the row's start. Reported seeds: {cfg['seeds']} (one on an exact "
            "population from the zero readout). Measures: `displacement`, `function` and `alignment` (where the "
            "task states its directions) of `numerics/experiments/lag.py`, and `attribution`: each block's "
            "first-order part $-\\sum_t \\nabla_P R \\cdot (P_{t+1} - P_t)$ of the validation risk's decrease, "
            "every step of the run, and $t_{1/2}$ of its cumulative part."), "",
           ("A cell's ratio $t_{1/2}(\\mathrm{attention}) / t_{1/2}(\\mathrm{readout})$ is the mean over seeds with "
            "an interval, the hull of the seeds' intervals (each half time located to within its measure's "
            "resolution). The attention **lags** when the whole interval is above 1, **leads** when it is below 1, "
            "and the cell is *undecided* otherwise. $\\rho^*$ is bracketed by consecutive decided grid points on "
            "opposite sides (undecided points skipped); its value is the bracket's geometric midpoint and its "
            "interval the bracket. The risk-optimal $\\rho$ is the grid point of least final test risk (mean over "
            "seeds): the ratio a protocol that tunes the two rates separately would pick."), "",
           f"### The crossover, readout starting at {first}", "", *crossover_rows_table(record, scales[0]), "",
           f"### The final risk against rho, readout starting at {first}", "",
           "Final test risk (mean over seeds) and the common scale chosen at each $\\rho$:", "",
           *risk_table(record, scales[0]), "",
           "### The verdict under each convention", "",
           ("*One shared rate* is $\\rho = 1$; *separately tuned rates* is the risk-optimal $\\rho$. Readout "
            f"starting at {first}:"), "", overall_words(record, scales[0]), "", *convention_words(record, scales[0]), "",
           remainder_words(record), "",
           "### How the readout's start changes the lag", "",
           "The side of 1 at $\\rho = 1$ and $\\rho^*$ at each starting scale of the readout:", "",
           *scale_table(record), "",
           "### Figures", ""]
    for name in record["rows"]:
        out += [f"![{name}: lag ratio and final risk against rho and against the readout's start]"
                f"({fig_dir}/{figure_name(name)})", ""]
    failed = record.get("failed") or {}
    out += ["### What the run cost", "",
            (f"{record['cells']} cells (row x rho x start), {record['units_cpu_s'] / 60:.1f} CPU minutes of units"
             + (f"; failed cells: {', '.join(failed)}" if failed else "; no cell failed") + "."), ""]
    return out


def figure(record: dict, name: str, path: Path) -> None:
    """The row's figure: left, the lag ratio of each measure (mean, interval as a bar) and the final risk
    against rho, readout starting at the first scale; right, the same at rho = 1 against the readout's start."""
    from app.render.plotting import plain_log_ticks
    from app.render.scope_studies import figure as new_figure
    from app.render.scope_studies import save

    row = record["rows"][name]
    rhos = record["rhos"]
    scales = [str(s) for s in record["start_scales"]]
    fig, (left, right) = new_figure(2, width=5.5, height=4.2)
    i1 = rhos.index(1.0)

    def draw(ax, xs, cells_of, risks, xlabel):
        top = bottom = 1.0
        for m, (colour, marker) in MEASURE_STYLE.items():
            cells = cells_of(m)
            pts = [(x, c) for x, c in zip(xs, cells) if c is not None and c["mean"] is not None]
            if not pts:
                continue
            ys = [c["mean"] for _, c in pts]
            # an interval open above (a half time at the first recorded step) is drawn to 4 times the mean
            lo = [c["mean"] - max(c["low"], c["mean"] / 4) if c["low"] is not None else 0 for _, c in pts]
            hi = [min(c["high"], 4 * c["mean"]) - c["mean"] if c["high"] is not None else 0 for _, c in pts]
            top = max(top, *(y + h for y, h in zip(ys, hi)))
            bottom = min(bottom, *(y - h for y, h in zip(ys, lo)))
            ax.errorbar([x for x, _ in pts], ys, yerr=[lo, hi], color=colour, marker=marker, capsize=3, lw=1.2,
                        label=MEASURE_NAMES[m])
        ax.axhline(1.0, color="grey", ls=":", lw=1)
        ax.set(xlabel=xlabel, ylabel="lag ratio t_half(attention) / t_half(readout)", yscale="log",
               ylim=(bottom / 1.2, top * 1.2))
        plain_log_ticks(ax.yaxis)
        twin = ax.twinx()
        ok = [(x, y) for x, y in zip(xs, risks) if y is not None and y > 0]
        if ok:
            twin.plot([x for x, _ in ok], [y for _, y in ok], color="black", ls="--", lw=1, marker="x",
                      label="final test risk")
            ys = [y for _, y in ok]
            wide = max(ys) > 3 * min(ys)
            twin.set(yscale="log" if wide else "linear", ylabel="final test risk (dashed)")
            if wide:
                plain_log_ticks(twin.yaxis)
        ax.legend(fontsize=7, loc="upper right")

    sc0 = row["scales"][scales[0]]
    draw(left, rhos, lambda m: sc0["measures"][m]["ratio"] if m in sc0["measures"] else [None] * len(rhos),
         sc0["risk"], "rho = eta_att / eta_out")
    left.set_xscale("log")
    left.set_xticks(rhos, [_rho(x) for x in rhos])
    left.set_title(f"{name}: against rho (readout starting at {_num(record['start_scales'][0])})", fontsize=9)
    pos = list(range(len(scales)))

    def at_rho1(m):
        return [row["scales"][s]["measures"][m]["ratio"][i1] if m in row["scales"][s]["measures"] else None
                for s in scales]
    draw(right, pos, at_rho1, [row["scales"][s]["risk"][i1] for s in scales], "readout's starting scale")
    right.set_xticks(pos, [_num(float(s)) for s in scales])
    right.set_title(f"{name}: against the readout's start (rho = 1)", fontsize=9)
    save(fig, path)
