"""Output folders of the suite's commands: one discipline for every command that writes.

Use it as two nested context managers::

    with OutputFolder(args.out, result="run", owns=("summary.json", "risk_curves.png")) as out:
        ...                                  # checked, locked and tidied: now do the work
        with out.transaction() as tx:        # the new result, staged and committed as a whole
            tx.write("risk_curves.png", lambda fh: fig.savefig(fh, format="png"))
            tx.write_text("summary.json", text)

What it promises, step by step:

1. **Check before any work.**  ``OutputFolder.__enter__`` creates the folder, probes that a file can be
   created and renamed in it, and raises :class:`OutputError` (the CLI's exit status 2, "bad usage")
   otherwise, so an unwritable ``--out`` is refused before the computation, never after it.
2. **Lock.**  It then takes an exclusive ``flock`` on the folder itself (no lock file is left behind); a
   second command into the same folder is refused with :class:`OutputError` while the first holds it.
   The lock's descriptor is closed in every forked child (process-pool workers) and on exec, so only the
   command itself holds the lock: a child that outlives a killed command does not keep the folder busy.
   A program the command starts (``git``) holds it between its fork and its exec, which a loaded machine
   can stretch past the command's death, so a busy folder is tried again for ``LOCK_WAIT_S`` seconds
   before the refusal.
3. **Recovery and tidying.**  Under the lock it finishes a commit that a SIGKILL interrupted (a journal is
   left, see 5) and deletes the temporary files (``.*.tmp``) of writers that were killed.
4. **Staging.**  ``tx.write`` / ``tx.write_text`` write each artifact to a temporary file in the folder
   (flushed and fsynced); nothing visible changes yet.  If the work inside the ``with`` block raises
   (an error, Ctrl-C), the staged files are deleted and the folder is exactly as before.
5. **Commit.**  When the transaction block ends normally, with SIGINT and SIGTERM held back (they are
   delivered once the commit is done, so Ctrl-C never lands half-way):

   a. a journal ``.occ-<result>.journal`` naming the staged files, their SHA-256 and the stale
      artifacts is written atomically: from here on the new result is complete on disk;
   b. every staged file is renamed over its target (``os.replace``, atomic per file);
   c. stale artifacts are removed: the files this result wrote last time (from its marker) and the
      names matching ``owns`` (glob patterns, e.g. ``table1_*.png``) that the new result does not contain;
   d. the completion marker ``.occ-<result>.complete.json`` (the manifest: file names, SHA-256,
      UTC time) is written atomically, last; then the journal is deleted.

   A SIGKILL before (a) leaves the previous result untouched (plus temporary files that step 3 of the
   next command removes); a SIGKILL after (a) leaves a journal with which step 3 of the next command
   into the folder (or :func:`recover`) completes the new result.  So the previous result is never
   deleted before the new one is complete, and after any kill the folder holds, once recovered, either
   the old complete result or the new one, never a mix.  :func:`complete_result` reads a folder the
   same way a test does: the manifest of the complete result, or None.

A result of a single file may pass ``marker=False``: the rename of that file is then its commit and its
own completion marker (``latex --out``, ``prove --proofs-doc``).  Artifact names may contain ``/``
(``docs`` writes ``README.md`` and ``docs/derivations.md`` under the checkout); staged files always live
in the top folder.

>>> import tempfile
>>> with OutputFolder(tempfile.mkdtemp(), result="demo") as out:
...     with out.transaction() as tx:
...         tx.write_text("a.txt", "hello")
...     with OutputFolder(out.path) as second:  # a second command into the same folder
...         pass
Traceback (most recent call last):
...
app.io.OutputError: --out ... is in use by another occ-companion command; ...
>>> sorted(complete_result(out.path, "demo")["files"])
['a.txt']
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import signal
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from types import TracebackType
from typing import BinaryIO, Callable, Iterator, Sequence

from theory.files import atomic_write, atomic_write_text

PREFIX = ".occ-"
LOCK_WAIT_S = 2.0
"""How long a command waits for a busy output folder before refusing it (step 2 of the module docstring)."""
COMMITTED: list[Path] = []
"""Every artifact committed in this process (the CLI's Ctrl-C message says what was written)."""
_LOCKED: set["OutputFolder"] = set()
"""The folders whose lock this process holds (their descriptors are closed in a forked child)."""


def _drop_locks_in_child() -> None:
    """In a forked child, close the descriptors of the parent's folder locks without unlocking them.

    A ``flock`` belongs to the open file description, which a forked child shares whatever the descriptor's
    close-on-exec flag: a child that kept the descriptor (a process-pool worker of ``table1``) would hold the
    folder's lock after its parent was killed, and refuse every later command into the folder.  The child
    never commits into the folder, so it needs no lock; ``LOCK_UN`` here would release the parent's lock."""
    for folder in list(_LOCKED):
        fd, folder._fd = folder._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
    _LOCKED.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_drop_locks_in_child)


class OutputError(Exception):
    """The output folder cannot be used (not creatable, not writable, or held by another command)."""


def _marker(result: str) -> str:
    return f"{PREFIX}{result}.complete.json"


def _journal(result: str) -> str:
    return f"{PREFIX}{result}.journal"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _read_json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Hold back SIGINT and SIGTERM for the duration (they are delivered when it ends); a no-op off the
    main thread, where Python does not deliver them anyway.

    Two ways in, both closed.  A signal sent to the main thread stays pending while the main thread blocks
    it (``pthread_sigmask``).  But a Ctrl-C is sent to the whole process, and the kernel hands it to any
    thread that does not block it (a progress bar's monitor, a BLAS worker, started before the hold); Python
    then runs its handler in the main thread at once, whatever the main thread's mask.  So the Python
    handlers are replaced for the duration by one that only records the signal, and a recorded signal is
    raised again, to the handler it had before, when the hold ends."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held = (signal.SIGINT, signal.SIGTERM)
    caught: list[int] = []

    def record(signum, frame) -> None:
        caught.append(signum)

    # a handler installed outside Python (getsignal gives None) cannot be put back: its signal is only blocked
    handlers = {s: h for s in held if (h := signal.getsignal(s)) is not None}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        for s in handlers:
            signal.signal(s, record)
        yield
    finally:
        for s, handler in handlers.items():
            signal.signal(s, handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, old)  # signals pending at the main thread arrive here
        for s in dict.fromkeys(caught):
            signal.raise_signal(s)


def _apply(folder: Path, journal: dict) -> None:
    """Steps b-d of the commit (idempotent: also the roll-forward of an interrupted commit)."""
    files = journal["files"]
    for name, entry in files.items():
        staged, target = folder / entry["staged"], folder / name
        if staged.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(staged, target)
    for name in journal["remove"]:
        (folder / name).unlink(missing_ok=True)
    _fsync_dir(folder)
    if journal.get("marker", True):
        manifest = {"result": journal["result"], "files": {n: e["sha256"] for n, e in files.items()},
                    "written": journal["written"]}
        atomic_write_text(folder / _marker(journal["result"]), json.dumps(manifest, indent=2) + "\n")
    (folder / _journal(journal["result"])).unlink(missing_ok=True)
    _fsync_dir(folder)


def recover(folder: str | os.PathLike) -> list[str]:
    """Complete every commit in ``folder`` that a kill interrupted after its journal was written, then
    delete the temporary files of killed writers.  Returns the results rolled forward.  Call it only
    while holding the folder's lock (``OutputFolder`` does, on entry) or on a folder no command uses."""
    folder = Path(folder)
    done = []
    for journal_path in sorted(folder.glob(f"{PREFIX}*.journal")):
        journal = _read_json(journal_path)
        if journal is None or not isinstance(journal.get("files"), dict):
            journal_path.unlink(missing_ok=True)  # written atomically, so only a foreign file can be broken
            continue
        _apply(folder, journal)
        done.append(journal["result"])
    for tmp in folder.glob(".*.tmp"):
        with contextlib.suppress(OSError):
            tmp.unlink()
    return done


def complete_result(folder: str | os.PathLike, result: str) -> dict | None:
    """The manifest of the complete ``result`` in ``folder`` (as written by a commit), or None when there
    is none or a listed file is missing or differs from its recorded SHA-256."""
    folder = Path(folder)
    manifest = _read_json(folder / _marker(result))
    if manifest is None or not isinstance(manifest.get("files"), dict):
        return None
    for name, digest in manifest["files"].items():
        path = folder / name
        if not path.is_file() or _sha256(path) != digest:
            return None
    return manifest


class Transaction:
    """The new result of one command, staged file by file and committed as a whole (see the module)."""

    def __init__(self, folder: "OutputFolder", marker: bool) -> None:
        self.folder = folder
        self.marker = marker
        self.staged: dict[str, Path] = {}

    def write(self, name: str, write: Callable[[BinaryIO], object]) -> Path:
        """Stage one artifact through ``write(binary_file)``; returns the path it will have."""
        top = self.folder.path
        if name in self.staged:
            raise ValueError(f"{name} is staged twice")
        fd, tmp = tempfile.mkstemp(dir=top, prefix=f".{name.replace('/', '_')}.", suffix=".tmp")
        try:
            os.fchmod(fd, _file_mode())
            with os.fdopen(fd, "wb") as fh:
                write(fh)
                fh.flush()
                os.fsync(fh.fileno())
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        self.staged[name] = Path(tmp)
        return top / name

    def write_text(self, name: str, text: str) -> Path:
        """Stage one UTF-8 text artifact."""
        return self.write(name, lambda fh: fh.write(text.encode("utf-8")))

    def discard(self) -> None:
        for tmp in self.staged.values():
            tmp.unlink(missing_ok=True)
        self.staged.clear()

    def commit(self) -> list[Path]:
        """Journal, rename, remove stale artifacts, write the marker (signals held back meanwhile)."""
        out = self.folder
        top, result = out.path, out.result
        previous = _read_json(top / _marker(result)) or {}
        stale = set(previous.get("files", {})) if isinstance(previous.get("files"), dict) else set()
        for pattern in out.owns:
            stale |= {str(p.relative_to(top)) for p in top.glob(pattern) if p.is_file()}
        stale -= set(self.staged)
        journal = {"result": result, "marker": self.marker, "remove": sorted(stale),
                   "written": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                   "files": {name: {"staged": tmp.name, "sha256": _sha256(tmp)} for name, tmp in self.staged.items()}}
        with signals_held():
            if len(self.staged) == 1 and not stale and not self.marker:
                (name, tmp), = self.staged.items()  # one file: its rename is the commit
                (top / name).parent.mkdir(parents=True, exist_ok=True)
                os.replace(tmp, top / name)
                _fsync_dir(top)
            else:
                atomic_write_text(top / _journal(result), json.dumps(journal) + "\n")
                _apply(top, journal)
            paths = [top / name for name in self.staged]
            COMMITTED.extend(paths)  # inside: a Ctrl-C held back is delivered after this is recorded
        self.staged.clear()
        return paths


def _file_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


class OutputFolder:
    """The output folder of a command, used as a context manager (the protocol is in the module docstring).

    ``result`` names the command's result (its marker and journal are ``.occ-<result>.*``); ``owns`` are
    glob patterns (relative to the folder) of the artifacts this result owns, so older copies that the
    new result does not write are removed at commit even without a marker (files of earlier versions);
    ``flag`` is the option named in messages (``label`` replaces "FLAG PATH" there when given).
    """

    def __init__(self, path: str | os.PathLike, *, result: str = "result", owns: Sequence[str] = (),
                 flag: str = "--out", label: str | None = None) -> None:
        self._given = os.fspath(path)
        self.path = Path(path)
        self.label = label
        self.result = result
        self.owns = tuple(owns)
        self.flag = flag
        self._fd: int | None = None

    def __enter__(self) -> "OutputFolder":
        where = self.label or f"{self.flag} {self.path}"
        if self._given == "":
            raise OutputError(f"{self.flag} needs a folder name (use {self.flag} . for the current folder)")
        try:
            if self.path.exists() and not self.path.is_dir():
                raise OutputError(f"{where} is a file, not a folder; choose another {self.flag}")
            self.path.mkdir(parents=True, exist_ok=True)
            probe_fd, probe = tempfile.mkstemp(dir=self.path, prefix=".write-probe.", suffix=".tmp")
            os.close(probe_fd)
            os.replace(probe, probe + ".renamed")
            os.unlink(probe + ".renamed")
        except OutputError:
            raise
        except OSError as exc:
            raise OutputError(f"{where} is not a writable folder ({exc.strerror or exc}); "
                              f"choose another {self.flag}") from None
        fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)  # a program a command starts does not hold it
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise OutputError(f"{where} is in use by another occ-companion command; wait for it to "
                                      f"finish or choose another {self.flag}") from None
                time.sleep(0.02)
        self._fd = fd
        _LOCKED.add(self)
        try:
            recover(self.path)
        except BaseException:
            self._release()
            raise
        return self

    def _release(self) -> None:
        _LOCKED.discard(self)
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._release()

    @contextlib.contextmanager
    def transaction(self, *, marker: bool = True) -> Iterator[Transaction]:
        """Stage the new result inside the block; commit it when the block ends normally, discard the
        staged files when it raises (the folder then holds the previous result unchanged)."""
        if self._fd is None:
            raise RuntimeError("OutputFolder.transaction needs the folder entered (with OutputFolder(...) as out)")
        tx = Transaction(self, marker)
        try:
            yield tx
        except BaseException:
            tx.discard()
            raise
        tx.commit()

    def write_text(self, name: str, text: str, *, marker: bool = False) -> Path:
        """Commit a result of one text artifact (a transaction of one file)."""
        with self.transaction(marker=marker) as tx:
            return tx.write_text(name, text)

    def write(self, name: str, write: Callable[[BinaryIO], object], *, marker: bool = False) -> Path:
        """Commit a result of one binary artifact written through ``write(file)``."""
        with self.transaction(marker=marker) as tx:
            return tx.write(name, write)


def output_file(path: str | os.PathLike, *, result: str, flag: str = "--out",
                example: str = "page.md") -> tuple[OutputFolder, str]:
    """A result of one file at ``path`` (``latex --out``, ``prove --proofs-doc``, the benchmarks' pages, the
    docs generators): its folder as an :class:`OutputFolder` (not yet entered: entering it checks and locks the
    folder, before any work) and the file's name, which ``out.write_text(name, text)`` commits by one rename
    (the file is its own completion marker; killed writers' temporary files are removed on the next entry).
    The lock is on the file's folder, so two writers of files in one folder take turns.  Refuses a path that
    is a folder, or names none, with :class:`OutputError` (exit status 2).

    >>> output_file("docs/", result="x")
    Traceback (most recent call last):
    ...
    app.io.OutputError: --out docs/ is a folder; give a file name such as docs/page.md
    """
    given = os.fspath(path)
    target = Path(given)
    if given == "":
        raise OutputError(f"{flag} needs a file name")
    if given.endswith("/") or target.is_dir():
        raise OutputError(f"{flag} {given} is a folder; give a file name such as {target / example}")
    return OutputFolder(target.parent, result=result, flag=flag, label=f"the folder of {flag} {given}"), target.name


__all__ = ["OutputFolder", "OutputError", "Transaction", "recover", "complete_result", "signals_held",
           "output_file", "atomic_write", "atomic_write_text", "COMMITTED"]
