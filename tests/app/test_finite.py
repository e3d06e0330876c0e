"""``finite``'s exit status is decided seed by seed: 0 only when every seed reaches the target (held-out
mean + 3 standard errors <= floor + epsilon), 1 as soon as one seed misses it."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from app import exitcodes
from app.cli import main
from numerics.theorem import finite_sample

EPSILON = 1e-2


@pytest.fixture
def outcomes(monkeypatch):
    """Replace the finite-sample run by one whose held-out (risk, standard error) per seed the test sets."""
    table: dict[int, tuple[float, float]] = {}

    def run(setting, *args, seed=0, **kwargs):
        risk, se = table[seed]
        return SimpleNamespace(seed=seed, test_risk=risk, test_se=se, train_risk=risk)

    monkeypatch.setattr(finite_sample, "three_phase_finite", run)
    return table


def _finite(seeds: int) -> int:
    return main(["finite", "--d", "5", "--seeds", str(seeds), "--epsilon", str(EPSILON), "--test-size", "100",
                 "--quiet"])


def test_one_seed_missing_the_target_fails_the_run(outcomes, capsys):
    outcomes.update({0: (1e-4, 1e-5), 1: (0.5, 1e-3), 2: (1e-4, 1e-5)})
    assert _finite(3) == exitcodes.CLAIM_FAILED
    assert "2/3 seeds reach" in capsys.readouterr().out


def test_every_seed_reaching_the_target_passes(outcomes, capsys):
    outcomes.update({0: (1e-4, 1e-5), 1: (EPSILON / 2, EPSILON / 10)})
    assert _finite(2) == exitcodes.DONE
    assert "2/2 seeds reach" in capsys.readouterr().out


def test_a_seed_whose_error_bar_crosses_the_target_misses_it(outcomes):
    """The criterion is the mean plus three standard errors, not the mean alone."""
    outcomes.update({0: (EPSILON / 2, EPSILON / 4)})
    assert _finite(1) == exitcodes.CLAIM_FAILED
