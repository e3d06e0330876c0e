"""Output folders of the suite's commands: atomic writes, a lock, stale artifacts, early checks.

Every artifact is written to a temporary file in its folder and renamed over the target
(``os.replace``), so a reader, a crash or Ctrl-C never sees half a file.  ``OutputFolder`` checks
that ``--out`` can be written *before* the computation starts, holds an exclusive ``flock`` on the
folder while the command runs (a second run into the same folder is refused), and removes the
artifacts of an earlier run that this run does not write again.
"""
from __future__ import annotations

import fcntl
import os
import tempfile
from pathlib import Path
from types import TracebackType
from typing import BinaryIO, Callable

from theory.files import atomic_write, atomic_write_text


class OutputError(Exception):
    """The output folder cannot be used (not creatable, not writable, or held by another run)."""


class OutputFolder:
    """The ``--out`` folder of a command, used as a context manager.

    On entry the folder is created, probed for writability and locked (``fcntl.flock`` on the
    folder itself, so no lock file is left behind); on exit the lock is released.  ``flag`` is the
    option name used in messages.

    >>> import tempfile
    >>> with OutputFolder(tempfile.mkdtemp()) as out:
    ...     path = out.write_text("a.txt", "hello")
    ...     with OutputFolder(out.path) as second:  # a second run into the same folder
    ...         pass
    Traceback (most recent call last):
    ...
    app.io.OutputError: --out ... is in use by another occ-companion run; ...
    >>> path.read_text()
    'hello'
    """

    def __init__(self, path: str | os.PathLike, *, flag: str = "--out") -> None:
        self.path = Path(path)
        self.flag = flag
        self._fd: int | None = None

    def __enter__(self) -> "OutputFolder":
        where = f"{self.flag} {self.path}"
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            probe_fd, probe = tempfile.mkstemp(dir=self.path, prefix=".write-probe.")
            os.close(probe_fd)
            os.unlink(probe)
        except OSError as exc:
            raise OutputError(f"{where} is not a writable folder ({exc.strerror or exc}); "
                              f"choose another {self.flag}") from None
        fd = os.open(self.path, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise OutputError(f"{where} is in use by another occ-companion run; wait for it to finish "
                              f"or choose another {self.flag}") from None
        self._fd = fd
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def remove(self, *names: str) -> None:
        """Delete these artifacts of an earlier run, where present."""
        for name in names:
            (self.path / name).unlink(missing_ok=True)

    def write_text(self, name: str, text: str) -> Path:
        """Write one text artifact atomically; returns its path."""
        target = self.path / name
        atomic_write_text(target, text)
        return target

    def write(self, name: str, write: Callable[[BinaryIO], object]) -> Path:
        """Write one binary artifact atomically through ``write(file)``; returns its path."""
        target = self.path / name
        atomic_write(target, write)
        return target
