"""The child side of tests/app/test_kill_loop.py, run in processes of a multiprocessing fork server.

The fork server is a clean single-threaded process that imported this module once (imports and the
SymPy derivations warm), so each child starts in milliseconds and is never forked from a test worker
that has threads (a fork there can inherit a lock held by another thread and hang).
"""
from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile

from app.cli import guarded, main


def _warm() -> None:
    """Run each command once, so imports, derivations and matplotlib are loaded in the server."""
    with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()):
        main(["run", "--d", "5", "--steps", "2", "--epsilon", "0.01", "--quiet", "--out", tmp])
        main(["prove", "--d", "3", "--steps", "2", "--out", tmp])
        main(["latex", "--only", "kappa", "--out", os.path.join(tmp, "f.tex")])
        main(["table1", "--quick", "--tasks", "occurrence", "--jobs", "1", "--quiet", "--max-steps", "20",
              "--out", os.path.join(tmp, "t1")])
        main(["benchmark", "--tiny", "--out", os.path.join(tmp, "b.md")])
        main(["benchmark-engine", "--tiny", "--no-torch", "--out", os.path.join(tmp, "e.md")])
        from app.render.report import derivations_markdown

        derivations_markdown()
        import pyarrow.parquet  # noqa: F401 - sweep's and scope's rendering (no cluster is started here)

        from app.render import scope, sweep  # noqa: F401

        for study in ("kqv", "regime"):
            scope.renderer(study)


_warm()


def child(argv: list[str], log: str, die_at: int | None, folder: str | None) -> None:
    """Run ``main(argv)`` with stdout discarded and stderr into ``log``; exit with its status.  With
    ``die_at``, die (``os._exit(137)``, as under SIGKILL) just before the die_at-th rename or unlink
    under ``folder``."""
    rc = 99
    try:
        os.dup2(os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 2)
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
        sys.stdout = open(1, "w", closefd=False)
        sys.stderr = open(2, "w", closefd=False)
        if die_at is not None:
            _die_at(die_at, folder)
        rc = guarded(argv)  # what app.cli.entry runs
    except KeyboardInterrupt:  # before guarded took over: what the entry point would report
        rc = 130
    except BaseException:  # noqa: BLE001 - reported through the log and the status
        import traceback

        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(rc)


def _die_at(k: int, under: str) -> None:
    count = [0]
    real_replace, real_unlink = os.replace, os.unlink

    def step(path) -> None:
        if os.path.abspath(os.fspath(path)).startswith(under):
            count[0] += 1
            if count[0] == k:
                os._exit(137)

    def replace(src, dst, *a, **kw):
        step(dst)
        return real_replace(src, dst, *a, **kw)

    def unlink(path, *a, **kw):
        step(path)
        return real_unlink(path, *a, **kw)

    os.replace, os.unlink = replace, unlink
