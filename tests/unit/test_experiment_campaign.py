"""The campaign driver of the CoDaPO-vs-GRPO experiment (`experiments/codapo_vs_grpo/run.py`) against its
pre-registration: every arm's command line is one the main job accepts and sets the pre-registered regime and the
arm's difference, the checkpoints are the ones the protocol reads, and each read-out is the pre-registered one.
Nothing is trained here (the main job's `save_at_steps` and question logs have their own tests in
`tests/integration/test_recipes.py`)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml
from helpers_scripts import load_script


EXPERIMENT = Path(__file__).resolve().parents[2] / "experiments" / "codapo_vs_grpo"


@pytest.fixture(scope="module")
def run():
    pytest.importorskip("trl")
    return load_script(EXPERIMENT / "run.py", "codapo_vs_grpo_run")


@pytest.fixture(scope="module")
def parsed_arms(run, tmp_path_factory):
    """Each arm's training command, parsed by the main job as the driver would run it."""
    from codapo_trl.jobs.train import parse

    compare = run.load_compare()
    recipe = yaml.safe_load((EXPERIMENT / "recipe.yaml").read_text())
    out = tmp_path_factory.mktemp("arms")
    parsed = {}
    for arm in run.ARM_NAMES:
        path = compare.arm_recipe(arm, recipe, out / f"{arm}.yaml")
        command = run.train_command(arm, 3, path, out / arm, compare.ARMS[arm])
        assert command[1].endswith("recipes/codapo_math.py")
        parsed[arm] = parse(command[2:])
    return parsed


def test_every_arm_trains_the_preregistered_regime(parsed_arms):
    for arm, (script, args, model) in parsed_arms.items():
        assert model.model_name_or_path == "outputs/warm_start/smollm2-arith-boxed", arm
        assert script.dataset_name == "arithmetic" and script.dataset_levels == [3, 4, 5], arm
        assert script.reward_funcs == ["math_accuracy"], arm
        assert args.seed == 3 and args.max_steps == 32, arm
        assert args.num_generations == 8 and args.temperature == 1.0 and args.top_p == 1.0, arm
        rollouts = args.per_device_train_batch_size * args.gradient_accumulation_steps
        assert rollouts // args.num_generations == 8, arm  # |B| = 8 questions per update
        assert args.max_completion_length == 48 and args.learning_rate == 2e-5 and args.beta == 0.0, arm
        assert script.save_at_steps == [8, 16, 24, 31] and args.save_only_model, arm


def test_each_arm_differs_as_preregistered(parsed_arms):
    from trl import GRPOConfig

    from codapo_trl import CoDaPOConfig

    script, grpo, _ = parsed_arms["grpo"]
    assert type(grpo) is GRPOConfig and grpo.loss_type == "grpo"
    assert script.baseline_dynamics and script.baseline_question_log == "questions.jsonl"
    codapo = {arm: parsed_arms[arm][1] for arm in ("codapo", "codapo_weighting", "codapo_uniform")}
    for arm, args in codapo.items():
        assert isinstance(args, CoDaPOConfig) and args.codapo_question_log == "questions.jsonl", arm
        assert args.codapo_top_k == 2 and args.codapo_resample_timing == "before_update", arm
    assert codapo["codapo"].codapo_sampling and codapo["codapo"].codapo_weighting
    assert codapo["codapo"].codapo_selection == "value"
    assert not codapo["codapo_weighting"].codapo_sampling and codapo["codapo_weighting"].codapo_weighting
    uniform = codapo["codapo_uniform"]
    assert uniform.codapo_sampling and uniform.codapo_selection == "uniform" and not uniform.codapo_weighting


def test_read_outs_follow_the_protocol(run):
    """Greedy at 8, 16, 24, 31 and 32; avg@4 at T = 0.6 only after a B update (31) and its S update (32)."""
    schedule = {
        step: [(e.kind, e.num_samples, e.temperature) for e in run.evaluations_at(step)] for step in range(1, 33)
    }
    reads = {step: kinds for step, kinds in schedule.items() if kinds}
    assert reads == {
        8: [("greedy", 1, 0.0)],
        16: [("greedy", 1, 0.0)],
        24: [("greedy", 1, 0.0)],
        31: [("avg4", 4, 0.6), ("greedy", 1, 0.0)],
        32: [("avg4", 4, 0.6), ("greedy", 1, 0.0)],
    }


def test_the_held_out_set_is_the_preregistered_one(run):
    from codapo_trl.data import load_math_dataset

    benchmark = run.held_out_benchmark()
    levels = [int(item.level) for item in benchmark.items]
    assert {lv: levels.count(lv) for lv in set(levels)} == {1: 14, 2: 12, 3: 23, 4: 180, 5: 200}
    train = set(load_math_dataset("arithmetic", "train")["question"])
    assert len(train) > 500 and not train & {
        item.question for item in benchmark.items
    }  # held out from every training question


class _Stop(RuntimeError):
    pass


def test_a_stopped_sitting_resumes_without_redoing_work(run, tmp_path, monkeypatch):
    """A finished training is not re-run, a finished read-out is not redone, a checkpoint already read out and
    deleted does not break the next sitting, and the run is marked done only after its last read-out."""
    import argparse
    import json

    work = tmp_path / "work" / "grpo-seed1"
    for step in (8, 16, 24, 31):
        (work / f"checkpoint-{step}").mkdir(parents=True)
    for name in ("train_results.json", "model.safetensors", "trainer_state.json", "questions.jsonl"):
        (work / name).write_text("{}")
    calls = []
    stop_at = {"checkpoint-24"}

    class Result:
        def to_summary(self):
            return {"benchmarks": {}}

    def fake_evaluate_model(model, benchmarks, *, output_dir, num_samples, temperature, **kwargs):
        if Path(model).name in stop_at:
            raise _Stop
        calls.append((Path(model).name, num_samples, temperature))
        Path(output_dir).mkdir(parents=True)
        (Path(output_dir) / "samples.jsonl").write_text('{"q": 1}\n')
        return Result()

    def no_training(*args, **kwargs):
        raise AssertionError("a finished training was started again")

    monkeypatch.setattr(run, "evaluate_model", fake_evaluate_model)
    monkeypatch.setattr(run.subprocess, "run", no_training)
    options = argparse.Namespace(
        results_dir=tmp_path / "results",
        work_dir=tmp_path / "work",
        keep_checkpoints=False,
        updates=32,
        train_only=False,
    )
    recipe = {"max_completion_length": 48, "system_prompt": "p"}
    with pytest.raises(_Stop):
        run.run_one("grpo", 1, options, None, recipe, benchmark=None)
    results = options.results_dir / "runs" / "grpo-seed1"
    assert not (results / "done.json").exists()
    assert not (work / "checkpoint-8").exists() and (work / "checkpoint-24").exists()
    assert [c[0] for c in calls] == ["checkpoint-8", "checkpoint-16"]

    stop_at.clear()
    run.run_one("grpo", 1, options, None, recipe, benchmark=None)
    assert [c[0] for c in calls[2:]] == ["checkpoint-24", "checkpoint-31", "checkpoint-31", "grpo-seed1", "grpo-seed1"]
    assert sorted(p.name for p in work.glob("checkpoint-*")) == []
    assert json.loads((results / "done.json").read_text()) == {"arm": "grpo", "seed": 1}
    assert (results / "eval" / "step32-avg4" / "samples.jsonl.gz").exists()
    run.run_one("grpo", 1, options, None, recipe, benchmark=None)  # done: nothing evaluated again
    assert len(calls) == 7


def test_the_campaign_grades_with_the_preregistered_rule(run, monkeypatch, tmp_path):
    """The reward was fixed before the grader's default changed: the driver pins the last-box rule before any work,
    for its own evaluations and for the training subprocesses it starts."""
    import os
    import subprocess

    from codapo_trl.rewards import configure_grader, grade_answers, grader_settings

    # Since issue 32 the setting decides only a box written inside a larger value (text after the box is not read).
    contradicted = r"So $\boxed{2}^{10}$."
    before = grader_settings()["read_after_box"]
    monkeypatch.setenv("CODAPO_GRADER_READ_AFTER_BOX", "1")  # restored at teardown, whatever the driver sets
    configure_grader(read_after_box=True)
    try:
        assert grade_answers([contradicted], ["2"])[0].correct is False
        order, real_pin = [], run.pin_grader

        def pin():
            order.append("pin")
            real_pin()

        monkeypatch.setattr(run, "pin_grader", pin)
        recipe = tmp_path / "recipe.yaml"
        recipe.write_text(yaml.safe_dump({"model_name_or_path": str(tmp_path / "no-model")}))
        with pytest.raises(SystemExit):  # stops at the missing warm start, after pinning
            run.main(["--recipe", str(recipe), "--results-dir", str(tmp_path / "results")])
        assert order == ["pin"]
        assert os.environ["CODAPO_GRADER_READ_AFTER_BOX"] == "0"
        assert grade_answers([contradicted], ["2"])[0].correct is True
        grade = "from codapo_trl.rewards import grade_answers;"
        child = subprocess.run(
            [sys.executable, "-c", f"{grade} print(grade_answers([{contradicted!r}], ['2'])[0].correct)"],
            capture_output=True,
            text=True,
            env={**os.environ, "CODAPO_GRADER_WORKERS": "0"},
            timeout=120,
        )
        assert child.stdout.strip() == "True", child.stderr[-2000:]
    finally:
        configure_grader(read_after_box=before)


# Round 2 (issue 27): the same driver, parameterised by its options and the round-2 recipe.

ROUND_2 = EXPERIMENT.parent / "codapo_vs_grpo_r2"


@pytest.fixture(scope="module")
def round_2_arms(run, tmp_path_factory):
    from codapo_trl.jobs.train import parse

    compare = run.load_compare()
    recipe = yaml.safe_load((ROUND_2 / "recipe.yaml").read_text())
    out = tmp_path_factory.mktemp("round2")
    parsed = {}
    for arm in ("grpo", "codapo", "grpo_token_loss"):
        path = compare.arm_recipe(arm, recipe, out / f"{arm}.yaml")
        command = run.train_command(arm, 7, path, out / arm, compare.ARMS[arm], read_out_steps=(8, 16, 24, 32))
        parsed[arm] = parse(command[2:])
    return parsed


def test_round_2_arms_train_the_registered_regime(round_2_arms):
    from trl import GRPOConfig

    from codapo_trl import CoDaPOConfig

    for arm, (script, args, model) in round_2_arms.items():
        assert model.model_name_or_path == "outputs/warm_start/v4", arm
        assert script.dataset_levels == [4, 5, 7] and args.seed == 7 and args.max_steps == 32, arm  # amendment 1
        assert args.max_completion_length == 64, arm  # amendment 1: level 7's longest warm-start answer is 48 + EOS
        assert args.per_device_train_batch_size * args.gradient_accumulation_steps // args.num_generations == 16, arm
        assert args.num_generations == 8 and args.learning_rate == 2e-5 and args.beta == 0.0, arm
        assert script.save_at_steps == [8, 16, 24], arm
    grpo = round_2_arms["grpo"][1]
    assert type(grpo) is GRPOConfig and grpo.loss_type == "grpo"
    codapo = round_2_arms["codapo"][1]
    assert codapo.codapo_top_k == 4 and codapo.codapo_sampling and codapo.codapo_weighting
    loss_only = round_2_arms["grpo_token_loss"][1]
    assert isinstance(loss_only, CoDaPOConfig) and loss_only.loss_type == "codapo"
    assert not loss_only.codapo_weighting and not loss_only.codapo_sampling
    assert loss_only.codapo_question_log == "questions.jsonl"


def test_a_pilot_trains_only_and_keeps_its_logs(run, tmp_path, monkeypatch):
    import argparse
    import json

    compare = run.load_compare()
    seen = {}

    def fake_training(command, **kwargs):
        seen["command"] = command
        out = Path(command[command.index("--output_dir") + 1])
        for name in ("train_results.json", "model.safetensors", "trainer_state.json"):
            (out / name).write_text("{}")
        (out / "questions.jsonl").write_text('{"step": 1}\n')

    def no_evaluation(*args, **kwargs):
        raise AssertionError("a pilot reads nothing out")

    monkeypatch.setattr(run.subprocess, "run", fake_training)
    monkeypatch.setattr(run, "evaluate_model", no_evaluation)
    options = argparse.Namespace(
        results_dir=tmp_path / "results",
        work_dir=tmp_path / "work",
        keep_checkpoints=False,
        updates=16,
        train_only=True,
    )
    recipe = yaml.safe_load((ROUND_2 / "recipe.yaml").read_text())
    run.run_one("grpo", 1, options, compare, recipe, benchmark=None)
    command = seen["command"]
    assert command[command.index("--max_steps") + 1] == "16" and "--save_at_steps" not in command
    results = options.results_dir / "runs" / "grpo-seed1"
    assert (results / "questions.jsonl").read_text() == '{"step": 1}\n'
    assert json.loads((results / "done.json").read_text())["train_only"] is True


def test_round_2_read_outs(run):
    """Greedy at 8, 16, 24 and 32 (the primary endpoint's four), avg@4 at T = 0.6 only at 32."""
    import argparse

    steps = argparse.Namespace(greedy_steps=[8, 16, 24, 32], sampled_steps=[32])
    assert run.read_out_steps(steps) == (8, 16, 24, 32)
    reads = {
        step: [(e.kind, e.num_samples) for e in run.evaluations_at(step, *run.protocol_steps(steps))]
        for step in range(1, 33)
    }
    assert {step: kinds for step, kinds in reads.items() if kinds} == {
        8: [("greedy", 1)],
        16: [("greedy", 1)],
        24: [("greedy", 1)],
        32: [("avg4", 4), ("greedy", 1)],
    }
    assert run.read_out_steps(argparse.Namespace()) == (8, 16, 24, 31, 32)  # round 1's
    greedy_only = argparse.Namespace(greedy_steps=[8, 16, 24, 32], sampled_steps=[])
    assert [e.kind for e in run.evaluations_at(32, *run.protocol_steps(greedy_only))] == ["greedy"]


def test_held_out_questions_option(run):
    assert run.parse_level_counts(["4=180", "6=200"]) == {4: 180, 6: 200}
    with pytest.raises(ValueError, match="LEVEL=QUESTIONS"):
        run.parse_level_counts(["6:200"])
    benchmark = run.held_out_benchmark({6: 30})
    assert {int(item.level) for item in benchmark.items} == {6} and len(benchmark.items) == 30
    sampled = run.held_out_benchmark({7: 30})  # the sampled level: drawn from the test side of its hash split
    assert {int(item.level) for item in sampled.items} == {7} and len(sampled.items) == 30


def round_2_recipe_on_a_stub_model(tmp_path):
    """Round 2's recipe written to `tmp_path/recipe.yaml`, pointing at a stub model folder (a `config.json` only);
    returns that folder."""
    model = tmp_path / "warm"
    model.mkdir()
    (model / "config.json").write_text("{}")
    recipe = yaml.safe_load((ROUND_2 / "recipe.yaml").read_text())
    recipe["model_name_or_path"] = str(model)
    (tmp_path / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    return model


def test_warm_start_only_reads_out_the_warm_start_and_trains_nothing(run, tmp_path, monkeypatch):
    model = round_2_recipe_on_a_stub_model(tmp_path)
    read = []
    # main() pins the campaign's grader for the whole process (and its logging): kept out of the test session
    monkeypatch.setattr(run, "pin_grader", lambda: read.append("pinned"))
    monkeypatch.setattr(run, "configure_logging", lambda: None)
    monkeypatch.setattr(run, "evaluate", lambda model, evaluation, *args: read.append((model, evaluation.kind)))
    monkeypatch.setattr(run, "run_one", lambda *args: pytest.fail("--warm-start-only trains nothing"))
    argv = ["--recipe", str(tmp_path / "recipe.yaml"), "--results-dir", str(tmp_path / "results")]
    run.main(
        [*argv, "--eval-questions", "7=5", "--greedy-steps", "8", "16", "24", "32", "--sampled-steps"]
        + ["--warm-start-only"]
    )
    assert read == ["pinned", (model, "greedy")]
    with pytest.raises(SystemExit):
        run.main([*argv, "--warm-start-only", "--train-only"])


# Round 2, amendment 2 (issue 35): the pass8 read-out, hard-level-only greedy read-outs, the warm-start pin.


def test_amendment_2_read_outs(run):
    """Level-7 greedy at 8, 16, 24 and 32, levels 4 and 5 only at 16 and 32; pass@8 of level 7 at 16 and 32."""
    import argparse

    options = argparse.Namespace(
        greedy_steps=[8, 16, 24, 32], sampled_steps=[], pass8_steps=[16, 32], hard_level=7, all_levels_steps=[16, 32]
    )
    reads = {
        step: [(e.kind, e.levels, e.num_samples, e.temperature) for e in run.evaluations_for(step, options)]
        for step in range(1, 33)
    }
    assert {step: kinds for step, kinds in reads.items() if kinds} == {
        8: [("greedy", (7,), 1, 0.0)],
        16: [("greedy", None, 1, 0.0), ("pass8", (7,), 8, 1.0)],
        24: [("greedy", (7,), 1, 0.0)],
        32: [("greedy", None, 1, 0.0), ("pass8", (7,), 8, 1.0)],
    }
    assert run.read_out_steps(argparse.Namespace(greedy_steps=[8], sampled_steps=[], pass8_steps=[16])) == (8, 16)
    with pytest.raises(ValueError, match="--hard-level"):
        run.evaluations_at(16, (16,), (), pass8_steps=(16,))
    benchmark = run.held_out_benchmark({4: 3, 7: 4})
    only7 = run.restrict_levels(benchmark, (7,))
    assert [i.question for i in only7.items] == [i.question for i in benchmark.items if int(i.level) == 7]
    assert len(only7.items) == 4 and len(benchmark.items) == 7  # the full set is left as it was
    with pytest.raises(ValueError, match="no question of level"):
        run.restrict_levels(benchmark, (6,))


def test_pass8_read_out_on_a_tiny_model(run, tiny_model_dir, tmp_path):
    """A pass8 read-out samples 8 completions at T = 1.0 of the hard level's questions alone and keeps pass@8 and
    avg@8 per level (a tiny random model stands in for the warm start)."""
    import gzip
    import json

    benchmark = run.held_out_benchmark({4: 3, 7: 4})
    recipe = {"max_completion_length": 8, "system_prompt": "p"}
    out = tmp_path / "step16-pass8"
    summary = run.evaluate(Path(tiny_model_dir), run.Evaluation("pass8", (7,)), recipe, benchmark, out)
    bench = summary["benchmarks"]["arithmetic"]
    assert summary["config"]["num_samples"] == 8 and summary["config"]["temperature"] == 1.0
    assert list(bench["levels"]) == ["7"] and bench["num_samples"] == 32
    metrics = bench["levels"]["7"]["metrics"]
    assert {"avg@n", "pass@8"} <= set(metrics) and metrics["pass@8"] >= metrics["avg@n"]
    with gzip.open(out / "samples.jsonl.gz", "rt") as f:
        questions = [json.loads(line) for line in f]
    assert [q["level"] for q in questions] == [7] * 4 and all(len(q["samples"]) == 8 for q in questions)
    assert json.loads((out / "summary.json").read_text())["seconds"] > 0


def test_the_warm_start_pin(run, tmp_path, monkeypatch):
    """The pin is the SHA-256 of every file of the warm start (`sha256sum -c` reads it); a changed, missing or extra
    file stops the driver before anything is read out or trained."""
    import subprocess

    model = tmp_path / "warm"
    (model / "sub").mkdir(parents=True)
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(bytes(range(256)) * 4096)
    (model / "sub" / "tokenizer.json").write_text('{"a": 1}')
    recipe = yaml.safe_load((ROUND_2 / "recipe.yaml").read_text())
    recipe["model_name_or_path"] = str(model)
    (tmp_path / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    pin = tmp_path / "warm.sha256"
    monkeypatch.setattr(run, "pin_grader", lambda: None)
    monkeypatch.setattr(run, "configure_logging", lambda: None)
    work = []
    monkeypatch.setattr(run, "evaluate", lambda *args: work.append("read out"))
    monkeypatch.setattr(run, "run_one", lambda *args: work.append("trained"))
    argv = ["--recipe", str(tmp_path / "recipe.yaml"), "--results-dir", str(tmp_path / "results"),
            "--warm-start-pin", str(pin), "--arms", "grpo", "--seeds", "0"]  # fmt: skip
    with pytest.raises(SystemExit):  # no pin yet: record it first
        run.main(argv)
    run.main([*argv, "--record-warm-start-pin"])
    assert work == [] and sorted(run.parse_pin(pin.read_text())) == ["config.json", "model.safetensors",
                                                                      "sub/tokenizer.json"]  # fmt: skip
    check = subprocess.run(["sha256sum", "-c", str(pin)], cwd=model, capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    with pytest.raises(SystemExit):  # a pin is never replaced
        run.main([*argv, "--record-warm-start-pin"])
    run.main(argv)
    assert work == ["read out", "read out", "trained"]  # matches: the warm start's read-outs (avg4, greedy), a run
    weights = bytearray((model / "model.safetensors").read_bytes())
    weights[1000] ^= 1  # one bit
    (model / "model.safetensors").write_bytes(bytes(weights))
    (model / "extra.bin").write_bytes(b"x")
    (model / "config.json").unlink()
    (model / "config.json").write_text("{}")  # rewritten with the same bytes: still the pinned file
    assert run.pin_mismatches(model, run.parse_pin(pin.read_text())) == [
        "model.safetensors: changed",
        "extra.bin: not in the pin",
    ]
    work.clear()
    with pytest.raises(SystemExit):
        run.main(argv)
    assert work == []
    (model / "sub" / "tokenizer.json").unlink()
    assert "sub/tokenizer.json: missing" in run.pin_mismatches(model, run.parse_pin(pin.read_text()))
    with pytest.raises(ValueError, match="Line 1 of the pin"):
        run.parse_pin("deadbeef model.safetensors\n")


def test_pass8_and_hard_only_read_outs_need_the_hard_level(run, tmp_path, monkeypatch):
    round_2_recipe_on_a_stub_model(tmp_path)
    monkeypatch.setattr(run, "pin_grader", lambda: None)
    monkeypatch.setattr(run, "configure_logging", lambda: None)
    monkeypatch.setattr(run, "evaluate", lambda *args: pytest.fail("nothing is read out"))
    for extra in (["--pass8-steps", "16"], ["--all-levels-steps", "16"]):
        with pytest.raises(SystemExit):
            run.main(["--recipe", str(tmp_path / "recipe.yaml"), "--warm-start-only", *extra])
