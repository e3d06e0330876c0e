"""The output-folder discipline of ``app.io``: a Ctrl-C inside a commit, a changed file after its commit, and
a forked child of a killed command, each against the folder's promise (the old complete result or the new
one, never a mix; the lock held by the command alone)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from app import io as outio
from app.io import OutputError, OutputFolder, complete_result, recover

OLD = {"a.txt": "old a\n", "b.txt": "old b\n"}
NEW = {"a.txt": "new a\n", "b.txt": "new b\n"}


def _commit(folder: Path, files: dict) -> None:
    with OutputFolder(folder, result="demo") as out, out.transaction() as tx:
        for name, text in files.items():
            tx.write_text(name, text)


def _visible(folder: Path) -> dict:
    return {p.name: p.read_text() for p in sorted(folder.iterdir()) if not p.name.startswith(".")}


class Interrupted(Exception):
    """What the test's SIGINT handler raises (so pytest's own Ctrl-C handling stays out of it)."""


@pytest.fixture
def sigint_raises():
    """SIGINT raises ``Interrupted`` in the main thread for the test's duration."""
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals are handled in the main thread only")

    def handler(signum, frame):
        raise Interrupted

    old = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


def _interrupt_after_first_rename(monkeypatch, deliver) -> list:
    """Make the commit's first rename of an artifact call ``deliver()`` (a Ctrl-C) right after it."""
    real = os.replace
    seen = []

    def replace(src, dst, *args, **kwargs):
        real(src, dst, *args, **kwargs)
        if Path(dst).name in NEW and not seen:
            seen.append(Path(dst).name)
            deliver()

    monkeypatch.setattr(os, "replace", replace)
    return seen


def _ctrl_c_inside_the_commit(folder: Path, monkeypatch, deliver) -> None:
    _commit(folder, OLD)
    seen = _interrupt_after_first_rename(monkeypatch, deliver)
    with pytest.raises(Interrupted):  # delivered, at the latest once the commit is done
        _commit(folder, NEW)
        time.sleep(1.0)  # a signal handed to another thread reaches the main thread's handler within this
    assert seen, "the commit renamed no artifact"
    # before any recovery (what a user sees after Ctrl-C): one complete result, never a mix
    assert _visible(folder) in (OLD, NEW), _visible(folder)
    assert _visible(folder) == NEW  # the commit was under way: it finished
    assert complete_result(folder, "demo") is not None
    assert not list(folder.glob(".*.journal"))


def test_ctrl_c_at_the_main_thread_between_two_renames_is_held_until_the_commit_is_done(
        tmp_path, monkeypatch, sigint_raises):
    """A SIGINT sent to the main thread between the commit's two renames waits until the commit is done
    (``signals_held``); without the hold the folder would keep one new file beside one old one."""
    main = threading.main_thread().ident
    _ctrl_c_inside_the_commit(tmp_path / "out", monkeypatch, lambda: signal.pthread_kill(main, signal.SIGINT))


def test_ctrl_c_to_the_process_between_two_renames_is_held_while_other_threads_run(
        tmp_path, monkeypatch, sigint_raises):
    """A Ctrl-C goes to the whole process, and the kernel hands it to a thread that does not block it (a
    progress bar's monitor, a BLAS worker): Python then runs the handler in the main thread at once,
    whatever the main thread's signal mask.  The commit holds it all the same."""
    stop = threading.Event()
    other = threading.Thread(target=stop.wait, daemon=True)  # started before the commit: SIGINT unblocked
    other.start()
    try:
        _ctrl_c_inside_the_commit(tmp_path / "out", monkeypatch, lambda: os.kill(os.getpid(), signal.SIGINT))
    finally:
        stop.set()
        other.join()


def test_signals_held_restores_the_handlers_and_the_mask(sigint_raises):
    """After the hold, SIGINT reaches the handler it had before, and the signal mask is as before."""
    before = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    handler = signal.getsignal(signal.SIGINT)
    with outio.signals_held():
        pass
    assert signal.getsignal(signal.SIGINT) is handler
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == before
    with pytest.raises(Interrupted):
        signal.raise_signal(signal.SIGINT)


def test_a_file_changed_after_its_commit_makes_the_result_incomplete(tmp_path):
    """The completion marker vouches for the bytes it lists: a file changed after the commit (same size,
    one byte), or removed, leaves no complete result."""
    folder = tmp_path / "out"
    _commit(folder, NEW)
    manifest = complete_result(folder, "demo")
    assert manifest is not None and sorted(manifest["files"]) == ["a.txt", "b.txt"]
    (folder / "b.txt").write_text("new B\n")
    assert complete_result(folder, "demo") is None
    (folder / "b.txt").write_text(NEW["b.txt"])
    assert complete_result(folder, "demo") is not None
    (folder / "a.txt").unlink()
    assert complete_result(folder, "demo") is None


def test_a_commit_interrupted_after_its_journal_is_rolled_forward(tmp_path, monkeypatch):
    """A kill after the journal (simulated: the second rename fails) leaves a folder that the next entry
    completes to the new result."""
    folder = tmp_path / "out"
    _commit(folder, OLD)
    real, count = os.replace, []

    def replace(src, dst, *args, **kwargs):
        if Path(dst).name in NEW:
            count.append(dst)
            if len(count) == 2:
                raise SystemExit("killed")
        return real(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(SystemExit):
        _commit(folder, NEW)
    monkeypatch.setattr(os, "replace", real)
    assert _visible(folder) not in (OLD, NEW)  # half-way, as a kill leaves it
    assert recover(folder) == ["demo"]
    assert _visible(folder) == NEW and complete_result(folder, "demo") is not None


@pytest.mark.slow  # starts a Python process
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_of_a_killed_command_does_not_hold_the_folder(tmp_path):
    """A command that holds the folder forks a child (as a process pool does) and is killed: while the
    child lives on, the next command into the folder is not refused."""
    folder = tmp_path / "out"
    script = textwrap.dedent(f"""
        import os, signal, sys, time
        from app.io import OutputFolder
        with OutputFolder({str(folder)!r}, result="demo"):
            child = os.fork()
            if child == 0:
                devnull = os.open(os.devnull, os.O_RDWR)
                os.dup2(devnull, 1)
                os.dup2(devnull, 2)
                time.sleep(60)
                os._exit(0)
            print(child, flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
    """)
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(root)})
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    child = int(proc.stdout.split()[0])
    try:
        os.kill(child, 0)  # the child lives on
        try:
            with OutputFolder(folder, result="demo"):
                pass
        except OutputError as exc:
            pytest.fail(f"the killed command's child holds the folder: {exc}")
    finally:
        os.kill(child, signal.SIGKILL)


def test_a_folder_busy_for_a_moment_is_waited_for_and_one_busy_longer_refused(tmp_path, monkeypatch):
    """A lock held for less than ``LOCK_WAIT_S`` (a program a killed command was starting, between its fork
    and its exec) is waited out; one held longer is refused with the usual message, after the wait."""
    import fcntl

    monkeypatch.setattr(outio, "LOCK_WAIT_S", 1.0)
    holder = os.open(tmp_path, os.O_RDONLY)
    fcntl.flock(holder, fcntl.LOCK_EX)
    threading.Timer(0.3, lambda: fcntl.flock(holder, fcntl.LOCK_UN)).start()
    t0 = time.monotonic()
    with OutputFolder(tmp_path):
        waited = time.monotonic() - t0
    assert 0.25 <= waited < 1.0
    fcntl.flock(holder, fcntl.LOCK_EX)
    t0 = time.monotonic()
    with pytest.raises(OutputError, match="is in use by another occ-companion command"):
        OutputFolder(tmp_path).__enter__()
    assert time.monotonic() - t0 >= 1.0
    os.close(holder)
