"""The Table 1 runner's process handling: its pool workers' initializer under every start method."""
from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor

import pytest

from numerics.experiments import runner


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
