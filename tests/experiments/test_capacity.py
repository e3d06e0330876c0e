"""Representability ceilings (numerics/experiments/capacity.py) against hand-checked small cases."""
from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from scipy.optimize import linprog
from scipy.special import gammaln
from scipy.stats import multivariate_normal

from numerics.experiments import capacity
from numerics.experiments import tasks
from numerics.experiments.population import population
from numerics.model import Model, Params
from theory.validation import SettingError


def test_weak_orderings_are_the_fubini_numbers():
    assert [len(capacity.weak_orderings(T)) for T in (1, 2, 3, 4)] == [1, 3, 13, 75]


def _pattern_params(c: capacity.Ceiling, s: float) -> Params:
    """Finite parameters of a ceiling's limit pattern at scale s (score -rank s, the pattern's readout)."""
    ranks = np.array(c.details["patterns"], float)
    readout = np.array(c.details["readout"])
    return Params(-s * ranks, readout[:, :, None])


@pytest.mark.parametrize("task,d,H", [("occurrence", 4, 1), ("OR", 6, 1), ("AND", 3, 2)])
def test_exact_zero_ceilings_are_reached_by_their_pattern(task, d, H):
    """The stated pattern, at finite scale s, has population risk falling to 0 (class-reduced population,
    which tests/experiments/test_tasks.py checks against the full sum); a wrong pattern would stall above 0."""
    c = capacity.ceiling(task, d, H)
    assert c.kind.startswith("exact infimum") and c.lower == 0 and c.upper < 1e-20 and c.accuracy == 1.0
    pop = population(task, d, mass_tol=1e-6, len_tol=1e-8)
    T = pop.m.shape[1]  # class tokens a, (b,) u with symmetric parameters: X = I_T on the class counts
    model = Model(H, T, 1)
    risks = [model.risk_and_grad(_pattern_params(c, s), np.eye(T), pop.y, pop.m, weights=pop.weights)[0]
             for s in (2.0, 5.0, 10.0, 40.0)]
    assert all(b < a for a, b in zip(risks, risks[1:]))
    assert risks[-1] < 1e-25
    # the exact rule is checked on every presence pattern, not only on the classes kept
    readout = np.array(c.details["readout"])
    patterns = [tuple(r) for r in c.details["patterns"]]
    assert capacity.limit_rule_is_exact(task, patterns, readout)
    readout[0, 0] += 1e-6
    assert not capacity.limit_rule_is_exact(task, patterns, readout)


def test_a_tied_tier_with_different_readouts_is_not_exact():
    """a and u tied on top with readouts +1, -1: f is the count average, right only at extreme counts."""
    assert not capacity.limit_rule_is_exact("occurrence", [(0, 0)], np.array([[1.0, -1.0]]))
    assert capacity.limit_rule_is_exact("occurrence", [(0, 1)], np.array([[1.0, -1.0]]))


def test_and_two_heads_needs_three_tiers():
    """Two heads that each attend to one marked symbol only (a > {b, u} and b > {a, u}) cannot fit AND: the
    readouts would solve an inconsistent system.  The exact ceiling uses three-tier rankings."""
    pop = population("AND", 3, mass_tol=1e-6, len_tol=1e-8)
    y, w = pop.y[:, 0], pop.weights
    Phi = np.concatenate([capacity.limit_features(pop.m, (0, 1, 1)), capacity.limit_features(pop.m, (1, 0, 1))], axis=1)
    assert capacity._weighted_lstsq(Phi, y, w)[1] > 0.01  # 0.021 at d = 3, against 1e-31 for three tiers
    assert sorted(set(capacity.ceiling("AND", 3, 2).details["patterns"][0])) == [0, 1, 2]


def _and_full_population_d4(n_max: int):
    """Every count vector (a, b, u1, u2) at d = 4 with n <= n_max and its probability."""
    p = tasks.length_parameter("AND", 4)
    rows, w = [], []
    for n in range(1, n_max + 1):
        for c in itertools.product(range(n + 1), repeat=3):
            if sum(c) <= n:
                v = (*c, n - sum(c))
                rows.append(v)
                w.append(math.exp(gammaln(n + 1) - gammaln(np.array(v) + 1).sum() - n * math.log(4)
                                  + math.log(p) + (n - 1) * math.log1p(-p)))
    return np.array(rows, float), np.array(w)


def test_and_lower_bound_formula_against_explicit_quadruples():
    """and_lower_bound sums 2 / sum 1/pi over the quadruples {u, u+a, u+b, u+a+b}; here the same sum over
    explicit unmarked parts u = (u1, u2) at d = 4 with the multinomial probabilities."""
    d, M = 4, 60
    p = tasks.length_parameter("AND", d)

    def prob(v):
        n = sum(v)
        return math.exp(math.lgamma(n + 1) - sum(math.lgamma(x + 1) for x in v) - n * math.log(d)
                        + math.log(p) + (n - 1) * math.log1p(-p))

    total = 0.0
    for u1 in range(M + 1):
        for u2 in range(M + 1 - u1):
            if u1 + u2 == 0:
                continue
            inv = sum(1 / prob((i, j, u1, u2)) for i in (0, 1) for j in (0, 1))
            total += 2 / inv
    tail = capacity.and_lower_bound(d) - total
    assert 0 <= tail < 1e-3 * total  # the explicit sum stops at |u| <= 60: what is left is the tail


def test_and_lower_bound_holds_for_any_parameters():
    """The quadruple lemma: sum of the four errors >= 2 for arbitrary (non-symmetric) one-head parameters,
    and the bound lies below the risk of every parameter (random, and the best over a fine grid at d = 3,
    where the class reduction is the whole model), with the reported upper end at the grid's best."""
    rng = np.random.default_rng(4)
    model = Model(1, 4, 1)
    c4, w4 = _and_full_population_d4(12)
    y4 = np.where((c4[:, 0] > 0) & (c4[:, 1] > 0), 1.0, -1.0)[:, None]
    for _ in range(20):
        prm = Params(rng.standard_normal((1, 4)) * 4, rng.standard_normal((1, 4, 1)) * 3)
        u = np.array([[0, 0, 2, 1], [1, 0, 2, 1], [0, 1, 2, 1], [1, 1, 2, 1]], float)
        f = model.forward(prm, np.eye(4), u)[0][:, 0]
        assert np.abs(f - np.array([-1, -1, -1, 1])).sum() >= 2 - 1e-12
        risk = model.risk_and_grad(prm, np.eye(4), y4, c4, weights=w4)[0]
        assert capacity.and_lower_bound(4) <= risk
    c = capacity.ceiling("AND", 3, 1)
    pop = population("AND", 3, mass_tol=1e-4, len_tol=1e-6)
    y, w = pop.y[:, 0], pop.weights
    grid = np.linspace(-15, 15, 31)
    best = min(capacity._weighted_lstsq(*((lambda e: (e / e.sum(axis=1, keepdims=True), y, w))(
        pop.m * np.exp(np.array([ga, gb, 0.0]) - max(ga, gb, 0.0)))))[1] for ga in grid for gb in grid)
    assert c.lower <= best
    assert c.lower > 0.02 and c.not_representable(0.01) and c.verdict(0.01) == "not representable"
    assert min(c.details["search_risk"], c.details["limit_pattern_risk"]) <= best + 1e-9


@pytest.mark.parametrize("loss", ["squared", "cross_entropy"])
def test_icl_construction_reaches_zero(loss):
    """Attention on the tokens whose previous symbol is the trigger, readout of the token's own symbol:
    the risk falls to 0 on sampled strings (d = 3); attending to the trigger itself does not."""
    d = 3
    b = tasks.sample_icl(d, 3000, np.random.default_rng(2)).dense()
    model = Model(*tasks.model_shape("ICL", d))
    target = b.labels if loss == "cross_entropy" else b.y

    def risk(s, c, block):
        alpha = np.zeros((1, 2 * d))
        alpha[0, block] = s
        B = np.zeros((1, 2 * d, d))
        B[0, :d, :] = c * np.eye(d)
        return model.risk_and_grad(Params(alpha, B), b.X, target, b.m, loss=loss)[0]

    def scale(s):  # the readout scale: 1 under the squared loss, growing with s under cross-entropy
        return s / 2 if loss == "cross_entropy" else 1.0

    r = [risk(s, scale(s), d + 0) for s in (1.0, 5.0, 20.0, 60.0)]
    assert all(y < x for x, y in zip(r, r[1:])) and r[-1] < 1e-12
    assert risk(60.0, scale(60.0), 0) > 0.05  # the trigger's own coordinate: wrong tokens
    cl = capacity.ceiling("ICL", d, loss=loss)
    assert cl.upper == 0 and cl.accuracy == 1 and cl.representable(0.0)


def test_slr_projections_and_posterior_match_full_vectors():
    """The ceiling's reduced SLR draws (x.k*, x.v*, |x_perp|^2) have the law of the full sampler's, and the
    posterior is the likelihood ratio of the two Gaussians: the Bayes risk from full vectors (posterior by
    scipy densities) agrees with the reduced one within 4.5 standard errors (d = 8)."""
    d, N = 8, 4000
    b = tasks.sample_slr(d, N, np.random.default_rng(5), seed=1)
    k, v = b.extra["k"], b.extra["v"]
    mu = math.sqrt(d / 2) * k
    sig = multivariate_normal(mu, tasks.SLR_GAMMA2 * np.eye(d))
    null = multivariate_normal(np.zeros(d), np.eye(d))
    n = b.extra["n"]
    flat = b.X[b.m > 0]                                # tokens string by string (rows are padded at the end)
    starts = np.concatenate([[0], np.cumsum(n)[:-1]])
    lr = np.exp(sig.logpdf(flat) - null.logpdf(flat))
    var_full = np.empty(N)
    for i in range(N):
        pi = lr[starts[i]: starts[i] + n[i]] / lr[starts[i]: starts[i] + n[i]].sum()
        xv = flat[starts[i]: starts[i] + n[i]] @ v
        var_full[i] = tasks.SLR_NOISE ** 2 + pi @ xv ** 2 - (pi @ xv) ** 2
    red = capacity.slr_projections(d, 20000, np.random.default_rng(6))
    var_red = capacity.slr_posterior(d, *red)[1]
    se = math.hypot(var_full.std() / math.sqrt(N), var_red.std() / math.sqrt(len(var_red)))
    assert abs(var_full.mean() - var_red.mean()) < 4.5 * se
    # the same strings through the reduced posterior give the same variances (per string, not in law)
    perp = (flat ** 2).sum(axis=1) - (flat @ k) ** 2 - (flat @ v) ** 2
    assert np.allclose(capacity.slr_posterior(d, flat @ k, flat @ v, perp, starts)[1], var_full, atol=1e-12)


def test_slr_ceiling_brackets_and_is_representable_at_large_d():
    c = capacity.ceiling("SLR", 50, samples=20000)
    assert c.lower == c.best_risk and c.risk >= c.best_risk and c.upper >= c.risk
    assert abs(c.best_risk - tasks.SLR_NOISE ** 2 / 2) < 1e-4  # J is identified at d = 50
    assert c.representable(0.002)
    small = capacity.ceiling("SLR", 8, samples=20000)
    assert small.risk - small.best_risk > 0.02  # at d = 8 linear scores cannot weigh |x|^2: a real gap


def _even_pairs_strings(n_max: int):
    for n in range(1, n_max + 1):
        for z in itertools.product((0, 1), repeat=n):
            yield np.array(z)


def test_even_pairs_query_construction_risk_goes_to_zero():
    """Exact enumeration of every string with n <= 11 under the query embedding, built here from the
    definition (first flag, symbol, last symbol): the construction's risk equals the closed form truncated at
    n <= 11 and falls to 0 with the scale."""
    p = tasks.length_parameter("even_pairs", 2)
    rows, w, y = [], [], []
    for z in _even_pairs_strings(11):
        n = len(z)
        c = np.zeros(8)
        for i, zi in enumerate(z):
            c[4 * (i == 0) + 2 * zi + z[-1]] += 1
        rows.append(c)
        w.append(p * (1 - p) ** (n - 1) * 2.0 ** -n)
        y.append(1.0 if sum(z[1:] != z[:-1]) % 2 == 0 else -1.0)
    m, w, y = np.array(rows), np.array(w), np.array(y)[:, None]
    model = Model(1, 8, 1)
    beta = np.zeros(8)
    for x, q in itertools.product((0, 1), repeat=2):
        beta[4 + 2 * x + q] = 1.0 if x == q else -1.0
    risks = []
    for s in (1.0, 4.0, 10.0, 40.0):
        alpha = np.where(np.arange(8) >= 4, s, 0.0)
        r = model.risk_and_grad(Params(alpha[None], beta[None, :, None]), np.eye(8), y, m, weights=w)[0]
        if s < 20:  # at s = 40 f rounds to +-1 in floating point
            assert r == pytest.approx(capacity.even_pairs_query_construction_risk(s, n_max=11), rel=1e-10, abs=1e-300)
        risks.append(r)
    assert all(b < a for a, b in zip(risks, risks[1:])) and risks[-1] < 1e-30
    assert capacity.even_pairs_query_construction_risk(40.0) < 1e-30
    c = capacity.ceiling("even_pairs", 50)
    assert c.upper == 0 and c.representable(0.0) and c.details["embedding"] == "query"


def _adjacent_counts(z) -> tuple:
    prev, nxt = [-1, *z], [*z, 2]
    c = np.zeros(9)
    for u, v in zip(prev, nxt):
        c[3 * (u + 1) + v] += 1
    return tuple(c)


def test_adjacent_population_is_the_exact_class_sum():
    """Every string with n <= 10 enumerated: its pair-count class and probability, summed, equal the class
    population's (no class dropped here)."""
    p = tasks.length_parameter("even_pairs", 2)
    want: dict = {}
    for z in _even_pairs_strings(10):
        key = _adjacent_counts(z)
        want[key] = want.get(key, 0.0) + p * (1 - p) ** (len(z) - 1) * 2.0 ** -len(z)
    pop = capacity.adjacent_population(1e-300, 0.5)
    got = {tuple(c): (wt, lab) for c, wt, lab in zip(pop.m, pop.weights, pop.labels) if c.sum() - 1 <= 10}
    assert set(got) == set(want)
    assert max(abs(got[k][0] - want[k]) for k in want) < 1e-15
    assert all(got[k][1] == (1 if k[4] == k[6] else -1) for k in got)  # even iff as many ab as ba


def test_adjacent_cannot_classify_six_strings_and_its_bound_holds():
    """No linear rule sign(w . c) separates a, b, aba, bab from ab, ba (linprog infeasible); the certificate
    c(a) + c(b) + c(aba) + c(bab) = 2 c(ab) + 2 c(ba) makes the six errors sum to >= 2 for any parameters,
    and the dual bound lies below the population risk of random parameters."""
    strings = {"a": [0], "b": [1], "aba": [0, 1, 0], "bab": [1, 0, 1], "ab": [0, 1], "ba": [1, 0]}
    c = {k: np.array(_adjacent_counts(v)) for k, v in strings.items()}
    pos, neg = ["a", "b", "aba", "bab"], ["ab", "ba"]
    A = np.array([-c[k] for k in pos] + [c[k] for k in neg])  # margins >= 1 after scaling
    assert linprog(np.zeros(9), A_ub=A, b_ub=-np.ones(6), bounds=[(None, None)] * 9).status == 2
    assert np.array_equal(sum(c[k] for k in pos), 2 * sum(c[k] for k in neg))
    model = Model(1, 9, 1)
    rng = np.random.default_rng(3)
    pop = capacity.adjacent_population(1e-300, 0.5)
    _, probs, fams = capacity.adjacent_certificates()
    lower = capacity.certificate_lower_bound(probs, fams)
    assert lower > 2 / (1 / probs[fams[0]]).sum()  # more than the first family alone
    X = np.array([c[k] for k in pos + neg])
    y = np.array([1, 1, 1, 1, -1, -1.0])
    for scale in (0.5, 3.0, 30.0):
        prm = Params(rng.standard_normal((1, 9)) * scale, rng.standard_normal((1, 9, 1)) * 2)
        f = model.forward(prm, np.eye(9), X)[0][:, 0]
        assert np.abs(f - y).sum() >= 2 - 1e-9
        assert lower <= model.risk_and_grad(prm, pop.X, pop.y, pop.m, weights=pop.weights)[0]


def test_one_head_lean_gradient_matches_the_model():
    pop = capacity.adjacent_population(1e-2, 1e-3)
    x = np.random.default_rng(1).standard_normal(18) * 2
    r, g = capacity.one_head_risk_and_grad(x, pop.m, pop.y[:, 0], pop.weights)
    r2, g2, _ = Model(1, 9, 1).risk_and_grad(Params(x[:9].reshape(1, 9), x[9:].reshape(1, 9, 1)),
                                              pop.X, pop.y, pop.m, weights=pop.weights)
    assert r == pytest.approx(r2, rel=1e-13)
    assert np.allclose(g, np.concatenate([g2.alpha.ravel(), g2.B.ravel()]), rtol=0, atol=1e-14)


def test_ceiling_record_and_bad_input():
    c = capacity.Ceiling("AND", 8, 1, "squared", 0.3, 0.2, 0.8, 0.0, "bracket", "m")
    assert (c.lower, c.upper) == pytest.approx((0.1, 0.3))
    assert c.verdict(0.05) == "not representable" and c.verdict(0.2) == "undecided"
    assert c.verdict(0.3) == "representable" and c.representable(0.3) and not c.representable(0.29)
    assert c.to_dict()["lower"] == pytest.approx(0.1) and c.to_dict()["kind"] == "bracket"
    for real in (capacity.ceiling("AND", 3), capacity.ceiling("ICL", 4, loss="cross_entropy"), capacity.ceiling("even_pairs", 4),
                 capacity.ceiling("SLR", 4, samples=2000)):
        back = json.loads(json.dumps(real.to_dict(), allow_nan=False))
        assert back["upper"] == real.upper and back["kind"] == real.kind
    with pytest.raises(SettingError, match="loss"):
        capacity.ceiling("AND", 8, loss="cross_entropy")
    with pytest.raises(SettingError, match="option"):
        capacity.ceiling("AND", 8, even_pairs_embedding="query")
    with pytest.raises(SettingError, match="even_pairs_embedding"):
        capacity.ceiling("even_pairs", 8, even_pairs_embedding="bigram")
    with pytest.raises(SettingError, match="d >= 4"):
        capacity.ceiling("OR", 3)


def test_certificate_classes_and_dual_bound():
    """The certificate classes carry the population's probabilities, and the dual bound of one family is its
    closed form 2 / sum 1/pi (the minimum of sum pi e^2 / 2 subject to sum e >= 2)."""
    keys, probs, fams = capacity.adjacent_certificates(3)
    pop = capacity.adjacent_population(1e-300, 0.5)
    table = {tuple(c): w for c, w in zip(pop.m, pop.weights)}
    rep = {"a": lambda i: [0] * i, "b": lambda j: [1] * j, "ab": lambda i, j: [0] * i + [1] * j,
           "ba": lambda j, i: [1] * j + [0] * i, "aba": lambda i2, j: [0] + [1] * j + [0] * (i2 - 1),
           "bab": lambda j2, i: [1] + [0] * i + [1] * (j2 - 1)}
    for key, pr in zip(keys, probs):
        assert pr == pytest.approx(table[_adjacent_counts(rep[key[0]](*key[1:]))], rel=1e-12)
    one = capacity.certificate_lower_bound(probs, fams[:1])
    assert one == pytest.approx(2 / (1 / probs[fams[0]]).sum(), rel=1e-6)


def test_and_certificate_dual_is_below_a_primal_point():
    """Weak duality, checked: at several m the K = 4 term of the AND bound (a dual value) lies below the
    primal value min sum g e^2 / 2 subject to every family's errors summing to >= 2 (solved by SLSQP: any
    feasible point is above the optimum, hence above every dual value), and above the K = 1 term."""
    from scipy.optimize import minimize

    m, terms, g, fams = capacity.and_lower_bound_terms(8, K=4)
    single = capacity.and_lower_bound_terms(8, K=1)[1]
    assert np.all(terms >= single) and terms.sum() > 1.3 * single.sum()
    weight = (1 - 2 / 8) ** m
    A = np.zeros((len(fams), g.shape[1]))
    for f, F in enumerate(fams):
        A[f, F] = 1.0
    cons = {"type": "ineq", "fun": lambda e: A @ e - 2.0, "jac": lambda e: A}
    for r in (5, 40):
        gr = g[r] / g[r].max()
        res = minimize(lambda e: 0.5 * (gr * e * e).sum(), np.full(len(gr), 2.0), jac=lambda e: gr * e,
                       constraints=cons, method="SLSQP", options={"ftol": 1e-14, "maxiter": 500})
        assert np.all(A @ res.x >= 2 - 1e-9)
        primal = 0.5 * (gr * res.x ** 2).sum() * g[r].max() * weight[r]
        assert terms[r] <= primal * (1 + 1e-9)


def test_ceiling_accuracy_counts_f_zero_as_minus_one_as_the_trained_runs_do():
    """One rule for +-1 predictions (``engine.predictions``): f = 0, and any f within the tie margin, is a
    -1 prediction, right on a -1 string and wrong on a +1 string, in the ceilings' accuracy as in the trained
    runs' (the ceilings counted f = 0 wrong for either label), and the tied mass is reported beside it."""
    from numerics.experiments import engine
    from numerics.experiments.capacity import _accuracy

    f, labels, w = np.array([0.0, 0.0, 2.0, -3.0]), np.array([-1, 1, 1, 1]), np.array([0.4, 0.3, 0.2, 0.1])
    assert _accuracy(f, labels, w, np.array([[3.0, -1.0]])) == pytest.approx((0.6, 0.7), abs=1e-15)
    # within the tie margin (TIE_RTOL times the largest |f| the readout allows: the heads' largest |values|
    # summed, 1.5 + 1.5, so 3e-9) an output counts as -1 and as tied, whatever its sign; beyond it the sign
    # decides (a margin from one head, 1.5e-9, would give (0.7, 0.7); no margin 0.3)
    assert engine.TIE_RTOL == 1e-9
    f2 = np.array([1e-12, -1e-12, 2e-9, 4e-9])
    acc, tied = _accuracy(f2, labels, w, np.array([[1.5, 0.0], [0.0, -1.5]]))
    assert (acc, tied) == pytest.approx((0.5, 0.9), abs=1e-15)
    tb = engine.from_batch(tasks.Batch(np.eye(2), np.ones((4, 2)), labels[:, None].astype(float), weights=w,
                               labels=labels))
    assert engine.accuracy(f[:, None, None], tb).tolist() == pytest.approx([0.6], abs=1e-15)


@pytest.mark.parametrize("task, d, heads, options, shape", [
    ("AND", 3, 2, {}, (2, 3)),   # limit pattern: theta, one row per head over the token classes a, b, u
    ("OR", 4, 1, {}, (1, 3)),
    ("AND", 3, 1, {}, (1, 3)),   # finite scores beat every pattern: beta, one head
    pytest.param("even_pairs", 4, 1, {"even_pairs_embedding": "adjacent"}, (1, 9), marks=pytest.mark.slow),
])
def test_ceiling_tie_margins_come_from_a_readout_per_head(monkeypatch, task, d, heads, options, shape):
    """The ceilings' accuracy takes its tie margin from the readout laid out per head (heads, values), as
    ``engine.tie_margin`` needs (the heads' largest |values| summed): a readout flattened into one head, or a
    head's values split into heads, would give another margin.  Every call's readout has the expected shape,
    and the reported tied mass is the one that readout gives."""
    calls = []
    real = capacity._accuracy

    def spy(f, labels, w, readout):
        out = real(f, labels, w, readout)
        calls.append((np.asarray(readout).shape, out))
        return out

    monkeypatch.setattr(capacity, "_accuracy", spy)
    if task == "even_pairs":  # any parameters do for the shape: skip the 16-start search (~15 s)
        monkeypatch.setattr(capacity, "_adjacent_search", lambda: np.linspace(-1.0, 1.0, 18))
    c = capacity.ceiling(task, d, heads, **options)
    assert calls and all(s == shape for s, _ in calls), calls
    assert c.details["accuracy_tied"] == calls[-1][1][1] and c.accuracy == calls[-1][1][0]


def _and_quadruples(u: tuple, k: int, j: int) -> np.ndarray:
    """Count vectors over (a, b, u1, u2) of u, u + k a, u + j b, u + k a + j b (labels -, -, -, +)."""
    base = np.array([0, 0, *u], float)
    return np.array([base, base + [k, 0, 0, 0], base + [0, j, 0, 0], base + [k, j, 0, 0]])


def test_and_certificate_rests_on_the_all_marked_denominator():
    """The step that makes AND's one-head certificate work: with softmax weights v = e^alpha > 0 the all-marked
    string's denominator D = v . c is the largest of its quadruple, and then the four errors of the model's
    outputs sum to at least 2; checked over a grid of scores, readouts, unmarked parts u and k, l <= 4."""
    model = Model(1, 4, 1)
    y = np.array([-1.0, -1.0, -1.0, 1.0])
    quads = [_and_quadruples(u, k, j) for u in ((1, 0), (0, 2), (2, 1), (3, 3)) for k in range(1, 5)
             for j in range(1, 5)]
    m = np.concatenate(quads)
    rng = np.random.default_rng(7)
    tightest = math.inf
    for alpha in itertools.product((-6.0, 0.0, 2.0, 6.0), repeat=4):
        v = np.exp(np.array(alpha))
        den = (m @ v).reshape(-1, 4)
        assert (den[:, 3] >= den[:, :3].max(axis=1)).all(), alpha              # the dominance step
        for beta in (rng.standard_normal(4) * 3, np.array([1.0, 1.0, -1.0, -1.0]), np.array([5.0, 5.0, -9.0, 0.0])):
            f = model.forward(Params(np.array([alpha]), beta.reshape(1, 4, 1)), np.eye(4), m)[0][:, 0]
            assert np.allclose(f, (m @ (beta * v)) / (m @ v), rtol=1e-12, atol=1e-12)  # f = (w . c) / (v . c)
            errors = np.abs(f.reshape(-1, 4) - y).sum(axis=1)
            assert (errors >= 2 - 1e-9).all(), (alpha, beta)
            tightest = min(tightest, float(errors.min()))
    assert tightest < 2.01  # the bound is reached on the grid, not only respected from afar


def test_and_certificate_fails_without_the_dominance():
    """The control: the same linear relation with a weight v_a < 0 (no softmax gives one) leaves the all-marked
    denominator below the others, and outputs f = (w . c) / (v . c) then err by about 0.1 in all, not 2."""
    c = _and_quadruples((1, 0), 1, 1)
    assert np.array_equal(c[3] + c[0], c[1] + c[2])
    v = np.array([-0.9, -0.05, 1.0, 1.0])
    w = np.array([0.9, 0.15, -1.0, 0.0])
    den = c @ v
    assert den.min() > 0 and den[3] < den[:3].max()
    errors = np.abs(c @ w / den - np.array([-1.0, -1.0, -1.0, 1.0])).sum()
    assert errors < 0.2
