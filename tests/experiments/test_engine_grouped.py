"""Seeds in one array program (``engine.grouped_risk_and_grad``, ``engine.stack``): every run's risk and
gradients the same bits as one ``risk_and_grad`` call per seed, which is what the benchmark's "Seeds in one
program" compares against (the runner keeps one call per seed: docs/benchmarks_engine.md)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from checks.strategies import examples
from numerics.experiments import engine
from numerics.experiments import tasks
from theory.validation import SettingError


def _batches(task: str, d: int, S: int, N: int = 24, kernel: str = "numpy") -> list:
    return [engine.from_batch(tasks.sample(task, d, N, np.random.default_rng([s, 41, 0, 7]), seed=s), kernel,
                         operators=False) for s in range(S)]


def _params(task: str, d: int, heads: int, R: int, seed: int = 3):
    H, D, K = tasks.model_shape(task, d, heads)
    rng = np.random.default_rng(seed)
    return 0.4 * rng.standard_normal((R, H, D)), 0.4 * rng.standard_normal((R, H, D, K))


def _per_group(alpha, B, parts, groups, loss):
    r, ga, gB = np.empty(len(groups)), np.empty_like(alpha), np.empty_like(B)
    for s, part in enumerate(parts):
        idx = np.flatnonzero(groups == s)
        if idx.size:
            r[idx], ga[idx], gB[idx], _ = engine.risk_and_grad(alpha[idx], B[idx], dataclasses.replace(part), loss,
                                                          with_f=False)
    return r, ga, gB


@pytest.mark.parametrize("task, d, heads, loss", [("ICL", 12, 1, "squared"), ("ICL", 12, 1, "cross_entropy"),
                                                  ("AND", 20, 2, "squared"), ("ICL", 30, 1, "squared")])
@pytest.mark.parametrize("sizes", [(1, 1), (3, 1, 5), (4, 0, 2), (6, 6, 6, 6), (5, 7)])
@pytest.mark.parametrize("chunk", [None, 2_000, 3_000])
def test_stacked_seeds_are_the_bits_of_one_call_per_seed(task, d, heads, loss, sizes, chunk, monkeypatch):
    """Groups of unequal sizes (padded), an empty group, the runs of the groups interleaved, and (chunk) runs
    split into chunks of one run or of several (at 3,000 elements two-group stacks of ICL at d = 12 take two
    runs a chunk, and one call per seed four), in the stacked program and in the per-seed calls alike; a spy
    sees that the stack was what ran."""
    if chunk is not None:
        monkeypatch.setattr(engine, "CHUNK_ELEMENTS", chunk)
    stacks = []
    real_stack = engine.stack
    monkeypatch.setattr(engine, "stack", lambda parts: stacks.append(len(parts)) or real_stack(parts))
    parts = _batches(task, d, len(sizes))
    assert engine.stackable(parts)
    groups = np.concatenate([np.full(n, s) for s, n in enumerate(sizes)])
    np.random.default_rng(5).shuffle(groups)
    alpha, B = _params(task, d, heads, len(groups))
    got = engine.grouped_risk_and_grad(alpha, B, parts, groups, loss)
    assert stacks == [sum(n > 0 for n in sizes)]
    want = _per_group(alpha, B, parts, groups, loss)
    for g, w in zip(got, want):
        assert np.array_equal(g, w)


def test_a_chunk_of_several_runs_is_exercised(monkeypatch):
    """The chunk sizes the test above relies on: at 3,000 elements, ICL at d = 12 stacks two batches two runs
    a chunk, and one call per seed takes four runs a chunk (so the risks' sums cross the stack's chunks)."""
    monkeypatch.setattr(engine, "CHUNK_ELEMENTS", 3_000)
    parts = _batches("ICL", 12, 2)
    H, D, K = tasks.model_shape("ICL", 12)
    per_run = max(engine._per_run(p, H, K) for p in parts)
    assert engine.CHUNK_ELEMENTS // (2 * per_run) == 2 and engine._chunk(parts[0], H, K) == 4


@examples(20)
@given(sizes=st.lists(st.integers(0, 4), min_size=2, max_size=4).filter(any), d=st.integers(6, 14),
       N=st.integers(1, 12), task=st.sampled_from(["ICL", "AND"]), seed=st.integers(0, 2 ** 16))
def test_stacked_seeds_are_the_bits_of_one_call_per_seed_on_random_draws(sizes, d, N, task, seed):
    heads = 2 if task == "AND" else 1
    d = d + 11 if task == "AND" else d  # two-head AND has token rows from d = 17 (a bag below): 17 .. 25
    parts = [engine.from_batch(tasks.sample(task, d, N, np.random.default_rng([seed, s])), operators=False)
             for s in range(len(sizes))]
    groups = np.concatenate([np.full(n, s) for s, n in enumerate(sizes)])
    np.random.default_rng(seed).shuffle(groups)
    alpha, B = _params(task, d, heads, len(groups), seed)
    got = engine.grouped_risk_and_grad(alpha, B, parts, groups)
    want = _per_group(alpha, B, parts, groups, "squared")
    assert all(np.array_equal(g, w) for g, w in zip(got, want))


def test_stacked_scores_use_each_groups_own_alphas():
    """One run per group, groups 0 and 1 with the same alphas but for one coordinate: each run's risk and
    gradients equal its own group's alone (a stack that read another group's block of score coefficients
    would give run 1 run 0's scores; one with no shifted block at all fails on the product's shapes)."""
    parts = _batches("ICL", 10, 3)
    alpha, B = _params("ICL", 10, 1, 3)
    alpha[1] = alpha[0]
    alpha[1, 0, 3] += 2.0
    groups = np.arange(3)
    got = engine.grouped_risk_and_grad(alpha, B, parts, groups)
    want = _per_group(alpha, B, parts, groups, "squared")
    assert all(np.array_equal(g, w) for g, w in zip(got, want))


@pytest.mark.parametrize("why", ["dense rows", "bag", "compiled", "sizes", "empty string", "one batch"])
def test_what_cannot_be_stacked_takes_one_call_per_seed(why):
    task, d, heads = {"dense rows": ("SLR", 10, 1), "bag": ("AND", 8, 2)}.get(why, ("ICL", 10, 1))
    kernel = "compiled" if why == "compiled" else "numpy"
    if why == "compiled":
        pytest.importorskip("numba")
    parts = _batches(task, d, 1 if why == "one batch" else 2, kernel=kernel)
    if why == "sizes":
        parts[1] = _batches(task, d, 1, N=25)[0]
    if why == "empty string":
        b = tasks.sample(task, d, 24, np.random.default_rng([9, 41, 0, 7]))
        m = b.m.tolil()
        m[3, :] = 0
        parts[1] = engine.from_batch(dataclasses.replace(b, m=m.tocsr()))
        assert len(parts[1].starts) < parts[1].size
    assert not engine.stackable(parts)
    if len(parts) > 1:
        with pytest.raises(SettingError):
            engine.stack(parts)
    groups = np.array([0, 0, 1, 0, 1])[: 3 if len(parts) == 1 else 5] % len(parts)
    alpha, B = _params(task, d, heads, len(groups))
    got = engine.grouped_risk_and_grad(alpha, B, parts, groups)
    want = _per_group(alpha, B, parts, groups, "squared")
    assert all(np.array_equal(g, w) for g, w in zip(got, want))


def test_groups_are_checked():
    parts = _batches("ICL", 10, 2)
    alpha, B = _params("ICL", 10, 1, 3)
    for bad in (np.array([0, 2, 1]), np.array([0, -1, 1]), np.zeros((3, 1), int), np.array([0, 1]),
                np.array([0, 1, 1, 0]), np.array([0.0, 0.5, 1.0])):
        with pytest.raises(SettingError):
            engine.grouped_risk_and_grad(alpha, B, parts, bad)


def test_a_stack_is_stepped_only_by_the_grouped_program():
    """A stack's risks and chunks are per group: risk, risk_and_accuracy and risk_and_grad refuse it, and its
    forward pass needs the same number of runs on every batch (R = 1 run with two heads on two batches would
    otherwise read the heads as the groups)."""
    tb = engine.stack(_batches("AND", 20, 2))
    alpha, B = _params("AND", 20, 2, 1)
    for call in (engine.risk, engine.risk_and_accuracy, engine.risk_and_grad):
        with pytest.raises(SettingError):
            call(alpha, B, tb)
    with pytest.raises(SettingError):
        engine.forward(alpha, B, tb)
