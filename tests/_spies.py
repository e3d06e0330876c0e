"""Counting the calls of module attributes during a test (the same-bits loops' tests: which loops ran)."""
from __future__ import annotations

from contextlib import contextmanager

import pytest


@contextmanager
def counted(owner, names):
    """For its duration each attribute ``names`` of ``owner`` (a module or namespace) is wrapped to count its
    calls; yields the counts {name: calls}, live."""
    calls = dict.fromkeys(names, 0)

    def spy(name, real):
        def call(*args):
            calls[name] += 1
            return real(*args)
        return call

    with pytest.MonkeyPatch.context() as m:
        for name in names:
            m.setattr(owner, name, spy(name, getattr(owner, name)))
        yield calls
