"""The renderers of studies 2, 3 and 5: a Markdown section with its table and verdict, and a PNG figure, from
summaries of tiny runs (kqv, sgd) and of constructed results (samples)."""
import math

import pytest

from app.render.scope_studies import kqv as kqv_render
from app.render.scope_studies import samples as samples_render
from app.render.scope_studies import sgd as sgd_render
from numerics.scope import kqv, samples, sgd
from tests.scope.test_kqv import _lag_results


def _summary(study, cfg):
    return study.summarise(cfg, {n: study.unit(a) for n, a in study.units(cfg).items()})


def _samples_summary(shape):
    cfg = samples.config(True) | {"d": [5, 10, 20, 50], "c_grid": [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0], "seeds": 10}
    results = {}
    for name, a in samples.units(cfg).items():
        need = 2.0 * shape(a["d"])
        k = 10 if a["N"] >= need else 3
        results[name] = {"N": a["N"], "reached": [True] * k + [False] * (10 - k), "test_risk": [1e-3] * 10}
    return samples.summarise(cfg, results)


@pytest.fixture(scope="module")
def summaries():
    return {"kqv": _summary(kqv, kqv.config(True) | {"d": 4, "m": [1, 2], "scale": [0.5], "steps": 20}),
            "sgd": _summary(sgd, sgd.config(True) | {"d": 4, "batch": [1, 16], "batch_scan": [1, 16], "seeds": 2,
                                                       "steps": 10, "test_size": 200}),
            "samples": _samples_summary(lambda d: d * math.log(d))}


@pytest.mark.parametrize("name,render", [("kqv", kqv_render), ("sgd", sgd_render), ("samples", samples_render)])
def test_markdown_and_figure(summaries, name, render, tmp_path):
    md = render.markdown(summaries[name])
    table = [line for line in md.splitlines() if line.startswith("|")]
    assert len(table) >= 3 and table[1].startswith("|---")
    assert "epsilon" in md or "d ln d" in md
    out = tmp_path / f"{name}.png"
    render.figure(summaries[name], out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_samples_verdict_names_the_shape_and_says_when_it_contradicts_the_paper():
    good = samples_render.markdown(_samples_summary(lambda d: d * math.log(d)))
    assert "the best shape is d ln d" in good and "contradicts" not in good
    bad = samples_render.markdown(_samples_summary(lambda d: d * d / 4))
    assert "the best shape is d^2" in bad and "contradicts the paper's O(d ln d)" in bad


def test_kqv_verdict_counts_runs(summaries):
    v = summaries["kqv"]["verdict"]
    md = kqv_render.markdown(summaries["kqv"])
    assert f"reached epsilon in {v['three_phase_reached']} of {v['units']} runs" in md


def test_kqv_page_prints_each_call_with_its_interval_and_the_band():
    """Each lag cell shows its ratio, the interval its call read against the band, and the call; the verdict
    names the band and counts every call of each measure; a summary called again from its recorded
    statistics says so."""
    summary = kqv.summarise(*_lag_cell_results([1.015, 1.02, 1.025]))
    md = kqv_render.markdown(summary)
    lo, hi = summary["table"][0]["lag"]["function"]["interval"]
    assert f"1.02 ± 0.005 in [{lo:.3g}, {hi:.3g}]: no appreciable lag" in md
    assert "practical band [0.8, 1.25]" in md
    assert "By the function measure: attention lags in 0 of 1 cells, no appreciable lag in 1" in md
    assert "without recomputing" not in md
    assert "without recomputing a unit" in kqv_render.markdown(kqv.decide_lags(summary))


def test_kqv_interval_end_near_the_band_edge_is_not_printed_as_the_edge():
    assert kqv_render._end(1.2533, [0.8, 1.25]) == "1.253"
    assert kqv_render._end(0.79964, [0.8, 1.25]) == "0.7996"
    assert kqv_render._end(1.25, [0.8, 1.25]) == "1.25"
    assert kqv_render._end(1.7131, [0.8, 1.25]) == "1.71"


def _lag_cell_results(ratios):
    """One KQV cell whose joint-GD lag ratios over seeds are ``ratios`` (t_half(output) 250 steps, resolution 1)."""
    cfg, results = _lag_results(ratios, 250.0)
    for r in results.values():
        r["regime"] = {"eta_1": 1.0, "eta_2": 1.0, "eta_3": 1.0, "T_min": 1}  # the page prints the regime
    return cfg, results


def test_samples_verdict_reads_n_star_against_ln_d_without_a_power_law_interval():
    """N* = the first grid N at or above 80 ln d: every bracket (N_below, N] / ln d holds 80, from the smallest
    d on, and the page says so in strings and in tokens; N* growing like d ln d shares no multiple of ln d over
    two d, and gets no such sentence. Neither page gives an interval for a power of d."""
    log_summary = _samples_summary(lambda d: 40 * math.log(d))
    k = samples_render.ln_d_reading(log_summary["table"])
    assert k["from_d"] == 5 and k["low"] < 80 <= k["high"]
    md = samples_render.markdown(log_summary)
    assert f"N*(d) is about {samples_render._two_digits(k['K'])} ln d strings" in md
    assert f"{samples_render._two_digits(k['K'])} d ln d tokens" in md
    dlnd = _samples_summary(lambda d: d * math.log(d))
    assert samples_render.ln_d_reading(dlnd["table"]) is None
    assert "ln d strings there" not in samples_render.markdown(dlnd)
    assert "every bracket holds N = C d ln d" in samples_render.markdown(dlnd)
    assert "no one C lies in every bracket" in md
    for page in (md, samples_render.markdown(dlnd)):
        assert "d^b" not in page and "95% [" not in page
