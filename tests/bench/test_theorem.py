"""The benchmark's baselines compute what they claim: the numpy double sum is the exact risk to its
tolerance at a cost linear in d, and the (n, c) Monte Carlo is unbiased within its standard error."""
import re

from app.render import bench_theorem
from numerics.bench.theorem import POINT, double_sum_terms, monte_carlo, numpy_double_sum
from numerics.theorem.series import SeriesEvaluator
from theory.setting import Setting


def test_numpy_double_sum_is_the_risk_and_its_cost_is_linear_in_d():
    risks, terms = {}, {}
    for d in (40, 80):
        risks[d], terms[d] = numpy_double_sum(d, tol=1e-15)
        series = SeriesEvaluator(Setting(d), tol=1e-15).evaluate_symmetric(*POINT)
        assert abs(risks[d] - series.risk) <= series.risk_bound + 1e-15
    # the count cut C(n) grows like n / d: terms double with d (without it they would quadruple)
    assert 1.6 < terms[80] / terms[40] < 2.6


def test_the_double_sums_terms_built_once_serve_every_point_with_the_same_bits():
    """The benchmark times the double sum's evaluation on terms built once per d (as the series' enumeration):
    built once or inside each call, the same risk to the bit, at points whose risks differ."""
    terms = double_sum_terms(30, tol=1e-15)
    other = (0.4, -0.2, 0.9, -0.7)
    for point in (POINT, other):
        assert numpy_double_sum(30, point, tol=1e-15, terms=terms) == numpy_double_sum(30, point, tol=1e-15)
    assert numpy_double_sum(30, POINT, terms=terms)[0] != numpy_double_sum(30, other, terms=terms)[0]


def test_monte_carlo_on_counts_is_within_its_standard_error():
    d = 12
    risk, se, size, _, need, _, _ = monte_carlo(d, size=100_000, seed=3)
    exact = SeriesEvaluator(Setting(d)).evaluate_symmetric(*POINT).risk
    assert size == 100_000 and 0 < se < 0.01 and abs(risk - exact) < 4 * se
    assert need > size  # SE 1e-6 needs more strings than the pilot


def test_the_full_grid_target_is_measured_only_on_the_shipped_grid_complete():
    """Met or missed only on a record of the shipped file with every cell complete, the lag map beside it
    counted in the total; a record of another file, or with cells missing, is "not yet"."""
    lag = [{"units_cpu_s": 1800.0}]
    full = {"readings_file": {"sha256": "s" * 64}, "cells": [{}] * 4, "incomplete_cells": [], "units_cpu_s": 3 * 3600.0,
            "beside": lag}
    assert bench_theorem.full_grid_target(full, ("s" * 64, 4)).endswith(
        "Measured: 3.00 h for the grid's units and 0.50 h for the lag map's, 3.50 h in all. Met: yes.")
    over = {**full, "units_cpu_s": 3.6 * 3600.0}  # 3.6 + 0.5 h: over 4 h only with the lag map counted
    assert bench_theorem.full_grid_target(over, ("s" * 64, 4)).endswith("4.10 h in all. Met: **no**.")
    partial = {**full, "cells": [{}] * 3, "incomplete_cells": [{"reading": "r", "d": 200}]}
    assert "Not run to the end: the committed sweep (docs/sweep/) has 3 complete cells of this readings file" in \
        bench_theorem.full_grid_target(partial, ("s" * 64, 4))
    failed = bench_theorem.full_grid_target({**full, "failures": [{"key": "k"}]}, ("s" * 64, 4))
    assert "4 complete cells of this readings file and 1 failed units (their CPU is not counted)" in failed
    assert failed.endswith("took 3.00 h of CPU, and the lag map's 0.50 h. Met: not yet.")
    # not finished, but the units so far with the lag map's already exceed the target: missed, whatever is left
    partial_over = bench_theorem.full_grid_target({**partial, "units_cpu_s": 3.6 * 3600.0}, ("s" * 64, 4))
    assert partial_over.endswith("Met: no: the units stored so far and the lag map's already took 4.10 h.")
    other_over = bench_theorem.full_grid_target({**partial, "units_cpu_s": 3.6 * 3600.0}, ("t" * 64, 4))
    assert other_over.endswith("Met: not yet.")   # another file's grid says nothing of this one's cost
    other = bench_theorem.full_grid_target(full, ("t" * 64, 4))
    assert "of another readings file (SHA-256 ssssssssssss)" in other and other.endswith("Met: not yet.")


def test_recorded_experiment_runs_read_the_committed_records(tmp_path):
    """The benchmark's experiment section quotes the recorded Table 1 and sweep times (training runs only; a
    render-only sweep run trains nothing and is left out)."""
    import json

    (tmp_path / "example_table1").mkdir()
    (tmp_path / "sweep").mkdir()
    (tmp_path / "example_table1" / "table1.json").write_text(json.dumps(
        {"config": {"d": 50}, "command": ["occ-companion", "table1"], "commit": "abc", "elapsed_s": 120.0,
         "cpu_s": 240.0}))
    (tmp_path / "sweep" / "sweep.json").write_text(json.dumps({
        "counts": {"cells": 3}, "cells": [{}, {}, {}], "readings_file": {"sha256": "0" * 64}, "units_cpu_s": 900.0,
        "runs": [
        {"command": ["occ-companion", "sweep"], "started": "t0", "trained": 7, "wall_s": 600.0, "trained_cpu_s": 900.0,
         "readings_sha256": "0" * 64, "d": [8, 16]},
        {"command": ["occ-companion", "sweep", "-o"], "started": "t", "trained": 5, "wall_s": 60.0, "trained_cpu_s": 90.0,
         "readings_sha256": "abcdef" + "1" * 58, "d": [8]},
        {"command": ["occ-companion", "sweep", "--no-train"], "started": "t1", "trained": 0, "wall_s": 6.0,
         "trained_cpu_s": 0.0},
        {"command": ["occ-companion", "sweep", "-i"], "started": "t2", "trained": None, "wall_s": 120.0,
         "trained_cpu_s": None}]}))
    rows = [r for r in bench_theorem.recorded_experiment_runs(tmp_path) if r.startswith("| ") and "---" not in r][1:]
    assert rows == ["| Table 1, default reading, d = 50 | `occ-companion table1` | abc | 2.0 min | 4.0 min |",
                    "| readings sweep (7 tasks; the committed sweep's readings file, d = 8, 16) | `occ-companion sweep` | t0 | 10.0 min "
                    "| 15.0 min (units) |",
                    "| readings sweep (5 tasks; readings file abcdef111111, d = 8) | `occ-companion sweep -o` | t | 1.0 min "
                    "| 1.5 min (units) |",
                    "| readings sweep (interrupted: tasks trained not recorded) | `occ-companion sweep -i` | t2 | 2.0 min | "
                    "not recorded |"]
    assert bench_theorem.recorded_experiment_runs(tmp_path / "missing")[-1].startswith("|---")
    # the old 52-step protocol's run, with its target, named by its reading
    (tmp_path / "example_table1" / "theory-52").mkdir()
    (tmp_path / "example_table1" / "theory-52" / "table1.json").write_text(json.dumps(
        {"config": {"d": 50}, "reading": {"name": "theory-52"}, "command": ["occ-companion", "table1", "-r"],
         "commit": "f00", "elapsed_s": 24.0, "cpu_s": 48.0}))
    assert ("| Table 1, theory-52 reading, d = 50 (the old 52-step protocol; target: under 60 s CPU, measured 48.0 s, "
            "met: yes) | "
            "`occ-companion table1 -r` | f00 | 0.4 min | 0.8 min |") in bench_theorem.recorded_experiment_runs(tmp_path)
    (tmp_path / "example_table1" / "theory-52" / "table1.json").write_text(json.dumps(
        {"config": {"d": 50}, "reading": {"name": "theory-52"}, "command": ["occ-companion", "table1", "-r"],
         "commit": "f00", "elapsed_s": 24.0, "cpu_s": 61.0}))
    assert any("under 60 s CPU, measured 61.0 s, met: **no**) |" in line
               for line in bench_theorem.recorded_experiment_runs(tmp_path))
    (tmp_path / "example_table1" / "theory-52" / "table1.json").unlink()
    # the d = 200 run, and its memory record
    (tmp_path / "example_table1" / "d200").mkdir()
    (tmp_path / "example_table1" / "d200" / "table1.json").write_text(json.dumps(
        {"config": {"d": 200}, "rows": {"ICL": {}, "OR": {}}, "command": ["occ-companion", "table1", "--d", "200"],
         "commit": "def", "elapsed_s": 60.0, "cpu_s": 90.0}))
    (tmp_path / "example_table1" / "d200" / "memory.json").write_text(json.dumps(
        {"peak_rss_largest_process_GB": 1.163, "peak_rss_summed_GB": 2.062, "pss_sampled_from_s": 7,
         "peak_pss_summed_GB": 1.512, "note": "N."}))
    lines = bench_theorem.recorded_experiment_runs(tmp_path)
    assert "| Table 1, default reading, d = 200, ICL, OR | `occ-companion table1 --d 200` | def | 1.0 min | 1.5 min |" in lines
    assert lines[-1].startswith("Memory of the d = 200 run (target: under 2 GB): largest process 1.16 GB")
    assert "summed over its processes 2.06 GB" in lines[-1] and "from second 7 on, 1.51 GB. Target met: yes, " \
        "read on the peak of the summed PSS" in lines[-1] and "can be missed). N." in lines[-1]
    # the verdict follows the summed PSS; the high-water marks, where recorded, are said to be under or over
    for pss, hwm, verdict, side in ((1.512, 2.1, "yes", "over"), (2.01, 2.1, "**no**", "over"),
                                    (1.5, 1.9, "yes", "under")):
        (tmp_path / "example_table1" / "d200" / "memory.json").write_text(json.dumps(
            {"peak_rss_largest_process_GB": 1.163, "peak_rss_summed_GB": 2.062, "pss_sampled_from_s": 7,
             "peak_pss_summed_GB": pss, "hwm_summed_GB": hwm, "note": "N."}))
        last = bench_theorem.recorded_experiment_runs(tmp_path)[-1]
        assert f"Target met: {verdict}, read on" in last and f"summed, {hwm:.2f} GB, bound the resident peak " \
            f"from above and are {side} the target" in last
    (tmp_path / "example_table1" / "d200" / "memory.json").write_text(json.dumps(
        {"peak_rss_largest_process_GB": 1.163, "peak_rss_summed_GB": 2.062, "pss_sampled_from_s": 7,
         "peak_pss_summed_GB": 1.512, "note": "N."}))
    # later whole reruns, PSS sampled from the start
    record = json.loads((tmp_path / "example_table1" / "d200" / "memory.json").read_text())
    record["reruns"] = [{"command": ["occ-companion", "table1"], "commit": "0123456789ab", "wall_s": 1800.0, "cpu_s": 2400.0,
                         "peak_pss_summed_GB": 1.234, "peak_pss_at_s": 12.4, "peak_rss_summed_GB": 1.5,
                         "hwm_summed_GB": 2.25, "hwm_largest_GB": 0.9, "note": "W."},
                        {"command": ["x"], "commit": "fedcba9876543", "wall_s": 60.0, "whole": False,
                         "sample_period_s": 0.5, "peak_pss_summed_GB": 1.0,
                         "peak_pss_at_s": 3.0, "peak_rss_summed_GB": 1.1, "hwm_summed_GB": 1.2, "hwm_largest_GB": 0.5,
                         "note": "V."}]
    (tmp_path / "example_table1" / "d200" / "memory.json").write_text(json.dumps(record))
    last = bench_theorem.recorded_experiment_runs(tmp_path)[-1]
    assert "can be missed). N. Measured since, over a whole rerun (`occ-companion table1` at 0123456789, " \
           "30 min wall, 40 min CPU), PSS summed" in last
    assert "peak 1.23 GB at second 12 (RSS summed 1.50 GB; the processes' resident high-water marks summed 2.25 GB, " \
           "the largest 0.90 GB). W. Measured since, over the first 1 min of a rerun (`x` at fedcba9876, 1 min wall), " \
           "PSS summed over its processes sampled every 0.5 s from the start" in last
    assert last.count("sampled every second from the start") == 1  # the first rerun, recorded without a period
    assert last.endswith("the largest 0.50 GB). V.")
    # runs of the command on code before the committed run's: their own paragraph, not "measured since"
    record["earlier"] = {"until": "abc1234", "note": "E.",
                         "first": {"commit": "8a5685eb0464", "peak_rss_largest_process_GB": 1.163,
                                   "peak_rss_summed_GB": 2.062, "pss_sampled_from_s": 1475,
                                   "peak_pss_summed_GB": 1.512, "note": "F."},
                         "reruns": [record["reruns"][0]]}
    record["reruns"] = []
    (tmp_path / "example_table1" / "d200" / "memory.json").write_text(json.dumps(record))
    lines = bench_theorem.recorded_experiment_runs(tmp_path)
    assert lines[-3].endswith("can be missed). N.") and lines[-2] == ""
    assert lines[-1] == ("Earlier runs of the same command, on the code before abc1234: E. The first committed run "
                         "(at 8a5685eb04): largest process 1.16 GB resident; resident sets summed 2.06 GB; PSS, "
                         "sampled from second 1475 on, 1.51 GB. F. Then, over a whole rerun (`occ-companion table1` "
                         "at 0123456789, 30 min wall, 40 min CPU), PSS summed over its processes sampled every second "
                         "from the start: peak 1.23 GB at second 12 (RSS summed 1.50 GB; the processes' resident "
                         "high-water marks summed 2.25 GB, the largest 0.90 GB). W.")


def test_a_main_job_row_meets_its_target_on_cpu_memory_and_exit_status(monkeypatch):
    from numerics.bench import theorem
    def row(cpu, peak, status=0, **target):
        monkeypatch.setattr(theorem, "run_process", lambda args, repeat, warm=False: {
            "cpu": cpu, "wall": 1.0, "peak_mb": peak, "status": status, "repeat": repeat})
        return bench_theorem.process_line(theorem.process_row("run", ["run"], "t", 3, **target)).rsplit("|", 2)[1].strip()

    assert row(0.5, 50, cpu_s=0.6) == "yes" and row(0.61, 50, cpu_s=0.6) == "**no**"
    assert row(2.0, 150, cpu_s=10, peak_mb=200) == "yes" and row(2.0, 250, cpu_s=10, peak_mb=200) == "**no**"
    assert row(0.5, 50, status=1, cpu_s=0.6) == "**no**" and row(0.5, 50) == "-"
    assert row(2.9, 50, wall_s=3) == "yes" and row(2.9, 50, wall_s=0.9) == "**no**"  # the wall time is 1.0


def test_keep_suite_carries_the_test_command_section_over_marked(tmp_path):
    """``--keep-suite`` copies the replaced page's test-command figures, says so with that page's date, and
    stops at the next section; a page without them yields "not measured"."""
    from app.render.bench_theorem import carried_suite_section

    page = tmp_path / "benchmarks.md"
    page.write_text("# Benchmarks\n\nDate 2026-01-02; 2 cores.\n\n## Test command\n\n| command | wall time |\n"
                    "|---|---|\n| `pytest` | 12.0 s |\n\n## Experiment runs\n\n| run |\n")
    got = carried_suite_section(page)
    assert got[0] == "## Test command" and "2026-01-02" in got[2] and "did not run" in got[2]
    assert "| `pytest` | 12.0 s |" in got and not any("Experiment" in line for line in got)
    page.write_text("# Benchmarks\n\nDate 2026-03-04; 2 cores.\n\n" + "\n".join(got) + "\n## Experiment runs\n")
    again = carried_suite_section(page)  # carried twice: one note, naming the page the figures come from
    assert again == got
    page.write_text("# Benchmarks\n")
    assert "Not measured" in carried_suite_section(page)[2]


def test_the_hand_maintained_tiers_section_is_kept_as_it_stands(tmp_path):
    """The "Test tiers" section of the replaced page comes back line for line, from its heading to the next
    section (not into it), and a page without one gives no lines; the README command the page times runs every
    tier."""
    from app.render.bench_theorem import kept_tiers_section
    from numerics.bench.theorem import TEST_COMMAND

    tiers = ["## Test tiers", "", "Measured by hand.", "", "| tier | CPU s |", "|---|---|", "| fast | 40 |"]
    page = tmp_path / "benchmarks.md"
    page.write_text("# Benchmarks\n\n## Test command\n\n| `pytest` | 12.0 s |\n\n" + "\n".join(tiers)
                    + "\n\n\n## Experiment runs\n\n| run |\n")
    assert kept_tiers_section(page) == [*tiers, ""]
    page.write_text("# Benchmarks\n\n## Test command\n\n| `pytest` | 12.0 s |\n\n## Experiment runs\n")
    assert kept_tiers_section(page) == []
    assert kept_tiers_section(tmp_path / "absent.md") == []
    i = TEST_COMMAND.index("-m", 2)  # the marker expression after "-m pytest"
    assert TEST_COMMAND[i + 1] == "slow or not slow" and TEST_COMMAND[-2:] == ("checks", "tests")


# ------------------------------------------------------------------------------------------------
# the command lines (app.commands.benchmarks): the output discipline of every command (issue 18)

import pytest  # noqa: E402


@pytest.mark.parametrize("command,module,renderer", [
    ("benchmark", "numerics.bench.theorem", "app.render.bench_theorem"),
    ("benchmark-engine", "numerics.bench.engine", "app.render.bench_engine")])
def test_benchmark_destination_is_checked_and_locked_before_any_work(tmp_path, monkeypatch, capsys, command,
                                                                     module, renderer):
    """An unusable or busy --out is exit 2 before any measurement; Ctrl-C during the measurement keeps the old
    page and leaves no temporary file; a finished run replaces the page as a whole."""
    import importlib

    from app import exitcodes
    from app.cli import main
    from app.io import OutputFolder

    bench = importlib.import_module(module)
    monkeypatch.setattr(importlib.import_module(renderer), "render", lambda record: record)
    calls = []

    def measure(*args, **kwargs):
        calls.append(1)
        return "new page"

    monkeypatch.setattr(bench, "measure", measure)
    (tmp_path / "a_file").write_text("x")
    for out in ("/proc/occ-bench/x.md", str(tmp_path / "a_file" / "x.md"), str(tmp_path), ""):
        assert main([command, "--tiny", "--out", out]) == exitcodes.USAGE, out
    page = tmp_path / "pages" / "bench.md"
    page.parent.mkdir()
    page.write_text("old page\n")
    with OutputFolder(page.parent):  # another command holds the folder
        assert main([command, "--tiny", "--out", str(page)]) == exitcodes.USAGE
    assert "in use by another" in capsys.readouterr().err
    assert calls == []  # none of the refusals measured anything

    def interrupted(*args, **kwargs):
        (page.parent / ".bench.md.half.tmp").write_text("a killed writer's file")  # removed by the next run
        raise KeyboardInterrupt
    monkeypatch.setattr(bench, "measure", interrupted)
    assert main([command, "--tiny", "--out", str(page)]) == exitcodes.INTERRUPTED
    assert page.read_text() == "old page\n"
    monkeypatch.setattr(bench, "measure", measure)
    assert main([command, "--tiny", "--out", str(page)]) == exitcodes.DONE
    assert page.read_text() == "new page" and sorted(p.name for p in page.parent.iterdir()) == ["bench.md"]


def test_benchmark_tiny_page_is_complete(tmp_path):
    """The tiny size (the kill loop's) renders the first table and the recorded runs."""
    from app.cli import main

    page = tmp_path / "bench.md"
    assert main(["benchmark", "--tiny", "--out", str(page)]) == 0
    text = page.read_text()
    assert text.startswith("# Benchmarks\n") and "| 5 | float series (estimate) |" in text
    assert "## Experiment runs (recorded, not re-run)" in text and "## Main job" not in text
    # the host's speed, measured in the run (a rate, not a placeholder)
    rate = re.search(r"one BLAS thread ran at ([0-9.]+) GFLOP/s", text)
    assert rate and float(rate.group(1)) > 0
    # every value of the first table carries only the digits its printed error supports, and every timed row
    # gives median wall and CPU seconds over its stated repeats
    assert "| evaluation wall s | evaluation CPU s | repeats |" in text
    rows = {r.split(" | ")[1]: r.strip("| ").split(" | ") for r in text.splitlines() if r.startswith("| 5 | ")}
    for method in ("float series (estimate)", "numpy double sum (float64)", "numpy Monte Carlo on (n, c) (pilot)"):
        _, _, value, error, *_, wall, cpu, repeats, _ = rows[method]
        _assert_supported(value, float(error.split()[0]))
        assert float(wall) >= 0 and float(cpu) >= 0 and int(repeats) >= 3
    assert "risk and gradient" in text and "risk only" in text and "conservative" in text


def _assert_supported(text: str, bound: float):
    """``text`` has no decimal beyond what ``bound`` supports: its last place's half-unit is at most the bound
    (or the bound includes that rounding), and one place fewer would already be within it."""
    from fractions import Fraction

    k = len(text.split(".")[1]) if "." in text else 0
    unit, b = Fraction(1, 10**k), Fraction(bound)
    assert unit / 2 <= b, (text, bound)  # the last digit is not padding
    assert 10 * unit / 2 > b - unit / 2, (text, bound)  # and no digit is beyond the bound


def test_printed_values_carry_only_supported_digits():
    """The page's values keep the last decimal place whose half-unit is within their error and no more (the
    reviewer's cases: a float at 3.2e-13 and a Monte Carlo mean at SE 3.4e-4), by the CLI's rule."""
    from app.render.bench_theorem import _rounded

    assert _rounded(0.41596093705584264, 3.2e-13)[0] == "0.4159609370558"
    assert _rounded(0.41585118, 3.4e-4)[0] == "0.4159"
    assert _rounded(0.9000321412423076, 1.5e-12)[0] == "0.900032141242"
    for x in (0.41596093705584264, 0.8174422213493071, 0.025396134023705472, 123.456, -1.5, 0.5):
        for bound in (3.4e-4, 5e-4, 1e-3, 3.2e-13, 1.7e-12, 2.4e-18, 0.05, 0.25):
            text = _rounded(x, bound)[0]
            if len(text.lstrip("-0.")) < 17:  # not capped at 17 significant digits
                _assert_supported(text, bound)


def test_taylor_model_rows_put_the_two_evaluators_side_by_side(monkeypatch):
    """The Taylor-model table runs both arms on the same plan: the same doubles, fewer integrals with models."""
    from numerics.bench import theorem
    monkeypatch.setitem(theorem.REPEATS, "taylor", 1)
    lines = bench_theorem.taylor_model_rows(theorem.taylor_model(steps=6))
    text = "\n".join(lines)
    assert "is the same double in both" in text and "DIFFERS" not in text
    per_call = next(ln for ln in lines if ln.startswith("| three integrals per call"))
    model = next(ln for ln in lines if ln.startswith("| Taylor models"))
    assert int(per_call.split("|")[-2]) == 3 * 7  # every call of the 6-step plan (start and 6 recorded steps)
    # the start and step 1 share u = 1 (the first step moves no attention: a repeat builds no model); step 2
    # is a small step, so a model of order 5 (8 more integrals) answers the rest
    assert int(model.split("|")[-2]) == 3 + 3 + 3 + 8
