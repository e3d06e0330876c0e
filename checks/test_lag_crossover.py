"""Checks of the claim ``lag_crossover`` (stated in theory/claims.toml, printed by
``python3 -c "from theory.claims import claim; print(claim('lag_crossover'))"`` and rendered in README.md).

With eta_out = 1 and eta_att = rho, the lag ratio of joint GD from zero over the budget is certified above 1 at
rho_low and not above 1 at rho_high = 5/4 rho_low on the grid rho = (5/4)^k, so it crosses 1 in between
(``numerics.theorem.lag.certify_crossover``).  Here at d = 3, where a certified trajectory costs a fraction of a
second; the large d are certified by ``occ-companion prove --lag-crossover`` into docs/certificate/, whose record
is checked below.  Controls: a rho above the bracket is certified not above 1, one below it above 1; the criterion
refuses a bracket whose ends are swapped, too wide, or run with the two step sizes exchanged; and the certified
half times agree with the float trajectory's at the right rates and not at the exchanged ones.  The rate kappa_1
of the leading-order law (the gap's opening, through the factor (1 - r) of the attention gradient) is the SymPy
derivation's.
"""
from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import sympy as sp

from numerics.theorem import lag
from theory import symbolic
from theory.claims import claim

CLAIM = claim("lag_crossover")
ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "docs" / "certificate" / "certificate.json"
FACTOR = lag.CROSSOVER_FACTOR


def bracketed(low: lag.LagResult, high: lag.LagResult, factor: Fraction = FACTOR) -> bool:
    """The claim's criterion on two certified runs: the readout's step is 1 at both, the attention's grows by
    ``factor`` from ``low`` to ``high``, and the ratio is certified > 1 at ``low`` and <= 1 at ``high``."""
    return (low.eta_out == high.eta_out == 1 and high.eta_att == factor * low.eta_att and low.eta_att >= 1
            and low.verdict == "holds" and high.verdict == "does not hold"
            and low.ratio_bounds[0] > 1 and high.ratio_bounds[1] is not None and high.ratio_bounds[1] <= 1)


def test_crossover_bracketed_by_certified_ratios():
    res = lag.certify_crossover(3)
    assert res.status == "PASS" and res.k_high == res.k_low + 1
    lo, hi = res.bracket
    assert (lo, hi) == (FACTOR ** res.k_low, FACTOR ** res.k_high) and hi / lo == FACTOR
    assert bracketed(res.low, res.high)
    # controls: the criterion refuses the same runs swapped, and a bracket twice as wide
    assert not bracketed(res.high, res.low)
    wider = lag.certify_lag(3, eta_att=FACTOR * hi, eta_out=1)
    assert wider.verdict == "does not hold"  # a rho above the bracket: the criterion says "does not hold"
    assert not bracketed(res.low, wider)
    below = lag.certify_lag(3, eta_att=lo / FACTOR, eta_out=1)
    assert below.verdict == "holds"  # and one below it: above 1
    # the certified half times are the float trajectory's at eta_att = rho, eta_out = 1 ...
    for end in (res.low, res.high):
        assert (end.attention.low, end.readout.low) == lag.float_lag(3, eta_att=float(end.eta_att), eta_out=1.0)
    # ... and not those of the exchanged rates (a swap of eta_att and eta_out is seen), which the criterion refuses
    assert (res.low.attention.low, res.low.readout.low) != lag.float_lag(3, eta_att=1.0, eta_out=float(lo))
    swapped = lag.LagResult(**{**res.high.__dict__, "eta_att": res.high.eta_out, "eta_out": res.high.eta_att})
    assert not bracketed(res.low, swapped)


def test_gap_rate_is_the_derived_one():
    """kappa_1(d) of the leading-order law is the SymPy derivation's gap rate at the balancing p (so a derivation
    without the factor (1 - r) of the attention gradient, which changes that rate, fails here)."""
    d = symbolic.d
    kappa = symbolic.joint_gap_rate_balanced("positive")
    for dv in (3, 10, 1000):
        assert abs(float(sp.N(kappa.subs(d, dv), 30)) / lag.gap_rate(dv) - 1) < 1e-12
    assert lag.linear_gap(1000, 700) == 1225 * 700 * lag.gap_rate(1000)


def test_certificate_record_brackets_the_crossover():
    """The committed record (``occ-companion prove --lag-crossover``) has a PASS item at d = 10, 50, 200 and 1000
    whose ball spans one step of the grid, [(5/4)^k, (5/4)^(k+1)], with the ends' verdicts in its note."""
    record = json.loads(RECORD.read_text())
    assert "--lag-crossover" in record["command"]
    items = {c["d"]: c for c in record["certificates"] if c["claim"] == CLAIM.key}
    assert {10, 50, 200, 1000} <= set(items)
    for d, item in items.items():
        assert item["status"] == "PASS", (d, item["note"])
        mid, rad = item["ball"]
        lo, hi = mid - rad, mid + rad
        k = round(float(sp.log(lo) / sp.log(sp.Rational(5, 4))))
        assert abs(lo / float(FACTOR ** k) - 1) < 1e-9 and abs(hi / float(FACTOR ** (k + 1)) - 1) < 1e-9, d
        assert f"(5/4)^{k}: " in item["note"] and f"(5/4)^{k + 1}: " in item["note"]
        assert "holds" in item["note"].split(";")[0] and "does not hold" in item["note"].split(";")[1]
