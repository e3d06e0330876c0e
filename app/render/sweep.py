"""Rendering of a readings sweep (``app.commands.sweep``): sweep.json, the tidy tables, the robustness table, heat maps
and one page per reading.

``summarise`` turns the sweep's units into the summary (everything the Markdown needs: the verdict of every
claim under every reading and d, the lag measures, the counts and timings); ``robustness_markdown`` renders
the summary alone, so docs/table1.md is generated from a committed sweep.json without the store.
"""
from __future__ import annotations

import io
import json
import shlex
from collections import Counter
from functools import partial
from pathlib import Path

from numerics.experiments import sweep as sweep_module
from app.render import table1
VERDICTS = ("holds", "does not hold", "undecided", "refused", "not testable", "depends on tuning")
CATEGORIES = tuple(c for c, _ in sweep_module.REASONS) + ("other",)
CAUSES = tuple(c for c, _ in sweep_module.CAUSES) + ("other",)


def summarise(sweep: sweep_module.Sweep) -> dict:
    """The summary of a finished (or partly failed) sweep (``numerics.experiments.sweep.run_sweep``); ``_cells``
    and ``_tidy`` (not saved in sweep.json) carry the cell results and tidy records for the pages and tables
    written beside it."""
    p, outcome = sweep.plan, sweep.outcome
    unit_cpu = sum(outcome.unit_cpu.values())
    specs = {**p.searches, **p.ceilings}
    seed_search = {kk: sk for (sk, _), kk in outcome.seed_keys.items()}  # a seed unit's search: same task and d
    cpu_by = {}
    for k, c in outcome.unit_cpu.items():
        spec = specs.get(k) or (p.searches[seed_search[k]] if k in seed_search else None)
        if spec is not None:
            key = f"d={spec['config']['d']} {spec['task']}" + (f" (H={spec['heads']})" if spec["task"] == "AND" else "")
            cpu_by[key] = cpu_by.get(key, 0.0) + c
    runs = invocations(sweep.runs)
    failures = [{"key": k, "kind": f["spec"]["kind"], "task": f["spec"]["task"], "heads": f["spec"]["heads"],
                 "plan": f["spec"].get("plan"), "d": f["spec"]["config"]["d"], "error": f["error"],
                 "traceback": f["traceback"]} for k, f in outcome.failed.items()]
    cells, incomplete = sweep.cells, sweep.incomplete
    return {"suite": "occurrence-companion", "version": p.version, "code": sweep.code,
            "readings_file": p.grid.to_dict(), "run_config": sweep.run_config, "default_reading": p.grid.default,
            "configuration_rule": sweep_module.CONFIGURATION_RULE,
            "counts": {"cells": len(cells), "incomplete_cells": len(incomplete), "searches": len(p.searches), "ceilings": len(p.ceilings),
                       "trained": len(outcome.trained), "reused": len(outcome.reused), "failed": len(outcome.failed),
                       "skipped": len(outcome.skipped), "skipped_by_cause": sweep_module.skip_causes(outcome.skipped),
                       "corrupt_retrained": len(outcome.corrupt)},
            "wall_s": outcome.wall_s, "trained_cpu_s": outcome.cpu_s, "units_cpu_s": unit_cpu,
            "units_cpu_s_by": dict(sorted(cpu_by.items())), "runs": runs,
            "runs_wall_s": recorded_wall_s(runs),
            "failures": failures, "cells": cells, "incomplete_cells": incomplete, "_cells": sweep.results,
            "_tidy": sweep.tidy}


LAG_BESIDE = Path("lag_map") / "lag_map.json"
"""Where a sweep's pages look for the lag map beside them, from their folder's parent: docs/sweep/ beside
docs/lag_map/."""


def lag_beside_path(out: Path) -> Path:
    """The lag map record beside the folder ``out`` (``LAG_BESIDE`` in its parent), whether or not ``out``
    exists yet."""
    return Path(out).absolute().parent / LAG_BESIDE


def lag_beside(out: Path) -> list[dict]:
    """The lag map recorded beside the folder ``out`` (``lag_beside_path``) that a sweep's pages are written into (for
    docs/sweep/, docs/lag_map/lag_map.json), as the cost section counts it: its alphabet size, cells, seeds,
    units' CPU, command, commit and whether the checkout was dirty; none when no record is there or it is the
    quick map.  A record that does not parse, or lacks a field, raises (OSError, ValueError, KeyError)."""
    path = lag_beside_path(out)
    if not path.is_file():
        return []
    record = json.loads(path.read_text())
    if record.get("quick"):
        return []
    return [{"what": "lag map", "path": "../lag_map/", "d": record["config"]["d"], "cells": record["cells"],
             "rows": len(record["rows"]), "rhos": len(record["rhos"]), "starts": len(record["start_scales"]),
             "seeds": record["config"]["seeds"], "units_cpu_s": record["units_cpu_s"],
             "command": record.get("command", []), "commit": record.get("commit"), "dirty": bool(record.get("dirty"))}]


def recorded_wall_s(runs: list[dict]) -> float:
    """The summed wall time of the invocations (``invocations``) that recorded their end; a run without
    one (``wall_s`` None) is left out, not counted as 0 or as an error."""
    return sum(r["wall_s"] for r in runs if r.get("wall_s") is not None)


def invocations(lines: list[dict]) -> list[dict]:
    """The sweep invocations of a store's run log, in the order they started: each run's end record (lines
    without an event are end records of older logs), and, for a start record with no end record of the
    same run (its ``run_id``; older start records: the same start time and process), the run without its
    end (``wall_s`` None): one killed by SIGKILL or a crash (Ctrl-C and SIGTERM record their end), or one
    still running."""
    def ident(r):
        return r["run_id"] if "run_id" in r else (r.get("started"), r.get("pid"))

    ends = {ident(r): r for r in lines if r.get("event") == "end"}
    out = []
    for r in lines:
        if "event" not in r:
            out.append(r)
        elif r["event"] == "start":
            end = ends.get(ident(r))
            out.append(end if end is not None else
                       r | {"wall_s": None, "completed": False, "trained": None, "no_end": True})
    return out


# ------------------------------------------------------------------------------------------------
# robustness


def _by_claim(summary: dict, d: int) -> dict:
    """{(row, claim): {reading: verdict dict}} at one d, rows and claims in table order."""
    out: dict = {}
    for cell in summary["cells"]:
        if cell["d"] != d:
            continue
        for v in cell["verdicts"]:
            out.setdefault((v["row"], v["claim"]), {})[cell["reading"]] = v
    return out


def _readings_at(summary: dict, d: int) -> list[str]:
    return [c["reading"] for c in summary["cells"] if c["d"] == d]


def depends_on(verdicts: dict, axes: dict) -> list[str]:
    """The axes along which changing one choice (all else equal) changes a decided verdict: pairs of
    readings that differ in exactly that axis, one holding and the other not, with how many such pairs
    there are and the choices under which the verdict holds in them ("joint (2 pairs; holds under
    shared)": under shared in those pairs, not necessarily in every reading)."""
    out = []
    names = list(verdicts)
    parts = {n: n.split("/") for n in names}
    for i, axis in enumerate(axes):
        flips, pairs = set(), 0
        for x, a in enumerate(names):
            for b in names[x + 1:]:
                pa, pb = parts[a], parts[b]
                if len(pa) != len(axes) or len(pb) != len(axes):
                    continue
                if pa[i] != pb[i] and all(pa[j] == pb[j] for j in range(len(axes)) if j != i):
                    va, vb = verdicts[a]["verdict"], verdicts[b]["verdict"]
                    if {va, vb} == {"holds", "does not hold"}:
                        flips.add(pa[i] if va == "holds" else pb[i])
                        pairs += 1
        if flips:
            out.append(f"{axis} ({pairs} pair{'' if pairs == 1 else 's'}; holds under {', '.join(sorted(flips))})")
    return out


def distinct(per: dict) -> dict:
    """{configuration: verdict}: the verdicts of one (row, claim) over readings, each configuration of the units
    it rests on counted once (``sweep.configuration``; a verdict that records none is its own reading's).  Two
    readings of one configuration read the same evidence, so their verdicts must agree: a ValueError names
    them where they do not (the configuration missed something the verdict reads)."""
    out: dict = {}
    first: dict = {}
    for reading, v in per.items():
        c = v.get("config", reading)
        if c in out and out[c]["verdict"] != v["verdict"]:
            raise ValueError(f"{v['row']}: '{v['claim']}' is {out[c]['verdict']} under {first[c]} and "
                             f"{v['verdict']} under {reading}, which sweep.configuration calls one configuration "
                             f"({c}): it misses something the verdict reads")
        out.setdefault(c, v)
        first.setdefault(c, reading)
    return out


def _earlier(summary: dict, d: int) -> dict:
    """{(configuration, verdict): (row, d)} of every verdict at an alphabet size below ``d`` (the first d each
    pair appears at)."""
    seen: dict = {}
    for cell in sorted(summary["cells"], key=lambda c: c["d"]):
        if cell["d"] >= d:
            continue
        for v in cell["verdicts"]:
            if "config" in v:
                seen.setdefault((v["config"], v["verdict"]), (v["row"], cell["d"]))
    return seen


def repeat_of(summary: dict, d: int, per: dict) -> str | None:
    """"the same configuration and verdicts as <row> at d = <d'>" when every configuration of a (row, claim)
    at ``d`` was already counted at a smaller d with the same verdict (OR at d is occurrence at d/2, trained
    again at its own step-size scale; even pairs does not depend on d), else None: a verdict that differs is
    counted."""
    pairs = [(v.get("config"), v["verdict"]) for v in per.values()]
    seen = _earlier(summary, d)
    if not pairs or not all(pair in seen for pair in pairs):
        return None
    row, dd = seen[pairs[0]]
    return f"{SAME_AS} {row} at d = {dd}"


SAME_AS = "the same configuration and verdicts as"
"""How a (row, claim) counted at a smaller d is named (``repeat_of``)."""


def refused_cell(verdicts: list[dict], n: int) -> str:
    """"k/n" refused, with which plan (or the ceiling) caused each refusal (``sweep.refusal_cause``)."""
    refused = [v for v in verdicts if v["verdict"] == "refused"]
    why = Counter(v.get("cause") or sweep_module.refusal_cause(v["reasons"]) for v in refused)
    return f"{len(refused)}/{n}" + (": " + ", ".join(f"{k} {why[k]}" for k in CAUSES if why[k]) if why else "")


def among_decided(c: Counter) -> str:
    """Holds over the decided verdicts (holds and does not hold), "-" when none is decided."""
    decided = c["holds"] + c["does not hold"]
    return f"{c['holds']}/{decided}" if decided else "-"


def robustness_table(summary: dict, d: int) -> list[str]:
    """One line per (row, claim) at ``d``: counts over its distinct configurations (``distinct``), the refusals
    and who caused them, the share holding among the decided ones, and the axes the verdict changes with; a
    (row, claim) whose every configuration was counted at a smaller d says so and is not counted again."""
    default = summary.get("default_reading")
    axes = summary["readings_file"]["axes"]
    lines = ["| row | paper's claim | default reading | holds | does not hold | undecided | refused (which plan) | "
             "not testable or depends on tuning | holds among decided | verdict changes with |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for (row, claim), per in _by_claim(summary, d).items():
        dv = table1.VERDICT_MARK[per[default]["verdict"]] if default in per else ("not run" if default else "-")
        again = repeat_of(summary, d, per)
        if again:
            lines.append(f"| {row} | {claim} | {dv} | {again}: not counted again | | | | | | |")
            continue
        configs = list(distinct(per).values())
        n = len(configs)
        c = Counter(v["verdict"] for v in configs)
        other = ", ".join(f"{w} {c[w]}" for w in ("not testable", "depends on tuning") if c[w]) or "0"
        dep = "; ".join(depends_on(per, axes)) or "-"
        lines.append(f"| {row} | {claim} | {dv} | {c['holds']}/{n} | {c['does not hold']}/{n} | {c['undecided']}/{n} "
                     f"| {refused_cell(configs, n)} | {other} | {among_decided(c)} | {dep} |")
    return lines


def verdicts_by_d(summary: dict) -> list[str]:
    ds = sorted({c["d"] for c in summary["cells"]})
    default = summary.get("default_reading")
    lines = ["| row | paper's claim | " + " | ".join(f"d = {d}" for d in ds) + " |", "|---|---|" + "---|" * len(ds)]
    keys: list = []
    for d in ds:
        for k in _by_claim(summary, d):
            if k not in keys:
                keys.append(k)
    for k in keys:
        cells = []
        for d in ds:
            per = _by_claim(summary, d).get(k, {})
            if not per:
                cells.append("not run")
                continue
            again = repeat_of(summary, d, per)
            if again:
                cells.append(again)
                continue
            configs = list(distinct(per).values())
            c = Counter(v["verdict"] for v in configs)
            dv = per[default]["verdict"] if default in per else "-"
            extra = "".join(f", {c[w]} {a}" for w, a in (("not testable", "nt"), ("depends on tuning", "dt")) if c[w])
            cells.append(f"{table1.VERDICT_MARK[dv] if dv in table1.VERDICT_MARK else dv} "
                         f"({c['holds']} h, {c['does not hold']} n, {c['undecided']} u, {c['refused']} r{extra} "
                         f"of {len(configs)})")
        lines.append(f"| {k[0]} | {k[1]} | " + " | ".join(cells) + " |")
    return lines


def _num(s: dict | None) -> str:
    return "n/a" if not s else table1.fmt(s)


def lag_side_by_side(summary: dict) -> list[str]:
    """The default reading's lag: t_half of attention and output, and their ratio, under the displacement
    measure and the functional measure side by side, at every d."""
    default = summary.get("default_reading")
    lines = ["| d | row | displacement: t_half att / out | ratio | function: t_half att / out | ratio |",
             "|---|---|---|---|---|---|"]
    for cell in summary["cells"]:
        if cell["reading"] != default:
            continue
        for row, lag in cell["lag"].items():
            dm, fm = lag.get("displacement"), lag.get("function")
            lines.append(f"| {cell['d']} | {row} | "
                         + (f"{_num(dm['t_half_att'])} / {_num(dm['t_half_out'])} | {_num(dm['ratio'])}" if dm else "n/a | n/a")
                         + " | "
                         + (f"{_num(fm['t_half_att'])} / {_num(fm['t_half_out'])} | {_num(fm['ratio'])}" if fm else "n/a | n/a")
                         + " |")
    return lines


def lag_across_readings(summary: dict, d: int) -> list[str]:
    """Per row at one d: the mean t_half ratio (attention / output) of joint GD under the displacement and the
    functional measure, as median [min, max] over its distinct joint-GD configurations (the readings, for a
    summary that records none: ``distinct``), with the share of them where the ratio is above 1 (whatever its
    verdict)."""
    import statistics

    per: dict = {}
    seen: set = set()
    for cell in summary["cells"]:
        if cell["d"] != d:
            continue
        configs = {(v["row"], v["claim"]): v.get("config") for v in cell["verdicts"]}
        for row, lag in cell["lag"].items():
            for m in ("displacement", "function"):
                config = configs.get((row, f"attention lags output under joint GD ({m})"))
                if config is not None and (row, m, config) in seen:
                    continue
                seen.add((row, m, config))
                r = (lag.get(m) or {}).get("ratio") or {}
                if r.get("mean") is not None:
                    per.setdefault(row, {}).setdefault(m, []).append(r["mean"])
    lines = ["| row | displacement ratio: median [min, max] | above 1 | function ratio: median [min, max] | above 1 |",
             "|---|---|---|---|---|"]
    for row, ms in per.items():
        cells = []
        for m in ("displacement", "function"):
            v = ms.get(m, [])
            cells += ([f"{statistics.median(v):.3g} [{min(v):.3g}, {max(v):.3g}]",
                       f"{sum(x > 1 for x in v)}/{len(v)}"] if v else ["n/a", "-"])
        lines.append(f"| {row} | " + " | ".join(cells) + " |")
    return lines


def reading_page_name(reading: str) -> str:
    return f"reading_{table1.slug(reading.replace('=', '_'))}.md"


def _readings(n: int) -> str:
    return f"{n} reading" + ("" if n == 1 else "s")


def default_sentence(summary: dict) -> str:
    """Which reading of the file is the protocol's default (``readings.Grid.default``), or that none is (a
    file whose [base] changes a default, as the quick file's smaller budget does)."""
    default = summary.get("default_reading")
    if default is None:
        return ("No reading of this file is the protocol's default reading (its fields differ from the "
                "defaults), so the tables have no default-reading column to read.")
    return f"The default reading is `{default}`."


COUNTS_NOTE = ("Counts are over distinct configurations, not readings: readings that differ only in choices the "
               "units of a verdict ignore are one configuration (a lag verdict reads joint GD alone, which no "
               "three-phase schedule touches, so the schedule axis multiplies it only where a schedule changes the "
               "row's seeds: a row found bimodal under any plan takes more seeds for every plan). OR at d is "
               "occurrence at d/2 (same length law, p = 2/(d - 2); from the symmetric zero start the output depends "
               "only on the length and the number of marked tokens, whose law is the same, so the risks and t_half "
               "agree up to rounding and only the scale of the chosen step sizes differs) and even pairs does not "
               "depend on d: the sweep trains them again at each d, and each is counted and reported once, at the "
               "first d it appears, where its verdicts are the same. *Refused* says which plan, or the "
               "capacity ceiling, caused each refusal; *holds among decided* is holds over holds and does not hold; "
               "*verdict changes with* names the axes along which changing one choice, all else equal, turns a "
               "verdict between holds and does not hold, with the number of such pairs of readings and the choices "
               "under which it holds in them.")

RECORDED_NOTE = ("These verdicts are the ones the sweep recorded, under the decision rules of the commit it ran at "
                 "(its record names no `decision_rules`, or no configuration per verdict of the current rule, "
                 "which includes each draw's seeds): counts are over readings, "
                 "and a reading counts joint GD once for each three-phase schedule, OR at d is occurrence at d/2 and "
                 "even pairs is the same at every d, so these counts repeat evidence. Rerunning the sweep judges the "
                 "cells under the current rules and counts distinct configurations. *Refused* says which plan, or "
                 "the capacity ceiling, caused each refusal; *holds among decided* is holds over holds and does not "
                 "hold; *verdict changes with* names the axes along which changing one choice, all else equal, turns "
                 "a verdict between holds and does not hold, with the number of such pairs of readings and the "
                 "choices under which it holds in them.")


def counts_note(summary: dict) -> str:
    """COUNTS_NOTE when every recorded verdict names its configuration (the counts are over distinct ones), else
    RECORDED_NOTE (a sweep recorded before verdicts named their configuration: counts over readings)."""
    verdicts = [v for c in summary["cells"] for v in c.get("verdicts", [])]
    return COUNTS_NOTE if verdicts and all("config" in v for v in verdicts) else RECORDED_NOTE


def robustness_markdown(summary: dict, link_prefix: str = "") -> str:
    """The sweep's Markdown: what ran, a robustness table per d, the heat maps, the verdicts across d, the lag
    measures side by side, and links to the per-reading pages (``link_prefix`` + file name)."""
    rf = summary["readings_file"]
    counts = summary["counts"]
    ds = sorted({c["d"] for c in summary["cells"]})
    per_d = {d: len(_readings_at(summary, d)) for d in ds}
    lines = [f"Readings file `{Path(rf['path']).name}` (SHA-256 {rf['sha256'][:12]}): axes "
             + "; ".join(f"{a}: {', '.join(v)}" for a, v in rf["axes"].items())
             + f"; {len(rf['readings'])} readings, {rf['seeds']} reported seeds, tasks {', '.join(rf['tasks'])}. "
             + "Cells run: " + ", ".join(f"d = {d}: {_readings(per_d[d])}" for d in ds) + ".", "",
             (f"The whole grid, its {counts['incomplete_cells']} incomplete cells included: " if
              counts.get("incomplete_cells") else "")
             + f"{counts['searches']} step-size searches and {counts['ceilings']} capacity ceilings (readings share "
             f"the units of the plans they do not change), {counts['trained']} tasks trained and {counts['reused']} "
             f"taken from the store in this run, {counts['failed']} failed; the units' CPU time "
             f"{summary['units_cpu_s'] / 3600:.1f} h"
             + (" (those of the complete cells and those stored so far of the others)" if counts.get("incomplete_cells")
                else "") + ". " + default_sentence(summary), "",
             counts_note(summary), ""]
    for d in ds:
        lines += [f"### Robustness at d = {d} ({_readings(per_d[d])})", "", *robustness_table(summary, d), "",
                  f"![claim x reading at d = {d}]({link_prefix}sweep_heat_d{d}.png)", ""]
    lines += ["### Verdicts across d", "", "Default reading's verdict (counts over distinct configurations: h "
              "holds, n does not hold, u undecided, r refused, nt not testable, dt depends on tuning).", "", *verdicts_by_d(summary), "",
              "### Attention lag: displacement and functional measures side by side", "",
              "Joint GD's t_half of attention and output under the parameter-displacement measure and the "
              "functional measure, default reading. " + table1.LAG_NOTE, "",
              *lag_side_by_side(summary), ""]
    for d in ds:
        lines += [f"Across the {_readings(per_d[d])} at d = {d} (mean ratio over seeds, per distinct joint-GD "
                  "configuration):", "",
                  *lag_across_readings(summary, d), ""]
    lines += ["### Per reading", "",
              "Every reading's plans, risks, lag measures and verdicts: "
              + ", ".join(f"[{r}]({link_prefix}{reading_page_name(r)})" for r in rf["readings"]
                          if any(c["reading"] == r for c in summary["cells"])) + ".", ""]
    if summary.get("incomplete_cells"):
        inc = summary["incomplete_cells"]
        lines += ["### Cells not complete", "", f"{len(inc)} cells (reading, d) had units missing from the store "
                  "when this page was rendered and are left out of every table above: "
                  + "; ".join(incomplete_words(inc, list(summary["readings_file"]["readings"]))) + ".", ""]
    if summary["failures"]:
        lines += ["### Failed tasks", "", "| kind | task | plan | d | error |", "|---|---|---|---|---|"]
        lines += [f"| {f['kind']} | {f['task']} | {f['plan'] or '-'} | {f['d']} | {f['error']} |"
                  for f in summary["failures"]]
        lines.append("")
    return "\n".join(lines)


def incomplete_words(incomplete: list[dict], readings: list[str]) -> list[str]:
    """The incomplete cells, by d: every reading at a d in one phrase (with the rows missing in any of them),
    otherwise each cell with its rows missing."""
    out = []
    for d in sorted({c["d"] for c in incomplete}):
        at = [c for c in incomplete if c["d"] == d]
        if {c["reading"] for c in at} == set(readings) and len(at) == len(readings) > 1:
            rows = sorted({r for c in at for r in c["rows_missing"]})
            out.append(f"every reading ({len(at)}) at d = {d} (rows missing in some: {', '.join(rows)})")
        else:
            out += [f"`{c['reading']}` at d = {d} ({', '.join(c['rows_missing'])})" for c in at]
    return out


def beside_words(summary: dict) -> str:
    """The sentence on the runs committed beside the sweep (``lag_beside``) that its cost counts: each one's
    units' CPU and command, and the grid and them together; empty without any."""
    beside = summary.get("beside") or []
    if not beside:
        return ""
    parts = [f"the {b['what']} in `{b['path']}` (d = {b['d']}, {b['cells']} cells: {b['rows']} rows x {b['rhos']} "
             f"rho x {b['starts']} starts, {b['seeds']} seeds each), {b['units_cpu_s'] / 3600:.2f} h of unit CPU, "
             f"`{shlex.join(b['command'])}` at commit {(b.get('commit') or 'unknown')[:10]}"
             + (" (dirty)" if b.get("dirty") else "") for b in beside]
    total = summary["units_cpu_s"] + sum(b["units_cpu_s"] for b in beside)
    return (" Beside it, " + "; ".join(parts) + f": the grid and what is beside it took {total / 3600:.2f} h of "
            "unit CPU in all.")


def cost_markdown(summary: dict) -> list[str]:
    """What the sweep cost: the wall time of every invocation on its store that ran its units
    (``numerics.experiments.sweep.counts_for``: the same units' code and version, on its readings file or at
    one of its alphabet sizes; a run stopped by Ctrl-C or SIGTERM counts too, one killed by SIGKILL or a crash
    is listed without its wall time), and the units' CPU time by d and task, largest first.  The invocations
    that trained (or left no end record) are listed one by one; those that only rendered from the store are
    counted in one line."""
    runs = summary["runs"]
    listed = [r for r in runs if r.get("wall_s") is None or r.get("trained") != 0]  # None: stopped, count unknown
    renders = [r for r in runs if r not in listed]
    open_runs = sum(r.get("wall_s") is None for r in runs)
    by = sorted(summary["units_cpu_s_by"].items(), key=lambda kv: -kv[1])
    total = summary["units_cpu_s"]
    unknown = (f"; {open_runs} more left no end record (killed by SIGKILL or a crash, or still running) and their "
               "wall time is not in it" if open_runs else "")
    return ["## Cost", "",
            f"{len(runs) - open_runs} invocations of the sweep on this store that ran these units' code (this readings file, or "
            f"another sharing one of its d) took {summary['runs_wall_s'] / 3600:.2f} h "
            f"wall in all (runs stopped by Ctrl-C or SIGTERM included){unknown}; the units took {total / 3600:.2f} h of CPU (one "
            "BLAS thread each)." + beside_words(summary) + " CPU time by d and task (searches, seeds and ceilings "
            "together):", "",
            "| d, task | CPU h | share |", "|---|---|---|",
            *[f"| {k} | {v / 3600:.2f} | {v / total:.0%} |" for k, v in by], "",
            "The invocations that trained:", "",
            "| started (UTC) | command | tasks trained | wall |", "|---|---|---|---|",
            *[f"| {r.get('started', '?')} | `{shlex.join(r.get('command', []))}` | "
              + ("no end record | unknown |" if r.get("wall_s") is None else
                 f"{'not recorded (interrupted)' if r.get('trained') is None else r['trained']} | "
                 f"{r['wall_s'] / 60:.1f} min |") for r in listed], "",
            *([f"and {len(renders)} that trained nothing and only rendered the pages from the store "
               f"({sum(r['wall_s'] for r in renders):.0f} s wall in all).", ""] if renders else [])]


def duration(seconds: float) -> str:
    """A wall time in the unit that reads best: seconds under a minute, minutes under 1.5 h, else hours."""
    if seconds < 60:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


def run_line(summary: dict) -> str:
    """What this invocation did, for the page's header: the tasks it trained, on which cluster and in what
    wall time; or, when it trained nothing, that it rendered from the results store (and what it left out)."""
    c = summary["counts"]
    if c["trained"] == 0:
        left = ""
        if c.get("skipped"):
            causes = c.get("skipped_by_cause") or {}
            words = {"diverged": "seed tasks after a search that diverged at every step size (those plans are refused)",
                     "failed": "seed tasks after a search that failed (those plans are refused)",
                     "not stored": "seed tasks whose search is not in the store",
                     "render only": "tasks not in the store themselves",
                     "other": "tasks for another cause"}
            parts = [f"{causes[k]} {w}" for k, w in words.items() if causes.get(k)]
            missing = c.get("incomplete_cells", 0)
            left = (f"; {c['skipped']} tasks were not run" + (f": {', '.join(parts)}" if parts else "")
                    + (f"; {missing} cells with units missing are left out" if missing
                       else "; no cell has units missing"))
        return (f"this rendering trained nothing: every task it shows came from the results store "
                f"({duration(summary['wall_s'])}{left})")
    return (f"this run trained {c['trained']} tasks in {duration(summary['wall_s'])} wall on "
            f"{summary.get('scheduler', '?')}")


def markdown(summary: dict) -> str:
    return "\n".join(["# Table 1 under every reading of the protocol (sweep)", "",
                      f"occurrence-companion {summary['version']}; commit {summary.get('commit') or 'unknown'}; "
                      f"{run_line(summary)}.", "",
                      robustness_markdown(summary), *cost_markdown(summary)])


def reading_page(summary: dict, reading: str) -> str:
    lines = [f"# Reading {reading}", "", table1.reading_line(summary["readings_file"]["readings"][reading]) + ".", "",
             "Attention lag: " + table1.LAG_NOTE, ""]
    for (r, d), res in sorted(summary["_cells"].items(), key=lambda kv: kv[0][1]):
        if r != reading:
            continue
        cell = next(c for c in summary["cells"] if c["reading"] == r and c["d"] == d)
        lines += [f"## d = {d}", ""]
        if res["rows"]:
            lines += ["### Plans", "", table1.accuracy_note(res), "", *table1.plan_table(res), "",
                      "### Attention lag under joint GD", "",
                      *table1.lag_table(res), ""]
        if cell["missing_rows"]:
            lines += ["Rows not assembled: " + "; ".join(f"{k}: {', '.join(v)}" for k, v in cell["missing_rows"].items()), ""]
        lines += ["### The paper's claims", "", *table1.verdict_table(cell["verdicts"]), ""]
    return "\n".join(lines)


# Okabe-Ito colours: blue against vermillion, which stay apart under red-green colour blindness
COLOURS = {"holds": "#0072b2", "does not hold": "#d55e00", "undecided": "#bbbbbb", "refused": "#f0e442",
           "not testable": "#ffffff", "depends on tuning": "#56b4e9"}
TICK_PT = 8     # tick labels of the heat maps, in points (drawn at 100 dpi)


def column_labels(summary: dict, readings: list[str]) -> list[str]:
    """The heat map's column labels: the readings, the protocol's default reading marked "(default)".

    >>> column_labels({"default_reading": "b"}, ["a", "b"])
    ['a', 'b (default)']
    """
    default = summary.get("default_reading")
    return [r + " (default)" if r == default else r for r in readings]


def short_claim(claim: str) -> str:
    """A claim's label on the heat map."""
    for long, short in (("attention lags output under joint GD", "lag"),
                        ("attention grows almost as fast as the output under joint GD", "lag near 1"),
                        ("the lag is least on even pairs", "least lag"), ("three-phase matches joint GD", "3-phase = joint"),
                        ("three-phase falls short of joint GD", "3-phase < joint"),
                        ("attention-only is competitive (matches three-phase)", "att-only = 3-phase")):
        if claim.startswith(long):
            rest = claim[len(long):].strip()
            return short + (" " + rest.split(":")[0] + (")" if ":" in rest else "") if rest else "")
    return claim


def heat_map(summary: dict, d: int, fh) -> None:
    """Verdict of every (row, claim) under every reading at one d, one coloured cell each."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch, Rectangle

    readings = _readings_at(summary, d)
    claims = list(_by_claim(summary, d).items())
    idx = {v: i for i, v in enumerate(VERDICTS)}
    grid = [[idx[per[r]["verdict"]] if r in per else float("nan") for r in readings] for _, per in claims]
    ylabels = [f"{row}: {short_claim(claim)}" for (row, claim), _ in claims]
    xlabels = column_labels(summary, readings)
    per_char = 0.055 * TICK_PT / 7                          # inches per character of a tick label
    left = 0.3 + per_char * max(len(t) for t in ylabels)
    bottom = 0.6 + per_char * max(len(r) for r in xlabels)
    width, height = 0.24 * len(readings), 0.22 * len(claims)
    W, H = left + width + 1.8, bottom + height + 0.5
    fig = plt.figure(figsize=(W, H))
    ax = fig.add_axes((left / W, bottom / H, width / W, height / H))
    ax.imshow(grid, cmap=ListedColormap([COLOURS[v] for v in VERDICTS]), vmin=-0.5, vmax=len(VERDICTS) - 0.5, aspect="auto",
              interpolation="nearest")
    ax.set_xticks(range(len(readings)), xlabels, rotation=90, fontsize=TICK_PT)
    ax.set_yticks(range(len(claims)), ylabels, fontsize=TICK_PT)
    if summary.get("default_reading") in readings:
        k = readings.index(summary["default_reading"])
        ax.add_patch(Rectangle((k - 0.5, -0.5), 1, len(claims), fill=False, edgecolor="k", lw=2,
                               label="default reading"))
        ax.get_xticklabels()[k].set_fontweight("bold")
    ax.set_xlabel("reading (" + " / ".join(summary["readings_file"]["axes"]) + ")", fontsize=8)
    ax.set_ylabel("row: paper's claim", fontsize=8)
    ax.set_title(f"Verdict of each claim under each reading, d = {d}", fontsize=9)
    handles = [Patch(facecolor=COLOURS[v], edgecolor="0.5", label=v) for v in VERDICTS]  # a white patch needs an edge
    if summary.get("default_reading") in readings:
        handles.append(Patch(fill=False, edgecolor="k", lw=2, label="default reading"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1), fontsize=TICK_PT)
    fig.savefig(fh, format="png", dpi=100)
    plt.close(fig)


def _frame(records: list[dict]):
    import pandas as pd

    return pd.DataFrame.from_records(records, columns=list(sweep_module.TIDY_COLUMNS))


def _verdict_records(summary: dict) -> list[dict]:
    return [{"reading": c["reading"], "d": c["d"], "row": v["row"], "claim": v["claim"], "verdict": v["verdict"],
             "category": v.get("category", ""), "cause": v.get("cause", ""), "outcome": v.get("outcome", ""),
             "draws_agreeing": v.get("draws_agreeing", ""), "config": v.get("config", ""),
             "reasons": "; ".join(v["reasons"]), "evidence": v["evidence"]}
            for c in summary["cells"] for v in c["verdicts"]]


def write(summary: dict, tx) -> list[Path]:
    """Stage every file of the sweep's result in the transaction ``tx`` (committed together)."""
    import pandas as pd

    saved = {k: v for k, v in summary.items() if not k.startswith("_")}
    paths = [tx.write_text("sweep.json", json.dumps(saved, indent=1))]
    frame = _frame(summary["_tidy"])
    paths.append(tx.write_text("tidy.csv", frame.to_csv(index=False)))

    def parquet(fh):
        buf = io.BytesIO()
        frame.to_parquet(buf, engine="pyarrow", index=False)
        fh.write(buf.getvalue())

    paths.append(tx.write("tidy.parquet", parquet))
    paths.append(tx.write_text("verdicts.csv", pd.DataFrame.from_records(
        _verdict_records(summary), columns=["reading", "d", "row", "claim", "verdict", "category", "cause",
                                            "outcome", "draws_agreeing", "config", "reasons",
                                            "evidence"]).to_csv(index=False)))
    for d in sorted({c["d"] for c in summary["cells"]}):
        paths.append(tx.write(f"sweep_heat_d{d}.png", partial(heat_map, summary, d)))
    for r in dict.fromkeys(c["reading"] for c in summary["cells"]):
        paths.append(tx.write_text(reading_page_name(r), reading_page(summary, r)))
    paths.append(tx.write_text("sweep.md", markdown(summary)))
    return paths


def _tidy_records(folder: Path) -> list[dict]:
    """The tidy table of a sweep's output ``folder`` as ``tidy_rows`` wrote it: missing values as None."""
    import pandas as pd

    path = folder / "tidy.parquet"
    frame = pd.read_parquet(path) if path.exists() else pd.read_csv(folder / "tidy.csv", keep_default_na=False,
                                                                      na_values=[""])
    frame = frame.astype(object).where(frame.notna(), None)
    return [{k: (v.item() if hasattr(v, "item") else v) for k, v in rec.items()}
            for rec in frame.to_dict(orient="records")]


def cell_from_tables(summary: dict, cell: dict, tidy: list[dict]) -> dict:
    """The results of one cell of a sweep, as far as its reading page shows them, from the cell's record in
    sweep.json (its rows and plans, each plan's step-size search, the lag measures, rows not assembled) and its
    records of the tidy table (each reported seed's risk, accuracy, steps and end state), in the row and seed
    order the sweep wrote them."""
    from numerics.experiments import runner

    reading = summary["readings_file"]["readings"][cell["reading"]]
    rows = {}
    for name, plans_of in cell["plans"].items():
        recs = [r for r in tidy if r["row"] == name]
        task = recs[0]["task"] if recs else name.split(" ")[0]
        plans = {}
        for plan in plans_of:
            seeds = [r for r in recs if r["plan"] == plan]
            search = plans_of[plan]
            tied = [r["test_acc_tied"] for r in seeds if r["test_acc_tied"] is not None]
            plans[plan] = {"search": {"edge": search["edge"], "insensitive": search["insensitive"]},
                           "chosen": search["chosen"], "seeds": seeds,
                           "risk": runner.stats([r["test_risk"] for r in seeds]),
                           "acc": runner.stats([r["test_acc"] for r in seeds]),
                           "acc_tied": max(tied) if tied else None,
                           "diverged": [r["seed"] for r in seeds if r["diverged"]],
                           "unstable": [r["seed"] for r in seeds if r["unstable"]],
                           "capped": [r["seed"] for r in seeds if r["capped"]],
                           "not_converged": [r["seed"] for r in seeds if not r["converged"]],
                           "steps": runner.stats([r["steps"] for r in seeds]),
                           **({"length_risk": search["length_risk"]} if search.get("length_risk") else {})}
        rows[name] = {"name": name, "task": task, "plans": plans,
                      "loss": summary["run_config"]["icl_loss"] if task == "ICL" else "squared",
                      "lag": cell["lag"][name]}
    return {"reading": reading, "rows": rows, "missing_rows": cell["missing_rows"]}


def from_tables(folder: Path) -> dict:
    """The summary of the sweep whose output ``folder`` holds its tables (sweep.json, and tidy.parquet or, where
    that is absent, tidy.csv), with the cell results and tidy records its pages need: ``write`` renders from it
    the pages the sweep wrote, without the results store.  A sweep.json written before the cells recorded their
    step-size searches is refused; one whose verdicts name configurations of another rule
    (``sweep.CONFIGURATION_RULE``) is counted over readings."""
    summary = json.loads((folder / "sweep.json").read_text())
    if summary.get("configuration_rule") != sweep_module.CONFIGURATION_RULE:  # configurations of another rule
        for cell in summary["cells"]:                                          # are not counted: readings are
            for v in cell.get("verdicts", []):
                v.pop("config", None)
    if any("plans" not in c for c in summary["cells"]):
        raise ValueError(f"{folder / 'sweep.json'} records no step-size searches (cells without 'plans'): its "
                         "pages can be re-rendered only from the results store (sweep --no-train)")
    tidy = _tidy_records(folder)
    by_cell: dict = {}
    for r in tidy:
        by_cell.setdefault((r["reading"], r["d"]), []).append(r)
    summary["_tidy"] = tidy
    summary["_cells"] = {(c["reading"], c["d"]): cell_from_tables(summary, c, by_cell.get((c["reading"], c["d"]), []))
                         for c in summary["cells"]}
    return summary


def summary_text(summary: dict) -> str:
    """The one line a sweep prints at its end.  A corrupt store entry is moved to corrupt/ when it is read,
    and trained again only by a run that trains (not by ``--no-train``)."""
    c = summary["counts"]
    inc = len(summary.get("incomplete_cells", []))
    corrupt = (f"{c['corrupt_retrained']} corrupt store entries moved to corrupt/"
               + (" and retrained" if c["trained"] else "")) if c["corrupt_retrained"] else "no corrupt store entry"
    return (f"sweep: {c['cells']} cells" + (f" complete, {inc} incomplete (units not in the store)" if inc else "")
            + f"; {c['trained']} tasks trained, {c['reused']} from the store, "
            f"{c['failed']} failed, {corrupt}; "
            f"{summary['wall_s'] / 60:.1f} min wall")
