"""``occ-companion finite``: the finite-sample three-phase plan, phases 1-2 on N_1 strings and
phase 3 on N_3 fresh strings, with the held-out risk of every seed.

``cmd_finite`` receives parsed, already validated options (``app.options`` types) and checks the sample
sizes, their memory and their CPU time against the limits below before any work.
"""
from __future__ import annotations

import argparse
import math
import sys
import warnings

from app.options import (
    HelpFormatter,
    UsageError,
    add_setting_options,
    check_memory,
    fraction,
    int_at_least,
    nonnegative_int,
    positive,
    positive_int,
    setting_from_args,
)
from app.progress import progress_factory

FINITE_EPSILON = 1e-2
MAX_SAMPLE = 10**9
"""Largest sample size (finite's N_1, N_3, --test-size): beyond it the run takes hours even where memory suffices."""
FINITE_CPU_S_PER_COUNT = 3.5e-7
"""CPU seconds of ``finite`` per seed and per entry of its count matrices ((N_1 + N_3 + --test-size) x d):
the constant of the CPU estimate a run is checked against, above the cost per count measured at d = 50
to 600; sampling the counts and the softmax weights over them take nine tenths of it."""
FINITE_BYTES_PER_COUNT = (8, 48, 1.2)
"""Memory of ``finite``: 8 bytes per entry of the three count matrices, 48 per entry of the largest (the float
work arrays of one estimate), times 1.2 (the measured peak is 1.13 to 1.17 times this model at d = 200-600)."""
MAX_FINITE_CPU_S = 600.0
"""Longest ``finite`` run accepted (its estimate): a check of the finite-sample plan, not an experiment;
``finite --d 1000`` at 5 seeds is refused, ``--seeds 1`` runs."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register finite on the subcommand parser ``sub``."""
    fs = sub.add_parser("finite", help="finite-sample three-phase plan (N_1, N_3 = C d ln d by default)",
                        description=cmd_finite.__doc__, formatter_class=HelpFormatter)
    add_setting_options(fs, 50, d_min=3, loss=False, p_one=False)
    fs.add_argument("--epsilon", type=positive, default=FINITE_EPSILON,
                    help="target held-out risk; looser than run's 1e-3 because finitely many samples leave an "
                         "excess risk: at d = 50 and N_1 = N_3 = ceil(30 d ln d) the held-out risk is about 4.5e-3 "
                         "(seeds 0, 1), so 1e-3 needs a larger --constant")
    fs.add_argument("--eta1-frac", type=fraction, default=0.5, help="eta_1 as a fraction of eta1_max, in (0, 1)")
    fs.add_argument("--constant", type=positive, default=30.0, help="C in N_1 = N_3 = ceil(C d ln d)")
    fs.add_argument("--n1", type=positive_int, default=None,
                    help="strings for phases 1-2 (default: ceil(C d ln d))")
    fs.add_argument("--n3", type=positive_int, default=None, help="fresh strings for phase 3 (default: ceil(C d ln d))")
    fs.add_argument("--seeds", type=positive_int, default=5, help="number of seeds (runs) to try")
    fs.add_argument("--seed", type=nonnegative_int, default=0, help="first seed; runs use seed, seed + 1, ...")
    fs.add_argument("--test-size", type=int_at_least(2), default=100_000,
                    help="held-out strings per seed for the risk estimate and its standard error")
    fs.add_argument("--quiet", action="store_true", help="no progress bars (they appear only on a terminal)")
    fs.set_defaults(func=cmd_finite)


def cmd_finite(args: argparse.Namespace) -> int:
    """Finite-sample three-phase plan: phases 1-2 on N_1 strings, phase 3 on N_3 fresh strings, at
    N_1 = N_3 = ceil(C d ln d) unless given; held-out risk per seed.  Exits 1 unless every seed
    reaches the target (held-out mean + 3 standard errors <= floor + --epsilon; the floor is 0 under
    the default length law)."""
    from numerics.theorem.evaluators import population_evaluator
    from numerics.theorem.finite_sample import d_log_d, three_phase_finite
    from numerics.theorem.regime import regime_plan

    setting = setting_from_args(args)
    default_n = args.constant * setting.d * math.log(setting.d)
    if (args.n1 is None or args.n3 is None) and not default_n <= MAX_SAMPLE:
        raise UsageError(f"--constant {args.constant:g}: N = ceil(C d ln d) = {default_n:.3g} strings exceeds "
                         f"{MAX_SAMPLE:.0e}; lower --constant or give --n1 and --n3")
    N_1 = args.n1 if args.n1 is not None else d_log_d(setting.d, args.constant)
    N_3 = args.n3 if args.n3 is not None else d_log_d(setting.d, args.constant)
    for flag, n in (("--n1", N_1), ("--n3", N_3), ("--test-size", args.test_size)):
        if n > MAX_SAMPLE:
            raise UsageError(f"{flag}: {n} strings exceeds {MAX_SAMPLE:.0e}; use fewer")
    # each sample is a strings x d matrix of counts (int64); an estimate adds float work arrays of its shape
    counts = (N_1 + N_3 + args.test_size) * setting.d
    per_count, largest, margin = FINITE_BYTES_PER_COUNT
    check_memory("--d, --n1, --n3, --test-size, --constant",
                 margin * (per_count * counts + largest * max(N_1, N_3, args.test_size) * setting.d),
                 f"the samples of N_1 + N_3 + test = {N_1 + N_3 + args.test_size} strings over d = {setting.d} symbols")
    cpu_s = args.seeds * counts * FINITE_CPU_S_PER_COUNT
    if cpu_s > MAX_FINITE_CPU_S:
        raise UsageError(f"--d {setting.d} with N_1 = {N_1}, N_3 = {N_3}, --test-size {args.test_size} and --seeds "
                         f"{args.seeds}: about {cpu_s / 60:.0f} CPU minutes ({counts:.3g} counts per seed at about "
                         f"{FINITE_CPU_S_PER_COUNT:.1e} s each), more than finite's limit of "
                         f"{MAX_FINITE_CPU_S / 60:.0f} min; lower --seeds, --d, --constant (or --n1, --n3) or --test-size")
    reg = regime_plan(setting, args.epsilon, eta1_frac=args.eta1_frac, evaluator=population_evaluator(setting))
    target = args.epsilon + reg.floor
    print(f"setting: {setting.describe()}; eta_1={reg.eta_1:.4g}, eta_2={reg.eta_2:.4g}, eta_3=1, T={reg.T_min}, "
          f"N_1={N_1}, N_3={N_3}; about {cpu_s:.2g} CPU s", file=sys.stderr)
    progress = progress_factory(args.quiet)
    hits = 0
    for k in range(args.seeds):
        with warnings.catch_warnings():  # a 1-string training sample has no spread: numpy warns, nothing is wrong
            warnings.simplefilter("ignore", RuntimeWarning)
            run = three_phase_finite(setting, reg.eta_1, reg.eta_2, 1.0, reg.T_min, N_1, N_3, seed=args.seed + k,
                                     test_size=args.test_size, progress=progress)
        hits += run.test_risk + 3 * run.test_se <= target
        print(f"seed {run.seed}: held-out risk {run.test_risk:.5g} +- {run.test_se:.2g} (train {run.train_risk:.5g})")
    goal = f"{args.epsilon:g}" if reg.floor == 0 else f"floor + epsilon = {reg.floor:.3g} + {args.epsilon:g}"
    print(f"{hits}/{args.seeds} seeds reach risk <= {goal} (held-out mean + 3 SE)")
    return 0 if hits == args.seeds else 1
