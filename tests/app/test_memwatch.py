"""app.memwatch: the memory record of a command and its process tree (docs/example_table1/d200/memory.json)."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app import memwatch
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

ROOT = Path(__file__).resolve().parents[2]
HOLD = ("import sys, time, numpy as np; a = np.ones(int(sys.argv[1]) * 125_000); time.sleep(1.5); "
        "print(a.sum())")  # holds argv[1] MB for 1.5 s


def _spawn(code: str, *args: str) -> str:
    """Python source that runs ``code`` with ``args`` in a child process and exits with its status."""
    return f"import subprocess, sys; sys.exit(subprocess.call([sys.executable, '-c', {code!r}, *{list(args)!r}]))"


@pytest.mark.slow  # subprocesses
def test_watch_sees_a_grandchild_holding_memory_and_bounds_it_from_both_sides(tmp_path):
    """A grandchild of the command holding 300 MB (the tree is walked, not only the command's children): the
    sampled PSS peak and the summed high-water marks bracket it, the log has one line per sample and ends with
    the summary, and the command's status is returned."""
    log = tmp_path / "mem.jsonl"
    summary = memwatch.watch([sys.executable, "-c", _spawn(_spawn(HOLD, "300"))], log, period=0.1)
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert lines[-1] == {"summary": json.loads(json.dumps(summary))}
    samples = lines[:-1]
    assert len(samples) >= 5 and all(set(s) == {"t", "pss", "rss", "per"} for s in samples)
    assert max(len(s["per"]) for s in samples) == 3  # the command, its child and the grandchild
    assert summary["returncode"] == 0 and summary["sample_period_s"] == 0.1
    assert 0.3 <= summary["peak_pss_summed_GB"] <= summary["peak_rss_summed_GB"] <= summary["hwm_summed_GB"] < 0.7
    assert summary["hwm_largest_GB"] >= 0.3 and len(summary["hwm_per_pid"]) == 3
    assert 0 < summary["cpu_s"] < 30  # the command's tree only, not the test process's earlier children


def test_main_returns_the_commands_status_and_refuses_bad_input_before_running(tmp_path, capsys):
    log = tmp_path / "m.jsonl"
    assert memwatch.main([str(log), "--period", "0.05", "--", sys.executable, "-c", "import sys; sys.exit(3)"]) == 3
    assert json.loads(capsys.readouterr().out)["returncode"] == 3
    assert memwatch.main([str(tmp_path / "k.jsonl"), "--period", "0.05", "--", sys.executable, "-c",
                    "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"]) == 128 + 15
    bad = ([str(log)], [str(log), "--period", "0", "--", "true"], [str(log), "--period", "inf", "--", "true"],
           [str(tmp_path / "no" / "m.jsonl"), "--", "true"], [str(tmp_path), "--", "true"], ["--", "true"])
    for argv in bad:
        with pytest.raises(SystemExit) as exc:
            memwatch.main(argv)
        assert exc.value.code == 2
    assert not (tmp_path / "no").exists()


def _terminal_signals() -> None:
    """SIGINT and SIGTERM at their defaults, as for a command typed at a terminal.  The test process may have
    them ignored: ``cli.guarded`` leaves them ignored after a command run in-process by an earlier test on the
    same worker, and a shell's background job ignores SIGINT; an ignored signal stays ignored across exec, so
    the watcher and the command would never see the Ctrl-C (this stop's CI: the command slept its 30 s)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _watcher(tmp_path, command_code: str) -> tuple[subprocess.Popen, Path]:
    """The watcher on ``python3 -c command_code READY``, once the command has created the file READY (its own
    signal that it is where the test wants it: a signal sent before then would find it starting up) and
    the watcher has sampled it three times."""
    log, ready = tmp_path / "w.jsonl", tmp_path / "ready"
    p = subprocess.Popen([sys.executable, "-m", "app.memwatch", str(log), "--period", "0.05", "--", sys.executable,
                          "-c", command_code, str(ready)], cwd=ROOT, start_new_session=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, preexec_fn=_terminal_signals)
    deadline = time.time() + 60
    while time.time() < deadline and not (ready.exists() and log.exists() and log.read_text().count("\n") >= 3):
        time.sleep(0.05)
    if not ready.exists():
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        pytest.fail("the command did not start within 60 s")
    return p, log


def test_sigterm_to_the_watcher_reaches_the_command_and_the_summary_is_written(tmp_path):
    p, log = _watcher(tmp_path, "import sys, time; open(sys.argv[1], 'w').close(); time.sleep(30)")
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=20) == 128 + 15
    assert json.loads(log.read_text().splitlines()[-1])["summary"]["returncode"] == -15


@pytest.mark.slow  # subprocesses
def test_two_ctrl_c_still_wait_for_the_command_and_write_the_summary(tmp_path):
    """Ctrl-C twice at the terminal (SIGINT to the whole group): the command handles the first and exits 7 after a
    second; the watcher neither dies on the second nor loses the summary."""
    code = ("import sys, time\ntry:\n    open(sys.argv[1], 'w').close()\n    time.sleep(30)\n"
            "except KeyboardInterrupt:\n    t = time.time()\n"
            "    while time.time() - t < 1.0:\n        try:\n            time.sleep(0.05)\n"
            "        except KeyboardInterrupt:\n            pass\n    sys.exit(7)\n")
    p, log = _watcher(tmp_path, code)
    os.killpg(p.pid, signal.SIGINT)
    time.sleep(0.3)
    os.killpg(p.pid, signal.SIGINT)
    assert p.wait(timeout=20) == 7
    assert json.loads(log.read_text().splitlines()[-1])["summary"]["returncode"] == 7
