"""Bad input fails early with a message naming the parameter."""
import math

import pytest

from numerics.theorem.closed_forms import ClosedForms
from numerics.theorem.montecarlo import estimate
from numerics.theorem.regime import three_phase_regime
from numerics.theorem.series import SeriesEvaluator
from numerics.theorem.training import attention_only, joint, output_only, three_phase
from theory import symbolic
from theory.setting import Setting
from theory.validation import SettingError


@pytest.mark.parametrize("d", [1, 0, -3, 2.5, "5", None, True, math.nan])
def test_bad_alphabet_size(d):
    with pytest.raises(SettingError, match="alphabet size d"):
        Setting(d)


@pytest.mark.parametrize("p", [0, -0.1, 1.5, math.nan, math.inf, "0.3"])
def test_bad_geometric_parameter(p):
    with pytest.raises(SettingError, match="geometric parameter p"):
        Setting(5, p=p)


def test_p_one_is_accepted_as_degenerate_lengths():
    assert Setting(2).p_value == 1  # balancing p for d = 2 under the default law
    with pytest.raises(SettingError, match="p < 1"):
        ClosedForms(Setting(2)).expr(symbolic.inverse_length_moment(1))


@pytest.mark.parametrize("lengths,loss", [("geometric", "squared"), ("positive", "hinge")])
def test_bad_variants(lengths, loss):
    with pytest.raises(SettingError, match="must be one of"):
        Setting(5, lengths=lengths, loss=loss)


@pytest.mark.parametrize("eta", [-0.1, math.nan, math.inf, -math.inf, "1"])
def test_bad_step_sizes(eta):
    with pytest.raises(SettingError, match="step size"):
        output_only(eta, 3)
    with pytest.raises(SettingError, match="step size"):
        three_phase(1.0, eta, 1.0, 3)
    with pytest.raises(SettingError, match="step size"):
        joint(eta, 3)


@pytest.mark.parametrize("T", [-1, 2.5, "3", None])
def test_bad_step_counts(T):
    with pytest.raises(SettingError, match="non-negative integer"):
        attention_only(0.1, T)


@pytest.mark.parametrize("eps", [0, -1, math.nan, math.inf])
def test_bad_epsilon(eps):
    with pytest.raises(SettingError, match="epsilon"):
        three_phase_regime(Setting(5), eps, 0.5)


def test_bad_parameter_vectors():
    ev = SeriesEvaluator(Setting(4))
    with pytest.raises(SettingError, match="length d = 4"):
        ev.evaluate([0, 0, 0], [0, 0, 0, 0])
    with pytest.raises(SettingError, match=r"beta\[2\] must be finite"):
        ev.evaluate([0, 0, 0, 0], [0, 0, math.nan, 0])
    with pytest.raises(SettingError, match=r"alpha\[1\] must be a real number"):
        ev.evaluate([0, "x", 0, 0], [0, 0, 0, 0])
    with pytest.raises(SettingError, match="sample size"):
        estimate(Setting(4), [0] * 4, [0] * 4, size=0)


def test_bad_evaluator_options():
    with pytest.raises(SettingError, match="backend"):
        SeriesEvaluator(Setting(3), backend="gpu")
    with pytest.raises(SettingError, match="tol"):
        SeriesEvaluator(Setting(3), tol=0)
    with pytest.raises(SettingError, match="float context cannot resolve"):
        SeriesEvaluator(Setting(3), tol=1e-20)
    with pytest.raises(SettingError, match="dps"):
        SeriesEvaluator(Setting(3), backend="mp", dps=5)
    with pytest.raises(SettingError, match="max_terms"):
        SeriesEvaluator(Setting(4), max_terms=1000).evaluate([0, 1, 2, 3], [0, 1, 2, 3])


def test_closed_form_evaluation_names_missing_symbols():
    with pytest.raises(SettingError, match="eta_1"):
        ClosedForms(Setting(5)).expr(symbolic.phase1_beta()[0])
    with pytest.raises(SettingError, match="unknown symbol"):
        ClosedForms(Setting(5)).expr(symbolic.phase1_beta()[0], eta_one=1)
    with pytest.raises(SettingError, match="non-negative integer"):
        ClosedForms(Setting(5)).inverse_length_moment_series(1, -2)
    with pytest.raises(SettingError, match="unknown closed form"):
        ClosedForms(Setting(5)).value("nonsense")


@pytest.mark.parametrize("kw,match", [({"eta1_frac": 1.0}, "eta1_frac"), ({"eta1_frac": 0}, "eta1_frac"),
                                      ({"eta2_factor": 0.5}, "eta2_factor"), ({"eta2_factor": math.inf}, "eta2_factor")])
def test_regime_plan_refuses_steps_outside_the_regime(kw, match):
    from numerics.theorem.regime import regime_plan

    with pytest.raises(SettingError, match=match):
        regime_plan(Setting(5), 1e-2, **kw)
