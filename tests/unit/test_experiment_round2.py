"""Round 2 of the CoDaPO-vs-GRPO experiment (`experiments/codapo_vs_grpo_r2/`): the pilot gate's discovery measure
and the blind re-estimate of the seeds, against hand-computed values."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest


pytest.importorskip("scipy")
ROUND_2 = Path(__file__).resolve().parents[2] / "experiments" / "codapo_vs_grpo_r2"


ROUND_1 = ROUND_2.parent / "codapo_vs_grpo"


def _exec(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def round_1_modules():
    """Round 2's scripts import round 1's `run`, `stats` and `report` by name (run with
    PYTHONPATH=experiments/codapo_vs_grpo); the tests register them under those names, and restore what was there."""
    pytest.importorskip("trl")
    saved = {name: sys.modules.get(name) for name in ("run", "stats", "report")}
    for name in saved:
        _exec(name, ROUND_1 / f"{name}.py")
    yield
    for name, old in saved.items():
        if old is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = old


def _load(name: str):
    return _exec(f"round2_{name}", ROUND_2 / f"{name}.py")


def _row(step, level, correct, phase=0):
    return {"step": step, "phase": phase, "level": level, "num_correct": correct, "num_generations": 8}


def test_discovery_windows_pool_fresh_groups_only(tmp_path, round_1_modules):
    discovery = _load("discovery")
    logs = {
        "grpo-seed100": [_row(1, 6, 0), _row(1, 6, 2), _row(2, 6, 0), _row(2, 5, 8), _row(17, 6, 1)],
        "grpo-seed101": [_row(1, 6, 0), _row(2, 6, 1), _row(2, 6, 8, phase=1)],  # an S repeat never counts
    }
    summary = discovery.summarize(logs, 6, [(1, 16), (2, 2)])
    first = summary["windows"][0]
    assert first["pooled"]["discovered"] == 2 and first["pooled"]["groups"] == 5  # update 17 is outside
    assert first["pooled"]["correct"] == 3 and first["pooled"]["samples"] == 40
    assert first["grpo-seed100"]["discovered"] == 1 and first["grpo-seed100"]["groups"] == 3
    assert first["complete"] is True
    assert summary["per_update"][0] == {"step": 1, "groups": 3, "discovered": 1, "correct": 2, "samples": 24}
    # a partial log says how far it got
    partial = discovery.summarize({"a": [_row(1, 6, 0), _row(3, 6, 1)]}, 6, [(1, 16)])
    assert partial["last_update"] == 3 and partial["windows"][0]["complete"] is False
    # the command line reads the logs and writes the same summary
    paths = []
    for name, rows in logs.items():
        path = tmp_path / name / "questions.jsonl"
        path.parent.mkdir()
        path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
        paths.append(str(path))
    discovery.main([*paths, "--level", "6", "--output", str(tmp_path / "out.json")])
    assert json.loads((tmp_path / "out.json").read_text())["windows"][0]["pooled"]["discovered"] == 2


def test_blind_reestimate_bounds_and_endpoint(round_1_modules):
    blind = _load("blind_sd")
    # SD 0 would need no seeds; the floor keeps 10
    assert blind.blind_reestimate([2.0, 2.0, 2.0], cap=30) == (0.0, 10)
    # SD 7 asks for 18 (stats.required_seeds(5, 7)); a cap of 16 stops it there
    differences = [7.0 * x for x in (1.0, -1.0, 1.0, -1.0, 1.0, -1.0, 1.0, -1.0)]
    sd = blind.statistics.stdev(differences)
    assert blind.blind_reestimate(differences, cap=40)[1] == blind.stats.required_seeds(5.0, sd)
    assert blind.blind_reestimate(differences, cap=16) == (sd, 16)
    with pytest.raises(ValueError, match="missing \\[24\\]"):
        blind.primary_endpoint({8: {"6": 1.0}, 16: {"6": 1.0}, 32: {"6": 1.0}})
    assert blind.primary_endpoint({8: {"6": 0.0}, 16: {"6": 10.0}, 24: {"6": 20.0}, 32: {"6": 30.0}}) == 15.0
