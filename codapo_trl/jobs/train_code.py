"""The code job: train a model on programming problems with CoDaPO, rewarded by running its code in the sandbox.

    accelerate launch --config_file accelerate_configs/zero3.yaml --num_processes 4 recipes/codapo_code.py \
        --config recipes/Qwen2.5-Math-1.5B/codapo/config_code.yaml

`codapo-train-code ...` and `python -m codapo_trl.jobs.train_code ...` run the same job as the launcher
`recipes/codapo_code.py`. It is the main job (`codapo_trl.jobs.train`: algorithms, presets, resume, outputs) with code
data: `dataset_name` `taco` (the hub's `BAAI/TACO`, filtered by `dataset_difficulties`), or a local file: a TACO-style
jsonl/parquet, or a jsonl in the normalised form (`question`, `tests`; e.g. `recipes/data/code_demo.jsonl`). The reward
is the pass rate of the completion's last Python code block on the problem's tests (`code_execution`), which CoDaPO
uses as correctness. Prompts carry the code system prompt of `codapo_trl.data.code`. With no arguments, a CPU demo runs
SmolLM2-135M-Instruct on the ten bundled problems.
"""

from __future__ import annotations

from codapo_trl.data.code import load_code_jsonl, load_taco
from codapo_trl.jobs.running import exit_cleanly
from codapo_trl.jobs.train import RECIPES_DIR, parse, train


DEFAULTS = {"dataset_name": "taco", "reward_funcs": ["code_execution"]}
DEMO_RECIPE = str(RECIPES_DIR / "SmolLM2-135M-Instruct" / "codapo" / "config_code_demo.yaml")


def load_code_datasets(script_args, training_args) -> tuple:
    """TACO from the hub, a TACO-style local file, or a jsonl in the normalised form."""

    def load(split: str, limit: int | None):
        name = script_args.dataset_name
        if name == "taco":
            return load_taco(split=split, limit=limit)
        if name.endswith(".jsonl"):
            with open(name, encoding="utf-8") as f:
                first = f.readline()
            if '"tests"' in first:
                return load_code_jsonl(name, limit=limit)
        return load_taco(split=split, path=name, limit=limit)

    train_dataset = load(script_args.dataset_train_split, script_args.dataset_limit)
    eval_dataset = None
    if training_args.eval_strategy != "no":
        eval_dataset = load(script_args.dataset_test_split, script_args.eval_limit)
    return train_dataset, eval_dataset


def main(argv: list[str] | None = None) -> None:
    """`codapo-train-code`: parse the command line (`sys.argv` when `argv` is None), train, leave cleanly."""
    train(*parse(argv, defaults=DEFAULTS, default_recipe=DEMO_RECIPE), load_datasets=load_code_datasets)
    exit_cleanly()


if __name__ == "__main__":
    main()
