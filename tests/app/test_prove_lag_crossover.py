"""prove's --lag-crossover: the crossover item is certified with the flag, SKIP without it, and the recorded
command carries the flag (so docs/lag.md can say how its record was made)."""
import json

from app.cli import main


def _items(out):
    data = json.loads((out / "certificate.json").read_text())
    return data, {c["claim"]: c for c in data["certificates"]}


def test_crossover_is_certified_only_on_request(tmp_path):
    assert main(["prove", "--d", "3", "--steps", "3", "--out", str(tmp_path / "plain")]) == 0
    data, items = _items(tmp_path / "plain")
    assert items["lag_crossover"]["status"] == "SKIP" and "--lag-crossover" not in data["command"]
    assert "--lag-crossover" in items["lag_crossover"]["note"]

    assert main(["prove", "--d", "3", "--steps", "3", "--lag-crossover", "--out", str(tmp_path / "with")]) == 0
    data, items = _items(tmp_path / "with")
    item = items["lag_crossover"]
    assert item["status"] == "PASS" and "--lag-crossover" in data["command"]
    mid, rad = item["ball"]  # the JSON ball rounds its radius outwards in the last digits
    assert abs((mid - rad) / 1.25 ** 13 - 1) < 1e-9 and abs((mid + rad) / 1.25 ** 14 - 1) < 1e-9
    assert {c["claim"]: c["status"] for c in data["claims"] if c["d"] == 3}["lag_crossover"] == "PASS"
