"""The paper's theorems: evaluate (closed forms, series, integral, Monte Carlo), train, judge (certify)."""
