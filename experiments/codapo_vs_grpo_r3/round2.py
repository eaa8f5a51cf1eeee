"""Round 2's registered scripts, imported unchanged for the functions round 3 shares with them (their SHA-256 are in
round 2's PREREGISTRATION.md, so they are not moved or edited): `analysis` (read-out levels, logged means). Round
2's `analysis` imports round 1's `stats` and `report` by name, so round 3's scripts run with
`PYTHONPATH=experiments/codapo_vs_grpo`, as round 2's do."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


ROUND_2 = Path(__file__).resolve().parents[1] / "codapo_vs_grpo_r2"


def load(name: str) -> ModuleType:
    """Round 2's script `name`.py as the module `round2_<name>` (a name of its own, so that it never shadows round
    3's script of the same name)."""
    module_name = f"round2_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, ROUND_2 / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


analysis = load("analysis")
