"""The jobs in one process: every recipe parses against the pinned TRL, the accelerate configs load, the console
scripts and launchers point at the jobs, the main job and the demo run end to end (the multi-process runs are in
test_recipes_zero3.py)."""

import importlib
import importlib.util
import json
import runpy
import sys
import tomllib
import warnings
from pathlib import Path

import pytest
import yaml
from trl import GRPOConfig

from codapo_trl import CoDaPOConfig
from codapo_trl.jobs.demo import run_demo
from codapo_trl.jobs.running import resume_checkpoint
from codapo_trl.jobs.train import parse, recipe_codapo_keys, train


ROOT = Path(__file__).resolve().parents[2]


RECIPES = sorted((ROOT / "recipes").rglob("config_*.yaml"))
ACCELERATE_CONFIGS = sorted((ROOT / "accelerate_configs").glob("*.yaml"))


def test_there_are_recipes_for_the_papers_setups():
    names = {str(p.relative_to(ROOT / "recipes")) for p in RECIPES}
    for model in ("Qwen2.5-Math-1.5B", "Qwen2.5-Math-7B", "Llama-3.2-1B-Instruct"):
        assert f"{model}/codapo/config_math.yaml" in names
    for baseline in ("grpo", "dapo", "dr_grpo", "gpg"):
        assert f"Qwen2.5-Math-1.5B/{baseline}/config_math.yaml" in names
    assert "Qwen2.5-Math-1.5B/codapo/config_authors.yaml" in names
    assert "SmolLM2-135M-Instruct/codapo/config_demo.yaml" in names


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: str(p.relative_to(ROOT / "recipes")))
def test_recipe_states_what_the_hardware_would_decide(recipe):
    """Precision, the model's dtype and the attention kernel are written in every recipe, never left to TRL's
    defaults (bf16 on) or to the machine: the GPU recipes in bf16, the CPU demos in float32."""
    raw = yaml.safe_load(recipe.read_text())
    assert {"bf16", "dtype", "attn_implementation"} <= raw.keys()
    gpu = "SmolLM2" not in str(recipe)
    assert (raw["bf16"], raw["dtype"]) == ((True, "bfloat16") if gpu else (False, "float32"))
    assert raw["attn_implementation"] == "sdpa" and not raw.get("fp16", False)


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: str(p.relative_to(ROOT / "recipes")))
def test_recipe_parses_with_the_pinned_trl(recipe):
    # TrlParser rejects unknown keys; --use_cpu lets GPU recipes (bf16) be validated on this machine
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        script_args, training_args, model_args = parse(["--config", str(recipe), "--use_cpu", "true"])
    raw = yaml.safe_load(recipe.read_text())
    # transformers 5.23 renamed gradient_checkpointing (a FutureWarning since): the recipes use the new name, which
    # the job reads into the old field on an older transformers; either way the recipe's value is the one used
    assert "gradient_checkpointing" not in raw
    assert not [str(w.message) for w in caught if "checkpointing" in str(w.message)]
    assert training_args.gradient_checkpointing is raw["activation_checkpointing"]
    assert script_args.algorithm == raw["algorithm"]
    expected_class = CoDaPOConfig if raw["algorithm"] in ("codapo", "gpg") else GRPOConfig
    assert type(training_args) is expected_class
    assert training_args.loss_type == raw["loss_type"]
    assert model_args.model_name_or_path == raw["model_name_or_path"]
    if "SmolLM2" not in str(recipe):  # the paper's setups: 16 questions x G = 8 per phase on 4 GPUs, K = 4
        steps_per_generation = raw.get("steps_per_generation", raw["gradient_accumulation_steps"])
        assert 4 * raw["per_device_train_batch_size"] * steps_per_generation == 16 * 8
        if raw["algorithm"] == "codapo":  # the authors' code takes 8 optimizer steps per phase, the paper 1
            assert training_args.codapo_steps_per_phase == (8 if "authors" in recipe.name else 1)
        assert raw["learning_rate"] == 1e-6 and raw["lr_scheduler_type"] == "constant" and raw["beta"] == 0
        assert raw["temperature"] == 1.0 and raw["top_p"] == 1.0 and raw["seed"] == 42 and raw["use_vllm"]
        if raw["algorithm"] == "codapo":
            assert raw["codapo_top_k"] == 4


def test_algorithm_presets_are_defaults_that_recipes_may_override(tmp_path):
    cpu = ["--output_dir", str(tmp_path), "--use_cpu", "true", "--bf16", "false"]
    _, args, _ = parse([*cpu, "--algorithm", "dr_grpo"])
    assert type(args) is GRPOConfig and args.loss_type == "dr_grpo"
    _, args, _ = parse([*cpu, "--algorithm", "gpg"])
    assert args.loss_type == "gpg" and not args.codapo_weighting and not args.codapo_sampling
    _, args, _ = parse([*cpu, "--algorithm", "grpo", "--loss_type", "bnpo"])
    assert args.loss_type == "bnpo"
    with pytest.raises(ValueError, match="runs TRL's GRPOTrainer"):
        parse([*cpu, "--algorithm", "grpo", "--loss_type", "codapo"])


def test_baseline_algorithm_on_a_codapo_recipe_is_a_clear_error():
    recipe = ROOT / "recipes/SmolLM2-135M-Instruct/codapo/config_demo.yaml"
    with pytest.raises(ValueError, match="sets CoDaPO options"):
        parse(["--config", str(recipe), "--algorithm", "grpo"])


def test_codapo_keys_are_read_from_the_parsed_recipe(tmp_path):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(
        'algorithm: grpo\n"codapo_top_k": 4\nnotes: |\n  codapo_weighting: true is only text here\ncodapo_sampling: false\n'
    )
    assert recipe_codapo_keys(recipe) == ["codapo_top_k", "codapo_sampling"]
    recipe.write_text("algorithm: grpo\nnotes: |\n  codapo_weighting: true\n")
    assert recipe_codapo_keys(recipe) == []


def test_console_scripts_and_launchers_run_the_jobs(monkeypatch, capsys):
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    for script, module in (("codapo-train", "train"), ("codapo-train-code", "train_code"), ("codapo-demo", "demo")):
        assert scripts[script] == f"codapo_trl.jobs.{module}:main"
    for target in scripts.values():
        module, function = target.split(":")
        assert callable(getattr(importlib.import_module(module), function)), target
    for launcher, expected in (
        ("codapo_math.py", "--algorithm"),
        ("codapo_code.py", "--algorithm"),
        ("demo.py", "--eval-samples"),
    ):
        monkeypatch.setattr(sys, "argv", [launcher, "--help"])
        with pytest.raises(SystemExit) as exit_info:
            runpy.run_path(str(ROOT / "recipes" / launcher), run_name="__main__")
        assert exit_info.value.code == 0 and expected in capsys.readouterr().out, launcher


def test_no_arguments_means_the_embedded_default():
    script_args, training_args, model_args = parse([])
    assert model_args.model_name_or_path == "embedded/SmolLM2-135M-Instruct"
    assert script_args.dataset_name == "arithmetic" and training_args.use_cpu


@pytest.mark.parametrize("config", ACCELERATE_CONFIGS, ids=lambda p: p.name)
def test_accelerate_config_loads(config):
    from accelerate.commands.config.config_args import load_config_from_file

    loaded = load_config_from_file(str(config))
    assert loaded.num_processes >= 2
    if config.name.startswith("cpu_"):
        # accelerate's MULTI_CPU launcher silently starts one process: CPU configs must go through torchrun
        assert str(loaded.distributed_type) != "DistributedType.MULTI_CPU"
        assert loaded.mixed_precision == "no"


def test_main_job_end_to_end_and_resume_on_request(tiny_recipe, tmp_path):
    out = tmp_path / "run"
    recipe = tiny_recipe(out)
    train(*parse(["--config", str(recipe)]))
    for name in ("model.safetensors", "train_results.json", "trainer_state.json", "README.md", "checkpoint-2"):
        assert (out / name).exists(), name
    assert "codapo" in (out / "README.md").read_text().lower()
    state = json.loads((out / "trainer_state.json").read_text())
    assert [h["codapo/phase"] for h in state["log_history"] if "codapo/phase" in h] == [0.0, 1.0]

    # not asked: a fresh start (with a warning); asked: continue from the last checkpoint
    assert resume_checkpoint(parse(["--config", str(recipe)])[1]) is None
    args = parse(["--config", str(recipe), "--resume_from_checkpoint", "last", "--max_steps", "4"])
    assert resume_checkpoint(args[1]) == str(out / "checkpoint-2")
    train(*args)
    state = json.loads((out / "trainer_state.json").read_text())
    assert state["global_step"] == 4
    assert [h["codapo/phase"] for h in state["log_history"] if "codapo/phase" in h] == [0.0, 1.0, 0.0, 1.0]
    with pytest.raises(FileNotFoundError):
        resume_checkpoint(parse(["--config", str(recipe), "--resume_from_checkpoint", "nope"])[1])


def test_demo_end_to_end(tiny_recipe, tmp_path, capsys):
    """The demo's three stages (evaluate, train, evaluate) on the tiny model: report, figure and summary written."""
    recipe = tiny_recipe(tmp_path / "unused", save_strategy="no")
    out = tmp_path / "demo"
    summary = run_demo(["--recipe", str(recipe), "--output-dir", str(out), "--eval-samples", "1"])
    for name in ("demo.png", "demo_summary.json", "model/model.safetensors", "eval_before", "eval_after"):
        assert (out / name).exists(), name
    assert json.loads((out / "demo_summary.json").read_text()) == json.loads(json.dumps(summary))
    assert len(summary["training_reward"]) == 2 and set(summary["before"]) == set(summary["after"]) != set()
    printed = capsys.readouterr().out
    assert "Held-out accuracy per level" in printed
    # one readable progress line per update, no dict of empty difficulty bins
    assert "step 1/2 | phase B | reward " in printed and "step 2/2 | phase S | reward " in printed
    assert "dynamics/" not in printed


def test_every_comparison_arm_parses_with_the_demo_recipe(tmp_path):
    """`experiments/compare.py`'s arms (the uniform-resampling control included) are command lines the main job
    accepts on top of the recipe it trains from, and each sets what its name says."""
    spec = importlib.util.spec_from_file_location("compare", ROOT / "experiments" / "compare.py")
    compare = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(compare)
    recipe = yaml.safe_load(compare.DEFAULT_RECIPE.read_text())
    parsed = {}
    for arm, overrides in compare.ARMS.items():
        path = compare.arm_recipe(arm, recipe, tmp_path / f"{arm}.yaml")
        _, parsed[arm], _ = parse(["--config", str(path), *overrides, "--use_cpu", "true"])
    assert parsed["codapo"].codapo_selection == "value" and parsed["codapo"].codapo_weighting
    control = parsed["codapo_uniform"]
    assert control.codapo_selection == "uniform" and not control.codapo_weighting and control.codapo_sampling
    assert not parsed["codapo_weighting"].codapo_sampling
    assert type(parsed["grpo"]) is GRPOConfig


def test_grpo_baseline_writes_the_question_log(tiny_recipe, tmp_path):
    """A baseline arm of a comparison logs its questions like CoDaPO (`baseline_question_log`), and the option is a
    clear error where it would be ignored."""
    out = tmp_path / "grpo"
    recipe = yaml.safe_load(tiny_recipe(out).read_text())
    recipe = {k: v for k, v in recipe.items() if not k.startswith("codapo_")}
    recipe.update(algorithm="grpo", loss_type="grpo", save_strategy="no")
    path = tmp_path / "grpo.yaml"
    path.write_text(yaml.safe_dump(recipe))
    common = ["--config", str(path), "--baseline_question_log", "questions.jsonl"]
    train(*parse([*common, "--baseline_dynamics", "true"]))
    rows = [json.loads(line) for line in (out / "questions.jsonl").read_text().splitlines()]
    per_update = recipe["per_device_train_batch_size"] * recipe["gradient_accumulation_steps"]
    assert len(rows) == 2 * per_update // recipe["num_generations"]  # one row per question per update
    assert {row["step"] for row in rows} == {1, 2} and {row["phase"] for row in rows} == {0}
    assert all(0.0 <= row["difficulty"] <= 1.0 for row in rows)
    with pytest.raises(ValueError, match="needs baseline_dynamics"):
        parse(common)
    with pytest.raises(ValueError, match="codapo_question_log"):
        parse(["--config", str(tiny_recipe(tmp_path / "c")), "--baseline_question_log", "q.jsonl"])


def test_save_at_steps_writes_exactly_the_chosen_checkpoints(tiny_recipe, tmp_path):
    """`save_at_steps` adds checkpoints after chosen updates (an evaluation protocol's 31 and 32) where save_steps
    can only express a period, and steps a run never reaches are refused before the model loads."""
    out = tmp_path / "run"
    recipe = tiny_recipe(out, save_strategy="no", max_steps=3)
    train(*parse(["--config", str(recipe), "--save_at_steps", "1", "3"]))
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-3"]
    state = json.loads((out / "checkpoint-1" / "trainer_state.json").read_text())
    assert state["global_step"] == 1
    for steps in (["0"], ["2", "4"]):
        with pytest.raises(ValueError, match="save_at_steps"):
            parse(["--config", str(recipe), "--save_at_steps", *steps])
