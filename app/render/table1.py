"""Rendering of Table 1 results (``numerics.experiments.runner.run``): Markdown and figures.

Everything here is rebuilt from the results dict alone (``--from-json``), so a finished run re-renders without
training.
"""
from __future__ import annotations

import json
import math
import shlex
import textwrap
from functools import partial
from pathlib import Path

import numpy as np

from numerics.experiments import verdicts as verdicts_module
from numerics.experiments.readout import TIE_RTOL
from numerics.experiments.lag import relative_progress
from numerics.experiments.runner import PLANS
VERDICT_MARK = {"holds": "holds", "does not hold": "**does not hold**", "undecided": "undecided",
                "refused": "*refused*", "not testable": "*not testable in this model class*",
                "depends on tuning": "*depends on tuning*"}


def fmt(s: dict, digits: int = 3) -> str:
    """mean ± standard deviation over seeds (the mean alone for one run): the deviation to two significant
    digits, the mean to at most ``digits`` and none finer than the deviation's second (its digits beyond the
    spread of the seeds say nothing), trailing zeros kept; a deviation of 10 or more as a plain integer, and
    the mean too where no decimal is left."""
    if s["mean"] is None:
        return "n/a"
    if s["n"] <= 1:
        return f"{s['mean']:.{digits}g}"
    mean, std = s["mean"], s["std"]
    if not std or not math.isfinite(std) or not math.isfinite(mean):
        return f"{mean:.{digits}g} ± {std:.2g}"
    sd = float(f"{abs(std):.2g}")
    place = math.floor(math.log10(sd)) - 1                               # the deviation's second digit
    if mean != 0:
        place = max(place, math.floor(math.log10(abs(mean))) - digits + 1)
    val = round(mean, -place)
    sd_text = f"{sd:.0f}" if sd >= 10 else f"{sd:#.2g}"                  # 0.090, not 0.09
    if val == 0:
        return f"{0:.{-place}f} ± {sd_text}" if -3 <= place < 0 else f"0 ± {sd_text}"
    if abs(val) < 1e-3:                                                  # 9.0e-07, not 0.00000090
        kept = max(1, math.floor(math.log10(abs(val))) - place + 1)
        return f"{val:{'#' if kept > 1 else ''}.{kept}g} ± {sd_text}"
    return f"{val:.{max(0, -place)}f} ± {sd_text}"


def _rates(chosen: dict | None) -> str:
    if chosen is None:
        return "none (all diverged)"
    names = {"out": "eta_out", "att": "eta_att"}
    return ", ".join(f"{names[k]}={v:.3g}" for k, v in chosen.items())


def _status(pr: dict) -> str:
    n = len(pr["seeds"])
    bits = []
    if pr["diverged"]:
        bits.append(f"diverged {len(pr['diverged'])}/{n}")
    if pr.get("unstable"):
        bits.append(f"unstable {len(pr['unstable'])}/{n}")
    if pr["capped"]:
        bits.append(f"capped {len(pr['capped'])}/{n}")
    nc = [s for s in pr["not_converged"] if s not in pr["capped"] and s not in pr["diverged"]]
    if nc:
        bits.append(f"not converged {len(nc)}/{n}")
    s = pr["search"]
    if s["edge"]:
        bits.append("edge: " + ", ".join(s["edge"]))
    if s["insensitive"]:
        bits.append("step-insensitive")
    return "; ".join(bits) if bits else "converged"


ACCURACY_NOTE = ("Accuracy: a +1 prediction where the output f exceeds the tie margin ({margin} times the largest "
                 "|f| the readout allows on the row's tokens, `engine.TIE_RTOL`), -1 elsewhere (ICL: the first "
                 "class within the margin of the largest output); (tied m): the mass (exact rows) or test fraction "
                 "of strings within the margin, counted by that rule, not by the sign of their output (for a plan, "
                 "the largest over its seeds; a readout still at 0 ties every string).")
OLD_ACCURACY_NOTE = ("Accuracy: a +1 prediction where the output f > 0, -1 elsewhere. This run predates the tie "
                     "rule: strings at f = 0 up to rounding count by the sign rounding gave them, and no tied mass "
                     "is recorded.")


def accuracy_note(results: dict) -> str:
    """How the accuracies of ``results`` were counted: the tie rule when every plan records its tied mass
    (``acc_tied``, None for regression rows), else the plain sign of runs that predate it."""
    recorded = all("acc_tied" in pr for row in results["rows"].values() for pr in row["plans"].values())
    return ACCURACY_NOTE.format(margin=f"{TIE_RTOL:.0e}".replace("e-0", "e-")) if recorded else OLD_ACCURACY_NOTE


def _accuracy(acc, tied) -> str:
    """An accuracy (a number or ``stats``), with its tied mass (the largest of its seeds) when it is above 0
    (``accuracy_note``)."""
    text = fmt(acc) if isinstance(acc, dict) else f"{acc:.3g}"
    return text if not tied else f"{text} (tied {tied:.2g})"


def has_length_risk(results: dict) -> bool:
    """Whether the results measured the plans' risk per length bucket (``runner.length_risk``); results that
    predate it render without the column and the figures."""
    return any(pr.get("length_risk") for row in results["rows"].values() for pr in row["plans"].values())


def longest_bucket(pr: dict) -> str:
    """A plan's held-out risk in its longest length bucket, with the bucket: "0.49 ± 0.01 at n in [491, 981)"."""
    buckets = pr.get("length_risk") or []
    if not buckets:
        return "n/a"
    last = buckets[-1]
    return f"{fmt(last['risk'])} at n in [{last['lo']}, {last['hi']})"


def plan_table(results: dict) -> list[str]:
    lengths = has_length_risk(results)
    out = ["| row | plan | held-out risk | accuracy | steps | status | step sizes |"
           + (" risk, longest strings |" if lengths else ""),
           "|---|---|---|---|---|---|---|" + ("---|" if lengths else "")]
    for name, row in results["rows"].items():
        label = name if row["loss"] == "squared" else f"{name} ({row['loss'].replace('_', '-')})"
        for plan in PLANS:
            pr = row["plans"][plan]
            out.append(f"| {label} | {plan} | {fmt(pr['risk'])} | {_accuracy(pr['acc'], pr.get('acc_tied'))} | "
                       f"{fmt(pr['steps'], 4)} | "
                       f"{_status(pr)} | {_rates(pr['chosen'])} |" + (f" {longest_bucket(pr)} |" if lengths else ""))
    return out


LENGTH_NOTE = ("Risk, longest strings: each plan's trained models on {size} fresh strings per seed whose lengths "
               "follow the training law conditioned on the longest bucket, up to {top:g} times the mean length "
               "(mean over seeds; every bucket in the figures `table1_<row>_lengths.png`).")


def length_note(results: dict) -> str:
    """What the longest-strings column is, for results that measured it; else nothing."""
    if not has_length_risk(results):
        return ""
    cfg = results["config"]
    return " " + LENGTH_NOTE.format(size=cfg.get("length_test_size", "?"), top=max(cfg.get("length_multiples", [0])))


def ceiling_table(results: dict) -> list[str]:
    out = ["| row | start risk | ceiling: best risk reached, in | ceiling accuracy | task's best risk | kind | "
           "representable |", "|---|---|---|---|---|---|---|"]
    for name, row in results["rows"].items():
        c = row.get("ceiling")
        ok, why = verdicts_module.capacity(row)
        start = verdicts_module._start_risk(row)
        start_s = "n/a" if start is None else f"{start:.3g}"
        if not c or "error" in c:
            out.append(f"| {name} | {start_s} | n/a | n/a | n/a | {why} | unknown |")
            continue
        acc = "n/a" if c.get("accuracy") is None else _accuracy(c["accuracy"], (c.get("details") or {}).get("accuracy_tied"))
        label = {True: "yes", False: "no", None: "undecided"}[ok]
        out.append(f"| {name} | {start_s} | [{c['lower']:.3g}, {c['upper']:.3g}] | {acc} | {c['best_risk']:.3g} | "
                   f"{c.get('kind', '')} | {label} |")
    return out


LAG_NOTE = ("t_half: the step at which a block has made half of its progress; mean ± standard deviation over the "
            "reported seeds where it is defined (a bimodal row's further seeds included), and the ratio (attention "
            "over output) is the mean of the seeds' ratios, not the ratio of the means.")


def lag_table(results: dict) -> list[str]:
    out = ["| row | measure | t_half(attention) | t_half(output) | ratio | resolution (steps) |",
           "|---|---|---|---|---|---|"]
    for name, row in results["rows"].items():
        for m, v in row["lag"].items():
            if m == "alignment" and row["task"] == "AND":
                continue  # no ground-truth direction is stated for AND (lag.alignment)
            out.append(f"| {name} | {m} | {fmt(v['t_half_att'])} | {fmt(v['t_half_out'])} | {fmt(v['ratio'])} | "
                       f"{v['resolution']} |")
    return out


def verdict_table(verdicts: list[dict]) -> list[str]:
    """The verdicts with their evidence (the interval, the per-seed count or the lag outcome) and reasons, and
    how many tuning draws give each verdict when there are several."""
    out = ["| row | paper's claim | here | evidence or reasons |", "|---|---|---|---|"]
    for v in verdicts:
        text = v["evidence"]
        if v["reasons"]:
            text = (text + "; " if text else "") + "; ".join(v["reasons"])
        draws = v.get("draws_agreeing", "1/1")
        if not draws.endswith("/1"):
            text += f"; tuning draws giving it: {draws}"
        out.append(f"| {v['row']} | {v['claim']} | {VERDICT_MARK[v['verdict']]} | {text} |")
    return out


def rules_note(results: dict) -> str:
    """The decision rules the verdicts are judged by (``verdicts.rules``), and whether the results recorded
    them (results assembled before the rules were recorded are judged by the current ones)."""
    r = verdicts_module.rules()
    recorded = results.get("decision_rules")
    lo, hi = r["lag_band"]
    where = ("as recorded with the results" if recorded == r else
             "the current rules; the results record other rules" if recorded else
             "the current rules; the results record none")
    return (f"Decision rules, fixed before the run ({where}): confidence bounds are mean ± {r['z']:g} standard errors "
            f"over seeds plus the population error slack; the margin {r['match_share']:g} x the attention effect "
            f"(output-only minus joint GD) has its own interval from the same bounds on that effect; *matches* holds "
            f"when the upper bound of the excess risk is at most the margin's lower bound, does not hold when the "
            f"lower bound of the excess is above the margin's upper bound, and is undecided in between; *falls "
            f"short* is the superiority test on the same intervals; a lag ratio interval above [{lo:g}, {hi:g}] is "
            f"*attention lags*, inside it *no appreciable lag*, below it *attention leads*; *almost as fast* holds "
            f"when the interval is inside the band. With several tuning draws a verdict is decided only when every "
            f"draw gives it.")


def identity_note(results: dict) -> str:
    """The sentence that OR at d is occurrence at d/2, when the results have an OR row; else nothing."""
    d = results["config"]["d"]
    if "OR" not in results["rows"] or d % 2:
        return ""
    return (f"OR at d = {d} is occurrence at d = {d // 2}: both lengths have p = 2/(d - 2) and each token is "
            "marked with probability 2/d, and from the symmetric zero start the output depends only on the "
            "length and the number of marked tokens, so the two rows give the same risks and t_half (only the "
            "scale of the chosen step sizes differs). ")


def reading_line(reading: dict) -> str:
    k2 = reading["k2"]
    return (f"reading **{reading['name']}**: phases k1 = {reading['k1']}, k2 = {k2}"
            f"{' (cap ' + str(reading['phase2_cap']) + ')' if k2 == 'plateau' else ''}; budget {reading['budget']} "
            f"(cap {reading['max_steps']} steps, validation every {reading['eval_every']}, patience "
            f"{reading['patience']}, tol {reading['tol']:g} x R0); joint GD steps {reading['joint_steps']}; "
            f"optimizer {reading['optimizer']}; {reading['tuning_seeds']} tuning seeds; grids of ratio "
            f"{reading['grid_ratio']:g}, {reading['grid_points']} points, up to {reading['max_extensions']} "
            f"extensions a side")


def kernel_note(cfg: dict) -> str:
    """", engine kernel compiled" for a run on the compiled kernel; nothing for the default (numpy) kernel,
    which results that do not name a kernel ran on."""
    kernel = cfg.get("kernel", "numpy")
    return "" if kernel == "numpy" else f", engine kernel {kernel}"


def integral_rows(results: dict) -> list[str]:
    """The rows of ``results`` trained on AND's population by the integral (``and_heads_data="integral"``)."""
    return [name for name, row in results["rows"].items() if row.get("data", {}).get("kind") == "integral"]


def and_data_note(results: dict) -> str:
    """", <rows> on its exact population by the integral" for a run with such rows; nothing otherwise (the
    option's default, sampled, and results that do not name it)."""
    rows = integral_rows(results)
    return f", {' and '.join(rows)} on the exact population by the integral" if rows else ""


def held_out_note(results: dict) -> str:
    """What the held-out risk of each row is."""
    rows = integral_rows(results)
    if rows:
        return ("Held-out risk: exact population risk on the exact rows (occurrence, OR, AND with one head) and, by "
                f"the integral representation, on {' and '.join(rows)} (each plan records the largest quadrature "
                "estimate of its seeds, the error of the same sum at twice the step: pessimistic, not a bound; its "
                "accuracies on the test set), test-set risk otherwise; exact rows are deterministic and run once, "
                "the integral's rows once per seed (their random starts differ). ")
    return ("Held-out risk: exact population risk on the exact rows (occurrence, OR, AND with one head), test-set "
            "risk otherwise; exact rows are deterministic and run once. ")


def markdown(results: dict) -> str:
    """results/table1.md: configuration, reading, the table, ceilings, lag measures and verdicts."""
    cfg = results["config"]
    verdicts = verdicts_module.assess(results)
    lines = ["# Table 1 (reconstruction)", "",
             f"occurrence-companion {results['version']}; commit {results.get('commit') or 'unknown'}; "
             f"command: `{shlex.join(results['command'])}`; {results['elapsed_s']:.0f} s wall, "
             f"{results['cpu_s']:.0f} s CPU.", "",
             f"d = {cfg['d']}, reported seeds = {cfg['seeds']}, batch {cfg['batch']}, validation "
             f"{cfg['val_size']}, test {cfg['test_size']}, two-head init scale {cfg['init_scale']}, ICL loss "
             f"{cfg['icl_loss'].replace('_', '-')}{kernel_note(cfg)}{and_data_note(results)}.", "",
             reading_line(results["reading"]) + ".", "",
             held_out_note(results) + accuracy_note(results) + length_note(results), "",
             "## Plans", "", *plan_table(results), "", "## Capacity ceilings", "", *ceiling_table(results), "",
             "## Attention lag under joint GD", "", LAG_NOTE, "", *lag_table(results), "", "## The paper's claims", "",
             identity_note(results) + rules_note(results), "", *verdict_table(verdicts), ""]
    return "\n".join(lines)


def summary_text(results: dict) -> str:
    """What the command prints: the plan table and the verdicts."""
    return "\n".join(plan_table(results) + [""] + verdict_table(verdicts_module.assess(results)))


def _median_curve(recs: list[dict], key: str = "risk") -> tuple[list, np.ndarray] | None:
    """(steps, median): the median of ``key`` over every seed of ``recs`` with a recorded curve, at every step
    any of them recorded.  Seeds validate at different steps and stop at different steps, so each seed's
    curve is held at its last recorded value from one of its steps to the next and after its end (a stopped
    run keeps its parameters): the median at every step is over the same seeds, and does not jump as seeds
    enter and leave it."""
    curves = [r["curve"] for r in recs if r["curve"]["steps"]]
    if not curves:
        return None
    grid = sorted({s for c in curves for s in c["steps"]})
    pos = {s: j for j, s in enumerate(grid)}
    vals = np.full((len(curves), len(grid)), np.nan)
    for i, c in enumerate(curves):
        for s, v in zip(c["steps"], c[key]):
            if v is not None:
                vals[i, pos[s]] = v
        last = np.nan
        for j in range(pos[c["steps"][0]], len(grid)):
            if np.isnan(vals[i, j]):
                vals[i, j] = last
            else:
                last = vals[i, j]
    with np.errstate(all="ignore"):
        return grid, np.nanmedian(vals, axis=0)


def _lag_panels(row: dict) -> list[tuple[str, object]]:
    """The joint-GD panels of a row's figure, as (title, seed -> {label: (steps, values)}): the displacement
    and function measures when the row has a joint run, and the alignment measure only where the row states a
    ground-truth direction (``lag.alignment``; none for AND), so that no panel is drawn empty."""
    joint = [r for r in row["plans"]["joint"]["seeds"] if "lag" in r]
    if not joint:
        return []
    panels = [("displacement and function", lambda r: {
        "attention displacement": (r["curve"]["steps"], r["alpha_dist"]),
        "output displacement": (r["curve"]["steps"], r["B_dist"]),
        "attention gain (function)": (r["function"]["steps"], r["function"]["gain_att"]),
        "output gain (function)": (r["function"]["steps"], r["function"]["gain_out"])})]
    if row["task"] != "AND" and all(r.get("alignment") for r in joint):
        panels.append(("alignment with ground truth", lambda r: {
            "attention alignment": (r["alignment"]["steps"], r["alignment"]["att"]),
            "output alignment": (r["alignment"]["steps"], r["alignment"]["out"])}))
    return panels


NEGATIVE_GAIN = {"output gain (function)": ("readout", "attention", "risk_output_at_t"),
                 "attention gain (function)": ("attention", "readout", "risk_attention_at_t")}


def negative_gain_note(label: str, joint: list[dict]) -> str:
    """Why the function gain of ``label`` (a key of ``NEGATIVE_GAIN``) goes below 0 on the joint runs ``joint``.

    gain_out(t) = R(alpha_end, B_0) - R(alpha_end, B_t) is below 0 when the readout of step t, put with the
    final attention, does worse than the readout at the start: the readout of step t fits the attention of
    step t, not the final one (and likewise for the attention's gain).  The note gives the worst such risk
    against the start's, and the end gain that divides both: the dip is that mismatch, not a small end value
    blown up by the normalisation."""
    block, other, key = NEGATIVE_GAIN[label]
    runs = [r["function"][key] for r in joint]
    top = max(max(v) for v in runs)
    start = max(v[0] for v in runs)
    end = min(v[0] - v[-1] for v in runs)
    return (f"{label} < 0: the final {other} with the {block} of step t has risk up to {top:.2g} against "
            f"{start:.2g} with the starting {block}, as the {block} of step t fits the {other} of step t; "
            f"the end gain (at least {end:.2g}) divides it")


NEGATIVE_GAIN_SHOWN = -0.02
"""A function gain whose drawn mean goes below this (2 % of its end value) gets a note under the figure."""


def row_figure(name: str, row: dict):
    """One row's figure (a pyplot figure; the caller closes it): risk by plan, and one panel per joint-GD
    measure the row has (``_lag_panels``)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from app.render.plotting import MEASURE_COLOURS, PLAN_COLOURS, plain_log_ticks

    panels = _lag_panels(row)
    fig, axes = plt.subplots(1, 1 + len(panels), figsize=(5 * (1 + len(panels)), 4.6), squeeze=False)
    axes = axes[0]
    ax = axes[0]
    seeds = 0
    for plan in PLANS:
        got = _median_curve(row["plans"][plan]["seeds"])
        if got is not None:
            steps, med = got
            seeds = max(seeds, sum(1 for r in row["plans"][plan]["seeds"] if r["curve"]["steps"]))
            ax.plot(np.maximum(steps, 0.5), med, marker="o", ms=2, label=plan.replace("_", " "),
                    color=PLAN_COLOURS[plan.replace("_", "-")])
    c = row.get("ceiling")
    if c and "error" not in c and c["upper"] > 1e-12:  # a ceiling of 0 has no place on a log axis
        ax.axhline(c["upper"], color="k", ls="--", lw=0.8, label="capacity ceiling (upper bound)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    plain_log_ticks(ax.xaxis)
    plain_log_ticks(ax.yaxis)
    ax.set_xlabel("gradient step (log)")
    ax.set_ylabel(f"held-out risk (median over all {seeds} seeds)" if seeds > 1 else "held-out risk")
    ax.set_title(f"{name}: risk by plan")
    ax.legend(fontsize=7)
    joint = [r for r in row["plans"]["joint"]["seeds"] if "lag" in r]
    notes = []
    for ax, (title, getter) in zip(axes[1:], panels):
        for label in getter(joint[0]):
            curves = []
            for r in joint:
                steps, vals = getter(r)[label]
                curves.append((steps, relative_progress(vals)))
            grid = sorted({s for st, _ in curves for s in st})
            mean = np.nanmean([np.interp(grid, st, v) for st, v in curves], axis=0)
            measure = next(m for m in MEASURE_COLOURS if m in label)
            ax.plot(np.maximum(grid, 0.5), mean, ls="-" if "attention" in label else "--", label=label,
                    color=MEASURE_COLOURS[measure])
            if label in NEGATIVE_GAIN and mean.min() < NEGATIVE_GAIN_SHOWN:
                notes.append(negative_gain_note(label, joint))
        ax.axhline(0.5, color="k", lw=0.8, ls=":")
        ax.set_xscale("log")
        plain_log_ticks(ax.xaxis)
        ax.set_xlabel("joint GD step (log)")
        ax.set_ylabel("relative progress (mean over seeds)")
        ax.set_title(f"joint GD: {title}")
        ax.legend(fontsize=7)
    lines = [line for note in notes for line in textwrap.wrap(note, int(15 * fig.get_figwidth()))]
    if lines:
        fig.text(0.01, 0.01, "\n".join(lines), fontsize=7, va="bottom")
    # fixed margins that fit these labels at this size: tight_layout would draw every figure once more to
    # measure them
    fig.subplots_adjust(left=0.05 * 3 / len(axes), right=0.99, bottom=0.12 + 0.03 * len(lines), top=0.93,
                        wspace=0.25)
    return fig


def figures(results: dict, tx) -> list[Path]:
    """One figure per row (``row_figure``), staged in the transaction ``tx`` (``app.io``)."""
    import matplotlib.pyplot as plt

    paths = []
    for name, row in results["rows"].items():
        fig = row_figure(name, row)
        paths.append(tx.write(f"table1_{slug(name)}.png", partial(_save_png, fig)))
        plt.close(fig)
        if has_length_risk(results):
            fig = length_figure(name, row)
            paths.append(tx.write(f"table1_{slug(name)}_lengths.png", partial(_save_png, fig)))
            plt.close(fig)
    return paths


def length_figure(name: str, row: dict):
    """The row's held-out risk against string length: one line per plan through its buckets' risks (mean over
    seeds, bars one standard deviation), each point at the bucket's geometric middle, on a log length axis
    that marks the training law's mean."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from app.render.plotting import plain_log_ticks

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for plan in PLANS:
        buckets = row["plans"][plan].get("length_risk") or []
        pts = [(np.sqrt(b["lo"] * max(b["hi"] - 1, b["lo"])), b["risk"]["mean"], b["risk"]["std"] or 0.0)
               for b in buckets if b["risk"]["mean"] is not None]
        if pts:
            x, y, e = map(np.asarray, zip(*pts))
            ax.errorbar(x, y, yerr=e, marker="o", ms=3, capsize=2, label=plan.replace("_", " "))
    mean = (row.get("length_buckets") or {}).get("mean_length")
    if mean:
        ax.axvline(mean, color="k", ls=":", lw=0.8, label=f"training mean length {mean:.3g}")
    ax.set_xscale("log")
    plain_log_ticks(ax.xaxis)
    ax.set_xlabel("string length n (log; bucket's geometric middle)")
    ax.set_ylabel("held-out risk (mean over seeds)")
    ax.set_title(f"{name}: risk by string length")
    ax.legend(fontsize=7)
    fig.subplots_adjust(left=0.12, right=0.98, bottom=0.13, top=0.92)
    return fig


def slug(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name).strip("_").replace("__", "_")


def _save_png(fig, fh) -> None:
    fig.savefig(fh, format="png", dpi=90)


def write(results: dict, tx) -> list[Path]:
    """Stage table1.json, the figures and table1.md in the transaction ``tx`` of an ``app.io.OutputFolder``
    (committed together; figures of rows no longer in the results are removed as stale)."""
    js = tx.write_text("table1.json", json.dumps(results, indent=1, allow_nan=False))
    return [js, *figures(results, tx), tx.write_text("table1.md", markdown(results))]
