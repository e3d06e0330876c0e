"""The Table 1 page's column and figures of the held-out risk by string length."""
from __future__ import annotations

import copy
import json

import matplotlib

matplotlib.use("Agg")

from app.render import table1 as table1_module  # noqa: E402
from app.render import table1_docs  # noqa: E402
from numerics.experiments.runner import PLANS  # noqa: E402


def _results() -> dict:
    """A results file without the length measurement: the d = 200 run with every key the measurement writes
    taken out (the config's sizes, each row's buckets, each plan's and each seed's risks by length), as results
    recorded before it existed have them."""
    out = json.loads((table1_docs.EXAMPLE / "d200" / "table1.json").read_text())
    for key in ("length_test_size", "length_multiples"):
        del out["config"][key]
    for row in [*out["rows"].values(), *(r for draw in out.get("tuning_draws", []) for r in draw["rows"].values())]:
        del row["length_buckets"]
        for pr in row["plans"].values():
            del pr["length_risk"]
            for s in pr["seeds"]:
                s.pop("length_risk", None)
    return out


def _with_lengths(results: dict) -> dict:
    out = copy.deepcopy(results)
    out["config"].update(length_test_size=512, length_multiples=[1, 2, 5, 10, 20])
    for row in out["rows"].values():
        row["length_buckets"] = {"mean_length": 20.0}
        for i, plan in enumerate(PLANS):
            row["plans"][plan]["length_risk"] = [
                {"lo": lo, "hi": hi, "n": 512, "risk": {"mean": 0.1 * i + k / 100, "std": 0.01, "n": 2}}
                for k, (lo, hi) in enumerate(((1, 20), (20, 40), (40, 100)))]
    return out


def test_old_results_render_without_the_column_and_new_ones_with_the_longest_bucket():
    old = _results()
    assert not table1_module.has_length_risk(old)
    assert "longest strings" not in table1_module.markdown(old)
    new = _with_lengths(old)
    table = table1_module.plan_table(new)
    assert table[0].endswith("| risk, longest strings |") and table[1].count("---") == 8
    name = next(iter(new["rows"]))
    line = next(ln for ln in table if ln.startswith(f"| {name} | joint |"))
    assert line.endswith("| 0.120 ± 0.010 at n in [40, 100) |")
    assert "up to 20 times the mean length" in table1_module.markdown(new)


def test_length_figure_has_one_line_per_plan_on_a_log_length_axis():
    row = next(iter(_with_lengths(_results())["rows"].values()))
    fig = table1_module.length_figure("row", row)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and "length" in ax.get_xlabel() and "risk" in ax.get_ylabel()
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert sorted(labels) == sorted([p.replace("_", " ") for p in PLANS] + ["training mean length 20"])
    assert len(ax.containers) == 4  # one error-bar line per plan
    x, y = ax.containers[1].lines[0].get_data()
    assert list(y) == [0.1 + k / 100 for k in range(3)]  # the joint plan's bucket means, in order
    assert x[0] < 20 <= x[1] < 40 <= x[2] < 100  # each point inside its bucket


def test_docs_table1_shows_a_length_figure_for_every_measured_row():
    """docs/table1.md embeds the length figure of each row of the example run that measured risk by length, and
    every figure it embeds is committed."""
    import json

    from app.render import table1_docs
    results = json.loads((table1_docs.EXAMPLE / "table1.json").read_text())
    page = (table1_docs.DOCS / "table1.md").read_text()
    measured = [n for n, r in results["rows"].items() if r.get("length_buckets")]
    assert measured
    from app.render import table1 as table1_render
    for name in measured:
        fig = f"table1_{table1_render.slug(name)}_lengths.png"
        assert f"(example_table1/{fig})" in page and (table1_docs.EXAMPLE / fig).exists()
