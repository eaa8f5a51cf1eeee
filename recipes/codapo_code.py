"""Train a model on programming problems with CoDaPO, rewarded by running its code in the sandbox.

    accelerate launch --config_file accelerate_configs/zero3.yaml --num_processes 4 recipes/codapo_code.py \
        --config recipes/Qwen2.5-Math-1.5B/codapo/config_code.yaml

The same job as `recipes/codapo_math.py` (algorithms, presets, resume, outputs) with code data: `dataset_name`
`taco` (the hub's `BAAI/TACO`, filtered by `dataset_difficulties`), or a local file: a TACO-style jsonl/parquet, or a
jsonl in the normalised form (`question`, `tests`; e.g. `recipes/data/code_demo.jsonl`). The reward is the pass rate
of the completion's last Python code block on the problem's tests (`code_execution`), which CoDaPO uses as
correctness. Prompts carry the code system prompt of `codapo_trl.data_code`. With no arguments, a CPU demo runs
SmolLM2-135M-Instruct on the ten bundled problems.
"""

from __future__ import annotations

import os
import sys


sys.path[:0] = [
    os.path.dirname(os.path.abspath(__file__)),
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
]

import codapo_math  # noqa: E402

from codapo_trl.data_code import load_code_jsonl, load_taco  # noqa: E402


DEFAULTS = {"dataset_name": "taco", "reward_funcs": ["code_execution"]}
DEMO_RECIPE = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "SmolLM2-135M-Instruct/codapo/config_code_demo.yaml"
)


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


if __name__ == "__main__":
    args = codapo_math.parse(defaults=DEFAULTS, default_recipe=DEMO_RECIPE)
    codapo_math.main(*args, load_datasets=load_code_datasets)
    codapo_math.exit_cleanly()
