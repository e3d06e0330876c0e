"""The Table 1 runner's process handling: the progress it reports per finished row, and its pool workers'
initializer under every start method."""
from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor

import pytest

from numerics.experiments import runner


def test_progress_counts_every_finished_row_kept_ones_included(monkeypatch):
    """``progress`` is called once per trained row, in the order they finish, with the rows finished so far
    (a row kept from an interrupted run counts) out of the table's rows."""
    monkeypatch.setattr(runner, "run_row", lambda row: {"name": row.name, "cpu_s": 0.0})
    cfg = runner.Config.quick(tasks=("occurrence", "OR", "even_pairs"), jobs=1)
    seen = []
    runner.run(cfg, quiet=True, done={"OR": {"name": "OR", "cpu_s": 0.0}}, progress=seen.append)
    # rows run dearest first (``runner.COST`` times heads: two-head even pairs before occurrence)
    assert [(c["row"], c["finished"], c["total"]) for c in seen] == [("even_pairs", 2, 3), ("occurrence", 3, 3)]
    assert all(c["elapsed"] >= 0 for c in seen)


def _pid() -> int:
    return os.getpid()


@pytest.mark.slow  # starts worker processes by every start method
@pytest.mark.parametrize("method", [m for m in ("fork", "forkserver", "spawn")
                                    if m in multiprocessing.get_all_start_methods()])
def test_pool_workers_start_under_every_start_method(method):
    """The initializer that ties a worker to its parent lets it work whether the parent is the pool's
    creator (fork, spawn) or the fork server (forkserver, Python's default on Linux from 3.14)."""
    context = multiprocessing.get_context(method)
    with ProcessPoolExecutor(max_workers=1, mp_context=context, initializer=runner._end_with_parent,
                             initargs=(os.getpid(),)) as pool:
        assert pool.submit(_pid).result(timeout=120) != os.getpid()
