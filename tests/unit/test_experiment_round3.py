"""Round 3 of the CoDaPO-vs-GRPO experiment (`experiments/codapo_vs_grpo_r3/`, issue 63): the pools, the arms'
recipes, and dry runs of the analysis, the pilot rules, the cost rule and the runner on synthetic run folders laid
out as the runner writes them (read-out summaries, compressed question logs, trainer states), against hand-computed
values."""

from __future__ import annotations

import doctest
import json
import statistics
import sys
from pathlib import Path

import pytest
import yaml
from helpers_scripts import changed_since_registered, load_script, registered_hashes

from codapo_trl.dynamics.question_log import append_lines


pytest.importorskip("scipy")
EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"
ROUND_1 = EXPERIMENTS / "codapo_vs_grpo"
ROUND_3 = EXPERIMENTS / "codapo_vs_grpo_r3"
ROUND_1_NAMES = ("run", "stats", "after_box", "report")
ROUND_3_NAMES = ("arms", "pools", "round2", "outcome", "analysis", "cost_rule", "pilot_rules", "campaign")


@pytest.fixture
def r3():
    """Round 3's scripts import round 1's modules and their siblings by name (run with
    PYTHONPATH=experiments/codapo_vs_grpo); the tests register them under those names, and restore what was there."""
    pytest.importorskip("trl")
    names = (*ROUND_1_NAMES, *ROUND_3_NAMES, "round2_analysis")
    saved = {name: sys.modules.get(name) for name in names}
    for name in ("round2_analysis",):
        sys.modules.pop(name, None)  # round2.py loads them afresh against the round-1 modules registered here
    for name in ROUND_1_NAMES:
        load_script(ROUND_1 / f"{name}.py", name)
    modules = {name: load_script(ROUND_3 / f"{name}.py", name) for name in ROUND_3_NAMES}
    yield type("Round3", (), modules)
    for name, old in saved.items():
        if old is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = old


@pytest.mark.parametrize("name", ROUND_3_NAMES)
def test_doctests(r3, name):
    """Every example in round 3's scripts runs as written."""
    failures, _ = doctest.testmod(getattr(r3, name), optionflags=doctest.ELLIPSIS)
    assert failures == 0


REGISTERED_SCRIPTS = (
    *(f"experiments/codapo_vs_grpo_r3/{name}.py" for name in ROUND_3_NAMES),
    "experiments/codapo_vs_grpo_r3/COMMANDS.md",
    *(f"experiments/codapo_vs_grpo/{name}.py" for name in (*ROUND_1_NAMES, "warm_start")),
    "experiments/compare.py",  # round 1's runner takes its arms' overrides from it
    *(
        f"experiments/codapo_vs_grpo_r2/{name}" for name in ("analysis.py", "mkl_intel_path.c", "warm_start_v4.sha256")
    ),  # fmt: skip
    "recipes/codapo_math.py",
    "codapo_trl/answers.py",  # the maths grader, frozen from the pilot on, and the held-out set's builder
    *(
        f"codapo_trl/rewards/{name}.py"
        for name in (
            "__init__",
            "registry",
            "math",
            "grading",
            "judging",
            "checks",
            "equality",
            "extraction",
            "form_reading",
            "deadline_pool",
        )
    ),  # fmt: skip
    "codapo_trl/data/arithmetic.py",
)


def test_registered_files_match_their_hashes(r3):
    """The registration records the SHA-256 of every file that makes, runs, reads out, grades and analyses round 3:
    the scripts (round 3's, and round 1's and 2's it imports), every arm's recipe, every committed pool and the maths
    grader. A changed file fails here until a dated amendment records its new hash."""
    recorded = registered_hashes((ROUND_3 / "PREREGISTRATION.md").read_text())
    pools = {f"experiments/codapo_vs_grpo_r3/pools/64/seed{s}.jsonl" for s in (*range(14), *range(200, 205))}
    pools |= {path for path in recorded if path.startswith("experiments/codapo_vs_grpo_r3/pools/128/")}  # gate 1's
    recipes = {f"experiments/codapo_vs_grpo_r3/recipes/{arm}.yaml" for arm in r3.arms.ARMS}
    assert set(recorded) == {*REGISTERED_SCRIPTS, *pools, *recipes}
    changed = changed_since_registered(EXPERIMENTS.parent, recorded)
    assert not changed, f"{changed} changed since the registration: record the change in a dated amendment"


# ---------------------------------------------------------------------------------------------------------------------
# Synthetic run folders
# ---------------------------------------------------------------------------------------------------------------------

SWING = {1: -1.5, 2: -0.5, 3: 0.5, 4: 1.5}  # per read-out (1st..4th) swings that average out


def summary(levels: dict[int, float], no_answer: float = 0.0, seconds: float = 100.0) -> dict:
    """A read-out summary as `evaluate_model` writes it (the keys the scripts read): avg@n per level in points."""
    bench_levels = {str(lv): {"num_questions": 200, "metrics": {"avg@n": p / 100}} for lv, p in levels.items()}
    overall = statistics.fmean(levels.values()) / 100
    return {
        "benchmarks": {
            "arithmetic": {"metrics": {"avg@n": overall}, "levels": bench_levels, "no_answer_frac": no_answer}
        },
        "seconds": seconds,
    }


def group(step, phase, qid, level, correct, value=None, selected=None):
    return {"step": step, "phase": phase, "question_id": qid, "level": level, "confidence": 0.9, "difficulty": 0.5,
            "value": value, "selected": selected, "num_correct": correct, "num_generations": 8}  # fmt: skip


def fresh_groups(batch: int, b_index: int, step: int, select: bool, value) -> list[dict]:
    """16 fresh groups of a pool of 64: 6 of level 4 (6 right), 5 of level 5 (4 right), 5 of level 7 (one success
    in the 12th group after generation batch 16, none otherwise). `b_index`: which pass over the pool's batches."""
    rows = []
    for i in range(16):
        level = 4 if i < 6 else 5 if i < 11 else 7
        correct = 6 if level == 4 else 4 if level == 5 else int(batch > 16 and i == 11)
        qid = f"q{((b_index - 1) * 16 + i) % 64}"
        rows.append(group(step, 0, qid, level, correct, value, (i in (0, 6, 11, 12)) if select else None))
    return rows


def question_log(arm: str) -> list[list[dict]]:
    """The log's batches: 32 fresh batches (GRPO-like arms) or 16 B + 16 S (CoDaPO arms)."""
    per = 8 if arm in ("codapo_authors", "grpo_authors_opt") else 1
    codapo = arm in ("codapo", "codapo_authors")
    value = None if arm.startswith("grpo") else 0.5
    out = []
    for batch in range(1, 33):
        step = batch * per
        if not codapo:
            out.append(fresh_groups(batch, batch, step, False, value))
        elif batch % 2:
            out.append(fresh_groups(batch, (batch + 1) // 2, step, True, value))
        else:
            picks = [r for r in out[-1] if r["selected"]]
            out.append([group(step, 1, p["question_id"], p["level"], 4, value) for p in picks for _ in range(4)])
    return out


def write_run(runs_dir: Path, r3, arm: str, seed: int, macro: float, no_answer: float = 0.0, seconds: float = 1000.0,
              entropy: float = 0.5) -> Path:  # fmt: skip
    """A finished run folder: every read-out of the arm with levels 4 / 5 / 7 at macro + 20 / macro / macro - 20 (so
    the macro is `macro`), plus the read-out's swing; the compressed question log; a trainer state."""
    path = runs_dir / f"{arm}-seed{seed}"
    for step, evaluation in r3.campaign.read_outs(arm):
        swing = SWING[r3.arms.READ_OUT_BATCHES.index(step // r3.arms.ARMS[arm].steps_per_batch) + 1]
        if evaluation.kind == "avg4":
            swing = -2.0
        levels = {4: macro + 20 + swing, 5: macro + swing, 7: macro - 20 + swing}
        out = path / "eval" / f"step{step}-{evaluation.kind}"
        out.mkdir(parents=True)
        (out / "summary.json").write_text(json.dumps(summary(levels, no_answer)))
    for batch in question_log(arm):
        append_lines(str(path / "questions.jsonl.gz"), "".join(json.dumps(r) + "\n" for r in batch))
    updates = r3.arms.ARMS[arm].updates
    history = [
        {"step": s, "loss": 0.1, "reward": 0.4, "grad_norm": 0.5, "entropy": entropy} for s in range(1, updates + 1)
    ]
    (path / "trainer_state.json").write_text(json.dumps({"log_history": history}))
    (path / "train_seconds.json").write_text(json.dumps({"seconds": seconds}))
    (path / "done.json").write_text(json.dumps({"arm": arm, "seed": seed}))
    return path


def write_warm(runs_dir: Path, macro: float = 31.0) -> None:
    for kind in ("greedy", "avg4"):
        out = runs_dir / "warm_start" / kind
        out.mkdir(parents=True)
        (out / "summary.json").write_text(json.dumps(summary({4: macro + 30, 5: macro, 7: macro - 30})))


def write_campaign(runs_dir: Path, r3, effects: dict[int, float], ladder_effects: dict[str, float] | None = None):
    """GRPO at macro 40 + seed / 2 for every seed of `effects`, CoDaPO at GRPO + effects[seed]; the other ladder
    arms (seeds 0-7) at GRPO + ladder_effects[arm]."""
    write_warm(runs_dir)
    for seed, effect in effects.items():
        base = 40 + seed / 2
        write_run(runs_dir, r3, "grpo", seed, base)
        write_run(runs_dir, r3, "codapo", seed, base + effect)
        if seed < 8:
            for arm, shift in (ladder_effects or {"codapo_weighting": 1.0, "codapo_authors": -1.0}).items():
                write_run(runs_dir, r3, arm, seed, base + shift)


# ---------------------------------------------------------------------------------------------------------------------
# Pools and recipes
# ---------------------------------------------------------------------------------------------------------------------


def test_pools_are_the_registered_counts_disjoint_from_the_held_out_set_and_committed_as_written(r3):
    from codapo_trl.evaluation import load_benchmark

    held_out = {item.question for item in load_benchmark("arithmetic", split="test",
                                                         num_per_level=r3.campaign.EVAL_QUESTIONS).items}  # fmt: skip
    seeds = (*r3.pools.CAMPAIGN_SEEDS, *r3.pools.PILOT_SEEDS)
    assert r3.pools.stale_pools(seeds, 64) == []  # the committed files are what pools.py writes
    first = None
    for seed in seeds:
        rows = [json.loads(line) for line in r3.pools.pool_path(seed, 64).read_text().splitlines()]
        assert [sum(r["level"] == lv for r in rows) for lv in (4, 5, 7)] == [22, 21, 21]
        assert len({r["unique_id"] for r in rows}) == 64 and all(r["answer"] == str(r["a"] + r["b"]) for r in rows)
        assert not {r["question"] for r in rows} & held_out
        first = first or rows
    assert first != [json.loads(line) for line in r3.pools.pool_path(1, 64).read_text().splitlines()]  # per seed


def test_a_pool_off_the_batch_size_is_refused(r3):
    with pytest.raises(ValueError, match="not a multiple of"):
        r3.pools.pool_rows(0, {4: 10, 5: 10})


def test_pools_check_reports_an_edited_pool(r3, tmp_path):
    r3.pools.write_pools([3], 64, tmp_path)
    assert r3.pools.stale_pools([3], 64, tmp_path) == []
    path = r3.pools.pool_path(3, 64, tmp_path)
    path.write_text(path.read_text().replace('"level": 7', '"level": 6', 1))
    assert r3.pools.stale_pools([3, 4], 64, tmp_path) == [f"{path}: differs from what pools.py writes",
                                                         f"{r3.pools.pool_path(4, 64, tmp_path)}: missing"]  # fmt: skip


def test_arm_recipes_share_the_regime_and_differ_only_where_the_design_says(r3):
    from codapo_trl.jobs.train import parse

    parsed = {arm: parse(["--config", str(spec.recipe_path())]) for arm, spec in r3.arms.ARMS.items()}
    for arm, (script, training, _) in parsed.items():
        spec = r3.arms.ARMS[arm]
        assert training.generation_batch_size == 128 and training.num_generations == 8  # 16 questions x 8
        assert training.steps_per_generation // training.gradient_accumulation_steps == spec.steps_per_batch
        assert training.max_steps == spec.updates and script.dataset_levels == [4, 5, 7]
        assert (training.temperature, training.max_completion_length, training.beta, training.bf16) == (
            1.0,
            64,
            0.0,
            False,
        )
        assert training.lr_scheduler_type == "constant"
        log = getattr(training, "codapo_question_log", None) or script.baseline_question_log
        assert log == "questions.jsonl.gz"
    grpo, weighting, codapo, authors, control = (parsed[a][1] for a in r3.arms.ARMS)
    assert type(grpo).__name__ == type(control).__name__ == "GRPOConfig" and grpo.loss_type == "grpo"
    assert not weighting.codapo_sampling and weighting.codapo_weighting and weighting.loss_type == "codapo"
    assert codapo.codapo_sampling and codapo.codapo_resample_timing == "before_update" and codapo.codapo_top_k == 4
    assert codapo.codapo_weight_offset == 0.0 and codapo.delta is None and codapo.learning_rate == 2e-5
    # the authors' configuration and its matched control: the same optimisation, CoDaPO's parts only in A3
    assert authors.loss_type == control.loss_type == "bnpo" and authors.delta == control.delta == 3.0
    for key in ("learning_rate", "entropy_coef", "weight_decay", "max_grad_norm", "epsilon", "steps_per_generation"):
        assert getattr(authors, key) == getattr(control, key), key
    assert (authors.codapo_weight_offset, authors.codapo_resample_timing) == (0.1, "after_update")
    assert authors.learning_rate == codapo.learning_rate / 8


def test_seeded_recipe_sets_the_seed_and_its_pool(r3, tmp_path):
    recipe = r3.arms.seeded_recipe("codapo_authors", 5, Path("pools/64/seed5.jsonl"), {"learning_rate": 5e-6})
    assert (recipe["seed"], recipe["dataset_name"], recipe["learning_rate"]) == (5, "pools/64/seed5.jsonl", 5e-6)
    assert r3.arms.batch_of_step("codapo_authors", 192) == 24
    with pytest.raises(ValueError, match="inside a generation batch"):
        r3.arms.batch_of_step("codapo_authors", 100)


# ---------------------------------------------------------------------------------------------------------------------
# The analysis
# ---------------------------------------------------------------------------------------------------------------------


def test_interim_gain_with_the_sign_rule_stops_the_campaign(r3, tmp_path):
    runs = tmp_path / "runs"
    effects = {s: 6.0 + (0.5 if s % 2 else -0.5) for s in range(8)}  # mean 6, every difference positive
    write_campaign(runs, r3, effects)
    warm, loaded = r3.analysis.load_runs(runs)
    result = r3.analysis.analyse(loaded, warm, 14)
    p = result["primary"]
    assert result["stage"] == "interim" and result["seeds"] == list(range(8))
    assert result["nominal_level"] == pytest.approx(0.0030, abs=5e-5)  # the design's table at N_P = 14
    assert p["mean"] == pytest.approx(6.0) and p["differences"] == pytest.approx([effects[s] for s in range(8)])
    gain = p["tests"]["gain"]
    assert gain["sign_rule"] and gain["unanimous_sign"] and gain["flip_p"] == pytest.approx(1 / 256)
    assert p["label"] == "gain" and result["stop"]
    # the run endpoint: mean over the four read-outs of the level mean, swings cancelled
    assert result["primary_values"]["grpo"] == pytest.approx([40 + s / 2 for s in range(8)])
    assert result["secondaries"]["L7"]["mean"] == pytest.approx(6.0)
    assert result["secondaries"]["avg4_macro"]["mean"] == pytest.approx(6.0)  # avg@4 after batch 32 only
    # A3's read-outs after steps 64-256 are its batches 8-32: codapo_authors - grpo is its shift, -1
    assert result["ladder_contrasts"]["codapo_authors - grpo"]["mean"] == pytest.approx(-1.0)
    assert result["ladder_contrasts"]["codapo_authors - codapo_weighting"]["mean"] == pytest.approx(-2.0)
    assert "authors_vs_matched_control" not in result


def test_interim_without_a_label_goes_on_and_says_what_a_follow_up_needs(r3, tmp_path):
    runs = tmp_path / "runs"
    write_campaign(runs, r3, {s: (4.0 if s % 2 else -3.0) for s in range(8)})
    warm, loaded = r3.analysis.load_runs(runs)
    result = r3.analysis.analyse(loaded, warm, 12)
    p = result["primary"]
    assert p["mean"] == pytest.approx(0.5) and not result["stop"]
    assert p["label"] == r3.analysis.CONTINUE and "follow_up_seeds" not in p  # no label but the stopping ones
    md = r3.analysis.to_markdown(result)
    assert "inconclusive" not in md and "goes on to the final analysis" in md
    # the same differences at a final look (10 seeds) are labelled, with the follow-up the label asks for
    write_campaign(tmp_path / "final", r3, {s: (4.0 if s % 2 else -3.0) for s in range(10)})
    final = r3.analysis.analyse(*reversed(r3.analysis.load_runs(tmp_path / "final")), 10)["primary"]
    assert final["label"] == "inconclusive" and final["follow_up_seeds"]["margin"] > 8


@pytest.mark.parametrize(
    ("effects", "expected"),
    [
        ({s: -6.0 + (0.4 if s % 2 else -0.4) for s in range(10)}, "worse"),
        ({s: (0.3 if s % 2 else -0.3) for s in range(10)}, "not worse by 3 or more"),
    ],
)
def test_final_look_labels_with_the_exact_sign_flip_test(r3, tmp_path, effects, expected):
    runs = tmp_path / "runs"
    write_campaign(runs, r3, effects)
    warm, loaded = r3.analysis.load_runs(runs)
    result = r3.analysis.analyse(loaded, warm, 10)
    stats = sys.modules["stats"]
    assert result["stage"] == "final" and result["stop"]
    assert result["nominal_level"] == pytest.approx(stats.group_sequential_levels(0.8).final_level)
    tests = result["primary"]["tests"]
    assert not any(t["sign_rule"] for t in tests.values())  # 2^-10 is below the final level: the exact test decides
    assert result["primary"]["label"] == expected


def test_unregistered_seed_counts_are_refused_before_any_result(r3, tmp_path):
    runs = tmp_path / "runs"
    write_campaign(runs, r3, {s: 1.0 for s in range(9)})
    warm, loaded = r3.analysis.load_runs(runs)
    with pytest.raises(ValueError, match="not a registered look"):
        r3.analysis.analyse(loaded, warm, 14)
    del loaded["codapo_weighting", 3]
    with pytest.raises(ValueError, match="not complete in every ladder arm"):
        r3.analysis.analyse(loaded, warm, 14)
    with pytest.raises(ValueError, match="N_P lies in"):
        r3.analysis.look(range(8), range(8), 9)


def test_a_missing_read_out_is_named(r3, tmp_path):
    runs = tmp_path / "runs"
    write_campaign(runs, r3, {s: 1.0 for s in range(8)})
    for summary_file in (runs / "codapo_authors-seed2" / "eval" / "step128-greedy").iterdir():
        summary_file.unlink()
    (runs / "codapo_authors-seed2" / "eval" / "step128-greedy").rmdir()
    warm, loaded = r3.analysis.load_runs(runs)
    with pytest.raises(ValueError, match=r"codapo_authors-seed2 lacks the greedy read-outs after steps \[128\]"):
        r3.analysis.analyse(loaded, warm, 14)


def test_question_log_measures_by_generation_batch(r3):
    grpo = [r for batch in question_log("grpo") for r in batch]
    codapo = [r for batch in question_log("codapo") for r in batch]
    authors = [r for batch in question_log("codapo_authors") for r in batch]
    # batches 25-32: GRPO's 8 batches, CoDaPO's 4 B batches (S left out), each 6 x 6 + 5 x 4 + 1 = 57 of 128 right
    assert r3.analysis.pool_fit(grpo) == pytest.approx(100 * 57 / 128)
    assert r3.analysis.pool_fit(codapo) == pytest.approx(100 * 57 / 128)
    assert r3.analysis.pool_fit(authors) == r3.analysis.pool_fit(codapo)  # the same batches, 8 steps each
    # level-7 successes come in group 12 after batch 16: qids 16 (b - 1) + 11 mod 64 -> q11, q27, q43, q59
    assert (r3.analysis.discovered(grpo, 16), r3.analysis.discovered(grpo, 32)) == (0, 4)
    assert r3.analysis.discovered(codapo, 32) == 4  # B batches 9-16 of the pool (batches 17-31): the same 4
    shares = r3.analysis.mass_shares([grpo])
    assert sum(shares["level"].values()) == pytest.approx(1.0)
    assert shares["class"]["mid"] == pytest.approx(shares["level"]["5"])  # level 5's 4-of-8 groups are all the mid
    assert shares["class"]["easy"] == pytest.approx(shares["level"]["4"])  # 6 of 8 is easy (k / G = 3/4)
    assert r3.analysis.group_mass(4, 8) == pytest.approx(4 / (0.5345224838 + 1e-4))  # 8 x 0.5 / (std + eps)


def test_main_writes_the_analysis_from_compressed_logs(r3, tmp_path):
    write_campaign(tmp_path / "runs", r3, {s: 2.0 + s / 10 for s in range(8)})
    write_run(tmp_path / "runs", r3, "grpo_authors_opt", 0, 40.5)
    cost = tmp_path / "cost_rule.json"
    cost.write_text(json.dumps({"start": True, "final_seeds": 14, "ladder": list(r3.arms.LADDER)}))
    result = r3.analysis.main(["--results-dir", str(tmp_path), "--cost-rule", str(cost)])
    saved = json.loads((tmp_path / "analysis_interim.json").read_text())
    assert saved["primary"]["label"] == result["primary"]["label"] and saved["stage"] == "interim"
    assert saved["authors_vs_matched_control"]["n"] == 1
    assert saved["authors_vs_matched_control"]["mean"] == pytest.approx(39.0 - 40.5)  # A3 seed 0: 40 - 1
    assert saved["mechanism"]["codapo"]["s_picks_by_level"] == {"4": 16 * 8, "5": 16 * 8, "7": 32 * 8}
    assert (tmp_path / "analysis_interim.md").read_text().startswith("# Round 3 analysis: interim look")
    with pytest.raises(SystemExit):  # a look runs once
        r3.analysis.main(["--results-dir", str(tmp_path), "--cost-rule", str(cost)])


def test_main_takes_the_look_from_the_committed_cost_rule_and_time_out_record(r3, tmp_path, capsys):
    """N_P and the ladder come from the cost rule's file; a final short of N_P needs a time-out record with N >= 10;
    an arm the rule dropped is reported on seed 0 alone; a count that is no look is refused before any result."""
    runs = tmp_path / "runs"
    write_campaign(runs, r3, {s: 1.0 + s / 10 for s in range(10)})  # the ladder's four arms on 0-7, the pair on 0-9
    cost = tmp_path / "cost_rule.json"
    cost.write_text(json.dumps({"start": True, "final_seeds": 12, "ladder": ["grpo", "codapo_weighting", "codapo"]}))
    with pytest.raises(SystemExit):  # 10 seeds at N_P = 12: neither the interim nor the final
        r3.analysis.main(["--results-dir", str(tmp_path), "--cost-rule", str(cost)])
    assert "not a registered look" in capsys.readouterr().err
    short = tmp_path / "time_out.json"
    short.write_text(json.dumps({"reached": 9, "reason": "test"}))
    with pytest.raises(SystemExit):
        r3.analysis.main(["--results-dir", str(tmp_path), "--cost-rule", str(cost), "--time-out", str(short)])
    short.write_text(json.dumps({"reached": 10, "reason": "test"}))
    result = r3.analysis.main(["--results-dir", str(tmp_path), "--cost-rule", str(cost), "--time-out", str(short)])
    levels = sys.modules["stats"].group_sequential_levels(0.8)
    assert result["stage"] == "final" and result["nominal_level"] == pytest.approx(levels.final_level)
    assert result["ladder"] == ["grpo", "codapo_weighting", "codapo"]
    dropped = result["dropped_arms_seed0"]["codapo_authors"]
    assert dropped["codapo_authors - grpo"] == pytest.approx(-1.0)  # A3's shift in the synthetic campaign


# ---------------------------------------------------------------------------------------------------------------------
# Pilot rules and cost rule
# ---------------------------------------------------------------------------------------------------------------------


def write_pilot(runs: Path, r3, grpo_macro: float, a3_macro: float, no_answer: float = 0.0) -> None:
    write_warm(runs, 31.0)
    for seed in (200, 201):
        write_run(runs, r3, "grpo", seed, grpo_macro + (seed - 200.5), no_answer=no_answer, seconds=2000)
    write_run(runs, r3, "codapo_authors", 202, a3_macro, seconds=2500)


@pytest.mark.parametrize(
    ("grpo", "a3", "attempt", "a3_attempt", "expected"),
    [
        (37.5, 34.0, 1, 1, "campaign"),  # GRPO +6 at batch 32 (swing +1.5), A3 +4.5 >= 3
        (33.5, 34.0, 1, 1, "repeat_with_pool_128"),  # GRPO +4 < 5
        (33.5, 34.0, 2, 1, "no_campaign: gate 1 (learning) failed twice"),
        (37.5, 31.0, 1, 1, "repilot_a3_lr_5e-6"),  # A3 +1.5 < 3
        (37.5, 31.0, 1, 2, "drop_a3"),
    ],
)
def test_pilot_rules(r3, tmp_path, grpo, a3, attempt, a3_attempt, expected):
    write_pilot(tmp_path / "runs", r3, grpo, a3)
    args = ["--pilot", str(tmp_path), "--attempt", str(attempt), "--a3-attempt", str(a3_attempt)]
    if attempt == 2:
        args += ["--grpo-seeds", "200", "201"]
    outcome = r3.pilot_rules.main(args)
    assert outcome["verdict"] == expected
    assert outcome["warm_start_macro"] == pytest.approx(31.0)
    assert outcome["grpo_gain"] == pytest.approx(grpo + 1.5 - 31.0)  # the last read-out's swing is +1.5
    assert outcome["gate_2_stability"]["passed"]
    # zero-advantage groups over batches 17-32: the 4 level-7 groups without a success, of 16 per batch
    assert outcome["reported_zero_advantage_17_32"]["pooled"] == [2 * 16 * 4, 2 * 16 * 16]
    assert outcome["wall_seconds"]["codapo_authors-seed202"] == pytest.approx(2500 + 5 * 100)
    assert json.loads((tmp_path / "pilot_rules.json").read_text())["verdict"] == expected


def test_pilot_stability_gate(r3, tmp_path):
    write_pilot(tmp_path / "runs", r3, 37.5, 34.0, no_answer=0.06)  # boxed rate 94 %
    outcome = r3.pilot_rules.main(["--pilot", str(tmp_path)])
    assert outcome["verdict"] == "no_campaign: gate 2 (stability) failed"
    assert outcome["gate_2_stability"]["runs"]["grpo-seed200"]["min_boxed_rate"] == pytest.approx(0.94)
    assert outcome["gate_2_stability"]["runs"]["codapo_authors-seed202"]["passed"]


def test_a3_re_pilot_is_read_from_its_own_folder(r3, tmp_path):
    """Gate 3's second attempt: A3 at lr 5e-6 re-runs seed 202 in a folder of its own; the rules take GRPO and the
    warm start from the first pilot and A3 from the re-pilot alone, and write their outcome where they are told."""
    write_pilot(tmp_path / "pilot" / "runs", r3, 37.5, 31.0)  # the first A3 moved too little
    write_run(tmp_path / "repilot" / "runs", r3, "codapo_authors", 202, 36.0, seconds=2500)
    out = tmp_path / "pilot" / "pilot_rules_a3_attempt2.json"
    args = ["--pilot", str(tmp_path / "pilot"), "--a3-attempt", "2", "--a3-pilot", str(tmp_path / "repilot")]
    outcome = r3.pilot_rules.main([*args, "--output", str(out)])
    assert outcome["verdict"] == "campaign" and outcome["a3_gain"] == pytest.approx(36.0 + 1.5 - 31.0)
    assert json.loads(out.read_text())["a3_attempt"] == 2 and not (tmp_path / "pilot" / "pilot_rules.json").exists()
    alone = r3.pilot_rules.main(["--pilot", str(tmp_path / "pilot"), "--a3-attempt", "2"])
    assert alone["verdict"] == "drop_a3"  # without the re-pilot folder, the first A3 run is the one read


def test_cost_rule_from_seed_zero_wall_times(r3, tmp_path):
    runs = tmp_path / "runs"
    write_warm(runs)
    # per run: training plus its read-outs (5 of 100 s): grpo, weighting, codapo 2 240 s; A3 2 900 s
    for arm, seconds in (("grpo", 1740), ("codapo_weighting", 1740), ("codapo", 1740), ("codapo_authors", 2400)):
        write_run(runs, r3, arm, 0, 40.0, seconds=seconds)
    pilot = tmp_path / "pilot"
    write_pilot(pilot, r3, 37.5, 34.0)  # 2 x 2 500 + 3 000 s + 2 warm read-outs of 100 s
    out = tmp_path / "cost.json"
    outcome = r3.cost_rule.main(["--seed-0", str(runs), "--spent", str(pilot), "--output", str(out)])
    per = {"grpo": 2240 / 3600, "codapo_weighting": 2240 / 3600, "codapo": 2240 / 3600, "codapo_authors": 2900 / 3600}
    assert outcome["hours_per_run"] == pytest.approx(per)
    spent = (3 * 2240 + 2900 + 200 + 2 * 2500 + 3000 + 200) / 3600
    assert outcome["hours_spent"] == pytest.approx(spent)
    ladder = 7 * sum(per.values())
    pair = 2 * 2240 / 3600
    assert spent + ladder + 6 * pair <= 40  # so N_P = 14 with A3
    assert (outcome["final_seeds"], outcome["ladder"][-1], outcome["start"]) == (14, "codapo_authors", True)
    assert outcome["projected_hours"] == pytest.approx(spent + ladder + 6 * pair)
    # with 16 h spent elsewhere: A3 does not fit at 10 seeds; A0-A2 fit at 12, not at 14
    tight = r3.cost_rule.main(["--seed-0", str(runs), "--spent", str(pilot), "--extra-hours", "16"])
    assert spent + 16 + 7 * (per["grpo"] * 3 + per["codapo_authors"]) + 2 * pair > 40
    assert spent + 16 + 7 * per["grpo"] * 3 + 6 * pair > 40 >= spent + 16 + 7 * per["grpo"] * 3 + 4 * pair
    assert (tight["final_seeds"], tight["ladder"]) == (12, ["grpo", "codapo_weighting", "codapo"])
    none = r3.cost_rule.main(["--seed-0", str(runs), "--extra-hours", "30"])
    assert none == {**none, "start": False, "final_seeds": None}


def test_cost_rule_counts_a_lost_read_out_time_as_the_longest_of_its_kind(r3, tmp_path):
    """A read-out finished from its scratch copy by a later sitting has no seconds (`null`): the rule counts it as the
    longest read-out of its kind it read, rather than stopping or counting nothing."""
    runs = tmp_path / "runs"
    write_warm(runs)
    for arm in ("grpo", "codapo_weighting", "codapo"):
        write_run(runs, r3, arm, 0, 40.0, seconds=1740)
    lost = runs / "codapo-seed0" / "eval" / "step16-greedy" / "summary.json"
    record = json.loads(lost.read_text())
    longest = 180.0
    record["seconds"] = None
    lost.write_text(json.dumps(record))
    other = runs / "grpo-seed0" / "eval" / "step8-greedy" / "summary.json"
    other.write_text(json.dumps({**json.loads(other.read_text()), "seconds": longest}))
    outcome = r3.cost_rule.main(["--seed-0", str(runs), "--ladder", "grpo", "codapo_weighting", "codapo"])
    assert outcome["seed_0_seconds"]["codapo"] == pytest.approx(1740 + 4 * 100 + longest)
    assert outcome["seed_0_seconds"]["grpo"] == pytest.approx(1740 + 4 * 100 + longest)
    assert outcome["ladder"] == ["grpo", "codapo_weighting", "codapo"]


# ---------------------------------------------------------------------------------------------------------------------
# The runner
# ---------------------------------------------------------------------------------------------------------------------


def fake_training(r3, commands: list):
    """A stand-in for `subprocess.run` in the runner: `git` answers a commit for done.json; a training command is
    recorded with its recipe as it was then (`(command, recipe)`) and leaves what a finished training leaves."""

    def run(command, **kwargs):
        if command[0] == "git":
            return r3.campaign.argparse.Namespace(stdout="0123abc\n")
        commands.append((command, yaml.safe_load(Path(command[command.index("--config") + 1]).read_text())))
        out = Path(command[command.index("--output_dir") + 1])
        for name in ("trainer_state.json", "train_results.json", "model.safetensors"):
            (out / name).write_text("{}")
        append_lines(str(out / "questions.jsonl.gz"), json.dumps(group(1, 0, "q0", 4, 3)) + "\n")
        for step in command[command.index("--save_at_steps") + 1 : command.index("--save_only_model")]:
            (out / f"checkpoint-{step}").mkdir()

    return run


def test_runner_trains_on_the_seed_pool_reads_out_and_skips_finished_runs(r3, tmp_path, monkeypatch):
    """run_one with the training and the read-outs replaced by fakes: the recipe and command it writes, the files it
    keeps, and that a finished run is skipped and a finished training only read out."""
    commands, read = [], []
    fake_train = fake_training(r3, commands)

    def fake_evaluate(model, evaluation, recipe, benchmark, out):
        read.append((Path(model).name, evaluation.kind))
        out.mkdir(parents=True)
        (out / "summary.json").write_text("{}")

    monkeypatch.setattr(r3.campaign.subprocess, "run", fake_train)
    monkeypatch.setattr(r3.campaign.round_1, "evaluate", fake_evaluate)
    options = r3.campaign.argparse.Namespace(results_dir=tmp_path / "results", work_dir=tmp_path / "work",
                                             pool_size=64, set={}, keep_checkpoints=False)  # fmt: skip
    r3.campaign.run_one("codapo_authors", 3, options, benchmark=None)
    results = tmp_path / "results" / "runs" / "codapo_authors-seed3"
    recipe = r3.arms.load_recipe("codapo_authors")
    written = yaml.safe_load((results / "recipe.yaml").read_text())
    assert written["seed"] == 3 and written["dataset_name"] == "experiments/codapo_vs_grpo_r3/pools/64/seed3.jsonl"
    assert {k: v for k, v in written.items() if k not in ("seed", "dataset_name")} == {
        k: v for k, v in recipe.items() if k not in ("seed", "dataset_name")
    }
    first = commands[0][0]
    assert first[first.index("--save_at_steps") + 1 :][:3] == ["64", "128", "192"]
    final = "codapo_authors-seed3"  # the work directory holds the final model
    assert read == [("checkpoint-64", "greedy"), ("checkpoint-128", "greedy"), ("checkpoint-192", "greedy"),
                    (final, "greedy"), (final, "avg4")]  # fmt: skip
    assert (results / "questions.jsonl.gz").exists() and (results / "done.json").exists()
    done = json.loads((results / "done.json").read_text())
    assert done["pool_sha256"] == r3.campaign.sha256(r3.pools.pool_path(3, 64)) and done["commit"] == "0123abc"
    assert done["cpu"] == r3.campaign.cpu_model() != "" and done["versions"]["torch"]
    assert set(done) >= {"codapo_trl_tree", "recipes_tree", "omp_num_threads", "ld_preload", "overrides"}
    work = tmp_path / "work" / "results" / "codapo_authors-seed3"  # below the results folder's name
    assert (work / "model.safetensors").exists() and not (work / "checkpoint-64").exists()  # read out, then deleted
    r3.campaign.run_one("codapo_authors", 3, options, benchmark=None)  # done: skipped
    assert len(commands) == 1 and len(read) == 5
    seconds = json.loads((results / "train_seconds.json").read_text())
    assert seconds["seconds"] >= 0 and len(seconds["load_before"]) == len(seconds["load_after"]) == 3


def test_a_repeat_pilot_never_reads_out_the_first_pilots_model(r3, tmp_path, monkeypatch):
    """The A3 re-pilot runs seed 202 again at another lr, in a results folder of its own: it trains its own model (in
    a work folder named after its results folder), and a model trained from another recipe is trained again."""
    commands = []
    fake_train = fake_training(r3, commands)

    def fake_evaluate(model, evaluation, recipe, benchmark, out):
        out.mkdir(parents=True, exist_ok=True)
        (out / "summary.json").write_text("{}")

    monkeypatch.setattr(r3.campaign.subprocess, "run", fake_train)
    monkeypatch.setattr(r3.campaign.round_1, "evaluate", fake_evaluate)

    def options(results: str, overrides: dict):
        return r3.campaign.argparse.Namespace(results_dir=tmp_path / results, work_dir=tmp_path / "work",
                                              pool_size=64, set=overrides, keep_checkpoints=False)  # fmt: skip

    r3.campaign.run_one("codapo_authors", 202, options("pilot", {}), benchmark=None)
    r3.campaign.run_one("codapo_authors", 202, options("pilot_a3_lr5e-6", {"learning_rate": 5e-6}), benchmark=None)
    trained = [(Path(c[c.index("--output_dir") + 1]), recipe) for c, recipe in commands]
    assert [out.parent.name for out, _ in trained] == ["pilot", "pilot_a3_lr5e-6"]
    assert trained[1][1]["learning_rate"] == 5e-6 and trained[0][1]["learning_rate"] == 2.5e-6
    (tmp_path / "pilot" / "runs" / "codapo_authors-seed202" / "done.json").unlink()
    r3.campaign.run_one("codapo_authors", 202, options("pilot", {"learning_rate": 5e-6}), benchmark=None)
    assert len(commands) == 3 and commands[2][0] == commands[0][0]  # same folder, another recipe: trained again


def test_a_restarted_training_drops_the_read_outs_of_the_training_before_it(r3, tmp_path, monkeypatch):
    """A training cut off (its model lost with the machine) restarts from scratch: a read-out kept from the lost
    model must not stand beside the new model's read-outs."""
    read = []
    fake_train = fake_training(r3, [])

    def fake_evaluate(model, evaluation, recipe, benchmark, out):
        if (out / "summary.json").exists():  # as round 1's evaluate: a kept summary is not evaluated again
            return
        read.append(out.name)
        out.mkdir(parents=True)
        (out / "summary.json").write_text('{"model": "new"}')

    monkeypatch.setattr(r3.campaign.subprocess, "run", fake_train)
    monkeypatch.setattr(r3.campaign.round_1, "evaluate", fake_evaluate)
    results = tmp_path / "results" / "runs" / "grpo-seed3"
    stale = results / "eval" / "step8-greedy"
    stale.mkdir(parents=True)
    (stale / "summary.json").write_text('{"model": "lost"}')  # read out from a model whose work folder is gone
    options = r3.campaign.argparse.Namespace(results_dir=tmp_path / "results", work_dir=tmp_path / "work",
                                             pool_size=64, set={}, keep_checkpoints=False)  # fmt: skip
    r3.campaign.run_one("grpo", 3, options, benchmark=None)
    assert "step8-greedy" in read
    assert json.loads((stale / "summary.json").read_text()) == {"model": "new"}
