"""The paper's theorems: evaluate (closed forms, series, integral, Monte Carlo), train, judge (certify),
and the main job that runs the plans and judges the three-phase target (job)."""
