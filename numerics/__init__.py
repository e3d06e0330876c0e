"""Numerical layer: high-precision evaluation of closed forms, exact series, Monte Carlo, training plans."""
