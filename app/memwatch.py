"""Memory of a command and its process tree, as docs/example_table1/d200/memory.json records it.

``python3 -m app.memwatch LOG -- COMMAND ...`` runs COMMAND and samples its process tree (COMMAND and its
descendants) every ``--period`` seconds (default 0.5): the proportional set size (PSS, each shared page
counted once in all) and the resident set size (RSS) summed over the processes, each process's PSS, and each
process's resident high-water mark (VmHWM), the largest one read while it lived.  One JSON line per sample
goes to LOG as it is taken (a killed watch keeps what it saw), then a last line ``{"summary": ...}``; the
summary is also printed.  Sizes in the summary are in GB = 10^9 bytes; ``cpu_s`` is the CPU time of the
command and of the processes it waited for.

What the numbers bound.  A sample reads the processes one after another and can miss a peak shorter than the
period, so the peak of the sums approximates the true peak from below.  The high-water marks summed over the
processes bound the resident peak of the processes seen from above (a page shared by two processes counts
twice).  Not seen: what a process allocates in its last period before it exits, a process that lives less
than one period, and a descendant that leaves the tree (a double fork re-parents it) or outlives COMMAND.
Linux only (/proc and smaps_rollup).  A Ctrl-C or SIGTERM reaches COMMAND (the terminal's Ctrl-C reaches the
whole process group; SIGTERM is passed on), and the watch waits for it and writes the summary.  Exits with
COMMAND's status (128 + N when signal N killed it).
"""
from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

GB = 1e9
MAX_PERIOD = 60.0
"""Longest sampling period accepted (seconds)."""


def high_water_mark(pid: int) -> int | None:
    """The process's VmHWM in bytes (None when it is gone or the kernel does not say)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def sample(root: psutil.Process) -> tuple[int, int, dict[int, int], dict[int, int]]:
    """(PSS summed, RSS summed, PSS per pid, VmHWM per pid) over ``root`` and its descendants now."""
    try:
        procs = [root] + root.children(recursive=True)
    except psutil.NoSuchProcess:
        return 0, 0, {}, {}
    pss = rss = 0
    per, hwm = {}, {}
    for q in procs:
        try:
            mi = q.memory_full_info()
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        pss, rss, per[q.pid] = pss + mi.pss, rss + mi.rss, mi.pss
        h = high_water_mark(q.pid)
        if h is not None:
            hwm[q.pid] = h
    return pss, rss, per, hwm


def _children_cpu() -> float:
    t = psutil.Process().cpu_times()
    return t.children_user + t.children_system


def watch(command: list[str], log: Path, period: float = 0.5) -> dict:
    """Run ``command``, sample it until it exits (module doc) and return the summary."""
    t0, cpu0 = time.time(), _children_cpu()
    hwm: dict[int, int] = {}
    peak = {"pss": (0, 0.0), "rss": (0, 0.0)}
    with open(log, "w") as out:
        proc = subprocess.Popen(command)
        main = threading.current_thread() is threading.main_thread()  # signal handlers: main thread only
        previous = signal.signal(signal.SIGTERM, lambda *_: proc.send_signal(signal.SIGTERM)) if main else None
        try:
            # a Ctrl-C anywhere in the sampling (the command got it too) stops it, and the command is waited for
            # below; the loop's own test is inside the try, so that no moment of it is left uncovered
            try:
                root = psutil.Process(proc.pid)
                while proc.poll() is None:
                    pss, rss, per, marks = sample(root)
                    t = time.time() - t0
                    for pid, h in marks.items():
                        hwm[pid] = max(hwm.get(pid, 0), h)
                    peak["pss"] = max(peak["pss"], (pss, t))
                    peak["rss"] = max(peak["rss"], (rss, t))
                    out.write(json.dumps({"t": round(t, 2), "pss": pss, "rss": rss, "per": per}) + "\n")
                    out.flush()
                    time.sleep(period)
            except psutil.NoSuchProcess:  # the command has already exited
                pass
            except KeyboardInterrupt:
                pass
            while True:
                try:
                    proc.wait()
                    break
                except KeyboardInterrupt:  # a second Ctrl-C: keep waiting, so that the summary is written
                    continue
        finally:
            if main:
                signal.signal(signal.SIGTERM, previous)
        summary = {"command": command, "returncode": proc.returncode, "wall_s": time.time() - t0,
                   "sample_period_s": period, "cpu_s": _children_cpu() - cpu0,
                   "peak_pss_summed_GB": peak["pss"][0] / GB, "peak_pss_at_s": peak["pss"][1],
                   "peak_rss_summed_GB": peak["rss"][0] / GB, "peak_rss_at_s": peak["rss"][1],
                   "hwm_summed_GB": sum(hwm.values()) / GB,
                   "hwm_largest_GB": max(hwm.values(), default=0) / GB,
                   "hwm_per_pid": hwm}
        out.write(json.dumps({"summary": summary}) + "\n")
    return summary


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(prog="python3 -m app.memwatch", usage="%(prog)s [--period S] LOG -- COMMAND ...",
                                     description=__doc__.split("\n\n")[0],
                                     epilog="Example: python3 -m app.memwatch mem.jsonl -- occ-companion table1 "
                                            "--tasks ICL,OR,AND --d 200 --quiet --out OUT")
    parser.add_argument("log", type=Path, help="the JSON-lines file to write (one sample per line, then the summary)")
    parser.add_argument("--period", type=float, default=0.5, help="seconds between samples (default 0.5)")
    split = argv.index("--") if "--" in argv else len(argv)
    args, command = parser.parse_args(argv[:split]), argv[split + 1:]
    if not command:
        parser.error("give the command to watch after --")
    if not 0 < args.period <= MAX_PERIOD:
        parser.error(f"--period must be in (0, {MAX_PERIOD:g}] seconds, got {args.period}")
    if args.log.is_dir() or not args.log.parent.is_dir():
        parser.error(f"{args.log} is a folder, or its folder does not exist: give a file in an existing folder")
    summary = watch(command, args.log, args.period)
    print(json.dumps({k: v for k, v in summary.items() if k != "hwm_per_pid"}))
    rc = summary["returncode"]
    return 128 - rc if rc < 0 else rc  # killed by signal N: the shell's 128 + N


if __name__ == "__main__":
    sys.exit(main())
