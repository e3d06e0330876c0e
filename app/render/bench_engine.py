"""The engine benchmark's page (docs/benchmarks_engine.md) from its record (``numerics.bench.engine.measure``).
"""
from __future__ import annotations

import os
import platform

import numpy as np

from numerics.bench.engine import (AGREE_TOL, ANCHOR_TOL, BANK_PAYS, BANK_RUNS, BANK_TARGET, RUNS, SMALL_STRINGS,
                                   bank_gain, bank_met, bank_ratio, best_anchor, fit_exponent, flop_count, row_bounds)
from numerics.experiments.runner import runs_per_call_at


def _x(ratio: float) -> str:
    """A ratio of timings with the two significant digits a shared machine's medians support (4427.5 is
    4400x, 2.74 is 2.7x, 0.346 is 0.35x)."""
    r = float(f"{ratio:.2g}")
    return f"{r:.0f}x" if r >= 10 else f"{r:.1f}x" if r >= 1 else f"{r:.2g}x"


def _x_near(ratio: float, limit: float) -> str:
    """``_x``, with a third digit within 5 % of a target's ``limit`` (3.04 is "3.04x", not a "3.0x" marked
    as missing the 3x target)."""
    return f"{ratio:.3g}x" if abs(ratio / limit - 1) < 0.05 else _x(ratio)


def fixed_cost_text(res: dict) -> str | None:
    """The sentence that compares the ICL step's fixed cost with 3x the FLOP bound at each d (None when the
    result has no fixed-cost measurement or no ICL row)."""
    fc, icl = res.get("icl_fixed_cost"), res["rows"].get("ICL", {})
    if fc is None or not icl:
        return None
    cost = fc["time"][1]
    comp = fc.get("time_compiled", (None, None))[1]

    def part(d, r):
        text = (f"d = {d}: 3x the bound is {_ms(3 * r['flop_seconds'])} ms, the fixed cost alone "
                f"{_x(cost / r['flop_seconds'])} the bound")
        return text + (f" ({_x(comp / r['flop_seconds'])} with the compiled kernel)" if comp else "")
    arith = fc["flops"] / (res["dgemm_gflops_1thread"] * 1e9)
    return (f"The ICL step's fixed cost: at d = {fc['d']} ({fc['flops']:.3g} FLOPs, {arith * 1e6:.2g} us at the "
            f"dgemm rate) one engine step takes {_ms(cost)} ms CPU"
            + (f" ({_ms(comp)} ms with the compiled kernel)" if comp else "")
            + ", the time of its numpy, scipy (and compiled) calls, which the step pays at every d. "
            + "; ".join(part(d, r) for d, r in sorted(icl.items())) + ". Where the fixed cost alone is near or "
            "above 3x the bound, no rearrangement of the same calls can meet that target.")


def parts_text(res: dict) -> list[str]:
    """The section on ICL's step beside its parts (``step_parts``), against the FLOP bound of the row's
    ``engine x1`` at each d; [] without the measurement."""
    parts, icl = res.get("parts") or {}, res["rows"].get("ICL", {})
    got = [(d, p, icl[d]["flop_seconds"]) for d, p in sorted(parts.items()) if d in icl]
    if not got:
        return []
    L = ["## ICL's step, part by part (the default kernel)", "",
         "One run's step beside three of its parts, each timed alone, the four alternately, repeat by repeat "
         "(`step_parts`): `exp`, numpy's exponential of the step's M shifted scores (one a token row); `products`, "
         "the three readout products (as in the compiled kernel's table); `loops`, the three rows loops (the "
         "shifted scores, the normalisation and scatter after a copy of the M exponentials they overwrite, the "
         "score gradient). The default kernel takes its exponentials from numpy and its products from BLAS, and its "
         "loops replay numpy's and scipy's operations in their order: an arrangement of its step that keeps "
         "those calls pays `exp + products`, and loops that keep that order (one that replayed numpy's exp or "
         "BLAS's order in its own code would still pay the M exponentials); `rest`: the step less the three "
         "parts (the loss, f . g, the update, and every call's own cost; the loops' copy of the exponentials "
         "is counted in `loops`). Ratios to the row's FLOP bound above (at the dgemm "
         "rate beside its `engine x1`, an earlier moment of the run). CPU / wall medians in ms.", "",
         "| d | M | step CPU / wall | exp | products | loops | rest (CPU) | exp + products / bound | "
         "exp + products + loops / bound | step / bound |", "|---|---|---|---|---|---|---|---|---|---|"]
    missed = []
    for d, p, fb in got:
        st, ex, pr, lo = (p[k][1] for k in ("step", "exp", "products", "loops"))
        rest = st - ex - pr - lo
        L.append(f"| {d} | {p['M']} | {_cw(p['step'])} | {_cw(p['exp'])} | {_cw(p['products'])} | {_cw(p['loops'])} | "
                 f"{_ms(rest)} | {_x((ex + pr) / fb)} | {_x((ex + pr + lo) / fb)} | {_x(st / fb)} |")
        if st > 3 * fb:  # the target missed here: what is left of 3x the bound beside what cannot move
            left = 3 * fb - ex - pr
            room = (f"which leaves {_ms(left)} ms within 3x the bound for the loops, the loss, the update and every "
                    "call's own cost" if left > 0 else "more than 3x the bound by themselves")
            missed += ["", f"At d = {d} the step takes {_x(st / fb)} the bound. numpy's exponential and the products "
                       f"take {_x((ex + pr) / fb)}, {room}; these loops alone take {_ms(lo)} ms and the rest "
                       f"{_ms(rest)} ms."]
    return L + missed


def fixed_share_text(res: dict) -> list[str]:
    """The section on each rows-loops row's step beside the same step on a small batch (``fixed_share``); []
    without the measurement."""
    if not res.get("fixed_share"):
        return []
    L = ["## The step's fixed cost in a bank of runs", "",
         "The runner steps a bank of runs with one call (a sweep's seed unit: 1 run; Table 1's reported seeds: 4, "
         "one per plan; a step-size search round: 16). `small batch`: the same step, from the same parameters, on "
         f"a batch of {SMALL_STRINGS} strings of the row's task and d that takes the same path (`step_path`: the "
         "rows loops, every string non-empty; `rows`: its token rows). In one chunk of runs (`engine._chunk`; "
         "`chunks`: the row's batch's) it makes the step's calls with little arithmetic; in several, it steps "
         "the runs in slices of the row's chunk, which makes as many calls or more, though not the same ones "
         "(an update a slice in place of the chunks' concatenations). Its time bounds from above what a step "
         "pays for its calls, the Python interpreter's part among them, so `at most` (small batch / step) "
         "bounds that part's share of the step. The bound is loose where the small step still does real "
         "arithmetic: every run's update and dB work on its D x K readout whatever the batch, and at large d two "
         "strings have many token rows. The two arms timed alternately, repeat by repeat; CPU / wall medians "
         "in ms per step (of "
         "all the runs).", "",
         "| row | d | runs | chunks | step CPU / wall | small batch CPU / wall | rows | at most (CPU) |",
         "|---|---|---|---|---|---|---|---|"]
    for row, d, x in _each(res["fixed_share"]):
        L.append(f"| {row} | {d} | {x['runs']} | {x['chunks']} | {_cw(x['step'])} | {_cw(x['small'])} | "
                 f"{x['rows']} | {x['small'][1] / x['step'][1]:.0%} |")
    return L


def _code(line: str) -> str:
    """A source line for a Markdown table cell: without its comment, at most 90 characters, pipes escaped."""
    return line.split("  #")[0].strip()[:90].replace("|", "\\|")


def _each(by_row: dict):
    """(row, d, x) of every measurement x of a result {row: {d: [x, ...]}}, in its order."""
    for row, by_d in by_row.items():
        for d, xs in by_d.items():
            for x in xs:
                yield row, d, x


def _cw(t) -> str:
    """A (wall, CPU) pair of medians in seconds as "CPU / wall" in ms."""
    return f"{_ms(t[1])} / {_ms(t[0])}"


def _ms(x) -> str:
    return "-" if x is None else f"{x * 1e3:.3g}"


def render(record: dict) -> str:
    """The page of one run of the benchmark (``numerics.bench.engine.measure``'s record)."""
    res = record["res"]
    L = _header(res, record["seconds"], record["finished"])
    L += _per_step(res) + _bounds_and_anchors(res) + _numba(res) + _compiled(res) + _seeds(res)
    parts = parts_text(res)
    if parts:
        L += ["", *parts]
    share = fixed_share_text(res)
    if share:
        L += ["", *share]
    L += _sampling(res) + _banks(res)
    L += _and_integral(res) + _growth(res) + _tail(res, record["targets"], record["profiles"], record["lines"])
    return "\n".join(L)


def _header(res: dict, seconds: tuple[float, float], finished) -> list[str]:
    """The title, the settings of the run and the machine's figures."""
    L = ["# Benchmark of the Table 1 engine", "",
         f"Generated by `occ-companion benchmark-engine` on "
         f"{finished.strftime('%Y-%m-%d %H:%M UTC')}, "
         f"{platform.python_implementation()} {platform.python_version()}, numpy {np.__version__}, "
         f"PyTorch {res['torch'] or 'absent'}, {os.cpu_count()} cores (shared); the run took "
         f"{seconds[0]:.0f} s wall, {seconds[1]:.0f} s CPU"
         + (f", at a load average (1 min) of {res['load'][0]:.1f} at its start and {res['load'][-1]:.1f} at its end"
            if res.get("load") and None not in res["load"] else "") + ".", "",
         "One training step = risk and gradients of every run on one batch, then a gradient-descent update. "
         "Exact rows (occurrence, OR, AND (H=1)) step on the whole population of count classes "
         f"(left-out mass {res['mass_tol']:g}, lengths to tail {res['len_tol']:g}; OR and AND in their "
         "a/b-symmetric reduction), as `runner.make_data` builds them; sampled rows on a mini-batch of "
         f"{res['batch']} strings. Every time is the median over {res['repeats']} repeats, in ms per run-step, "
         "CPU / wall, with BLAS on one thread. `engine x8` is one step of 8 runs at once divided by 8. "
         "PyTorch: `numerics.bench.engine.TorchModel` (float64, one thread, autograd), checked against the "
         f"engine to a relative {AGREE_TOL:g} on risk and gradients before timing (`agree`: the largest "
         "difference found). `FLOP bound`: `flop_count` (below) at the one-thread dgemm rate measured beside the "
         "row (a dgemm after each repeat of `engine x1`, median CPU rate; `dgemm beside` in GFLOP/s), so "
         "`engine / bound` compares the two at the same moment of the shared machine; `sampler`: drawing one "
         "batch and its engine layout, paid once per step by the sampled rows. "
         + ("The benchmark's process keeps its temporaries on the heap, as the processes that train Table 1's rows "
            "and the sweep's units do (`allocator.keep_temporaries_on_heap`)." if res.get("heap_setting") else
            "glibc's allocator setting (`allocator.keep_temporaries_on_heap`) was not available: the exact rows' "
            "temporaries may be mapped afresh at every step, as they would be in a Table 1 row on this machine."),
         "",
         f"dgemm ({res['gemm_n']} x {res['gemm_n']}, float64): {res['dgemm_gflops_1thread']:.1f} GFLOP/s on one thread "
         f"by CPU time at the start of the run ({res['dgemm_gflops_1thread_wall']:.1f} by wall time), "
         f"{res['dgemm_gflops_default']:.1f} GFLOP/s by wall time with BLAS's default {res['blas_default_threads']} "
         "threads (one a core, set for the measurement). "
         f"One ICL engine step at d = {res['icl_default_threads']['d']}: "
         f"{_ms(res['icl_default_threads']['time'][1])} ms CPU / {_ms(res['icl_default_threads']['time'][0])} ms "
         f"wall with the default threads, {_ms(res['icl_default_threads']['time_1thread'][1])} / "
         f"{_ms(res['icl_default_threads']['time_1thread'][0])} ms on one thread.", ""]
    if not res["torch"]:
        L += ["**PyTorch is not installed: its column is skipped** (`pip install -e \".[bench]\"`).", ""]
    return L


def _per_step(res: dict) -> list[str]:
    """The table of one step per row and d."""
    ds = res["ds"]
    L: list[str] = []
    L += ["## Per step", "",
          "| row | d | layout | N | engine x1 CPU / wall | engine x8 CPU / wall | PyTorch CPU / wall | "
          "engine / PyTorch (CPU) | agree | FLOPs | dgemm beside | FLOP bound | engine / bound | sampler CPU / wall |",
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row, r in res["rows"].items():
        for d in ds:
            if d not in r:
                continue
            x = r[d]
            e1, e8 = x["engine_1"], x["engine_8"]
            tt = x.get("torch")
            L.append(f"| {row} | {d} | {x['layout']} | {x['N']} | {_ms(e1[1])} / {_ms(e1[0])} | "
                     f"{_ms(e8[1])} / {_ms(e8[0])} | "
                     + (f"{_ms(tt[1])} / {_ms(tt[0])} | {e1[1] / tt[1]:.2f} | {x['agreement']:.0e} | "
                        if tt else "- | - | - | ")
                     + f"{x['flops']:.3g} | {x['dgemm_gflops_beside']:.1f} | {_ms(x['flop_seconds'])} | "
                     f"{_x(e1[1] / x['flop_seconds'])} | "
                     + (f"{_ms(x['sampler'][1])} / {_ms(x['sampler'][0])} |" if x["sampler"] else
                        f"(population built once: {x['build_cpu']:.2f} s CPU) |"))
    return L


def _bounds_and_anchors(res: dict) -> list[str]:
    """Each row's step against the larger of its FLOP and traffic bounds, and against the best of the PyTorch
    programs (``anchors``), with each program's accuracy."""
    if not res.get("bandwidth"):
        return []
    L = ["", "## Bounds and anchors", "",
         f"Memory read rate: {res['bandwidth'] / 1e9:.1f} GB/s by CPU time ({res['bandwidth_wall'] / 1e9:.1f} by wall "
         f"time), numpy's sum of a {res['bandwidth_bytes'] / 2 ** 20:.0f} MB float64 array on one thread at the start "
         "of the run (`memory_bandwidth`: one pass that reads every byte once, from main memory: the array is "
         "eight times the last-level cache). `bytes`: what a step must read of its batch once (`step_bytes`): on "
         "the exact rows, the population in the fused pass's narrow copy (`popstep.narrow`: two counts in the "
         "narrowest integer type that holds them, the target in int8, the weight in float64; the layout holds "
         "32 bytes a class in float64); on the sampled rows, the layout's arrays. `traffic bound`: those bytes at "
         "the read rate (a population that fits the caches can be read faster: the bound is main memory's); "
         "`FLOP bound`: as in the table above; `engine / larger`: `engine x1` by CPU over the larger of the two. "
         "Anchors: PyTorch programs of one run on one thread, each checked against the engine before it is timed "
         "(`agree`: the largest relative difference of risk and gradients, to the engine's size; float64 within "
         f"{ANCHOR_TOL['float64']:g}, float32 within {ANCHOR_TOL['float32']:g}): `padded float64` is the PyTorch "
         "column above; `type-first` (the exact rows) holds the counts as a (T, N) tensor and takes the T scores "
         "and type values once (`TorchTypeFirst`); `per-slot float32` (sampled rows) is the padded program with "
         "its per-slot index lookups in float32. `engine / best`: `engine x1` over the fastest anchor, by CPU. "
         "Times in ms per run-step, CPU.", "",
         "| row | d | bytes | bytes a class | traffic bound | FLOP bound | engine x1 | engine / traffic | "
         "engine / larger | anchors: CPU (agree) | best | engine / best |",
         "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row, r in res["rows"].items():
        for d in res["ds"]:
            x = r.get(d)
            b = None if x is None else row_bounds(res, x)
            if b is None:
                continue
            e = x["engine_1"][1]
            per_class = f"{x['bytes'] / x['N']:.0f}" if x["exact"] else "-"
            anchors = ([f"padded float64 {_ms(x['torch'][1])} ({x['agreement']:.0e})"] if "torch" in x else []) + [
                f"{k} {_ms(v['time'][1])} ({v['agree']:.0e})" for k, v in x.get("anchors", {}).items()]
            best = best_anchor(x)
            L.append(f"| {row} | {d} | {x['bytes']:.3g} | {per_class} | {_ms(b['traffic'])} | {_ms(b['flop'])} | "
                     f"{_ms(e)} | {_x(e / b['traffic'])} | {_x_near(e / b['larger'], 2)} | "
                     + ("; ".join(anchors) or "-") + " | "
                     + (f"{best[0]} | {e / best[1][1]:.2f} |" if best else "- | - |"))
    return L


def _measured(res: dict, key: str) -> list[tuple[str, int, dict]]:
    """(row, d, measurements) of every row and d whose measurements hold ``key``, rows in order, d ascending."""
    return [(row, d, r[d]) for row, r in res["rows"].items() for d in res["ds"] if d in r and key in r[d]]


def _numba(res: dict) -> list[str]:
    """What the numba loops gain on the default kernel."""
    L: list[str] = []
    plain = _measured(res, "numba")
    if plain:
        L += ["", "## What numba gains on the default kernel", "",
              "The default numpy kernel takes numba loops where numba runs (`kernels.usable`): the bag "
              "layout's forward pass for two token types and one output (the exact rows); the rows layout's "
              "passes over one-hot token rows (ICL, two-head AND: the scores less each string's maximum, then, "
              "after numpy's own exponential, the normalisation and the mean tokens; the attention gradient); the "
              "bag layout's score gradient from its pairs of types, summed in one einsum (even pairs); the "
              "squared loss's terms (one output: every row but ICL; several: ICL); the ICL sampler's rounds "
              "and count matrix; and the gather of a sparse table's rows into a sampled batch's layout (ICL, "
              "two-head AND). Each does numpy's (or scipy's) "
              "operations in numpy's order, so the results are the same bits. `numpy only` is the same step of one "
              "run on the same batch (and the sampler on the same draws) with those loops switched off "
              "(`kernels.numpy_paths`: the default kernel as it runs without numba); the two are timed "
              "alternately, repeat by repeat, by the same clock (`with_and_without_loops`; the sampler draws a "
              "fresh step each way, just after an untimed draw, the arms' order swapped every repeat), CPU and "
              "wall medians over the table above's number of repeats in ms per run-step, gains by CPU (so `with "
              "the loops` need not equal that table's `engine x1`, timed beside a dgemm); before timing, the risk, "
              "gradients and outputs of one step (and the batch of one draw and its layout) are checked to be the "
              "same bits with and without. "
              "`gain`: numpy only / with the loops; "
              "`step + sampler`: the gain on what a sampled row pays per step. ICL's sampler takes loops in its "
              "draws and its layout, two-head AND's in its layout only; the other samplers' gains (SLR, even "
              "pairs) compare the same code twice and show how far this shared machine's medians move between "
              "two measurements.", "",
              "| row | d | engine x1 with the loops CPU / wall | numpy only CPU / wall | gain | sampler with the loops "
              "CPU / wall | numpy only CPU / wall | gain | step + sampler gain |",
              "|---|---|---|---|---|---|---|---|---|"]
        for row, d, x in plain:
            nb = x["numba"]
            e, n = nb["with_1"][1], nb["without_1"][1]
            s, sn = (nb["with_sampler"] or (None, None))[1], (nb["without_sampler"] or (None, None))[1]
            L.append(f"| {row} | {d} | {_cw(nb['with_1'])} | {_cw(nb['without_1'])} | {_x(n / e)} | "
                     + (f"{_cw(nb['with_sampler'])} | {_cw(nb['without_sampler'])} | {_x(sn / s)} | "
                        f"{_x((n + sn) / (e + s))} |" if s is not None else "- | - | - | - |"))
    return L


def _compiled(res: dict) -> list[str]:
    """The compiled kernel beside the numpy kernel."""
    L: list[str] = []
    comp = _measured(res, "compiled_1")
    if comp:
        L += ["", "## The compiled kernel (`table1 --kernel compiled`)", "",
              "The engine's option for one-hot token rows (ICL, two-head AND): two compiled passes over the rows "
              "(numba, `numerics/experiments/kernels.py`), each row's exponentiated score a product of "
              "per-coordinate exponentials, the squared loss in a third loop over the outputs, the three readout "
              "products left to BLAS. It rounds differently from "
              f"the default numpy kernel (relative differences `agree`, checked to {AGREE_TOL:g} before timing), "
              "so the default stays numpy, the kernel of the committed Table 1, sweep and scope results (bit for "
              "bit). CPU and wall medians in ms per run-step, measured just after the numpy kernel's; ratios by "
              "CPU. `FLOP bound`: the row's `flop_count` at the dgemm rate timed beside the compiled x1 repeats "
              "(the numpy kernel's ratios are in the table above, at the rate beside its own). `readout products`: "
              "the step's three dense products (xbar B, xbar^T g, g B^T for one run and each head, "
              "`readout_products`) timed alone, the part of the step both kernels leave to BLAS.", "",
              "| row | d | numpy x1 CPU / wall | compiled x1 CPU / wall | compiled / numpy | numpy x8 CPU / wall | "
              "compiled x8 CPU / wall | FLOP bound | compiled x1 / bound | compiled x8 / bound | readout products "
              "CPU / wall | readout products / bound | agree |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for row, d, x in comp:
            e1, c1, c8, fb = x["engine_1"][1], x["compiled_1"][1], x["compiled_8"][1], x["compiled_flop_seconds"]
            rp = x["readout_products"][1]
            L.append(f"| {row} | {d} | {_cw(x['engine_1'])} | {_cw(x['compiled_1'])} | {c1 / e1:.2f} | "
                     f"{_cw(x['engine_8'])} | {_cw(x['compiled_8'])} | {_ms(fb)} | "
                     f"{_x(c1 / fb)} | {_x(c8 / fb)} | {_cw(x['readout_products'])} | {_x(rp / fb)} | "
                     f"{x['compiled_agreement']:.0e} |")
    return L


def _seeds(res: dict) -> list[str]:
    """Seeds in one array program beside one call per seed."""
    L: list[str] = []
    if res.get("seeds"):
        some = next(iter(next(iter(res["seeds"].values())).values()))[0]
        L += ["", "## Seeds in one program", "",
              f"The runner trains each seed in its own bank: one `risk_and_grad` call per seed and step, the seed's "
              f"runs (step sizes, plans) in it. `one program` advances the {some['seeds']} seeds' runs together "
              "(`engine.grouped_risk_and_grad`: their batches stacked, every product of the rows layout over all "
              "of them), checked to give the same bits as one call per seed before it is timed. Every seed has "
              "the same number of runs here, so nothing is padded: in a bank, runs stop at different times and "
              "the program pads the smaller groups with runs at zero, so this is its best case. Risks and "
              "gradients only (no update), from batches without their "
              "operators (each step builds them for its fresh batches, either way); the arms timed alternately, "
              "repeat by repeat; CPU medians in ms per run-step. `runs per seed`: 1 as in a sweep's seed unit, 4 "
              "as in Table 1's reported seeds (one run per plan), 16 as in a step-size search round. "
              "`gain`: one call per seed / one program (above 1: the program is faster).", "",
              "| row | d | runs per seed | one call per seed CPU / wall | one program CPU / wall | gain (CPU) |",
              "|---|---|---|---|---|---|"]
        for row, d, x in _each(res["seeds"]):
            ps, st = x["per_seed"], x["stacked"]
            L.append(f"| {row} | {d} | {x['runs']} | {_ms(ps[1])} / {_ms(ps[0])} | "
                     f"{_ms(st[1])} / {_ms(st[0])} | {_x(ps[1] / st[1])} |")
    return L


def _sampling(res: dict) -> list[str]:
    """The draw of a step's batch beside one run's step, per sampled row."""
    if not res.get("sampling"):
        return []
    L = ["", "## Sampling beside the step", "",
         "Every step of a sampled row draws a fresh batch (the sampler, then the engine layout with the batch's "
         "operators) that all the runs of its bank share. `draw`: that, for a new step each call; `step`: one "
         "engine step of one run (risks, gradients and the update) on a batch laid out before. The two arms "
         "timed alternately, repeat by repeat (`sampling_beside_step`); CPU / wall medians in ms. "
         "`draw / step` above 1: drawing costs more than one run's step; a bank of k runs shares one draw among "
         "k runs' steps (\"Banks\" below).", "",
         "| row | d | draw CPU / wall | step CPU / wall | draw / step (CPU) | at d = 200 |", "|---|---|---|---|---|---|"]
    for row, d, x in _by_d(res["sampling"]):
        ratio = x["draw"][1] / x["step"][1]
        mark = ("target met" if ratio <= 1 else "missed") if d == 200 else ""
        L.append(f"| {row} | {d} | {_cw(x['draw'])} | {_cw(x['step'])} | {_x(ratio)} | {mark} |")
    return L


def _banks(res: dict) -> list[str]:
    """Banks of 1, 4 and 16 runs in one call beside the same runs one call each, per sampled row, and whether
    the runner banks the row."""
    if not res.get("banks"):
        return []
    ks = [k for k in BANK_RUNS if k > 1]
    L = ["", "## Banks", "",
         "One step of k runs on the row's batch (risks, gradients and the update; each run its own random "
         "parameters), in one engine call (`bank`) and in k calls of one run each (`calls`: what the runner does "
         "where it does not bank a row), every arm timed alternately, repeat by repeat (`bank_steps`). "
         "`k T1 / Tk`: how many runs the bank steps in the time one run alone takes a step (CPU medians). The "
         f"target reads \"k runs in one program at least {BANK_TARGET} k times as fast per run as one run alone\": "
         f"k T1 / Tk >= {BANK_TARGET} k, a bank of k at most {1 / BANK_TARGET:.3g} steps of one run, or the "
         "runner does not bank the row. One run alone keeps its parameters in cache from step to step; k runs "
         "read k runs' parameters whichever way they are stepped, so `calls / bank` is what banking gains: the "
         f"runner keeps a bank of k where it is at least {BANK_PAYS}, and otherwise steps the runs in calls of "
         "fewer (`runner`: the most runs it puts in one call at that d, `runner.RUNS_PER_CALL`, decided on this "
         "table), sharing each batch all the same. The target is met at a d where every bank the runner makes "
         "(k up to its limit) meets it. CPU / wall medians in ms per step of the k runs.", "",
         "| row | d | k = 1 | " + " | ".join(f"k = {k}: bank / calls (CPU)" for k in ks) + " | "
         + " | ".join(f"{k} T1 / T{k}" for k in ks) + " | " + " | ".join(f"calls / bank, k = {k}" for k in ks)
         + " | runner | target |",
         "|---|---|---|" + "---|" * (3 * len(ks)) + "---|---|"]
    for row, d, x in _by_d(res["banks"]):
        ratios = {k: bank_ratio(x, k) for k in ks}
        cap = runs_per_call_at(_task_of(row), d)
        runner = "banked" if cap is None else "one run a call" if cap == 1 else f"{cap} runs a call"
        L.append(f"| {row} | {d} | {_cw(x[1]['bank'])} | "
                 + " | ".join(f"{_ms(x[k]['bank'][1])} / {_ms(x[k]['calls'][1])}" for k in ks) + " | "
                 + " | ".join(f"{r:.2g}" for r in ratios.values()) + " | "
                 + " | ".join(_x(bank_gain(x, k)) for k in ks)
                 + f" | {runner} | {'target met' if bank_met(_task_of(row), d, x) else 'missed'} |")
    return L


def _by_d(by_row: dict):
    """(row, d, x) of every record x of a result {row: {d: x}}, in its order."""
    for row, by_d in by_row.items():
        for d, x in by_d.items():
            yield row, d, x


def _task_of(row: str) -> str:
    """The task of a benchmark row's name."""
    from numerics.bench.engine import ROWS
    return next(t for r, t, _ in ROWS if r == row)


def _and_integral(res: dict) -> list[str]:
    """Two-head AND on its exact population by the integral."""
    L: list[str] = []
    if res.get("and_integral"):
        L += ["", "## Two-head AND on its exact population (`table1 --and-heads-data integral`)", "",
              "One step on the population by the integral representation (`and_integral.IntegralPopulation` through "
              "`engine.risk_and_grad`, then the update), per run-step, for one run and for "
              f"{RUNS} runs at once (the integral takes the runs one at a time, so the two differ only by the "
              "calls around it), beside the sampled row's step (`engine x1`, `engine x8`) plus its sampler from the "
              "table above. Two kinds of parameters: `any` (those of `initial`, different on every symbol: the "
              "sums run over all d symbols) and `Table 1's` (the same with every unmarked symbol given one "
              "value, as a Table 1 row's parameters stay: the sums run over three classes, whatever d). "
              "`nodes`: of each one-dimensional integral at the first run's parameters (the cross-head term takes "
              "their square); these parameters are of scale 0.3, and every unit by which a head's scores spread "
              "adds five nodes (a trained run's cost grows with its spread). The two kinds and the sampled step "
              "are timed at different moments, with no dgemm beside them: read the ratios to about 30 % on this "
              "shared machine. The integral's risk and gradient are the "
              "population's to rounding (tests/experiments/test_and_integral.py), the sampled step's a mini-batch's: the "
              "ratio is what exactness costs a step, not the same work done faster or slower. A bank of runs "
              f"(a step-size search round, a seed's plans) shares the sampled row's batch: with {RUNS} runs, "
              f"each pays `engine x{RUNS}` and an {RUNS}th of the sampler, while the integral is paid in full "
              "by every run.", "",
              f"| d | nodes | any x1 CPU / wall | any x{RUNS} CPU / wall | Table 1's x1 CPU / wall | Table 1's "
              f"x{RUNS} CPU / wall | sampled x1 + sampler (CPU) | sampled x{RUNS} + sampler / {RUNS} (CPU, per "
              f"run) | Table 1's / sampled, 1 run | Table 1's / sampled, {RUNS} runs |",
              "|---|---|---|---|---|---|---|---|---|---|"]
        for d, (one, many, one_t, many_t) in res["and_integral"].items():
            x = res["rows"].get("AND (H=2)", {}).get(d)
            s1 = s8 = None
            if x and x.get("sampler"):
                s1, s8 = x["engine_1"][1] + x["sampler"][1], x["engine_8"][1] + x["sampler"][1] / RUNS
            L.append(f"| {d} | {one['nodes']} | {_cw(one['time'])} | {_cw(many['time'])} | {_cw(one_t['time'])} | "
                     f"{_cw(many_t['time'])} | {_ms(s1)} | {_ms(s8)} | "
                     + (f"{_x(one_t['time'][1] / s1)} | {_x(many_t['time'][1] / s8)} |" if s1 else "- | - |"))
    return L


def _growth(res: dict) -> list[str]:
    """The growth exponents in d and the peak memory."""
    ds = res["ds"]
    L: list[str] = []
    L += ["", "## Growth in d and memory", "",
          f"Exponent k of a least-squares fit value ~ d^k over d = {', '.join(map(str, ds))}. Memory: peak "
          "traced allocation (tracemalloc) of building the row's data and one engine step of one run.", "",
          "| row | engine x1 | engine x8 | PyTorch | sampler | memory | "
          + " | ".join(f"memory at d = {d}" for d in ds) + " |",
          "|---|---|---|---|---|---|" + "---|" * len(ds)]
    for row, r in res["rows"].items():
        dd = [d for d in ds if d in r]

        def k(f):
            v = fit_exponent(dd, [f(r[d]) for d in dd])
            return "-" if v is None else f"{v:.2f}"
        L.append(f"| {row} | {k(lambda x: x['engine_1'][1])} | {k(lambda x: x['engine_8'][1])} | "
                 f"{k(lambda x: x['torch'][1] if x.get('torch') else None)} | "
                 f"{k(lambda x: x['sampler'][1] if x['sampler'] else None)} | {k(lambda x: x.get('peak_bytes'))} | "
                 + " | ".join(f"{r[d]['peak_bytes'] / 2 ** 20:.1f} MB" if d in r and "peak_bytes" in r[d]
                              else "-" for d in ds) + " |")
    return L


def _tail(res: dict, tg: list[dict], profiles: dict, lines: dict) -> list[str]:
    """The targets, the fixed cost, the profiles of the rows that miss a target, the line profiles and the
    operation count."""
    L = ["", "## Targets", "", "| target | measured | met |", "|---|---|---|"]
    L += [f"| {t['target']} | {target_value(t['value'])} | {'yes' if t['met'] else '**no**'} |" for t in tg]
    fixed = fixed_cost_text(res)
    if fixed:
        L += ["", fixed]
    if profiles:
        L += ["", "## Where the time goes (cProfile, 20 engine steps of one run, top functions by own time)", ""]
        for (row, d), top in profiles.items():
            L.append(f"- {row}, d = {d}: " + "; ".join(f"`{w}` {s:.0%} own, {c:.0%} cumulative"
                                                         for w, s, c in top))
    for (row, d), top in (lines or {}).items():
        L += ["", f"### {row} at d = {d}, line by line (`engine.py`, `passes.py`, `readout.py`, median over 100 "
              "calls of `risk_and_grad`, "
              "wall time under tracing)", "", "| line | code | us per call | share |", "|---|---|---|---|"]
        L += [f"| {ln} | `{_code(code)}` | {t * 1e6:.1f} | {sh:.0%} |" for ln, code, t, sh in top]
    L += ["", "## The operation count", "", flop_count.__doc__.split("\n\n")[0].strip().replace("\n    ", " "),
          "", "```", "\n".join(line.strip() for line in flop_count.__doc__.splitlines()[2:]), "```", ""]
    return L


def target_value(value: tuple) -> str:
    """A target's measured value (``numerics.bench.engine.targets``) as the page prints it."""
    kind, *x = value
    if kind == "versus":  # engine against PyTorch, seconds
        return f"{x[0] * 1e3:.3g} ms vs {x[1] * 1e3:.3g} ms (ratio {x[0] / x[1]:.2f})"
    if kind == "ratio":  # to the FLOP bound
        return _x_near(x[0], 3)
    if kind == "ratio to":  # to a bound, against the target's limit
        return _x_near(x[0], x[1])
    if kind == "ratios":  # one run's and 8 runs' (per run) to the FLOP bound
        return f"{_x_near(x[0], 3)} (8 runs at once: {_x(x[1])} per run)"
    if kind == "with sampler":  # the step, and the step with the sampler, seconds
        return f"{x[0] * 1e3:.3g} ms (with the sampler {x[1] * 1e3:.3g} ms)"
    if kind == "exponent":
        return f"d^{x[0]:.2f}"
    if kind == "draw vs step":  # the draw of a step's batch against one run's step, seconds
        return f"draw {x[0] * 1e3:.3g} ms vs step {x[1] * 1e3:.3g} ms ({_x(x[0] / x[1])})"
    if kind == "bank":  # k T1 / Tk in units of k, for k = 4 and 16
        return ", ".join(f"{r:.2g} k" for r in x)
    raise ValueError(f"unknown kind of target value {kind!r}")
