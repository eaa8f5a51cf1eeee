"""Warm start for the CoDaPO-vs-GRPO experiment: teach the embedded model the answer format, not the task.

Issue 14: in the pilot comparison (`experiments/results/compare_smollm2`), 88 % of the base model's completions gave
no answer, so the early, seed-dominated phase of every run was format discovery, not arithmetic. This script removes
that phase once, for every arm: a short supervised fine-tune (TRL's `SFTTrainer`, loss on the completion only) of
the embedded SmolLM2-135M-Instruct on EASY questions only (arithmetic levels 1-2, `train` split; the held-out `test`
questions are never used), asked with the paper's system prompt (`codapo_trl.data.SYSTEM_PROMPT`) in the chat
format, answered by a one-line computation and `\\boxed{N}`:

    What is 3 + 5?  ->  "3 + 5 = 8.\\n\\nThe answer is \\boxed{8}."

Every completion computes the sum and boxes the number (never an expression): the reward pays only an anchored
answer that is the number (see the restatement hack in `/work/shared/notes/smollm2-embedded-baseline.md`).

The model and tokenizer go to `--output-dir`, with `warm_start.json` (arguments, data, loss curve, time, versions).
Seeded: the same arguments give the same data and training order; bit-identical weights across machines or
thread counts are not claimed (re-calibrate a re-made warm start, see PREREGISTRATION.md).

    OMP_NUM_THREADS=1 nice -n 10 python experiments/codapo_vs_grpo/warm_start.py \\
        --output-dir outputs/warm_start/smollm2-arith-boxed

Then measure it with `experiments/codapo_vs_grpo/calibrate.py --model outputs/warm_start/smollm2-arith-boxed`.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import logging
import platform
import random
import time
from pathlib import Path
from typing import Any

import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import SFTConfig, SFTTrainer

from codapo_trl.data import SYSTEM_PROMPT, load_math_dataset
from codapo_trl.models import DEFAULT_EMBEDDED_MODEL, resolve_model_name_or_path


logger = logging.getLogger("warm_start")

WARM_START_LEVELS = (1, 2)
"""The only levels the warm start sees (one-digit sums); the experiment's hard levels (3-5) stay untouched."""

ANSWER_TEMPLATES = (
    "{a} + {b} = {s}.\n\nThe answer is \\boxed{{{s}}}.",
    "Adding {a} and {b}: {a} + {b} = {s}.\n\nSo the answer is \\boxed{{{s}}}.",
    "We compute the sum: {a} + {b} = {s}.\n\n\\boxed{{{s}}}",
)
"""Completions: a one-line computation, then the boxed number. Three phrasings so that the model learns the format
rather than one string."""


def warm_start_completion(a: int, b: int, template: int) -> str:
    """The target completion for `a + b` in phrasing `template` (an index into `ANSWER_TEMPLATES`).

    Example:
        >>> warm_start_completion(3, 5, 0)
        '3 + 5 = 8.\\n\\nThe answer is \\\\boxed{8}.'
    """
    return ANSWER_TEMPLATES[template].format(a=a, b=b, s=a + b)


def build_sft_dataset(num_per_level: int, seed: int, system_prompt: str | None = SYSTEM_PROMPT) -> Dataset:
    """Prompt-completion rows (conversational) for the easy levels of the `train` split.

    Args:
        num_per_level (`int`): examples per level; the level pools are small (about 40 train questions each), so
            questions repeat, each time with a phrasing drawn at random.
        seed (`int`): seed of the question draw and of the phrasing.
        system_prompt (`str` or `None`, *optional*): system turn; defaults to the paper's prompt.

    Returns:
        `Dataset` with `prompt` (system + user turns), `completion` (one assistant turn), `question`, `level`.
    """
    raw = load_math_dataset(
        "arithmetic",
        "train",
        num_per_level=dict.fromkeys(WARM_START_LEVELS, num_per_level),
        seed=seed,
        allow_repeats=True,
        system_prompt=system_prompt,
    )
    rng = random.Random(f"warm-start-{seed}")
    rows = []
    for row in raw:
        if row["level"] not in WARM_START_LEVELS:  # defensive: the data API must not hand us a hard question
            raise RuntimeError(f"warm-start data holds a level-{row['level']} question: {row['question']!r}")
        completion = warm_start_completion(row["a"], row["b"], rng.randrange(len(ANSWER_TEMPLATES)))
        rows.append(
            {
                "prompt": row["prompt"],
                "completion": [{"role": "assistant", "content": completion}],
                "question": row["question"],
                "level": row["level"],
            }
        )
    return Dataset.from_list(rows)


def versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for package in ("codapo-trl", "torch", "transformers", "trl", "datasets"):
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            continue
    return found


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=DEFAULT_EMBEDDED_MODEL, help="alias, hub id or local checkpoint")
    parser.add_argument("--output-dir", type=Path, required=True, help="where the fine-tuned model is written")
    parser.add_argument("--num-per-level", type=int, default=64, help="examples per easy level (1 and 2)")
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--learning-rate", type=float, default=1e-4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the weights depend on it slightly)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    path = resolve_model_name_or_path(args.model)
    dataset = build_sft_dataset(args.num_per_level, args.seed)
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    config = SFTConfig(
        output_dir=str(args.output_dir / "trainer"),
        num_train_epochs=args.epochs,
        per_device_train_batch_size=args.batch_size,
        learning_rate=args.learning_rate,
        lr_scheduler_type="cosine",
        warmup_steps=0.1,
        max_length=256,
        completion_only_loss=True,
        seed=args.seed,
        data_seed=args.seed,
        use_cpu=True,
        bf16=False,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        dataloader_num_workers=0,
    )
    trainer = SFTTrainer(model=model, args=config, train_dataset=dataset, processing_class=tokenizer)
    output = trainer.train()
    trainer.save_model(str(args.output_dir))
    tokenizer.save_pretrained(str(args.output_dir))
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    record = {
        "base_model": args.model,
        "base_path": path,
        "args": {k: str(v) for k, v in vars(args).items()},
        "levels": list(WARM_START_LEVELS),
        "split": "train",
        "system_prompt": SYSTEM_PROMPT,
        "templates": list(ANSWER_TEMPLATES),
        "num_examples": len(dataset),
        "distinct_questions": len(set(dataset["question"])),
        "examples": [
            {"question": r["question"], "completion": r["completion"][0]["content"]} for r in dataset.select(range(4))
        ],
        "optimizer_steps": trainer.state.global_step,
        "loss_first": losses[:5],
        "loss_last": losses[-5:],
        "train_loss": output.training_loss,
        "seconds": round(time.perf_counter() - start, 1),
        "threads": args.threads,
        "versions": versions(),
    }
    (args.output_dir / "warm_start.json").write_text(json.dumps(record, indent=2) + "\n")
    logger.info("Warm start done in %.0f s: %s", record["seconds"], args.output_dir)
    return record


if __name__ == "__main__":
    main()
