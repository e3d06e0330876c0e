"""The benchmark's baselines compute what they claim: the numpy double sum is the exact risk to its
tolerance at a cost linear in d, and the (n, c) Monte Carlo is unbiased within its standard error."""
from numerics.benchmark import POINT, monte_carlo, numpy_double_sum
from numerics.series import SeriesEvaluator
from theory.setting import Setting


def test_numpy_double_sum_is_the_risk_and_its_cost_is_linear_in_d():
    risks, terms = {}, {}
    for d in (40, 80):
        risks[d], terms[d] = numpy_double_sum(d, tol=1e-15)
        series = SeriesEvaluator(Setting(d), tol=1e-15).evaluate_symmetric(*POINT)
        assert abs(risks[d] - series.risk) <= series.risk_bound + 1e-15
    # the count cut C(n) grows like n / d: terms double with d (without it they would quadruple)
    assert 1.6 < terms[80] / terms[40] < 2.6


def test_monte_carlo_on_counts_is_within_its_standard_error():
    d = 12
    risk, se, size, _, need, _ = monte_carlo(d, size=100_000, seed=3)
    exact = SeriesEvaluator(Setting(d)).evaluate_symmetric(*POINT).risk
    assert size == 100_000 and 0 < se < 0.01 and abs(risk - exact) < 4 * se
    assert need > size  # SE 1e-6 needs more strings than the pilot
