"""Round 2 of the CoDaPO-vs-GRPO experiment (`experiments/codapo_vs_grpo_r2/`): the pilot gate's discovery measure,
and a dry run of amendment 2's registered analysis, pilot rules and cost rule on synthetic run folders laid out as
`run.py` writes them (read-out summaries built from the committed warm-start read-out, question logs and trainer
states with the real rows' keys), against hand-computed values."""

from __future__ import annotations

import json
import shutil
import statistics
import sys
from pathlib import Path

import pytest
from helpers_scripts import changed_since_registered, load_script, registered_hashes


pytest.importorskip("scipy")
ROUND_2 = Path(__file__).resolve().parents[2] / "experiments" / "codapo_vs_grpo_r2"


ROUND_1 = ROUND_2.parent / "codapo_vs_grpo"


def _exec(name: str, path: Path):
    return load_script(path, name)


@pytest.fixture
def round_1_modules():
    """Round 2's scripts import round 1's `run`, `stats` and `report` by name (run with
    PYTHONPATH=experiments/codapo_vs_grpo); the tests register them under those names, and restore what was there."""
    pytest.importorskip("trl")
    saved = {name: sys.modules.get(name) for name in ("run", "stats", "after_box", "report", "discovery", "analysis")}
    for name in ("run", "stats", "after_box", "report"):
        _exec(name, ROUND_1 / f"{name}.py")
    for name in ("discovery", "analysis"):  # round 2's scripts import these siblings by name
        _exec(name, ROUND_2 / f"{name}.py")
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


# Amendment 2 (issue 35): the registered analysis, dry-run on synthetic run folders in run.py's layout.

PILOT_RUNS = ROUND_2 / "results" / "pilot_grpo_level7" / "runs"
WARM_GREEDY = PILOT_RUNS / "warm_start" / "greedy" / "summary.json"
STEP_SPREAD = {8: -1.5, 16: -0.5, 24: 0.5, 32: 1.5}  # read-out swings that average out over 8/16/24/32


def _read_out(levels: dict[int, float], pass8: float | None = None) -> dict:
    """A read-out summary as `evaluate_model` writes it (the committed warm-start read-out's, levels replaced):
    `levels` -> avg@n in points; a pass8 read-out (8 samples at T = 1.0) also has pass@1..8 of level 7."""
    summary = json.loads(WARM_GREEDY.read_text())
    bench = summary["benchmarks"]["arithmetic"]
    bench["levels"] = {}
    for level, points in levels.items():
        metrics = {"avg@n": points / 100, "pass@1": points / 100}
        if pass8 is not None:
            metrics.update({"pass@2": pass8 / 200, "pass@4": pass8 / 150, "pass@8": pass8 / 100})
        bench["levels"][str(level)] = {"num_questions": 200, "metrics": metrics}
    bench["metrics"] = {k: sum(v["metrics"][k] for v in bench["levels"].values()) / len(levels)
                        for k in bench["levels"][str(next(iter(levels)))]["metrics"]}  # fmt: skip
    summary["config"].update(num_samples=1 if pass8 is None else 8, temperature=0.0 if pass8 is None else 1.0)
    summary["seconds"] = 100.0
    return summary


def _group(step, phase, qid, level, correct, selected=None):
    return {"step": step, "phase": phase, "question_id": qid, "level": level, "confidence": 0.85,
            "difficulty": 1 - correct / 8, "value": None, "selected": selected, "num_correct": correct,
            "num_generations": 8}  # fmt: skip


def _level7_hits(step: int) -> int:
    """Level-7 fresh groups with a success per update (of 5): 1 through update 24, 3 over 25-32."""
    return 1 if step <= 24 else 3


def _fresh_batch(step: int, seed: int, select: bool) -> list[dict]:
    """16 fresh groups: 5 of level 7 (`_level7_hits` of them with one success), 5 of level 5, 6 of level 4. With
    `select` (CoDaPO's B update), S picks a level-7 group with 1 success, a level-5 group with none and two level-4
    groups (8 and 4 successes)."""
    rows = []
    for i in range(16):
        level = 7 if i < 5 else 5 if i < 10 else 4
        correct = (1 if i < _level7_hits(step) else 0) if level == 7 else (0 if level == 5 else 8 if i == 10 else 4)
        picked = i in (0, 5, 10, 11) if select else None
        rows.append(_group(step, 0, f"s{seed}u{step}q{i}", level, correct, picked if select else None))
    if select:
        for r in rows:
            r["selected"] = bool(r["selected"])
    return rows


def _question_log(arm: str, seed: int) -> list[dict]:
    rows = []
    for step in range(1, 33):
        if arm != "codapo":
            rows += _fresh_batch(step, seed, select=False)
        elif step % 2:
            rows += _fresh_batch(step, seed, select=True)
        else:  # S: the 4 picks of the previous B update, 4 groups each; level-7 S groups have 2 of 8 correct
            picks = [r for r in rows if r["step"] == step - 1 and r["selected"]]
            rows += [_group(step, 1, p["question_id"], p["level"], 2 if p["level"] == 7 else 5) for p in picks
                     for _ in range(4)]  # fmt: skip
    return rows


def _trainer_state(arm: str) -> dict:
    template = json.loads((PILOT_RUNS / "grpo-seed102" / "trainer_state.json").read_text())
    first = template["log_history"][0]
    history = []
    for step in range(1, 33):
        entry = {**first, "step": step, "budget/generated_tokens": 4000.0 * step, "step_time": 150.0,
                 "grad_norm": 0.7 if arm == "codapo" else 0.5, "clip_ratio/region_mean": 0.01 * (step % 2)}  # fmt: skip
        if arm != "grpo":
            entry["codapo/phase"] = float(arm == "codapo" and step % 2 == 0)
        history.append(entry)
    history.append({**template["log_history"][-1], "step": 32})
    return {**template, "global_step": 32, "max_steps": 32, "log_history": history}


def _fake_campaign(root: Path, greedy_gain: list[float], loss_gain: list[float], pass8_gain=None) -> Path:
    """A round-2 results folder: the warm start's read-outs and, per seed, the three arms with level-7 greedy read-
    outs at 8 and 24 (level 7 alone), 16 and 32 (levels 4, 5, 7) and pass8 read-outs at 16 and 32 (level 7 alone).
    GRPO's level-7 greedy endpoint is 4 + 0.3 x seed; CoDaPO adds `greedy_gain[seed]`, the loss arm `loss_gain`."""
    runs = root / "runs"
    for kind, summary in (("greedy", _read_out({4: 61.7, 5: 29.0, 7: 4.5})), ("pass8", _read_out({7: 2.3}, 14.0))):
        (runs / "warm_start" / kind).mkdir(parents=True)
        (runs / "warm_start" / kind / "summary.json").write_text(json.dumps(summary))
    pass8_gain = pass8_gain or [0.0] * len(greedy_gain)
    for seed, (gain, loss, p8) in enumerate(zip(greedy_gain, loss_gain, pass8_gain)):
        for arm in ("grpo", "codapo", "grpo_token_loss"):
            run_dir = runs / f"{arm}-seed{seed}"
            level7 = 4.0 + 0.3 * seed + {"grpo": 0.0, "codapo": gain, "grpo_token_loss": loss}[arm]
            pass_at_8 = 20.0 + seed + (p8 if arm == "codapo" else 0.0)
            for step, swing in STEP_SPREAD.items():
                levels = {7: level7 + swing} if step in (8, 24) else {4: 70.0, 5: 35.0, 7: level7 + swing}
                reads = {"greedy": _read_out(levels)}
                if step in (16, 32):
                    reads["pass8"] = _read_out({7: level7 / 2}, pass_at_8 + (-1.0 if step == 16 else 1.0))
                for kind, summary in reads.items():
                    (run_dir / "eval" / f"step{step}-{kind}").mkdir(parents=True)
                    (run_dir / "eval" / f"step{step}-{kind}" / "summary.json").write_text(json.dumps(summary))
            (run_dir / "trainer_state.json").write_text(json.dumps(_trainer_state(arm)))
            (run_dir / "questions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _question_log(arm, seed)))
            (run_dir / "train_seconds.json").write_text(json.dumps({"seconds": 3000.0}))
            (run_dir / "done.json").write_text(json.dumps({"arm": arm, "seed": seed}))
    return root


def test_analysis_interim_look_labels_a_gain_and_tests_the_loss_arm(tmp_path, round_1_modules):
    analysis = _load("analysis")
    gains = [6.0, 7.0, 8.0, 6.5, 7.5, 8.5, 6.0, 7.0, 9.0, 8.0]
    results = _fake_campaign(tmp_path, gains, [1.0, 0.0] * 5)
    rules = tmp_path / "pilot_rules.json"
    rules.write_text(json.dumps({"primary": "greedy"}))
    out = analysis.main(["--results-dir", str(results), "--final-seeds", "14", "--pilot-rules", str(rules)])
    assert out["stage"] == "interim" and out["seeds"] == list(range(10))
    levels = analysis.stats.group_sequential_levels(10 / 14)
    assert out["nominal_level"] == pytest.approx(levels.interim_level) and 0.0079 < levels.interim_level < 0.0081
    primary = out["primary"]
    assert primary["differences"] == pytest.approx(gains)
    assert primary["p"]["flip_gain"] == pytest.approx(1 / 1024) and primary["label"] == "gain"
    assert not primary["below_smallest"] and out["stop"] is True
    attribution = out["attribution"]  # tested because the primary is a gain: CoDaPO - loss arm = gain - loss
    assert attribution["differences"] == pytest.approx([g - lo for g, lo in zip(gains, [1.0, 0.0] * 5)])
    assert attribution["label"] == "gain"
    assert out["loss_arm_vs_grpo"]["mean"] == pytest.approx(0.5)
    # secondaries: the rare window (8 and 16: swings -1.5 and -0.5 cancel between arms) and pass@8 at 16 / 32
    assert out["secondaries"]["rare_window"]["codapo - grpo"]["differences"] == pytest.approx(gains)
    assert out["secondaries"]["pass8_32"]["codapo - grpo"]["mean"] == pytest.approx(0.0)
    assert out["secondaries"]["avg8"]["codapo - grpo"]["differences"] == pytest.approx([g / 2 for g in gains])
    assert "greedy" not in out["secondaries"] and "pass8" in out["secondaries"]  # the other candidate is secondary
    # regime: level-7 discovery 20 % through update 24, 60 % over 25-32 (5 level-7 groups per update)
    assert out["regime"]["discovery"]["grpo"] == {"1-16": [160, 800], "17-32": [320, 800]}
    flags = {r["step"]: r["outside_rare_regime"] for r in out["regime"]["grpo_read_outs"]}
    assert flags == {8: False, 16: False, 24: False, 32: True}
    # mechanism, from the question logs and trainer states (10 runs per arm)
    codapo, grpo = out["mechanism"]["codapo"], out["mechanism"]["grpo"]
    assert codapo["s_picks_by_level"] == {"4": 320, "5": 160, "7": 160}
    assert codapo["s_picks_by_outcome"] == {"none": 160, "mixed": 320, "all": 160}
    assert codapo["level7_share_of_s_picks"] == pytest.approx(0.25)
    assert codapo["level7_rollouts"] == [10 * (16 * 5 + 16 * 4) * 8, 10 * 32 * 128]
    assert codapo["level7_s_vs_b"] == {"picks": 160, "b_correct": 160, "b_samples": 1280, "s_groups": 640,
                                       "s_correct": 1280, "s_samples": 5120}  # fmt: skip
    assert grpo["s_picks_by_level"] == {"4": 0, "5": 0, "7": 0} and grpo["level7_share_of_s_picks"] is None
    assert grpo["level7_rollouts"] == [10 * 32 * 5 * 8, 10 * 32 * 128]
    assert codapo["generated_tokens"] == 128000.0 and codapo["grad_norm"] == pytest.approx(0.7)
    assert codapo["clip_fraction_on_s"] == pytest.approx(0.0) and codapo["clip_fraction"] == pytest.approx(0.005)
    # the per-arm table holds level 7 at every read-out, levels 4 and 5 only where they were read
    rows = {(r["arm"], r["read_out"]): r for r in out["per_arm"]}
    assert "L4 avg" not in rows["grpo", "step8-greedy"] and rows["grpo", "step16-greedy"]["L4 avg"] == 70.0
    assert rows["grpo", "step32-pass8"]["L7 pass@8"] == pytest.approx(statistics.fmean(21.0 + s for s in range(10)))
    assert rows["warm start", "greedy"]["L7 avg"] == pytest.approx(4.5)
    text = (results / "analysis.md").read_text()
    assert "interim look" in text and "label: **gain**" in text and "outside the rare regime" in text
    assert json.loads((results / "analysis.json").read_text())["primary"]["label"] == "gain"


def test_analysis_final_labels_and_the_fixed_sequence(tmp_path, round_1_modules):
    analysis = _load("analysis")
    small = [1.0, 2.0, 3.0, 2.0, 1.5, 2.5, 3.0, 2.0, 1.0, 2.0, 2.5, 1.5]
    warm, runs = analysis.load_runs(_fake_campaign(tmp_path / "small", small, [0.0] * 12) / "runs")
    out = analysis.analyse(runs, warm, 12, "greedy")
    assert out["stage"] == "final"
    assert out["nominal_level"] == pytest.approx(analysis.stats.group_sequential_levels(10 / 12).final_level)
    assert out["primary"]["label"] == "gain smaller than 5 points" and out["attribution"]["label"] != "inconclusive"
    null = [-1.0, 1.0, -0.5, 0.5, 0.0, 1.0, -1.0, 0.2, -0.2, 0.3]
    null_runs = _fake_campaign(tmp_path / "null", null, [0.0] * 10) / "runs"
    for seed in range(10):  # the uniform control, as if an early stop had freed its budget: GRPO's read-outs
        shutil.copytree(null_runs / f"grpo-seed{seed}", null_runs / f"codapo_uniform-seed{seed}")
    warm, runs = analysis.load_runs(null_runs)
    out = analysis.analyse(runs, warm, 10, "greedy")  # a cap of 10: no interim look, the final at 0.025
    uniform = out["uniform_control"]
    assert uniform["codapo - codapo_uniform"]["differences"] == pytest.approx(null)
    assert uniform["codapo_uniform - grpo"]["mean"] == 0.0
    assert out["stage"] == "final" and out["nominal_level"] == 0.025
    assert out["primary"]["label"] == "no gain of 5 points or more"
    assert out["attribution"] == {"tested": False, "why": "the primary is not labelled a gain (fixed sequence)"}
    # the floor rule's primary reads the pass8 read-outs: CoDaPO's pass@8 gains, its greedy does not
    warm, runs = analysis.load_runs(
        _fake_campaign(tmp_path / "pass8", null, [0.0] * 10, pass8_gain=[6.0 + s % 3 for s in range(10)]) / "runs"
    )
    out = analysis.analyse(runs, warm, 10, "pass8")
    assert out["primary"]["differences"] == pytest.approx([6.0 + s % 3 for s in range(10)])
    assert out["primary"]["label"] == "gain" and out["secondaries"]["greedy"]["codapo - grpo"][
        "mean"
    ] == pytest.approx(statistics.fmean(null))


def test_analysis_runs_only_at_a_registered_look(tmp_path, round_1_modules):
    analysis = _load("analysis")
    warm, runs = analysis.load_runs(_fake_campaign(tmp_path, [1.0] * 9, [0.0] * 9) / "runs")
    with pytest.raises(ValueError, match="not a registered look"):
        analysis.analyse(runs, warm, 14, "greedy")
    with pytest.raises(ValueError, match="cap lies in 10..14"):
        analysis.look(range(9), 9)
    with pytest.raises(ValueError, match="primary endpoint is one of"):
        analysis.analyse(runs, warm, 14, "avg4")


def test_a_read_out_without_level_7_fails_the_analysis(tmp_path, round_1_modules):
    """A summary that lacks the hard level must stop the analysis, never count as zero or be skipped."""
    analysis = _load("analysis")
    results = _fake_campaign(tmp_path, [1.0] * 10, [0.0] * 10)
    path = results / "runs" / "codapo-seed3" / "eval" / "step24-greedy" / "summary.json"
    summary = json.loads(path.read_text())
    summary["benchmarks"]["arithmetic"]["levels"] = {"4": summary["benchmarks"]["arithmetic"]["levels"]["7"]}
    path.write_text(json.dumps(summary))
    warm, runs = analysis.load_runs(results / "runs")
    with pytest.raises(ValueError, match="codapo-seed3, step24-greedy has no level 7"):
        analysis.analyse(runs, warm, 10, "greedy")
    shutil.rmtree(results / "runs" / "grpo-seed2" / "eval" / "step32-pass8")
    warm, runs = analysis.load_runs(results / "runs")
    with pytest.raises(ValueError, match=r"grpo-seed2 lacks the pass8 read-outs after updates \[32\]"):
        analysis.analyse(runs, warm, 10, "pass8")


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _fake_pilot(root: Path, greedy_level7: float, seeds=(102, 103)) -> Path:
    """The 32-update pilot's folder: updates 1-16 of each seed's log are the committed pilot's rows, 17-32 add 16
    fresh groups per update with 5 of level 7 (`_level7_hits` discovered); level-7 greedy and pass8 read-outs."""
    for seed in seeds:
        run_dir = root / "runs" / f"grpo-seed{seed}"
        run_dir.mkdir(parents=True)
        rows = _rows(PILOT_RUNS / f"grpo-seed{seed}" / "questions.jsonl")
        rows += [r for step in range(17, 33) for r in _fresh_batch(step, seed, select=False)]
        (run_dir / "questions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        for step, swing in STEP_SPREAD.items():
            reads = {"greedy": _read_out({7: greedy_level7 + swing})}
            if step in (16, 32):
                reads["pass8"] = _read_out({7: greedy_level7}, 10.0 + step / 8)
            for kind, summary in reads.items():
                (run_dir / "eval" / f"step{step}-{kind}").mkdir(parents=True)
                (run_dir / "eval" / f"step{step}-{kind}" / "summary.json").write_text(json.dumps(summary))
        (run_dir / "trainer_state.json").write_text(json.dumps(_trainer_state("grpo")))
        (run_dir / "done.json").write_text(json.dumps({"arm": "grpo", "seed": seed}))
    return root


def test_pilot_rules_floor_regime_and_reproduction(tmp_path, round_1_modules):
    rules = _load("pilot_rules")
    pilot = _fake_pilot(tmp_path / "floored", 4.5)
    outcome = rules.main(["--pilot", str(pilot), "--committed", str(PILOT_RUNS)])
    assert json.loads((pilot / "pilot_rules.json").read_text()) == outcome
    assert outcome["primary"] == "pass8" and outcome["greedy_level7_mean_8_32_pooled"] == pytest.approx(4.5)
    assert all(v["reproduced"] for v in outcome["reproduction"].values())
    # the committed gate: 11 of 92 and 15 of 84 level-7 groups discovered over updates 1-16 (amendment 1)
    assert outcome["gate_1_16"] == {"grpo-seed102": [11, 92], "grpo-seed103": [15, 84]}
    assert outcome["gate_passed_on_1_16"] is True
    # 17-32: 5 level-7 groups per update, 1 discovered through 24 and 3 over 25-32, per seed
    assert outcome["regime_17_32"]["pooled"] == [2 * (8 * 1 + 8 * 3), 2 * 16 * 5]
    assert {r["step"]: r["outside_rare_regime"] for r in outcome["read_outs"]}[32] is True
    assert outcome["pass8_32"] == {"grpo-seed102": pytest.approx(14.0), "grpo-seed103": pytest.approx(14.0)}
    assert rules.apply_rules(_fake_pilot(tmp_path / "not", 6.5) / "runs", PILOT_RUNS)["primary"] == "greedy"
    # a rerun whose update-3 rows differ from the committed log is caught, with where
    log = pilot / "runs" / "grpo-seed103" / "questions.jsonl"
    rows = _rows(log)
    index = next(i for i, r in enumerate(rows) if r["step"] == 3)
    rows[index]["num_correct"] += 1
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    changed = rules.apply_rules(pilot / "runs", PILOT_RUNS)["reproduction"]
    assert changed["grpo-seed102"]["reproduced"] is True and changed["grpo-seed103"]["reproduced"] is False
    assert changed["grpo-seed103"]["first_difference"].startswith(f"row {index + 1} (update 3): num_correct")


def test_cost_rule_reads_wall_times_only(tmp_path, round_1_modules):
    cost = _load("cost_rule")
    results = _fake_campaign(tmp_path, [1.0], [0.0])  # seed 0: 3 runs of 3000 s training + 6 read-outs of 100 s
    outcome = cost.main(["--seed-0", str(results / "runs"), "--spent", str(PILOT_RUNS), "--extra-hours", "1.0"])
    per_seed = 3 * (3000 + 600) / 3600
    # the committed level-7 pilot: two trainings (train_seconds.json) and the warm start's greedy read-out
    pilots = (5370.993486994999 + 5580.776676685 + 267.6328528810009) / 3600
    assert outcome["hours_per_seed"] == pytest.approx(per_seed)
    spent = per_seed + 200 / 3600 + 1.0 + pilots  # the campaign's warm-start read-outs: greedy and pass8, 100 s each
    assert outcome["hours_spent"] == pytest.approx(spent)
    assert outcome["cap"] == 11  # 1 + floor((40 - 7.39) / 3)
    summary = results / "runs" / "codapo-seed0" / "eval" / "step8-greedy" / "summary.json"
    resumed = json.loads(summary.read_text())
    resumed["seconds"] = None  # a read-out finished by a later sitting has no wall time
    summary.write_text(json.dumps(resumed))
    with pytest.raises(ValueError, match="no wall seconds"):
        cost.run_seconds(summary.parents[2])


REGISTERED_SCRIPTS = {
    "experiments/codapo_vs_grpo_r2/analysis.py",
    "experiments/codapo_vs_grpo_r2/pilot_rules.py",
    "experiments/codapo_vs_grpo_r2/cost_rule.py",
    "experiments/codapo_vs_grpo_r2/discovery.py",
    "experiments/codapo_vs_grpo_r2/recipe.yaml",
    "experiments/codapo_vs_grpo/stats.py",
    "experiments/codapo_vs_grpo/report.py",
    "experiments/codapo_vs_grpo/run.py",
    "experiments/compare.py",
}


def test_registered_scripts_match_their_hashes():
    """Amendment 2 records the SHA-256 of every script that runs, reads out and analyses round 2; a changed script
    fails here until a dated amendment records its new hash (the analysis cannot drift silently)."""
    recorded = registered_hashes((ROUND_2 / "PREREGISTRATION.md").read_text())
    assert set(recorded) == REGISTERED_SCRIPTS
    changed = changed_since_registered(ROUND_2.parents[1], recorded)
    assert not changed, f"{changed} changed since amendment 2 registered them: record the change in a dated amendment"


REMAKES = (
    "codapo_vs_grpo_r2/results/warm_start_v4_remade_2026-11-27",
    "codapo_vs_grpo_r2/results/warm_start_v4_remade_2026-11-29",
    "codapo_vs_grpo_r3/results/warm_start_v4_remade_2026-12-02",
    "codapo_vs_grpo_r3/results/warm_start_v4_remade_2026-12-02_second",
    "codapo_vs_grpo_r3/results/warm_start_v4_remade_2026-12-02_third",
    "codapo_vs_grpo_r3/results/warm_start_v4_remade_2026-12-03",
    "codapo_vs_grpo_r3/results/warm_start_v4_remade_2026-12-04",
)
"""The re-makes of the lost pinned warm start, below `experiments/`; the second ran on an AMD EPYC with MKL on its
Intel code path, the third (round 3's first, before its registration) on a Xeon with bf16, the fourth (round 3's
second, before its pilot) on an AMD EPYC with MKL on its Intel code path, the fifth (round 3's third, before the
pilot's second run) on a Xeon with bf16, the sixth (before the pilot's third run) and the seventh (before the
campaign's third run, with transformers 5.24.0 pinned over the 5.25.0 a fresh install takes) on an AMD EPYC with MKL on
its Intel code path."""
PINNED_MAKE_SECONDS = 108.9
"""The wall time the pinned make wrote into its record (the second sitting of 2026-11-26 reports "109 s")."""


@pytest.mark.parametrize("remake", REMAKES)
def test_the_re_made_warm_start_is_the_pinned_one_but_for_its_wall_time(round_1_modules, remake):
    """The pinned `outputs/warm_start/v4` was lost with a checkout and re-made with the registered command (seventh
    sitting of 2026-11-27; ninth sitting of 2026-11-28). Each re-make's file hashes and its own record are committed as
    written: every file but the record matches its pinned SHA-256, the weights included, and the record differs from
    the pinned one only in the make's wall seconds, so the folder whose record carries the pinned make's seconds is the
    pinned warm start byte for byte. Any other recorded difference (a weight's hash, a loss value, an argument, a
    version) fails here."""
    import hashlib

    parse_pin = sys.modules["run"].parse_pin
    pinned = parse_pin((ROUND_2 / "warm_start_v4.sha256").read_text())
    remade_dir = ROUND_2.parent / remake
    remade = parse_pin((remade_dir / "files.sha256").read_text())
    assert set(remade) == set(pinned) and "model.safetensors" in pinned
    assert [name for name in sorted(pinned) if remade[name] != pinned[name]] == ["warm_start.json"]
    record_bytes = (remade_dir / "warm_start.json").read_bytes()
    assert hashlib.sha256(record_bytes).hexdigest() == remade["warm_start.json"]  # the re-make's record, unedited
    record = json.loads(record_bytes)
    assert record["seconds"] != PINNED_MAKE_SECONDS and record["args"]["threads"] == "1"
    record["seconds"] = PINNED_MAKE_SECONDS
    written_back = (json.dumps(record, indent=2) + "\n").encode()  # as warm_start.py writes its record
    assert hashlib.sha256(written_back).hexdigest() == pinned["warm_start.json"]


def test_mkl_on_its_amd_code_path_re_makes_other_weights(round_1_modules):
    """Why the AMD re-make ran with `mkl_intel_path.c` preloaded: the same command with MKL's default dispatch on the
    same AMD EPYC changed the weights from the first optimizer step on (its first logged loss differs in the seventh
    digit), while the data, the arguments and the versions stayed those of the pinned make."""
    parse_pin = sys.modules["run"].parse_pin
    pinned = parse_pin((ROUND_2 / "warm_start_v4.sha256").read_text())
    amd_dir = ROUND_2.parent / REMAKES[1] / "mkl_amd_path"
    amd = parse_pin((amd_dir / "files.sha256").read_text())
    assert [name for name in sorted(pinned) if amd[name] != pinned[name]] == ["model.safetensors", "warm_start.json"]
    amd_record = json.loads((amd_dir / "warm_start.json").read_text())
    intel_record = json.loads((ROUND_2.parent / REMAKES[1] / "warm_start.json").read_text())
    for key in ("args", "examples", "versions", "optimizer_steps"):
        assert amd_record[key] == intel_record[key], key
    assert amd_record["loss_first"][0] != intel_record["loss_first"][0]
    assert amd_record["loss_first"][0] == pytest.approx(intel_record["loss_first"][0], rel=1e-5)


def test_round_2_doctests(round_1_modules):
    import doctest

    for name in ("analysis", "pilot_rules", "cost_rule"):
        result = doctest.testmod(_load(name))
        assert result.attempted >= 2 and result.failed == 0, name
    result = doctest.testmod(sys.modules["run"])  # the read-out schedule and the pin file's format
    assert result.attempted >= 3 and result.failed == 0
