"""The experiment protocol as parameters: a **reading** of the paper's Table 1 protocol.

The paper does not state its protocol (budgets, phase lengths, step-size rule, optimizer); each choice below
is a parameter with a stated default, recorded in every result.  ``READINGS`` names the readings this suite
runs; ``Reading()`` is the default, chosen to the standard of the field (see docs/table1.md):

* **phases** of the three-phase plan: k1 output steps, then k2 attention steps, then output steps for the rest
  of the budget.  The theory's reading is (1, 1); the default runs the attention phase until its validation
  risk stops improving (``k2 = "plateau"``, at most ``phase2_cap`` steps), as the output phase is;
* **budget**: every plan gets the same budget and stopping rule: ``"plateau"`` stops a run when its validation
  risk decreases by less than about ``tol`` times the starting risk over the last ``patience`` evaluations
  (one every ``eval_every`` steps; ``bank.plateau``), with a cap of ``max_steps`` steps; ``"fixed"`` runs
  exactly ``max_steps``.  A run is *converged* when the same plateau test holds at its end, whatever the
  budget rule; a run that reaches the cap without it is *capped* (not converged);
* **joint_steps**: joint GD trains both layers with one learning rate (``"shared"``, the default, as the
  primary sources do) or with one per layer (``"separate"``, searched on a 2-D grid);
* **optimizer**: ``"gd"`` (default), ``"momentum"`` (heavy ball) or ``"adam"``, applied alike to every plan and
  phase (optimizer state per layer, kept across phases);
* **step sizes**: chosen on ``tuning_seeds`` seeds that are never reported (seeds 1000, 1001, ...; the reported
  seeds are 0, 1, ...), on log grids of ratio ``grid_ratio`` that extend (up to ``max_extensions`` points per
  side) while the best point sits at an edge whose outer neighbour has not diverged; a diverged point
  (non-finite risk, or validation risk above ``divergence_factor`` times the start) is never chosen;
* **step_rule**: ``"search"`` (default) chooses them so, per plan; ``"fixed"`` gives every plan and layer the
  one learning rate ``fixed_lr``, with no search (the convention of the primary sources: ``LONG_READING``).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

from theory.validation import SettingError

OPTIMIZERS = ("gd", "momentum", "adam")
BUDGETS = ("plateau", "fixed")
JOINT_STEPS = ("shared", "separate")
STEP_RULES = ("search", "fixed")
TUNING_SEED_BASE = 1000
"""The default first tuning seed id: tuning seeds are TUNING_SEED_BASE, TUNING_SEED_BASE + 1, ...; reported
seeds are 0, 1, ... (disjoint; ``runner.Config`` moves both and checks that they stay disjoint)."""
BIMODAL_SEEDS = 10
"""The reported seeds of a row where a plan's held-out risks are ``bimodal``: the share of seeds at each
level is the evidence there, and five seeds put it in steps of 20 %."""
BIMODAL_GAP = 3.0
"""``bimodal``: the gap between the two groups must exceed this many times the wider group's spread."""
BIMODAL_RATIO = 2.0
"""``bimodal``: the two groups' nearest risks must differ by at least this factor."""
BIMODAL_FLOOR = 1e-3
"""``bimodal``: risks below this share of the largest risk count as that share: at the row's scale they are
all solved, and their logarithms would otherwise spread over decades of rounding-level risk and hide the gap."""


def bimodal(risks, gap: float = BIMODAL_GAP, ratio: float = BIMODAL_RATIO, floor: float = BIMODAL_FLOOR) -> bool:
    """Whether the seeds' held-out risks split into two levels.

    The rule, on the logarithms of the finite risks (a diverged seed is reported as diverged, not as a level;
    risks below ``floor`` times the largest count as that, and below 1e-300 as 1e-300): sort them and cut at the largest gap between neighbours; the seeds
    are bimodal when there are at least three, the gap exceeds ``gap`` times the spread (largest minus
    smallest logarithm) of the wider of the two groups, and the gap is at least a factor ``ratio`` in risk.
    Logarithms, because the levels of a row (a plan stuck at the output-only level, or reaching the joint
    level) differ by factors, not by amounts, at every scale of risk; the spread of the groups, because
    seeds that scatter evenly over a decade have large gaps too but no two levels; the factor ``ratio``,
    because two tight groups a few percent apart are one level measured precisely.  Three seeds at least,
    because two seeds always split into two groups of spread 0."""
    finite = [float(r) for r in risks if r is not None and math.isfinite(r) and r >= 0]
    low = floor * max(finite, default=0.0)
    logs = sorted(math.log(max(r, low, 1e-300)) for r in finite)
    if len(logs) < 3:
        return False
    gaps = [b - a for a, b in zip(logs, logs[1:])]
    k = max(range(len(gaps)), key=gaps.__getitem__)
    spread = max(logs[k] - logs[0], logs[-1] - logs[k + 1])
    return gaps[k] >= math.log(ratio) and gaps[k] > gap * spread


@dataclass(frozen=True)
class Reading:
    """One reading of the protocol (every field is recorded in the results)."""

    name: str = "default"
    k1: int = 1
    k2: int | str = "plateau"
    phase2_cap: int = 400
    budget: str = "plateau"
    max_steps: int = 5000
    eval_every: int = 20
    patience: int = 10
    tol: float = 1e-3
    joint_steps: str = "shared"
    optimizer: str = "gd"
    momentum: float = 0.9
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    adam_eps: float = 1e-8
    tuning_seeds: int = 2
    grid_ratio: float = 4.0
    grid_points: int = 3
    max_extensions: int = 4
    divergence_factor: float = 10.0
    step_rule: str = "search"
    fixed_lr: float = 1e-2

    def validate(self) -> "Reading":
        """Raise SettingError naming the field on a reading no run can use."""
        def positive_int(name):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise SettingError(f"reading {self.name!r}: {name} must be an integer >= 1, got {v!r}")
        for name in ("k1", "phase2_cap", "max_steps", "eval_every", "patience", "tuning_seeds", "grid_points"):
            positive_int(name)
        if self.patience < 2:
            raise SettingError(f"reading {self.name!r}: patience must be >= 2 (the plateau test compares halves)")
        if not (self.k2 == "plateau" or (isinstance(self.k2, int) and not isinstance(self.k2, bool) and self.k2 >= 1)):
            raise SettingError(f"reading {self.name!r}: k2 must be an integer >= 1 or 'plateau', got {self.k2!r}")
        if isinstance(self.max_extensions, bool) or not isinstance(self.max_extensions, int) or self.max_extensions < 0:
            raise SettingError(f"reading {self.name!r}: max_extensions must be an integer >= 0")
        for name, choices in (("budget", BUDGETS), ("joint_steps", JOINT_STEPS), ("optimizer", OPTIMIZERS),
                              ("step_rule", STEP_RULES)):
            if getattr(self, name) not in choices:
                raise SettingError(f"reading {self.name!r}: {name} must be one of {', '.join(choices)}, "
                                   f"got {getattr(self, name)!r}")
        for name, lo, hi in (("tol", 0, 1), ("momentum", 0, 1), ("adam_beta1", 0, 1), ("adam_beta2", 0, 1)):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and lo < v < hi):
                raise SettingError(f"reading {self.name!r}: {name} must be in ({lo}, {hi}), got {v!r}")
        for name in ("adam_eps", "grid_ratio", "divergence_factor", "fixed_lr"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise SettingError(f"reading {self.name!r}: {name} must be finite and > 0, got {v!r}")
        if self.grid_ratio <= 1 or self.divergence_factor <= 1:
            raise SettingError(f"reading {self.name!r}: grid_ratio and divergence_factor must be > 1")
        if self.k1 + (self.k2 if isinstance(self.k2, int) else 1) >= self.max_steps:
            raise SettingError(f"reading {self.name!r}: the phases k1 + k2 must leave output steps within "
                               f"max_steps = {self.max_steps}")
        return self

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Reading":
        known = set(cls.__dataclass_fields__)
        unknown = set(data) - known
        if unknown:
            raise SettingError(f"unknown reading fields: {', '.join(sorted(unknown))}")
        return cls(**data).validate()

    def with_(self, **changes) -> "Reading":
        return replace(self, **changes).validate()


LONG_READING = Reading(name="long-adam", optimizer="adam", step_rule="fixed", fixed_lr=1e-2, budget="fixed",
                       max_steps=10_000, eval_every=50)
"""The primary sources' convention: one optimizer (Adam) at one learning rate for every plan and both layers,
no step-size search, and a long fixed budget (1e4 steps), so that the end points are set by the budget's
length rather than by a stopping rule tuned per plan.  What the sources do:

* google-deepmind/neural_networks_chomsky_hierarchy (experiments/example.py, training.py): Adam at learning
  rate 1e-3 after clipping by the global gradient norm, 10,000 training steps in the repository's example;
* albietz/transformer-birth (ihead_full_main.py): AdamW at learning rate 0.01 (weight decay 0.01, batch 64)
  for the full transformer; its simplified model (ihead_basic_main.py) SGD with momentum 0.9 at 0.2 (batch
  512), a budget set by ``max_iters`` (1000 in its README's example);
* PierreMarion23/single-location-regression (config.py, dynamics.py): projected (stochastic) GD on both
  layers with one step size alpha = 4e-3 or 1e-3, for 20,000 to 200,000 steps, 30 repeats.

The rate 1e-2 is transformer-birth's Adam rate and this protocol's Adam output centre (``base_grid``); the
attention phase of three-phase still runs to its plateau (at most ``phase2_cap`` steps).  One evaluation every
50 steps keeps 200 snapshots per run."""

READINGS = {
    "default": Reading(),
    "theory-52": Reading(name="theory-52", k1=1, k2=1, budget="fixed", max_steps=52, joint_steps="separate",
                         tuning_seeds=1),
    "k2-5": Reading(name="k2-5", k2=5),
    "k2-20": Reading(name="k2-20", k2=20),
    "separate": Reading(name="separate", joint_steps="separate"),
    "momentum": Reading(name="momentum", optimizer="momentum"),
    "adam": Reading(name="adam", optimizer="adam"),
    LONG_READING.name: LONG_READING,
}
"""Named readings.  ``theory-52`` is the protocol of the suite's first Table 1 (phases (1, 1), 52 steps for
every plan, joint GD on separate step grids) run under this protocol's step-size rule; its original numbers,
chosen on the reported seed 0, are kept in docs/example_table1/legacy-52/."""


QUICK_SIZE = {"d": 8, "seeds": 3, "batch": 32, "val_size": 256, "test_size": 512}
"""The run-configuration fields of a quick run (``runner.Config.quick``, ``table1 --quick``): a small alphabet,
few seeds and small sets, for a run of about a minute."""
QUICK_BUDGET = {"max_steps": 400, "eval_every": 10, "patience": 8, "phase2_cap": 100}
"""The reading fields of a quick run (``quick_reading``): a budget cap of at most ``max_steps`` steps, checked
more often."""


def quick_reading(r: Reading) -> Reading:
    """``r`` shortened to a quick run: ``QUICK_BUDGET``, its cap the smaller of the two caps."""
    return r.with_(**{**QUICK_BUDGET, "max_steps": min(r.max_steps, QUICK_BUDGET["max_steps"])})


def reading(name: str) -> Reading:
    """The named reading (SettingError listing the names otherwise)."""
    if name not in READINGS:
        raise SettingError(f"unknown reading {name!r}; choose from {', '.join(READINGS)}")
    return READINGS[name]


AXES = {"three_phase": ("out", "att"), "joint": ("out",), "joint_separate": ("out", "att"),
        "output_only": ("out",), "attention_only": ("att",)}
"""The step-size axes of each plan: an output learning rate ("out") and/or an attention one ("att").
Three-phase uses the output rate for phases 1 and 3 and the attention rate for phase 2; joint GD under
``joint_steps = "shared"`` uses one rate for both layers."""


def plan_axes(plan: str, r: Reading) -> tuple[str, ...]:
    return AXES["joint_separate"] if plan == "joint" and r.joint_steps == "separate" else AXES[plan]


def base_grid(axis: str, lam: float, r: Reading) -> list[float]:
    """The initial grid of an axis: ``grid_points`` log-spaced values (ratio ``grid_ratio``) around a centre
    set by the output curvature lambda_B at the start: 1 / (4 lambda_B) for output rates (below the
    stability limit 2 / lambda_B) and 8 / lambda_B for attention rates (whose gradient starts at 0 and has no
    curvature scale there).  Under momentum the centre is scaled by (1 - momentum) (the same effective
    step); under Adam, whose steps are per-coordinate and scale-free, the centres are 1e-2 and 1e-1."""
    if r.optimizer == "adam":
        centre = 1e-2 if axis == "out" else 1e-1
    else:
        centre = (0.25 if axis == "out" else 8.0) / lam
        if r.optimizer == "momentum":
            centre *= 1.0 - r.momentum
    half = (r.grid_points - 1) / 2
    return [centre * r.grid_ratio ** (i - half) for i in range(r.grid_points)]


def phases(plan: str, r: Reading) -> list[tuple[str, int | str]]:
    """The plan's phases: (block, length) with block "out", "att" or "both" and length a step count,
    "plateau" (attention phase: until its validation risk stops improving, at most phase2_cap steps) or
    "rest" (until the budget rule stops the run)."""
    if plan == "three_phase":
        return [("out", r.k1), ("att", r.k2), ("out", "rest")]
    return {"joint": [("both", "rest")], "output_only": [("out", "rest")],
            "attention_only": [("att", "rest")]}[plan]
