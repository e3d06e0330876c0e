"""app.memwatch: the memory record of a command and its children (docs/example_table1/d200/memory.json)."""
import json
import sys

import pytest

from app import memwatch as MW

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

CHILD = ("import sys, time, numpy as np; a = np.ones(int(sys.argv[1]) * 125_000); time.sleep(1.5); "
         "print(a.sum())")  # holds argv[1] MB for 1.5 s


def test_watch_sees_a_child_holding_memory_and_bounds_it_from_both_sides(tmp_path):
    """A child process holding 300 MB: the sampled PSS peak and the summed high-water marks bracket it, the
    log has one line per sample and ends with the summary, and the command's status is returned."""
    parent = ("import subprocess, sys; sys.exit(subprocess.call([sys.executable, '-c', "
              f"{CHILD!r}, '300']))")
    log = tmp_path / "mem.jsonl"
    summary = MW.watch([sys.executable, "-c", parent], log, period=0.1)
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert lines[-1] == {"summary": json.loads(json.dumps(summary))}
    samples = lines[:-1]
    assert len(samples) >= 5 and all(set(s) == {"t", "pss", "rss", "per"} for s in samples)
    assert max(len(s["per"]) for s in samples) == 2  # the parent and its child
    assert summary["returncode"] == 0 and summary["sample_period_s"] == 0.1
    assert 0.3 <= summary["peak_pss_summed_GB"] <= summary["peak_rss_summed_GB"] <= summary["hwm_summed_GB"] < 0.6
    assert summary["hwm_largest_GB"] >= 0.3 and len(summary["hwm_per_pid"]) == 2


def test_main_returns_the_commands_status_and_refuses_bad_input_before_running(tmp_path, capsys):
    log = tmp_path / "m.jsonl"
    assert MW.main([str(log), "--period", "0.05", "--", sys.executable, "-c", "import sys; sys.exit(3)"]) == 3
    assert json.loads(capsys.readouterr().out)["returncode"] == 3
    for argv in ([str(log)], [str(log), "--period", "0", "--", "true"], [str(tmp_path / "no" / "m.jsonl"), "--", "true"]):
        with pytest.raises(SystemExit) as exc:
            MW.main(argv)
        assert exc.value.code == 2
    assert not (tmp_path / "no").exists()


def test_a_command_killed_by_a_signal_exits_128_plus_the_signal(tmp_path):
    argv = [str(tmp_path / "m.jsonl"), "--period", "0.05", "--", sys.executable, "-c",
            "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"]
    assert MW.main(argv) == 128 + 15
