"""The token-wise samplers draw the tasks' laws: the symbol tasks' counts are Multinomial(n, uniform) given
the length, SLR's present tokens are standard normal and its located token N(sqrt(d/2) k*, gamma^2 I); the
draws are a function of the generator's seed alone."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.stats import chi2

from numerics.experiments import tasks

P_FAIL = 1e-6
"""Each distributional check fails with at most this probability under the right law (a fixed seed: the
draws, and so the verdict, are the same on every run)."""


def _compositions(n: int, d: int):
    """Every count vector of n tokens over d symbols."""
    for cut in itertools.combinations(range(n + d - 1), d - 1):
        edges = (-1, *cut, n + d - 1)
        yield tuple(b - a - 1 for a, b in zip(edges[:-1], edges[1:]))


def _multinomial_p(c: tuple, d: int) -> float:
    n = sum(c)
    return math.factorial(n) / math.prod(math.factorial(x) for x in c) / d ** n


@pytest.mark.parametrize("n_tok, d", [(4, 3), (3, 4), (1, 5)])
def test_uniform_counts_are_multinomial_by_enumeration(n_tok, d):
    """Every count vector of n tokens over d symbols, with its exact multinomial probability, against the
    frequencies of 40000 strings: a chi-square test at P_FAIL.  A symbol left out of the draw (tokens in
    0..d-2), or tokens counted in the wrong string, moves the statistic by thousands."""
    N = 40_000
    c = tasks._uniform_counts(np.full(N, n_tok), d, np.random.default_rng([11, n_tok, d]))
    assert c.shape == (N, d) and c.dtype == float and np.all(c.sum(axis=1) == n_tok)
    cells = list(_compositions(n_tok, d))
    expected = np.array([_multinomial_p(x, d) for x in cells]) * N
    assert abs(expected.sum() - N) < 1e-6
    seen = {x: 0 for x in cells}
    for row in map(tuple, c.astype(int)):
        seen[row] += 1
    observed = np.array([seen[x] for x in cells])
    stat = float(((observed - expected) ** 2 / expected).sum())
    assert stat < chi2.isf(P_FAIL, len(cells) - 1)


def test_uniform_counts_follow_each_strings_own_length():
    """Strings of different lengths side by side: each row sums to its own length, and an empty string has no
    tokens (a shift of the strings' offsets would move tokens between rows)."""
    n = np.array([0, 5, 1, 0, 7, 2])
    c = tasks._uniform_counts(n, 4, np.random.default_rng(3))
    assert np.array_equal(c.sum(axis=1), n)


@pytest.mark.parametrize("task", ["occurrence", "OR", "AND"])
def test_symbol_counts_have_uniform_token_marginals(task):
    """The share of each symbol among all tokens is 1/d (chi-square over the d symbols at P_FAIL), and the
    sampled lengths are the counts' sums; the label balance is checked in test_tasks."""
    d = 7
    b = tasks.sample(task, d, 20_000, np.random.default_rng([5, d]))
    per_symbol = b.m.sum(axis=0)
    total = per_symbol.sum()
    assert total == b.extra["n"].sum()
    stat = float(((per_symbol - total / d) ** 2 / (total / d)).sum())
    assert stat < chi2.isf(P_FAIL, d - 1)


def test_slr_present_tokens_are_standard_normal_and_padding_is_zero():
    """Every present token but the located one: coordinates of mean 0 and variance 1 (each coordinate's sum of
    squares against its chi-square law at P_FAIL), uncorrelated across coordinates; padding exactly 0."""
    d, N = 5, 4000
    b = tasks.sample_slr(d, N, np.random.default_rng(21), seed=4)
    n, J = b.extra["n"], b.extra["J"]
    present = b.m > 0
    assert np.array_equal(present.sum(axis=1), n) and np.all(b.X[~present] == 0)
    other = present.copy()
    other[np.arange(N), J] = False
    x = b.X[other]                                           # (tokens, d)
    T = x.shape[0]
    assert np.all(np.abs(x.mean(axis=0)) < 5 / math.sqrt(T))
    ss = (x ** 2).sum(axis=0)
    assert np.all((chi2.ppf(P_FAIL, T) < ss) & (ss < chi2.isf(P_FAIL, T)))
    corr = (x.T @ x / T)[np.triu_indices(d, 1)]
    assert np.all(np.abs(corr) < 5 / math.sqrt(T))


def test_slr_located_token_has_its_mean_and_variance_gamma_squared():
    """x_J = sqrt(d/2) k* + gamma g: its residual from the mean has coordinates of variance gamma^2 = 1/2
    (chi-square at P_FAIL; x_J left as its unscaled draw gives variance 1, far outside), mean 0, and the
    residual is independent of the tokens beside it (its correlation with the first other token)."""
    d, N = 4, 20_000
    b = tasks.sample_slr(d, N, np.random.default_rng(8), seed=2)
    k = b.extra["k"]
    rows, J = np.arange(N), b.extra["J"]
    resid = b.X[rows, J] - math.sqrt(d / 2) * k
    assert np.all(np.abs(resid.mean(axis=0)) < 5 * math.sqrt(tasks.SLR_GAMMA2 / N))
    ss = (resid ** 2).sum(axis=0) / tasks.SLR_GAMMA2
    assert np.all((chi2.ppf(P_FAIL, N) < ss) & (ss < chi2.isf(P_FAIL, N)))
    two = b.extra["n"] >= 2
    first_other = np.where(J == 0, 1, 0)
    beside = b.X[rows[two], first_other[two]]
    r = (resid[two] * beside).sum(axis=0) / math.sqrt(tasks.SLR_GAMMA2) / two.sum()
    assert np.all(np.abs(r) < 5 / math.sqrt(two.sum()))


@pytest.mark.parametrize("task", ["SLR", "AND", "occurrence"])
def test_token_wise_draws_are_a_function_of_the_seed(task):
    """The same seed gives the same bits; another seed other draws."""
    def draw(s):
        return tasks.sample(task, 9, 64, np.random.default_rng([s, 0, 0, 3]), seed=1).dense()

    a, b, c = draw(1), draw(1), draw(2)
    assert np.array_equal(a.m, b.m) and np.array_equal(np.asarray(a.X), np.asarray(b.X)) and np.array_equal(a.y, b.y)
    assert not (np.array_equal(a.m, c.m) and np.array_equal(np.asarray(a.X), np.asarray(c.X)))


def test_the_length_parameter_is_kept_per_task_and_d():
    """AND's root is solved once per (task, d): the second call returns the same float without solving."""
    tasks.length_parameter.cache_clear()
    p = tasks.length_parameter("AND", 33)
    hits = tasks.length_parameter.cache_info().hits
    assert tasks.length_parameter("AND", 33) == p and tasks.length_parameter.cache_info().hits == hits + 1


def _same(x, y) -> bool:
    """The same arrays (values and dtypes), for arrays, sparse matrices and plain values."""
    from scipy import sparse
    if sparse.issparse(x) or sparse.issparse(y):
        return (sparse.issparse(x) and sparse.issparse(y) and x.shape == y.shape
                and all(np.array_equal(getattr(x, a), getattr(y, a)) and getattr(x, a).dtype == getattr(y, a).dtype
                        for a in ("data", "indices", "indptr")))
    if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
        return isinstance(x, np.ndarray) and isinstance(y, np.ndarray) and x.dtype == y.dtype and np.array_equal(x, y)
    return x == y


@pytest.mark.parametrize("d", [5, 17, 60])
def test_the_kept_sparse_identity_gives_the_layout_of_the_dense_table(d):
    """A symbol batch hands the layout its table's sparse form (``identity_sparse``, built once per d): every
    field of the engine layout is what the dense table alone gives (few types: the dense bag, no sparse form)."""
    import dataclasses

    from numerics.experiments import engine
    b = tasks.sample("AND", d, 64, np.random.default_rng(d))
    assert ("table_sparse" in b.extra) == (d > engine.DENSE_BAG_MAX_TYPES)
    bare = tasks.Batch(b.X, b.m, b.y, b.weights, b.labels, {"n": b.extra["n"]})
    kept, built = engine.from_batch(b), engine.from_batch(bare)
    for f in dataclasses.fields(kept):
        assert _same(getattr(kept, f.name), getattr(built, f.name)), f.name
    if d > engine.DENSE_BAG_MAX_TYPES:
        assert kept.table is tasks.identity_sparse(d)
        r, ga, gB, _ = engine.risk_and_grad(np.full((1, 2, d), 0.3), np.full((1, 2, d, 1), 0.2), kept)
        r2, ga2, gB2, _ = engine.risk_and_grad(np.full((1, 2, d), 0.3), np.full((1, 2, d, 1), 0.2), built)
        assert np.array_equal(r, r2) and np.array_equal(ga, ga2) and np.array_equal(gB, gB2)


def test_a_sparse_table_of_another_shape_is_refused():
    """The layout takes a batch's kept sparse table only for its own table: another shape is refused."""
    from numerics.experiments import engine
    from theory.validation import SettingError
    b = tasks.sample("AND", 30, 16, np.random.default_rng(2))
    b.extra["table_sparse"] = tasks.identity_sparse(31)
    with pytest.raises(SettingError):
        engine.from_batch(b)
