"""Study 5 (sample-complexity constant): its section of docs/scope.md and its figure."""
from __future__ import annotations

import math
import pathlib

import numpy as np

from app.render.plotting import OKABE_ITO
from app.render.scope_studies import figure as _figure
from app.render.scope_studies import num, save, table


def _n_cell(r: dict) -> str:
    if r["censored"] == "above":
        return f"> {r['N_below']}"
    if r["censored"] == "below":
        return f"<= {r['N']}"
    return f"({r['N_below']}, {r['N']}]"


def mean_length(d: int) -> float:
    """E[n], the mean string length of the study's law at alphabet size d (the balanced geometric law on
    {1, 2, ...}, p = 1/(d - 1), so E[n] = 1/p = d - 1): N strings hold about N E[n] tokens."""
    from theory.setting import Setting

    return 1.0 / float(Setting(d).p_value)


def per_ln_d(r: dict) -> tuple[float, float]:
    """The bracket (N_below, N] of N*(d) as multiples K of ln d strings."""
    return r["N_below"] / math.log(r["d"]), r["N"] / math.log(r["d"])


def ln_d_reading(rows: list[dict]) -> dict | None:
    """N*(d) read as K ln d strings: the smallest d from which on one K lies in every bracket (N_below, N] / ln d
    (at least two d), the interval of such K, and the median over those d of the brackets' geometric midpoints
    / ln d; None when no two largest d share such a K."""
    used = [r for r in rows if r["censored"] is None]
    best = None
    for i in range(len(used) - 1):
        tail = used[i:]
        lo = max(per_ln_d(r)[0] for r in tail)
        hi = min(per_ln_d(r)[1] for r in tail)
        if lo < hi:
            mids = sorted(r["N_mid"] / math.log(r["d"]) for r in tail)
            best = {"from_d": tail[0]["d"], "low": lo, "high": hi, "mids": mids,
                    "K": float(np.median(mids)), "below": used[:i]}
            break
    return best


def _two_digits(x: float) -> str:
    """x to two significant digits, in plain digits.

    >>> _two_digits(336.5), _two_digits(1234.0), _two_digits(4.56)
    ('340', '1200', '4.6')
    """
    return f"{float(f'{x:.2g}'):g}" if x < 1e6 else f"{x:.2g}"


def verdict_paragraph(v: dict, table: list[dict]) -> str:
    fits = v["fits"]
    if not fits:
        return "No d has an uncensored N*(d): nothing is fitted."
    f = fits["d ln d"]
    text = f"Estimate, over d = {', '.join(map(str, v['fitted_d']))} ({v['seeds']} seeds per grid point, a grid " \
           f"ratio of {num(v['grid_ratio'])} in N). "
    k = ln_d_reading(table)
    if k is not None:
        below = "; ".join(f"d = {r['d']}: ({num(per_ln_d(r)[0])}, {num(per_ln_d(r)[1])}]" for r in k["below"])
        text += (f"In strings, from d = {k['from_d']} on every bracket holds N = K ln d for K in ({num(k['low'])}, "
                 f"{num(k['high'])}] (the brackets' midpoints give K = {num(k['mids'][0])} to {num(k['mids'][-1])}): "
                 f"N*(d) is about {_two_digits(k['K'])} ln d strings there"
                 + (f", and smaller multiples of ln d below ({below})" if below else "") + ". "
                 f"A string has mean length E[n] = d - 1 under the balanced geometric law, so in tokens N*(d) is "
                 f"about {_two_digits(k['K'])} (d - 1) ln d, close to {_two_digits(k['K'])} d ln d tokens, on that range. ")
    used = [r for r in table if r["censored"] is None]
    lo = max(r["N_below"] / (r["d"] * math.log(r["d"])) for r in used)
    hi = min(r["N"] / (r["d"] * math.log(r["d"])) for r in used)
    fit = (f"the least-squares C of N = C d ln d strings is {num(f['C'])} (the lower and upper ends of the "
           f"brackets give {num(v['bracket']['C_from_lower_ends'])} and {num(v['bracket']['C_from_upper_ends'])})")
    if lo < hi:
        text += f"Against d ln d in strings, every bracket holds N = C d ln d for C in ({num(lo)}, {num(hi)}]: {fit}. "
    else:
        text += (f"Against d ln d in strings, N*/(d ln d) runs from {num(used[0]['C_at_N'])} at the smallest d to "
                 f"{num(used[-1]['C_at_N'])} at the largest, and no one C lies in every bracket: {fit}, a summary "
                 "of this range, not a constant of the law. ")
    text += (f"No interval is given for a power of d: {len(used)} points on a curve that is not a power law do "
             "not support one. ")
    text += "Root mean square log residuals of the one-parameter shapes: " + ", ".join(
        f"{s} {num(x['rms_log_residual'], 2)}" for s, x in fits.items()) + f"; the best shape is {v['best_shape']}. "
    if v["censored"]:
        text += "Left out (crossing outside the grid): " + ", ".join(f"d = {d} ({c})" for d, c in v["censored"].items()) + ". "
    if v["best_shape"] == "d^2":
        text += (f"This contradicts the paper's O(d ln d) wording on this range: d^2 fits with a log residual of "
                 f"{num(fits['d^2']['rms_log_residual'], 2)} against {num(f['rms_log_residual'], 2)} for d ln d. ")
    elif v["best_shape"] != "d ln d":
        text += (f"The paper's O(d ln d) is an upper bound; these runs do not single out d ln d as the shape of "
                 f"N*(d) ({v['best_shape']} fits better among the three), which does not contradict an upper "
                 "bound. ")
    text += f"The suite's checks use C = {v['suite_constant']}."
    return text


def markdown(summary: dict) -> str:
    rows = [[str(r["d"]), _n_cell(r), _ln_d_cell(r), _tokens_cell(r), num(r.get("C_at_N")),
             "n/a" if "rate_interval" not in r else
             f"{num(r['rate_at_N'], 2)} [{num(r['rate_interval'][0], 2)}, {num(r['rate_interval'][1], 2)}]"]
            for r in summary["table"]]
    head = ["d", "N*(d) bracket (strings)", "N* / ln d", "tokens N* E[n] / (d ln d)", "N* / (d ln d)",
            "success rate at N* (Wilson 95%)"]
    lines = ["Smallest N = N_1 = N_3 on the grid from which every larger grid N reaches epsilon in at least 90% of "
             "the seeds (held-out risk + 3 standard errors <= epsilon); N counts strings, and N E[n] tokens (E[n] = "
             "d - 1, the mean length).", ""]
    return "\n".join(lines + table(head, rows) + ["", verdict_paragraph(summary["verdict"], summary["table"]), ""])


def _ln_d_cell(r: dict) -> str:
    if r["censored"] is not None:
        return "n/a"
    lo, hi = per_ln_d(r)
    return f"({num(lo)}, {num(hi)}]"


def _tokens_cell(r: dict) -> str:
    if r["censored"] is not None:
        return "n/a"
    scale = mean_length(r["d"]) / (r["d"] * math.log(r["d"]))
    return f"({num(r['N_below'] * scale)}, {num(r['N'] * scale)}]"


SHAPE_COLOURS = {"d": OKABE_ITO["blue"], "d ln d": OKABE_ITO["vermillion"], "d^2": OKABE_ITO["bluish green"]}


def figure(summary: dict, path: pathlib.Path) -> None:
    fig, (ax,) = _figure(1, width=6.0)
    used = [r for r in summary["table"] if r["censored"] is None]
    ds = np.array([r["d"] for r in used], float)
    ax.errorbar(ds, [r["N_mid"] for r in used],
                yerr=[[r["N_mid"] - r["N_below"] for r in used], [r["N"] - r["N_mid"] for r in used]],
                fmt="o", color="black", capsize=3, label="N*(d): grid bracket")
    if len(ds):
        grid = np.geomspace(ds.min(), ds.max(), 100)
        shapes = {"d ln d": grid * np.log(grid), "d": grid, "d^2": grid * grid}
        for s, fit in summary["verdict"]["fits"].items():
            ax.plot(grid, fit["C"] * shapes[s], label=f"{num(fit['C'])} {s}", color=SHAPE_COLOURS[s])
        k = ln_d_reading(summary["table"])
        if k is not None:
            span = np.geomspace(k["from_d"], ds.max(), 50)
            ax.plot(span, k["K"] * np.log(span), color="black", ls=":",
                    label=f"{_two_digits(k['K'])} ln d (from d = {k['from_d']} on)")
    ax.set(xscale="log", yscale="log", xlabel="alphabet size d", ylabel="samples N = N_1 = N_3 (strings)",
           title="finite-sample three-phase plan: N*(d) and fits")
    ax.legend(fontsize=7)
    save(fig, path)
