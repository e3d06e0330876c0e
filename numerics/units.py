"""Units of work on a ``dask.distributed`` cluster, kept in a content-addressed results store.

A *unit* is a picklable call of one function on a JSON-ready *spec*: ``spec["fn"]`` names the function as
"module:name", and the rest of the spec is everything its result depends on.  The function is called on the
whole spec, or on ``spec["args"]`` for a generic unit (kind "call").  The sweep's training units
(``numerics.experiments.sweep_units``, planned by ``numerics.experiments.sweep``) and the studies of ``occ-companion scope`` (``numerics.scope``, generic units
built by ``call_spec``) all run through this module.

Keys.  A unit's store key is the SHA-256 of the canonical JSON of its spec (``key_of``).  Every spec holds the
package version and ``unit_code(module)``, the digest of the code its result depends on: the unit function's
module and every module of ``CODE_PACKAGES`` it imports, transitively (function-level imports included; the
packages holding a module count as imported too), each *normalised*: parsed, its string statements
(docstrings) dropped, its imports of the code packages reduced to the names they bind and the normalised
content of the module they bind, and dumped without positions, so that comments, docstrings and layout do not
enter it.  A module's data file, the ``.toml`` file beside it with the module's name, enters with its parsed
content.  The digest is taken over the set of the modules' digests, not their paths: moving a module to another
folder (and its importers' import lines with it) keeps every key; editing a rule that a unit does not import
(verdicts, presentation) keeps its key; changing one constant or operator in a module it imports changes it.
Imports made by computed names (``importlib.import_module`` of a string) are not followed.

``code_digest`` is another digest: of every source file of ``CODE_PACKAGES`` with its path, recorded as the
provenance of a result (which checkout's code computed or rendered it); ``code_digest_at`` computes it for a
git commit.

Store (``Store``): one JSON file per finished unit, ``<store>/units/<key[:2]>/<key>.json``, written atomically
(temporary sibling, fsync, rename), holding the spec, the result and the SHA-256 of the result.  An entry whose
file is not UTF-8 or does not parse, whose spec differs from the one asked for, or whose digest does not match
is *corrupt*: it is moved to ``<store>/corrupt/`` and the unit is trained again.  Two runs may share a store:
each entry is written whole by one rename, and both writers of a unit write the same deterministic result.

The driver (``Driver``, ``execute_calls``) submits every unit whose result is not in the store to the cluster
(``Cluster``: a LocalCluster by default, or a running scheduler's address, connected at the first unit to
train), writes each result as it arrives, records a unit that raised with its error (the caller skips its
dependants), and on Ctrl-C cancels what is left: every finished unit is already in the store, so the same
command resumes where it stopped.
"""
from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.util
import json
import os
import re
import time
import tomllib
import traceback
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import Callable

from theory.cache import package_version  # noqa: F401 - units.package_version, the version in every key
from theory.validation import SettingError

STORE_FORMAT = 1
CODE_PACKAGES = ("numerics", "theory")
"""The packages whose source a unit's result can depend on (``app`` only presents results)."""


def canonical(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def key_of(spec: dict) -> str:
    return hashlib.sha256(canonical(spec).encode()).hexdigest()


# ------------------------------------------------------------------------------------------------
# the code a unit depends on


def package_roots() -> dict[str, Path]:
    """The folder of every package of ``CODE_PACKAGES``, as the import system finds it."""
    roots = {}
    for pkg in CODE_PACKAGES:
        spec = importlib.util.find_spec(pkg)
        roots[pkg] = Path(spec.origin).resolve().parent
    return roots


class _Sources:
    """Where the modules of the code packages are, and each one's normalised digest (see the module
    docstring); ``roots`` maps each package to its folder."""

    def __init__(self, roots: dict[str, Path]):
        self.roots = {k: Path(v) for k, v in roots.items()}
        self._bare: dict[str, str] = {}
        self._full: dict[str, str] = {}
        self._trees: dict[str, ast.Module] = {}
        self._dumps: dict[str, str] = {}

    def path(self, name: str) -> Path | None:
        """The source file of module ``name`` within the code packages (None outside them, or no such module)."""
        top, *rest = name.split(".")
        if top not in self.roots:
            return None
        base = self.roots[top].joinpath(*rest)
        if (base / "__init__.py").is_file():
            return base / "__init__.py"
        if base.with_suffix(".py").is_file():
            return base.with_suffix(".py")
        return None

    def tree(self, name: str, path: Path | None = None) -> ast.Module:
        if name not in self._trees:
            path = path or self.path(name)
            self._trees[name] = ast.parse(path.read_bytes(), filename=str(path))
        return self._trees[name]

    def bindings(self, name: str, node: ast.stmt) -> list[tuple[str, str, str | None]] | None:
        """What an import statement of module ``name`` binds from the code packages: (bound name, module,
        attribute or None for the module itself); None when it imports nothing from them (or binds a dotted
        path, which stays as written)."""
        if isinstance(node, ast.Import):
            if not all(a.asname and self.path(a.name) for a in node.names):
                return None
            return [(a.asname, a.name, None) for a in node.names]
        if not isinstance(node, ast.ImportFrom):
            return None
        base = self._absolute(name, node)
        if base is None or self.path(base) is None or any(a.name == "*" for a in node.names):
            return None
        out = []
        for a in node.names:
            sub = f"{base}.{a.name}"
            out.append((a.asname or a.name, sub, None) if self.path(sub) else (a.asname or a.name, base, a.name))
        return out

    def _absolute(self, name: str, node: ast.ImportFrom) -> str | None:
        if not node.level:
            return node.module
        package = name if self.path(name) and self.path(name).name == "__init__.py" else name.rpartition(".")[0]
        parts = package.split(".")
        if node.level - 1 > len(parts) - 1:
            return None
        parts = parts[:len(parts) - (node.level - 1)]
        return ".".join(parts + ([node.module] if node.module else []))

    def imports(self, name: str, path: Path | None = None) -> set[str]:
        """The modules of the code packages that module ``name`` imports anywhere in its source, with the
        packages holding them."""
        out = set()
        for node in _statements(self.tree(name, path).body):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = self._absolute(name, node)
                if base is None:
                    continue
                targets = [base] + [f"{base}.{a.name}" for a in node.names]
            else:
                continue
            for t in targets:
                parts = t.split(".")
                out.update(p for p in (".".join(parts[:i]) for i in range(1, len(parts) + 1)) if self.path(p))
        return out

    def closure(self, root: str, path: Path | None = None) -> set[str]:
        """``root`` and every module of the code packages it imports, transitively."""
        parts = root.split(".")
        todo = [root] + [p for p in (".".join(parts[:i]) for i in range(1, len(parts))) if self.path(p)]
        seen: set[str] = set()
        while todo:
            m = todo.pop()
            if m in seen:
                continue
            seen.add(m)
            todo.extend(self.imports(m, path if m == root else None) - seen)
        return seen

    def _normalised(self, name: str, path: Path | None = None) -> str:
        """The module's normalised dump, each import of the code packages as a marker naming the module it
        binds (``_MARK``), filled in by ``bare`` and ``digest``."""
        if name in self._dumps:
            return self._dumps[name]
        tree = self.tree(name, path)
        for node in [tree, *_statements(tree.body)]:
            for attr in _BODIES:
                body = getattr(node, attr, None)
                if not body:
                    continue
                kept = []
                for stmt in body:
                    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) \
                            and isinstance(stmt.value.value, str):
                        continue  # a docstring, or a string statement documenting the line above
                    bound = self.bindings(name, stmt) if isinstance(stmt, (ast.Import, ast.ImportFrom)) else None
                    if bound is not None:
                        marker = canonical([[b, f"{_MARK}{m}{_MARK}", a] for b, m, a in bound])
                        stmt = ast.Expr(ast.Call(ast.Name("__import_code__", ast.Load()), [ast.Constant(marker)], []))
                    kept.append(stmt)
                if attr == "body" and not kept and not isinstance(node, ast.Module):
                    kept = [ast.Pass()]
                setattr(node, attr, kept)
        self._dumps[name] = ast.dump(tree, annotate_fields=True, include_attributes=False)
        del self._trees[name]  # transformed in place: ``imports`` has read it already
        return self._dumps[name]

    def bare(self, name: str, path: Path | None = None) -> str:
        """Digest of the module with its imports of the code packages reduced to what they bind."""
        if name not in self._bare:
            self._bare[name] = _sha(_MARKED.sub("", self._normalised(name, path)))
        return self._bare[name]

    def digest(self, name: str, path: Path | None = None) -> str:
        """Digest of the module with each import of the code packages standing for the module it binds (by
        that module's ``bare`` digest), and of its data file."""
        if name not in self._full:
            text = _MARKED.sub(lambda m: self.bare(m.group(1)), self._normalised(name, path))
            own = path or self.path(name)
            data = own.with_suffix(".toml")
            if data.is_file():
                text += "\0" + canonical(tomllib.loads(data.read_text()))
            self._full[name] = _sha(text)
        return self._full[name]


_BODIES = ("body", "orelse", "finalbody")
"""The fields of a node that hold statements (an ``except`` clause's and a ``case``'s in ``body``)."""


def _statements(body: list):
    """Every statement in ``body`` and, recursively, in the statements, except clauses and cases it holds
    (expressions hold no statements)."""
    for stmt in body:
        yield stmt
        for attr in _BODIES:
            inner = getattr(stmt, attr, None)
            if inner:
                yield from _statements(inner)
        for clause in getattr(stmt, "handlers", ()) or ():
            yield clause
            yield from _statements(clause.body)
        for case in getattr(stmt, "cases", ()) or ():
            yield case
            yield from _statements(case.body)


_MARK = "@@code@@"
_MARKED = re.compile(r"@@code@@([\w.]+)@@code@@")
"""The marker of an imported module's name in a normalised dump (``_Sources._normalised``)."""


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def unit_code(module: str, roots: dict[str, os.PathLike] | None = None) -> str:
    """The digest (16 hex digits) of the code a unit function of ``module`` depends on: see the module
    docstring.  ``roots`` maps each of ``CODE_PACKAGES`` to its folder (default: where the import system
    finds them); a module outside the code packages enters with its own source, found by the import system."""
    if roots is None:
        return _unit_code_here(module)
    return _unit_code(module, _Sources(roots))


@lru_cache(maxsize=None)
def _unit_code_here(module: str) -> str:
    return _unit_code(module, _Sources(package_roots()))


def _unit_code(module: str, sources: _Sources) -> str:
    path = None
    if sources.path(module) is None:
        spec = importlib.util.find_spec(module)
        if spec is None or not spec.origin or not spec.origin.endswith(".py"):
            raise SettingError(f"unit module {module!r} has no Python source to key its units on")
        path = Path(spec.origin)
    digests = sorted({sources.digest(m, path if m == module else None) for m in sources.closure(module, path)})
    return _sha("\n".join(digests))[:16]


def code_digest(roots: dict[str, os.PathLike] | None = None) -> str:
    """SHA-256 (first 16 hex digits) of the source files (.py, .toml) of ``CODE_PACKAGES``, each with its path
    relative to its package's parent: the provenance of a result (the checkout's code), not a unit's key.
    ``roots`` as for ``unit_code``."""
    return _code_digest_here() if roots is None else _code_digest({k: Path(v) for k, v in roots.items()})


@lru_cache(maxsize=1)
def _code_digest_here() -> str:
    return _code_digest(package_roots())


def _code_digest(roots: dict[str, Path]) -> str:
    files = []
    for pkg in CODE_PACKAGES:
        root = roots[pkg]
        names = [p.relative_to(root.parent).as_posix() for p in root.rglob("*")
                 if p.suffix in (".py", ".toml") and p.is_file() and "__pycache__" not in p.parts]
        files += [(name, (root.parent / name).read_bytes()) for name in _in_digest_order(names)]
    return _digest(files)


def _in_digest_order(names: list[str]) -> list[str]:
    """Relative paths in the digest's order: part by part (as pathlib sorts paths), not as strings
    ("a/b.py" before "a-b.py" before "a.py")."""
    return sorted(names, key=PurePosixPath)


def _digest(files) -> str:
    """``code_digest`` of (path, bytes) pairs in their order."""
    h = hashlib.sha256()
    for rel, data in files:
        h.update(rel.encode() + b"\0" + data + b"\0")
    return h.hexdigest()[:16]


def code_digest_at(commit: str, repo) -> str:
    """``code_digest`` of the tracked files of ``CODE_PACKAGES`` at a git commit of the repository ``repo``
    (what a checkout of that commit computes, untracked files aside): the check that a result's recorded code
    digest is the one its recorded commit gives.  Raises ``subprocess.CalledProcessError`` where git cannot
    read the commit."""
    import subprocess

    def git(*args) -> bytes:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=True).stdout

    files = []
    for pkg in CODE_PACKAGES:
        listed = git("ls-tree", "-r", "-z", "--name-only", commit, "--", f"{pkg}/").decode().split("\0")
        names = [n for n in listed if n and PurePosixPath(n).suffix in (".py", ".toml")]
        files += [(name, git("show", f"{commit}:{name}")) for name in _in_digest_order(names)]
    return _digest(files)


# ------------------------------------------------------------------------------------------------
# running a unit (on the workers)


def run_unit(spec: dict, setup: Callable[[], object] | None = None) -> dict:
    """Run one unit on one BLAS thread (units run in parallel processes), after ``setup()`` (the caller's
    per-process preparation, e.g. the engine's allocator setting); returns its result with its CPU and wall
    time."""
    from threadpoolctl import threadpool_limits

    if setup is not None:
        setup()
    fn = resolve(spec["fn"])
    cpu0, wall0 = time.process_time(), time.time()
    with threadpool_limits(limits=1):
        out = fn(spec["args"] if spec.get("kind") == "call" else spec)
    return {"result": out, "cpu_s": time.process_time() - cpu0, "wall_s": time.time() - wall0,
            "host": os.uname().nodename, "pid": os.getpid()}


def resolve(fn: str) -> Callable[[dict], dict]:
    """The function of a "module:name" reference (a SettingError when it does not name one)."""
    module, sep, name = fn.partition(":")
    if not sep or not module or not name:
        raise SettingError(f"a unit names its function as 'module:name', got {fn!r}")
    try:
        found = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise SettingError(f"unit function {fn!r} not found ({exc})") from None
    if not callable(found):
        raise SettingError(f"unit function {fn!r} is not callable")
    return found


def call_spec(fn: str, args: dict, version: str | None = None, code: str | None = None) -> dict:
    """The spec of a generic unit: ``fn`` ("module:name") called on the JSON-ready ``args``; the key covers
    the function, the arguments, the package version and the code of ``fn``'s module (``unit_code``)."""
    canonical(args)  # refuses arguments that are not JSON-ready, before any work
    return {"kind": "call", "version": version or package_version(), "code": code or unit_code(fn.partition(":")[0]),
            "fn": fn, "args": args}


# ------------------------------------------------------------------------------------------------
# the store


class Store:
    """Finished units, one file each (see the module docstring); safe to share between runs."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self.corrupt_found: list[str] = []

    def path(self, key: str) -> Path:
        return self.root / "units" / key[:2] / f"{key}.json"

    def ensure_writable(self) -> None:
        """Create the store's folder and write an unnamed file in it (OSError where it cannot)."""
        import tempfile

        self.root.mkdir(parents=True, exist_ok=True)
        # an unnamed file (O_TMPFILE where the system has it): a kill here leaves nothing in the store
        with tempfile.TemporaryFile(dir=self.root):
            pass

    def get(self, key: str, spec: dict) -> dict | None:
        """The stored entry of the unit, or None when it is missing or corrupt (a corrupt one is moved aside)."""
        p = self.path(key)
        try:
            data = p.read_bytes()
        except FileNotFoundError:
            return None
        try:
            entry = json.loads(data.decode("utf-8"))
            ok = (entry["format"] == STORE_FORMAT and entry["key"] == key and canonical(entry["spec"]) == canonical(spec)
                  and hashlib.sha256(canonical(entry["result"]).encode()).hexdigest() == entry["digest"])
        except (ValueError, KeyError, TypeError):  # UnicodeDecodeError is a ValueError
            ok = False
        if ok:
            return entry
        self._quarantine(p, key)
        return None

    def _quarantine(self, p: Path, key: str) -> None:
        dest = self.root / "corrupt" / f"{key}.{time.time_ns()}.json"
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.replace(p, dest)
        except FileNotFoundError:  # another run moved or rewrote it meanwhile
            pass
        self.corrupt_found.append(key)

    def put(self, key: str, spec: dict, done: dict) -> None:
        from theory.files import atomic_write_text

        entry = {"format": STORE_FORMAT, "key": key, "spec": spec, "result": done["result"],
                 "digest": hashlib.sha256(canonical(done["result"]).encode()).hexdigest(),
                 "cpu_s": done["cpu_s"], "wall_s": done["wall_s"], "host": done.get("host"),
                 "written": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        atomic_write_text(self.path(key), canonical(entry))

    def entries(self):
        """Every stored entry that parses (its spec and ``cpu_s`` as ``put`` wrote them), in no set order;
        unlike ``get``, nothing is checked against a spec and nothing is moved aside."""
        for p in sorted((self.root / "units").glob("*/*.json")):
            try:
                yield json.loads(p.read_bytes().decode("utf-8"))
            except (OSError, ValueError):
                continue

    def log_run(self, record: dict) -> None:
        """Append one record of an invocation (its start, or its end) to ``<store>/runs.jsonl`` (one short
        line, one append)."""
        self.root.mkdir(parents=True, exist_ok=True)
        line = (json.dumps(record, sort_keys=True) + "\n").encode()
        fd = os.open(self.root / "runs.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)

    def runs(self) -> list[dict]:
        """Every record of the invocations on this store, starts and ends (lines that do not parse, or are not
        UTF-8, are skipped; ``app.render.sweep.invocations`` pairs them)."""
        try:
            lines = (self.root / "runs.jsonl").read_bytes().decode("utf-8", errors="replace").splitlines()
        except FileNotFoundError:
            return []
        out = []
        for line in lines:
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
        return out

    def keys(self) -> list[str]:
        return sorted(p.stem for p in (self.root / "units").glob("*/*.json"))


# ------------------------------------------------------------------------------------------------
# the cluster


class SchedulerUnreachable(SettingError):
    """The scheduler address did not answer as a dask scheduler (the message starts with the address)."""


SCHEDULER_SCHEMES = ("tcp", "tls", "ws", "wss")
"""The dask protocols a scheduler address may name; each runs over TCP, so the address is a host and a port."""
SCHEDULER_FORM = "tcp://host:port"
CONNECT_TIMEOUT_S = 20.0
"""How long a scheduler address has to accept a connection, and then to answer dask's handshake, before the
run gives up on it (a dask scheduler answers at once; an HTTP server, such as dask's dashboard, never does)."""


def scheduler_address(text: str) -> tuple[str, str, int]:
    """(protocol, host, port) of a dask scheduler address written ``tcp://host:port`` (``host:port`` means
    tcp; an IPv6 host in brackets); a SettingError saying what is wrong and the form otherwise, before any
    connection is tried."""
    from urllib.parse import urlsplit

    def refuse(why: str):
        raise SettingError(f"{text!r} is not a dask scheduler address ({why}); the form is {SCHEDULER_FORM}")

    if not text.strip():
        refuse("it is empty")
    try:
        parts = urlsplit(text if "://" in text else f"tcp://{text}")
        port = parts.port
    except ValueError as exc:
        refuse(f"bad port: {exc}")
    if parts.scheme not in SCHEDULER_SCHEMES:
        refuse(f"unknown protocol {parts.scheme!r}; dask's are {', '.join(SCHEDULER_SCHEMES)}")
    if not parts.hostname:
        refuse("no host")
    if port is None or port == 0:
        refuse("no port number" if port is None else "port 0")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        refuse("text after the port")
    return parts.scheme, parts.hostname, port


def _identity(address: str, timeout: float) -> object:
    """What the server at ``address`` answers to dask's handshake and an identity request (a dict whose "type"
    is "Scheduler" for a scheduler), within ``timeout`` seconds: TimeoutError when it does not answer in time,
    another exception when what answers does not speak dask's protocol (an SSH banner read as a frame length
    gives MemoryError).  Runs on its own event loop in a thread of its own, whatever loop the caller runs."""
    import asyncio
    import threading

    from distributed.comm import connect
    from distributed.security import Security

    async def ask():
        comm = await connect(address, timeout=timeout, **Security().get_connection_args("client"))
        try:
            await comm.write({"op": "identity", "reply": True})
            return await comm.read()
        finally:
            comm.abort()

    async def bounded():
        return await asyncio.wait_for(ask(), timeout)

    got: dict = {}

    def probe():
        try:
            got["reply"] = asyncio.run(bounded())
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread as it is
            got["error"] = exc

    thread = threading.Thread(target=probe, name="dask-scheduler-probe", daemon=True)
    thread.start()
    thread.join()
    if "error" in got:
        raise got["error"]
    return got["reply"]


class Cluster:
    """The dask client of a run: a LocalCluster of ``workers`` processes (default: the cores), or the running
    scheduler at ``scheduler`` (checked by ``scheduler_address`` at once); connected at the first unit to train
    (``connect``), closed by ``close`` (which keeps the number of workers it had).  A scheduler address gets
    ``timeout`` seconds to accept a connection and as many to answer dask's handshake as a scheduler
    (``check_scheduler``) before any unit is submitted to it."""

    def __init__(self, scheduler: str | None = None, workers: int | None = None,
                 timeout: float = CONNECT_TIMEOUT_S):
        if scheduler is not None:
            scheduler_address(scheduler)
        self.scheduler, self.n_workers, self.timeout = scheduler, workers, timeout
        self.opened: list = []
        self.workers = 0

    def connect(self):
        self.opened.extend(self._client())
        return self.opened[0]

    def check_scheduler(self) -> None:
        """A SchedulerUnreachable unless a dask scheduler answers at the scheduler address: the port accepts
        a TCP connection within the timeout ("cannot connect" otherwise), then the server answers dask's
        handshake and identity request as a scheduler within the timeout ("did not answer as a dask
        scheduler"), in dask's protocol ("not a dask scheduler" for anything else that answers)."""
        import socket

        _, host, port = scheduler_address(self.scheduler)
        try:
            socket.create_connection((host, port), timeout=self.timeout).close()
        except OSError as exc:
            raise SchedulerUnreachable(f"{self.scheduler}: cannot connect ({exc.strerror or exc})") from None
        try:
            reply = _identity(self.scheduler, self.timeout)
        except TimeoutError:
            raise SchedulerUnreachable(
                f"{self.scheduler}: did not answer as a dask scheduler within {self.timeout:g} s (a port that "
                "accepts connections but does not answer dask's handshake, such as an HTTP server or dask's "
                "dashboard: give the scheduler's own address, which dask prints as \"Scheduler at\")") from None
        except OSError as exc:
            raise SchedulerUnreachable(f"{self.scheduler}: not a dask scheduler (it closed the connection during "
                                       f"dask's handshake: {exc})") from None
        except Exception as exc:  # noqa: BLE001 - any failure to parse the answer: it is not dask's protocol
            raise SchedulerUnreachable(f"{self.scheduler}: not a dask scheduler (what answers there does not "
                                       f"speak dask's protocol: {type(exc).__name__})") from None
        kind = reply.get("type") if isinstance(reply, dict) else None
        if kind != "Scheduler":
            what = f"a dask {kind}" if isinstance(kind, str) else "a server that is not dask's"
            raise SchedulerUnreachable(f"{self.scheduler}: not a dask scheduler ({what} answers there)")

    def _client(self):
        import logging
        import signal

        from distributed import Client, LocalCluster

        if self.scheduler is not None:
            self.check_scheduler()
            try:
                return Client(self.scheduler, timeout=f"{self.timeout:g}s"), None
            except (OSError, TimeoutError) as exc:
                raise SchedulerUnreachable(f"{self.scheduler}: cannot connect ({exc})") from None
        import dask

        n = self.n_workers or os.cpu_count() or 1
        dask.config.set({"distributed.scheduler.worker-saturation": 1.0})  # a worker holds only the task it runs
        # the worker processes ignore Ctrl-C (a terminal sends it to the whole process group): the driver alone
        # handles it, cancels the remaining tasks and closes the cluster (no worker tracebacks)
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=":0",
                                   silence_logs=logging.CRITICAL)  # unit errors come back through their futures
        finally:
            signal.signal(signal.SIGINT, previous)
        return Client(cluster), cluster

    def close(self) -> None:
        if self.opened:
            try:
                self.workers = len(self.opened[0].scheduler_info().get("workers", {}))
            except Exception:  # noqa: BLE001 - a scheduler going away: the count is informative only
                pass
            client, cluster = self.opened
            try:
                client.close()
                if cluster is not None:
                    cluster.close()
            except Exception:  # noqa: BLE001 - closing a cluster that is already going away
                pass

    def describe(self, unit: str = "task") -> str:
        return self.scheduler or (f"LocalCluster ({self.workers} workers)" if self.opened
                                  else f"none (every {unit} stored)")


def running(client) -> int:
    """The number of units the cluster is running now (0 without a client, or when it does not answer)."""
    if client is None:
        return 0
    try:
        return sum(len(v) for v in client.processing().values())
    except Exception:  # noqa: BLE001 - the count is cosmetic; a scheduler that does not answer shows 0
        return 0


# ------------------------------------------------------------------------------------------------
# the driver


@dataclass
class Outcome:
    """What a run did: results by unit key, the units it trained and reused, the failures."""

    results: dict = field(default_factory=dict)
    seed_keys: dict = field(default_factory=dict)   # (search key, seed) -> seed unit key
    trained: list = field(default_factory=list)
    reused: list = field(default_factory=list)
    failed: dict = field(default_factory=dict)      # key -> {"spec", "error", "traceback"}
    skipped: dict = field(default_factory=dict)     # key -> why (a failed dependency)
    interrupted: bool = False
    corrupt: list = field(default_factory=list)
    unit_cpu: dict = field(default_factory=dict)   # key -> CPU seconds of the unit (trained now or stored)
    cpu_s: float = 0.0
    wall_s: float = 0.0


NOT_IN_STORE = "not in the store (not trained: render only)"
"""Why a unit a render-only run (``connect=None``) needs is in ``Outcome.skipped``."""


class Driver:
    """The execution loop every kind of unit shares: look a unit up in the store, else submit it to the dask
    client that ``connect()`` returns (called at the first unit to train), write each result to the store as
    it arrives, record a unit that raised with its error, and on Ctrl-C cancel what is left.

    ``on_done(key, spec)`` is called after a unit's result is in ``outcome.results`` (trained now or read
    from the store), ``on_failed(key, spec)`` after a unit raised: there the caller submits or skips the
    units that depend on it.  With ``connect=None`` nothing is trained and ``not_trained(key, spec)`` is
    called for every missing unit instead.  ``setup`` runs in the worker before each unit (``run_unit``);
    ``priority(spec)`` orders the submitted units (higher first)."""

    def __init__(self, store: Store, connect: Callable[[], object] | None, out: Outcome | None = None, *,
                 on_done: Callable[[str, dict], None] | None = None,
                 on_failed: Callable[[str, dict], None] | None = None,
                 not_trained: Callable[[str, dict], None] | None = None,
                 setup: Callable[[], object] | None = None,
                 priority: Callable[[dict], float] | None = None):
        self.store, self.connect = store, connect
        self.out = out if out is not None else Outcome()
        self.on_done, self.on_failed, self.not_trained = on_done, on_failed, not_trained
        self.setup, self.priority = setup, priority
        self.client = None
        self.futures: dict = {}
        self.ac = None
        self.t0 = time.time()

    def lookup(self, key: str, spec: dict) -> bool:
        """Take the unit's result from the store when it is there (True), else False."""
        entry = self.store.get(key, spec)
        if entry is None:
            return False
        out = self.out
        out.results[key] = entry["result"]
        out.reused.append(key)
        out.unit_cpu[key] = entry.get("cpu_s", 0.0)
        if self.on_done is not None:
            self.on_done(key, spec)
        return True

    def need(self, key: str, spec: dict) -> None:
        """The unit's result: from the store, or trained (submitted now)."""
        if not self.lookup(key, spec):
            self.submit(key, spec)

    def submit(self, key: str, spec: dict) -> None:
        from distributed import as_completed

        if self.connect is None:
            self.out.skipped[key] = NOT_IN_STORE
            if self.not_trained is not None:
                self.not_trained(key, spec)
            return
        if self.client is None:
            self.client = self.connect()
            self.ac = as_completed()
        fut = self.client.submit(run_unit, spec, self.setup, key=f"{spec['kind']}-{key[:16]}", pure=False,
                                 priority=0.0 if self.priority is None else self.priority(spec))
        self.futures[fut.key] = (key, spec, fut)
        self.ac.add(fut)

    def outstanding(self) -> set:
        """The keys of the units submitted and not yet back."""
        return {key for key, _, _ in self.futures.values()}

    def counts(self) -> dict:
        """Units trained now (done), taken from the store (reused), failed, skipped, and submitted and not yet
        back (submitted)."""
        out = self.out
        return {"done": len(out.trained), "reused": len(out.reused), "failed": len(out.failed),
                "skipped": len(out.skipped), "submitted": len(self.futures)}

    def run(self, total: int | Callable[[], int], progress: Callable[[dict], None] | None = None) -> Outcome:
        """Wait for every submitted unit (and the units their hooks submit); ``progress(counts)`` is called
        after every unit (``counts()``, and running, total, elapsed).  ``total`` is the number of units of the
        run, or a function that says it when the run learns it as it goes."""
        def report():
            if progress is not None:
                progress(self.counts() | {"total": total() if callable(total) else total,
                                          "elapsed": time.time() - self.t0, "running": running(self.client)})

        out = self.out
        report()
        try:
            for fut in self.ac or ():
                key, spec, _ = self.futures.pop(fut.key)
                if fut.status == "error":
                    exc = fut.exception()
                    tb = "".join(traceback.format_exception(type(exc), exc, fut.traceback()))
                    out.failed[key] = {"spec": spec, "error": f"{type(exc).__name__}: {exc}", "traceback": tb}
                    if self.on_failed is not None:
                        self.on_failed(key, spec)
                elif fut.status == "finished":
                    done = fut.result()
                    self.store.put(key, spec, done)
                    out.results[key] = done["result"]
                    out.trained.append(key)
                    out.cpu_s += done["cpu_s"]
                    out.unit_cpu[key] = done["cpu_s"]
                    if self.on_done is not None:
                        self.on_done(key, spec)
                fut.release()
                report()
        except KeyboardInterrupt:
            out.interrupted = True
            if self.client is not None:
                self.client.cancel([f for _, _, f in self.futures.values()])
            raise
        finally:
            out.wall_s = time.time() - self.t0
            out.corrupt = list(self.store.corrupt_found)
        return out


def execute_calls(specs: dict[str, dict], store: Store, connect: Callable[[], object] | None,
                  progress: Callable[[dict], None] | None = None,
                  setup: Callable[[], object] | None = None) -> Outcome:
    """Run the generic units ``specs`` (key -> ``call_spec``) that the store lacks; a unit that raised is in
    ``failed``, with ``connect=None`` a missing unit is in ``skipped``."""
    driver = Driver(store, connect, setup=setup)
    for key, spec in specs.items():
        driver.need(key, spec)
    return driver.run(len(specs), progress)
