"""The six tasks of the paper's Table 1, as this suite reconstructs them: seeded, vectorised samplers.

The paper's own protocols are not at hand; the definitions below are the suite's reconstruction from the
primary source of each task (see docs/table1.md).  Every choice is a parameter with the stated default.

A sample is a :class:`Batch` in the model's input format (``numerics.model.Model.risk_and_grad``): either a
shared table of distinct tokens ``X`` (L, D) with counts ``m`` (N, L) (the one-hot tasks: a string without
positional encoding is the bag of its tokens), or per-string embeddings ``X`` (N, L, D) padded to the batch
maximum with multiplicity 0 (single-location regression).

Length laws and their parameters (``length_parameter``):

* occurrence: n ~ Geometric(p) on {1, 2, ...}; P(a occurs) = 1/2 at p = 1/(d-1) (closed form);
* OR: P(a or b occurs) = 1/2 at p = 2/(d-2) (closed form);
* AND: P(a and b occur) = 1/2 has no closed form in p; solved with brentq to 1e-12 (about 0.0113 at d = 50);
* ICL bigram: n ~ Geometric(p) on {2, 3, ...} with mean 1 + 1/p = 2d, so p = 1/(2d - 1);
* single-location regression (SLR): Geometric on {1, ...}, mean 10, p = 1/10;
* even pairs: Geometric on {1, ...}, mean 20, p = 1/20 (not balanced: P(y = +1) = (1 + p)/2).

Even pairs has three embeddings (``even_pairs_embedding``; docs/setting.md, "Capacity"); the functions here
default to "query", the runner (``runner.Config``) to "ends":

* ``"query"``: token i of z_1..z_n is the one-hot of (first_i, z_i, z_n), first_i = [i = 1], index
  4 first_i + 2 z_i + z_n (D = 8).  The last symbol z_n is the query of a last-token attention (Huang, Liang &
  Yang 2025); our attention has one fixed query alpha, so the query's symbol is part of every token, and
  alpha^T x_i is any function of (first_i, z_i, z_n).  A one-head model represents the task: attention on the
  first token, readout +1 on (1, x, x) and -1 on (1, x, y != x).
* ``"adjacent"``: the framed string BOS z_1..z_n EOS as its adjacent pairs (D = 9).  A one-head model cannot
  represent the task (sign f is linear in the 9 pair counts; no linear rule classifies a, b, ab, ba, aba,
  bab); kept as a documented variant with its measured ceiling (``capacity.ceiling``).
* ``"ends"``: token i is the one-hot of (first_i, last_i, z_i), first_i = [i = 1], last_i = [i = n], index
  4 first_i + 2 last_i + z_i (D = 8).  The first token knows z_1 and the last z_n, but no token knows both
  (except the single token of a string of length 1), so no single token's type carries the label
  (``label_in_single_token``): the label [z_1 = z_n] is the XNOR of two tokens.  One head cannot represent it
  (sign f is linear in the counts, and the counts of aa + bb equal those of ab + ba); two heads can, in the
  limit of large scores (``capacity.ceiling``), so the even-pairs row has ``even_pairs_heads`` heads.

``label_in_single_token`` decides by enumeration of the short strings whether a single token carries the
label under an embedding: True for "query" (the first token's type (1, z_1, z_n)), False for the others.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from theory.validation import SettingError

TASKS = ("occurrence", "OR", "AND", "ICL", "SLR", "even_pairs")
"""Task names, in the order of the table."""

POPULATION_TASKS = ("occurrence", "OR", "AND")
"""Tasks whose population gradient is a finite sum over count classes (see ``population``)."""

MIN_D = {"occurrence": 3, "OR": 4, "AND": 3, "ICL": 3, "SLR": 2, "even_pairs": 1}
"""Smallest alphabet size (embedding dimension for SLR) at which each task is defined
(OR needs p = 2/(d-2) <= 1; the class reduction needs an unmarked symbol; ICL needs two answers; SLR
needs two orthonormal vectors; even pairs is binary whatever d is)."""

SLR_MEAN_LENGTH = 10
EVEN_PAIRS_MEAN_LENGTH = 20
SLR_GAMMA2 = 0.5
SLR_NOISE = 0.1
BRENTQ_XTOL = 1e-15
EVEN_PAIRS_EMBEDDINGS = ("query", "adjacent", "ends")
"""Embeddings of even pairs: the samplers' default first (see the module doc)."""
EVEN_PAIRS_DIM = {"query": 8, "adjacent": 9, "ends": 8}
EVEN_PAIRS_HEADS = {"query": 1, "adjacent": 1, "ends": 2}
"""Heads of the even-pairs row per embedding: the fewest that represent the task where some do (one for
"query", two for "ends"); one for "adjacent", whose one-head ceiling is the measured one."""


def even_pairs_heads(embedding: str) -> int:
    """The head count of the even-pairs row under ``embedding`` (``EVEN_PAIRS_HEADS``)."""
    check_even_pairs_embedding(embedding)
    return EVEN_PAIRS_HEADS[embedding]


def even_pairs_token_types(z, embedding: str) -> list[int]:
    """The token types (one-hot indices) of the string z (symbols 0 = a, 1 = b) under ``embedding``, in the
    order of the tokens: the definition ``sample_even_pairs`` vectorises, written out one string at a time."""
    check_even_pairs_embedding(embedding)
    n = len(z)
    if embedding == "query":
        return [4 * (i == 0) + 2 * int(z[i]) + int(z[-1]) for i in range(n)]
    if embedding == "ends":
        return [4 * (i == 0) + 2 * (i == n - 1) + int(z[i]) for i in range(n)]
    framed = [-1, *[int(x) for x in z], 2]
    return [3 * (u + 1) + v for u, v in zip(framed[:-1], framed[1:])]


def even_pairs_label(z) -> int:
    """+1 when the string has an even number of ab and ba pairs, else -1 (counted, not read off its ends)."""
    changes = sum(int(u != v) for u, v in zip(z[:-1], z[1:]))
    return 1 if changes % 2 == 0 else -1


LABEL_ENUMERATION_LENGTH = 8
"""Longest string ``label_in_single_token`` enumerates (all 510 strings of lengths 1 to 8)."""


@lru_cache(maxsize=8)
def label_in_single_token(embedding: str, n_max: int = LABEL_ENUMERATION_LENGTH) -> bool:
    """Whether a single token's type carries the even-pairs label under ``embedding``, by enumeration of every
    string of length 1 to ``n_max``: True when (a) the type at some position, counted from the start or from
    the end, determines the label over all strings that have that position, or (b) every string has a token
    whose type occurs in strings of one label only (a token the attention could pick out and read the label
    from).  Either reading of "a single token carries the label" makes it True, so False means that the
    label needs at least two tokens whichever way a token is picked."""
    strings = [z for n in range(1, n_max + 1) for z in itertools.product((0, 1), repeat=n)]
    typed = [(even_pairs_token_types(z, embedding), even_pairs_label(z)) for z in strings]
    for i in range(n_max):
        for pick in (lambda t: t[i], lambda t: t[-1 - i]):
            seen: dict = {}
            if all(seen.setdefault(pick(t), y) == y for t, y in typed if len(t) > i):
                return True
    labels_of: dict = {}
    for t, y in typed:
        for k in t:
            labels_of.setdefault(k, set()).add(y)
    return all(any(len(labels_of[k]) == 1 for k in t) for t, _ in typed)


def check_even_pairs_embedding(embedding: str) -> None:
    """Raise SettingError unless ``embedding`` is an even-pairs embedding."""
    if embedding not in EVEN_PAIRS_EMBEDDINGS:
        raise SettingError(f"even_pairs_embedding must be one of {', '.join(EVEN_PAIRS_EMBEDDINGS)}; "
                           f"got {embedding!r}")


def check_task(task: str, d: int) -> None:
    """Raise SettingError unless ``task`` is known and defined at alphabet size ``d``."""
    if task not in TASKS:
        raise SettingError(f"task must be one of {', '.join(TASKS)}; got {task!r}")
    if d < MIN_D[task]:
        raise SettingError(f"task {task} needs d >= {MIN_D[task]}, got d = {d}")


def _geometric_pgf(p: float, q: float) -> float:
    """E[q^n] for n ~ Geometric(p) on {1, 2, ...}."""
    return p * q / (1.0 - (1.0 - p) * q)


def and_balance(p: float, d: int) -> float:
    """P(a and b both occur) - 1/2 under Geometric(p) lengths on {1, ...}, tokens uniform over d symbols."""
    return 1.0 - 2.0 * _geometric_pgf(p, 1.0 - 1.0 / d) + _geometric_pgf(p, 1.0 - 2.0 / d) - 0.5


@lru_cache(maxsize=64)
def length_parameter(task: str, d: int) -> float:
    """The geometric parameter p of the task's length law (balancing for occurrence, OR and AND); kept per
    (task, d), since every batch of a sampled row asks (AND's root is a dozen evaluations of ``and_balance``)."""
    check_task(task, d)
    if task == "occurrence":
        return 1.0 / (d - 1)
    if task == "OR":
        return 2.0 / (d - 2)
    if task == "AND":
        # and_balance decreases from +1/2 (p -> 0: both occur) to -1/2 (p = 1: one token)
        from scipy.optimize import (
            brentq,  # imported here: the CLI loads this module for its task names
        )

        return brentq(and_balance, 1e-12, 1.0, args=(d,), xtol=BRENTQ_XTOL, rtol=4 * np.finfo(float).eps)
    if task == "ICL":
        return 1.0 / (2 * d - 1)
    if task == "SLR":
        return 1.0 / SLR_MEAN_LENGTH
    return 1.0 / EVEN_PAIRS_MEAN_LENGTH


@dataclass
class Batch:
    """Model inputs of a batch: embeddings X, multiplicities m, targets y (N, K), probability weights
    (None: uniform), integer labels for accuracy (class index, or +-1), and task-specific extras."""

    X: np.ndarray
    m: np.ndarray
    y: np.ndarray
    weights: np.ndarray | None = None
    labels: np.ndarray | None = None
    extra: dict = field(default_factory=dict)

    @property
    def size(self) -> int:
        return self.m.shape[0]

    def dense(self) -> "Batch":
        """The same batch with dense X and m (for the dense model at small sizes)."""
        X = self.X.toarray() if hasattr(self.X, "toarray") else self.X
        m = self.m.toarray() if hasattr(self.m, "toarray") else self.m
        return Batch(X, m, self.y, self.weights, self.labels, self.extra)


def _lengths(rng: np.random.Generator, p: float, N: int, start: int = 1) -> np.ndarray:
    """N lengths ~ Geometric(p) on {start, start + 1, ...}."""
    return rng.geometric(p, N) + (start - 1)


def _counts(index: np.ndarray, valid: np.ndarray, cells: int) -> np.ndarray:
    """Counts (N, cells) of the token indices ``index`` (N, L) at the ``valid`` positions."""
    N = index.shape[0]
    flat = (np.arange(N)[:, None] * cells + index)[valid]
    return np.bincount(flat, minlength=N * cells).reshape(N, cells).astype(float)


def _uniform_counts(n: np.ndarray, d: int, rng: np.random.Generator) -> np.ndarray:
    """Counts (N, d) of n_i tokens uniform over d symbols per string: Multinomial(n_i, uniform), drawn as the
    tokens themselves (one integer draw for all strings) and counted, which costs the tokens, not d binomials
    a string."""
    N = n.size
    tokens = rng.integers(0, d, int(n.sum()))
    flat = np.repeat(np.arange(N, dtype=np.int64) * d, n) + tokens
    return np.bincount(flat, minlength=N * d).reshape(N, d).astype(float)


@lru_cache(maxsize=8)
def identity_sparse(d: int):
    """The one-hot table I_d of the symbol tasks in the sparse form the engine layout gives it
    (``layout.from_batch``: ``scipy.sparse.csr_matrix`` of the dense table, the same arrays), built once per d,
    read-only; None where the layout keeps the table dense (few types, or a table too dense to pay)."""
    import scipy.sparse as sp

    from numerics.experiments import layout
    eye = np.eye(d)
    table = layout._sparse_if_sparse(eye)
    if not sp.issparse(table):
        return None
    for a in (table.data, table.indices, table.indptr):
        a.flags.writeable = False
    return table


def sample_symbols(task: str, d: int, N: int, rng: np.random.Generator) -> Batch:
    """Occurrence, OR or AND: symbol counts (N, d) over the one-hot table I_d; a = symbol 0, b = symbol 1.
    Each string's counts are those of its n_i uniform tokens (``_uniform_counts``)."""
    n = _lengths(rng, length_parameter(task, d), N)
    c = _uniform_counts(n, d, rng)
    has_a, has_b = c[:, 0] > 0, c[:, 1] > 0
    pos = {"occurrence": has_a, "OR": has_a | has_b, "AND": has_a & has_b}[task]
    lab = np.where(pos, 1, -1)
    extra = {"n": n}
    table = identity_sparse(d)
    if table is not None:
        extra["table_sparse"] = table
    return Batch(np.eye(d), c, lab[:, None].astype(float), labels=lab, extra=extra)


@lru_cache(maxsize=8)
def icl_table_sparse(d: int):
    """The pair embeddings of ``icl_table(d)`` as a canonical scipy.sparse CSR matrix, built once per d from its
    non-zeros (a dense table holds 128 MB at d = 200): row z (d + 1) + prev + 1 holds a 1 at column z and, after
    the first position (prev >= 0), one at column d + prev > z."""
    import scipy.sparse as sp
    z, prev = np.divmod(np.arange(d * (d + 1)), d + 1)
    has = prev > 0
    indptr = np.zeros(len(z) + 1, dtype=np.int64)
    np.cumsum(1 + has, out=indptr[1:])
    indices = np.empty(indptr[-1], dtype=np.int64)
    indices[indptr[:-1]] = z
    indices[indptr[1:][has] - 1] = d + prev[has] - 1
    return sp.csr_matrix((np.ones(indptr[-1]), indices, indptr), shape=(len(z), 2 * d))


def icl_table(d: int) -> np.ndarray:
    """Pair embeddings x = [e_z; e_prev] (D = 2d) of every (z, prev) with prev in {none, 0, ..., d-1};
    row index z * (d + 1) + (prev + 1), prev = -1 meaning the first position (zero vector).  Dense, for tests
    and small d: ``icl_table_sparse`` is the one construction."""
    return icl_table_sparse(d).toarray()


def icl_rule(z: np.ndarray, o: np.ndarray) -> np.ndarray:
    """Apply "every token after q = 0 is o" left to right to draws z (k, L) with answers o (k,), vectorised
    (``icl_rule_flat`` on the rows laid end to end)."""
    k, L = z.shape
    start = np.zeros((k, L), dtype=bool)
    start[:, :1] = True                              # (no column when L = 0)
    return icl_rule_flat(z.ravel(), np.repeat(o, L), start.ravel()).reshape(k, L)


def icl_rule_flat(z: np.ndarray, o: np.ndarray, start: np.ndarray) -> np.ndarray:
    """The rule on strings laid end to end: tokens z (M,), each position's answer o (M,), and ``start`` (M,)
    marking each string's first position.

    Read left to right, a position becomes o exactly when the (final) token before it is q; a final q is an
    original q whose run of consecutive original q's has an even index there (q o q o ... within a run).  So
    with k_i the index of position i within its run of original q's, z_i becomes o iff z_{i-1} was an
    original q with k_{i-1} even, in the same string.  A run starts afresh at a string's first position (as if
    a non-q stood just before it).
    """
    zero = z == 0
    idx = np.arange(z.size)
    last_nonzero = np.maximum.accumulate(np.where(~zero, idx, np.where(start, idx - 1, -1)))
    k = idx - last_nonzero - 1                       # index within the run of original q's (valid where zero)
    final_q = zero & (k % 2 == 0)
    to_o = np.zeros_like(zero)
    to_o[1:] = final_q[:-1]
    to_o &= ~start
    return np.where(to_o, o, z)


def sample_icl(d: int, N: int, rng: np.random.Generator, return_strings: bool = False,
               compiled: bool = True) -> Batch:
    """ICL bigram with trigger q = symbol 0: each string draws an answer o uniform over 1..d-1, tokens are
    uniform except that every token after q is o; strings without a q before the last position are redrawn
    (rejection, so the law is conditioned on that event).  Target: one-hot of o (K = d).

    The embedding table is the sparse ``icl_table_sparse(d)`` and the counts ``m`` a sparse (N, d (d + 1))
    matrix (a dense one has d^2 columns: 330 MB for 1024 strings at d = 200).

    ``compiled``: each round of the rejection loop as one compiled loop (``kernels.icl_round``) where numba
    runs, else in numpy (``_icl_round``, two dozen numpy calls a round, about five rounds a batch); the same
    draws and the same integers either way."""
    from numerics.experiments import kernels
    p = length_parameter("ICL", d)
    n = np.empty(N, dtype=int)
    o = np.empty(N, dtype=int)
    todo = np.arange(N)
    strings: list = [None] * N
    rows_n, rows_cell = [], []
    round_ = kernels.icl_round if compiled and kernels.usable() else _icl_round
    while todo.size:
        k = todo.size
        nk = _lengths(rng, p, k, start=2)
        ok_ = 1 + rng.integers(0, d - 1, k)
        raw = rng.integers(0, d, (k, int(nk.max())))   # drawn (k, L) as ever; only each string's own n_i used
        z, cells, good = round_(raw, nk, ok_, d)
        idx = todo[good]
        n[idx], o[idx] = nk[good], ok_[good]
        if return_strings:
            first = np.cumsum(nk) - nk
            for r, f, m_ in zip(idx, first[good], nk[good]):
                strings[r] = z[f:f + m_]
        rows_n.append(np.repeat(idx, nk[good]))
        rows_cell.append(cells[np.repeat(good, nk)])
        todo = todo[~good]
    rn, rc = np.concatenate(rows_n), np.concatenate(rows_cell)
    m = _count_matrix(rn, rc, N, d * (d + 1), compiled=round_ is kernels.icl_round)
    extra = {"n": n, "strings": strings} if return_strings else {"n": n}
    table = icl_table_sparse(d)
    extra["table_sparse"] = table
    return Batch(table, m, np.eye(d)[o], labels=o, extra=extra)


INT32_MAX = np.iinfo(np.int32).max


def csr_index_dtype(*sizes: int):
    """The index dtype scipy's CSR constructor keeps for a matrix whose dimensions, number of entries and index
    values are at most max(sizes): int32 where that fits, else int64.  (It narrows int64 index arrays that
    fit, with a scan and a copy of its own; arrays built in this dtype are kept as they are.)"""
    return np.int32 if max(sizes) <= INT32_MAX else np.int64


def _icl_round(raw: np.ndarray, nk: np.ndarray, ok_: np.ndarray, d: int):
    """One round of ``sample_icl``'s rejection loop, in numpy: (the k strings' tokens under the rule and their
    pair cells z_i (d + 1) + z_{i-1} + 1, z_{-1} = -1, laid end to end; which strings have a q before their
    last position).  ``kernels.icl_round`` is the same round as one compiled loop (the same integers)."""
    L = raw.shape[1]
    first = np.cumsum(nk) - nk                     # each string's offset in the strings laid end to end
    start = np.zeros(int(nk.sum()), dtype=bool)
    start[first] = True
    z = icl_rule_flat(raw[np.arange(L)[None, :] < nk[:, None]], np.repeat(ok_, nk), start)
    pos = np.arange(z.size) - np.repeat(first, nk)
    # a trigger before the last position (n_i >= 2, so no string is empty)
    good = np.logical_or.reduceat((z == 0) & (pos < np.repeat(nk - 1, nk)), first)
    prev = np.empty_like(z)
    prev[1:] = z[:-1]
    prev[start] = -1
    return z, z * (d + 1) + prev + 1, good


def _count_matrix(rows: np.ndarray, cols: np.ndarray, N: int, cells: int, compiled: bool = False):
    """The (N, cells) CSR matrix of the counts of the pairs (rows, cols): canonical (sorted indices, no
    duplicates), float counts, the same arrays as ``csr_matrix((ones, (rows, cols))).sum_duplicates()``.
    ``compiled``: by ``kernels.count_csr`` (two counting sorts, faster than sorting the keys), else by
    ``np.unique`` of the pairs' keys."""
    import scipy.sparse as sp
    if compiled:
        from numerics.experiments import kernels
        indptr, c, count = kernels.count_csr(rows, cols, N, cells)
    else:
        key, count = np.unique(rows.astype(np.int64) * cells + cols, return_counts=True)
        r, c = np.divmod(key, cells)
        indptr = np.zeros(N + 1, dtype=np.int64)
        np.cumsum(np.bincount(r, minlength=N), out=indptr[1:])
    dt = csr_index_dtype(N, cells, c.size)  # (int64 ones scipy would scan and copy)
    m = sp.csr_matrix((np.asarray(count, float), c.astype(dt), indptr.astype(dt)), shape=(N, cells))
    m.has_canonical_format = True
    return m


@lru_cache(maxsize=32)
def slr_directions(d: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The key k* and value v* of SLR: orthonormal, drawn from the task seed (QR of a Gaussian d x 2).  Kept
    per (d, seed), read-only (every batch of a run asks)."""
    q, _ = np.linalg.qr(np.random.default_rng([seed, 7]).standard_normal((d, 2)))
    q.flags.writeable = False  # (its columns, views as ever, read-only with it)
    return q[:, 0], q[:, 1]


def sample_slr(d: int, N: int, rng: np.random.Generator, seed: int) -> Batch:
    """Single-location regression: x_i ~ N(0, I_d) except x_J ~ N(sqrt(d/2) k*, gamma^2 I) at one uniform
    location J; y = <x_J, v*> + 0.1 xi.  Strings padded to the batch maximum with multiplicity 0.

    Only the present tokens are drawn (one standard normal vector each, in string order; the padding is
    zero), and x_J is its own standard normal draw g moved to sqrt(d/2) k* + gamma g: the same law as a draw
    of its own, without d further normals a string."""
    k, v = slr_directions(d, seed)
    n = _lengths(rng, length_parameter("SLR", d), N)
    L = int(n.max())
    m = (np.arange(L)[None, :] < n[:, None]).astype(float)
    J = rng.integers(0, n)
    X = np.zeros((N, L, d))
    X[m > 0] = rng.standard_normal((int(n.sum()), d))
    rows = np.arange(N)
    XJ = np.sqrt(d / 2) * k + np.sqrt(SLR_GAMMA2) * X[rows, J]
    X[rows, J] = XJ
    y = XJ @ v + SLR_NOISE * rng.standard_normal(N)
    return Batch(X, m, y[:, None], extra={"n": n, "J": J, "k": k, "v": v})


def sample_even_pairs(N: int, rng: np.random.Generator, return_strings: bool = False,
                      embedding: str = "query") -> Batch:
    """Even pairs over {a, b} (0 = a, 1 = b): y = +1 iff the number of ab and ba pairs is even (iff the first
    symbol equals the last).  Counts over the embedding's one-hot table (module doc):

    * "query": tokens (first_i, z_i, z_n), index 4 first_i + 2 z_i + z_n (D = 8);
    * "adjacent": the framed string BOS z_1..z_n EOS as its adjacent pairs (prev, next) in
      {BOS, a, b} x {a, b, EOS} (D = 9, index 3 prev + next);
    * "ends": tokens (first_i, last_i, z_i), index 4 first_i + 2 last_i + z_i (D = 8).
    """
    check_even_pairs_embedding(embedding)
    n = _lengths(rng, length_parameter("even_pairs", 2), N)
    L = int(n.max())
    z = rng.integers(0, 2, (N, L))          # 0 = a, 1 = b
    rows = np.arange(N)
    last = z[rows, n - 1]
    lab = np.where(z[:, 0] == last, 1, -1)
    if embedding == "query":
        pos = np.arange(L)[None, :]
        cells = 4 * (pos == 0) + 2 * z + last[:, None]
        m = _counts(cells, pos < n[:, None], 8)
    elif embedding == "ends":
        pos = np.arange(L)[None, :]
        cells = 4 * (pos == 0) + 2 * (pos == (n - 1)[:, None]) + z
        m = _counts(cells, pos < n[:, None], 8)
    else:
        framed_prev = np.concatenate([np.full((N, 1), -1), z], axis=1)      # BOS = -1
        framed_next = np.concatenate([z, np.full((N, 1), 2)], axis=1)       # EOS = 2
        framed_next[rows, n] = 2
        cells = 3 * (framed_prev + 1) + framed_next
        valid = np.arange(L + 1)[None, :] <= n[:, None]
        m = _counts(cells, valid, 9)
    extra = {"n": n, "embedding": embedding}
    if return_strings:
        extra["strings"] = [z[i, : n[i]] for i in range(N)]
    return Batch(np.eye(EVEN_PAIRS_DIM[embedding]), m, lab[:, None].astype(float), labels=lab, extra=extra)


def sample(task: str, d: int, N: int, rng: np.random.Generator, seed: int = 0, *,
           even_pairs_embedding: str = "query") -> Batch:
    """N strings of ``task`` at alphabet size d from ``rng`` (``seed`` fixes the SLR directions;
    ``even_pairs_embedding`` chooses the even-pairs tokens, see the module doc)."""
    check_task(task, d)
    check_even_pairs_embedding(even_pairs_embedding)
    if task in POPULATION_TASKS:
        return sample_symbols(task, d, N, rng)
    if task == "ICL":
        return sample_icl(d, N, rng)
    if task == "SLR":
        return sample_slr(d, N, rng, seed)
    return sample_even_pairs(N, rng, embedding=even_pairs_embedding)


def mean_length(task: str, d: int) -> float:
    """The mean string length of the task's length law (1 / p; ICL, on {2, 3, ...}: 1 + 1 / p)."""
    p = length_parameter(task, d)
    return 1.0 + 1.0 / p if task == "ICL" else 1.0 / p


def shortest_length(task: str) -> int:
    """The shortest string of the task's length law (2 for ICL, else 1)."""
    return 2 if task == "ICL" else 1


class _BucketLengths:
    """A numpy Generator whose geometric draws are conditioned on a range: ``geometric(p, size)`` returns
    Geometric(p) on {1, 2, ...} conditioned on lo <= g < hi (the inverse of the truncated law's distribution
    function on one uniform draw each); every other method is the wrapped generator's.  The samplers draw their
    lengths by ``geometric`` alone (``_lengths``), so through this generator they draw the task's strings with
    the length law conditioned on the range, and everything else as they always do."""

    def __init__(self, rng: np.random.Generator, lo: int, hi: int):
        self._rng, self._lo, self._hi = rng, int(lo), int(hi)

    def geometric(self, p: float, size) -> np.ndarray:
        q = np.log1p(-p)
        span = -np.expm1((self._hi - self._lo) * q)          # P(g < hi | g >= lo)
        k = np.floor(np.log1p(-self._rng.random(size) * span) / q).astype(np.int64)
        return self._lo + np.minimum(k, self._hi - self._lo - 1)

    def __getattr__(self, name):
        return getattr(self._rng, name)


def sample_lengths_in(task: str, d: int, N: int, rng: np.random.Generator, lo: int, hi: int, seed: int = 0, *,
                      even_pairs_embedding: str = "query") -> Batch:
    """N strings of ``task`` (``sample``) whose lengths follow the task's law conditioned on lo <= n < hi:
    held-out strings longer (or shorter) than training ever shows, at the law's own shape within the range."""
    check_task(task, d)
    start = shortest_length(task)
    if not (start <= lo < hi):
        raise SettingError(f"a length range of {task} needs {start} <= lo < hi, got [{lo}, {hi})")
    # the samplers add start - 1 to their geometric draws
    return sample(task, d, N, _BucketLengths(rng, lo - start + 1, hi - start + 1), seed,
                  even_pairs_embedding=even_pairs_embedding)


def model_shape(task: str, d: int, heads: int = 1, *, even_pairs_embedding: str = "query") -> tuple[int, int, int]:
    """(H, D, K) of the model for the task."""
    check_even_pairs_embedding(even_pairs_embedding)
    D = {"ICL": 2 * d, "even_pairs": EVEN_PAIRS_DIM[even_pairs_embedding]}.get(task, d)
    return heads, D, d if task == "ICL" else 1

