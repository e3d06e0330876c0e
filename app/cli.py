"""occ-companion: proof companion for the occurrence language with geometric lengths.

run: the main job (three-phase plan in its step-size regime vs the impossibility plans and joint GD);
prove: every claim certified in ball arithmetic (arb), and the proofs for all d;
table1: the reconstructed Table 1 experiments; sweep: Table 1 under every reading of the protocol;
scope: how far the theorem reaches once its simplifications are relaxed (five studies);
lag: the lag map of every Table 1 row, joint GD over eta_att / eta_out and the readout's start;
finite: the finite-sample plan; values / evaluate: closed forms and exact series at a point;
docs / latex: regenerate docs/derivations.md and README's claims, export LaTeX.

Exit status, the same for every command: 0 done; 1 a claim, target or check failed; 2 bad usage
(refused before any work); 3 undecided at the precision used; 4 internal error; 130 interrupted."""
from __future__ import annotations

import argparse
import importlib
import os
import shlex
import signal
import sys
import threading
import time
from typing import Sequence

from theory.validation import SettingError

from app import __version__, exitcodes
from app.checkout import NotInCheckout
from app.io import COMMITTED, OutputError
from app.options import UsageError

COMMAND_MODULES: tuple[str, ...] = (
    "app.commands.run",       # run
    "app.commands.finite",    # finite
    "app.commands.evaluate",  # values, evaluate
    "app.commands.docs",      # latex, docs
    "app.commands.prove",     # prove
    "app.commands.table1",    # table1
    "app.commands.sweep",     # sweep
    "app.commands.scope",     # scope
    "app.commands.lag",       # lag
    "app.commands.benchmarks",  # benchmark, benchmark-engine
)
"""Modules that register subcommands: each has ``add_parser(subparsers)``, which adds its parsers
and sets ``func`` (parsed options -> exit status).  A new command is one more line here."""

PROG = "occ-companion"
EXIT_USAGE = exitcodes.USAGE  # this module's names of app.exitcodes' statuses
EXIT_INTERRUPTED = exitcodes.INTERRUPTED
TRACEBACK_ENV = exitcodes.TRACEBACK_ENV


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand (options shown with their defaults in --help)."""
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).add_parser(sub)
    return parser


def advice(exc: SettingError, args: argparse.Namespace) -> str:
    """A SettingError from the library, restated in terms of the flags the user can type."""
    text = str(exc)
    if "max_terms" in text and hasattr(args, "max_terms"):
        p = f"--p {args.p:g} makes strings long and " if getattr(args, "p", None) is not None else ""
        how = {"run": "--evaluator integral", "evaluate": "--method integral (symmetric --alpha and --beta)"}
        integral = (f"; or use {how[args.cmd]}, whose cost does not grow with d and the lengths"
                    if args.cmd in how and getattr(args, "loss", "squared") == "squared"
                    and getattr(args, "evaluator", getattr(args, "method", "")) != "integral" else "")
        return (f"the exact series at this setting needs more than --max-terms {args.max_terms} terms ({p}the "
                f"enumeration grows with d and the string length): raise --max-terms, loosen --tol (now "
                f"{args.tol:g}){' or use a larger --p' if p else ''}{integral}")
    if "max_terms" in text:  # a command without --max-terms (finite)
        return ("the exact population series at this setting is too large to enumerate (small --p makes strings "
                "long, large --d makes many terms); use a larger --p or a smaller --d")
    return text


_RESEND_LOCK = threading.Lock()
_RESEND = {"pending": False}
"""A Ctrl-C caught by ``_unraisable`` and not yet delivered again (``main`` takes it over when the command
finishes first, so it is neither lost nor delivered to the caller after ``main`` has returned)."""


def _check_signals() -> None:
    """Nothing: calling a Python function makes the interpreter run pending signal handlers first."""


def _unraisable(info) -> None:
    """``sys.unraisablehook`` of the CLI: a Ctrl-C that lands in a finalizer or a weakref callback (garbage
    collection) cannot propagate, and Python would print "Exception ignored ... Traceback" and go on as if it
    never came.  It is sent again instead, so it is delivered at the next ordinary point of the command (old
    results kept, exit 130, one line).  Python's report of a signal lost to a switch to SIG_IGN
    (``_race_report``: the sweep ignores Ctrl-C while its workers start) is dropped, as that switch asked.
    Anything else goes to Python's own hook."""
    if _race_report(info):
        return
    if isinstance(info.exc_value, KeyboardInterrupt) or info.exc_type is KeyboardInterrupt:
        import _thread

        with _RESEND_LOCK:
            _RESEND["pending"] = True

        def again() -> None:  # from another thread, a moment later: delivered after this hook has returned
            time.sleep(0.005)
            with _RESEND_LOCK:  # unless main has finished first and taken the interrupt over
                # interrupt_main does nothing when SIGINT is ignored or default (e.g. after ``entry`` in
                # this process): then the interrupt stays pending and main takes it over when it finishes
                if _RESEND["pending"] and callable(signal.getsignal(signal.SIGINT)):
                    _RESEND["pending"] = False
                    _thread.interrupt_main(signal.SIGINT)

        try:
            threading.Thread(target=again, daemon=True).start()
        except KeyboardInterrupt:  # re-sent while this hook still ran (a loaded machine): kept for main
            with _RESEND_LOCK:
                _RESEND["pending"] = True
        return
    sys.__unraisablehook__(info)


_INTERRUPTS = []
"""The Ctrl-C's (and SIGTERMs) ``entry`` has seen: a C extension may turn the KeyboardInterrupt into another
exception with no trace of it (pandas' ``PyCapsule_Import`` raises a bare ImportError when the import it
runs is interrupted), and a failure after a Ctrl-C is an interruption, not a bug."""


def interrupt_inside(exc: BaseException) -> bool:
    """Whether ``exc`` was caused by a Ctrl-C: a KeyboardInterrupt raised inside a callback of a C extension
    comes back as a SystemError ("returned a result with an exception set") whose cause is the interrupt; or
    any exception after ``entry`` saw a Ctrl-C or SIGTERM (``_INTERRUPTS``)."""
    if _INTERRUPTS:
        return True
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def interrupted(who: str) -> int:
    """Say what a Ctrl-C left (``who``: the program and command in the message); the exit status 130."""
    if COMMITTED:
        done = ", ".join(str(p) for p in COMMITTED)
        print(f"{who}: interrupted after writing {done} (complete)", file=sys.stderr)
    else:
        print(f"{who}: interrupted; nothing new was written (earlier results are kept)", file=sys.stderr)
    return exitcodes.INTERRUPTED


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (``app.exitcodes``: 0 done, 1 a claim or target
    failed, 2 bad usage, 3 undecided, 4 internal error, 130 interrupted).

    >>> main(["--version"])  # doctest: +ELLIPSIS
    occ-companion ...
    0
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    COMMITTED.clear()
    previous_hook, sys.unraisablehook = sys.unraisablehook, _unraisable
    status = exitcodes.INTERRUPTED
    try:
        status = _main(argv)
        with _RESEND_LOCK:  # a Ctrl-C from a finalizer that the command finished before receiving
            lost, _RESEND["pending"] = _RESEND["pending"], False
        _check_signals()  # one re-sent just before the lock was taken is raised here, not in the caller
    except KeyboardInterrupt:
        lost = True
    finally:
        sys.unraisablehook = previous_hook
    if lost and status != exitcodes.INTERRUPTED:
        return interrupted(f"{PROG} {argv[0] if argv else ''}".rstrip())
    return status


def _main(argv: list[str]) -> int:
    cmd = "?"
    try:
        parser = build_parser()
        try:
            args = parser.parse_args(argv)
        except SystemExit as stop:  # --help, --version, or a flag argparse refused (exit 2)
            return int(stop.code or 0)
        cmd = args.cmd
        return args.func(args)
    except (UsageError, OutputError, NotInCheckout) as exc:
        print(f"{PROG} {cmd}: error: {exc}", file=sys.stderr)
        return exitcodes.USAGE
    except SettingError as exc:
        print(f"{PROG} {cmd}: error: {advice(exc, args)}", file=sys.stderr)
        return exitcodes.USAGE
    except KeyboardInterrupt:
        return interrupted(f"{PROG} {cmd}")
    except BrokenPipeError:  # output piped into e.g. `head`: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return exitcodes.DONE
    except MemoryError:
        print(f"{PROG} {cmd}: error: out of memory for `{shlex.join([PROG, *argv])}`; use smaller sizes",
              file=sys.stderr)
        return exitcodes.INTERNAL
    except Exception as exc:  # noqa: BLE001 - a bug: one line naming the input, its own exit status
        if interrupt_inside(exc):  # Ctrl-C inside a C extension's callback (python-flint's acb.integral)
            return interrupted(f"{PROG} {cmd}")
        if os.environ.get(TRACEBACK_ENV, "") not in ("", "0"):
            raise
        what = f"{type(exc).__name__}: {exc}".splitlines()[0] if str(exc) else type(exc).__name__
        print(f"{PROG} {cmd}: internal error ({what}) on input `{shlex.join([PROG, *argv])}`; "
              f"please report it (set {TRACEBACK_ENV}=1 for the traceback)", file=sys.stderr)
        return exitcodes.INTERNAL


_FINISHED = {"command": False}
"""Whether ``guarded``'s command has returned: ``on_interrupt`` then drops the signal."""


def on_interrupt(signum, frame):
    """The handler of SIGINT and SIGTERM while a command runs (``entry``): the signal is remembered
    (``_INTERRUPTS``: a C extension that turns the KeyboardInterrupt into another error, such as matplotlib's
    "Invalid bounding box", still reports an interruption) and raised as KeyboardInterrupt, so SIGTERM is
    handled as Ctrl-C: staged files removed, exit 130.  Once the command has returned (``_FINISHED``), the
    signal is dropped."""
    if _FINISHED["command"]:
        return
    _INTERRUPTS.append(signum)
    raise KeyboardInterrupt


def _race_report(info) -> bool:
    """Whether an unraisable error is Python's report that a SIGINT or SIGTERM reached a handler that was
    being set to SIG_IGN or SIG_DFL at that moment ("Signal 2 ignored due to race condition"): Python
    records the signal in its C handler, and when it runs the Python handler a moment later, finds none."""
    return (isinstance(info.exc_value, OSError)
            and str(info.exc_value) in {f"Signal {int(s)} ignored due to race condition"
                                        for s in (signal.SIGINT, signal.SIGTERM)})


def _after_command(info) -> None:
    """``sys.unraisablehook`` once ``guarded``'s command has returned: a signal that Python reports lost to
    the switch to SIG_IGN (``_race_report``) is what that switch asked for, dropped without a traceback;
    anything else goes to Python's own hook."""
    if not _race_report(info):
        sys.__unraisablehook__(info)


def guarded(argv: Sequence[str]) -> int:
    """``main(argv)`` with SIGTERM handled as Ctrl-C, then no late interrupt: once the command has finished
    and printed, a Ctrl-C or SIGTERM is dropped (``on_interrupt``) and then ignored (SIG_IGN: Python puts
    its own handlers back to the default ones at shutdown, but keeps SIG_IGN), so it does not turn the
    command's status into 130, and prints nothing.

    Switching a handler to SIG_IGN races with a signal that arrives during the switch; Python then prints
    "OSError: Signal 2 ignored due to race condition" with a traceback.  Such a report is dropped here
    (``_after_command``), since ignoring the signal is what was asked.

    Meant as a process's last act (``entry``, the kill test's children): it leaves SIGINT and SIGTERM
    ignored and its own unraisable hook installed."""
    _FINISHED["command"] = False
    COMMITTED.clear()  # an interrupt before main clears it must not report an earlier command's files
    status = None
    try:
        signal.signal(signal.SIGTERM, on_interrupt)
        signal.signal(signal.SIGINT, on_interrupt)
        status = main(argv)
    except KeyboardInterrupt:  # before main's own handling began, or in its last call (``interrupted``)
        pass
    finally:  # also when main re-raises a bug (TRACEBACK_ENV); Python 3.11 runs no signal handler between
        _FINISHED["command"] = True  # main's return and this line (none on a return, a store or a load)
        sys.unraisablehook = _after_command  # the process's last act: not restored
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if status is None:  # interrupted before main's handling began, or as it ended: 130 and its message
        return interrupted(f"{PROG} {argv[0] if argv else ''}".rstrip())
    return status


def entry(command: Sequence[str] = ()) -> int:
    """The process entry point (``occ-companion``, ``python3 -m app``, and ``python3 -m app.X`` with the
    subcommand X as ``command``): ``guarded`` on ``command`` and the process's arguments."""
    return guarded([*command, *sys.argv[1:]])


if __name__ == "__main__":  # pragma: no cover
    sys.exit(entry())
