"""Numerical layer: high-precision evaluation of closed forms, exact series, Monte Carlo, training plans."""
import theory  # noqa: F401  (first: pins SymPy's ground types before any numerics module imports SymPy)
