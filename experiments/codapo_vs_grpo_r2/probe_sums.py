"""A quick probe for the next hard-level candidate (round 2, issue 27): the warm start's pass rate at T = 1.0 on
random sums of two numbers with given digit counts, graded by the training reward's grader. Not a calibration (few
samples, questions drawn outside the task's train/test pools): it says which candidate to add and calibrate.

    python experiments/codapo_vs_grpo_r2/probe_sums.py --digits 4 4 --questions 16 --samples 4
"""

from __future__ import annotations

import argparse
import json
import random

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from codapo_trl.data import SYSTEM_PROMPT, arithmetic_question
from codapo_trl.rewards import grade_answers


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="outputs/warm_start/v4")
    parser.add_argument("--digits", type=int, nargs=2, default=[4, 4])
    parser.add_argument("--questions", type=int, default=16)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    options = parser.parse_args(argv)
    torch.manual_seed(options.seed)
    rng = random.Random(options.seed)
    tokenizer = AutoTokenizer.from_pretrained(options.model)
    tokenizer.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(options.model, dtype=torch.float32, attn_implementation="sdpa")
    pairs = [tuple(rng.randint(10 ** (d - 1), 10**d - 1) for d in options.digits) for _ in range(options.questions)]
    prompts = [
        tokenizer.apply_chat_template(
            [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": arithmetic_question(a, b)}],
            tokenize=False,
            add_generation_prompt=True,
        )
        for a, b in pairs
        for _ in range(options.samples)
    ]
    batch = tokenizer(prompts, return_tensors="pt", padding=True)
    with torch.no_grad():
        out = model.generate(
            **batch, do_sample=True, temperature=1.0, top_p=1.0, max_new_tokens=options.max_new_tokens
        )
    completions = tokenizer.batch_decode(out[:, batch["input_ids"].shape[1] :], skip_special_tokens=True)
    golds = [str(a + b) for a, b in pairs for _ in range(options.samples)]
    verdicts = grade_answers(completions, golds, ["number"] * len(golds))
    correct = [v.correct for v in verdicts]
    per_question = [sum(correct[i * options.samples : (i + 1) * options.samples]) for i in range(options.questions)]
    print(
        json.dumps(
            {
                "digits": options.digits,
                "pass_rate": sum(correct) / len(correct),
                "correct": sum(correct),
                "samples": len(correct),
                "questions_with_a_success": sum(c > 0 for c in per_question),
                "questions": options.questions,
                "examples": completions[:3],
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
