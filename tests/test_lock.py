"""requirements.lock pins every dependency CI installs (runtime and the ``test`` extra of pyproject.toml) to
one exact version that satisfies its range, so CI's pinned environment cannot silently drop or contradict one.
The tool-only extras (``bench``: PyTorch; ``mutation``: mutmut) are not installed by CI and not locked."""
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0].strip().lower().replace("_", "-")


def test_lock_pins_every_declared_dependency():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = list(project["dependencies"]) + list(project["optional-dependencies"]["test"])
    pins = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.\-]+)==([^\s;]+)", line)
        if m:
            pins[m.group(1).lower().replace("_", "-")] = m.group(2)
    missing = sorted(_name(r) for r in declared if _name(r) not in pins)
    assert not missing, f"requirements.lock lacks {missing}: run .ci/lock"
    from packaging.requirements import Requirement

    for r in declared:
        req = Requirement(r)
        assert req.specifier.contains(pins[_name(r)], prereleases=True), f"{r}: lock has {pins[_name(r)]}; run .ci/lock"
