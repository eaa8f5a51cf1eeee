"""Measure a model's base accuracy on each level of the synthetic arithmetic task.

This is how the levels of `codapo_trl.data.ARITHMETIC_LEVELS` were calibrated on the embedded SmolLM2-135M-Instruct:
the demo needs a band it can learn (level 1 solved sometimes, level 5 almost never, a gradient in between).

Two checkers, both comparing with the exact sum:

- `boxed`: the content of the last `\\boxed{}` (spaces, commas and `$` removed) equals the answer;
- `boxed_or_last`: the boxed content if there is a box, else the last integer in the completion.

Usage (2 threads, low priority, ~5-10 min on two free cores):

    nice -n 10 python experiments/calibrate_arithmetic.py --num-questions 32 --samples 4 --temperatures 1.0 0.6 \\
        --output outputs/calibration.json
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from codapo_trl.data import ARITHMETIC_LEVELS, SYSTEM_PROMPT, last_boxed, load_math_dataset
from codapo_trl.models import DEFAULT_EMBEDDED_MODEL, resolve_model_name_or_path


logger = logging.getLogger("calibrate_arithmetic")

_INT_RE = re.compile(r"-?\d[\d,]*")


def boxed_answer(text: str) -> str | None:
    """Normalised content of the last box, or None."""
    boxed = last_boxed(text)
    return None if boxed is None else re.sub(r"[\s,$]", "", boxed)


def last_integer(text: str) -> str | None:
    """The last integer written in the text (thousands separators removed), or None."""
    found = _INT_RE.findall(text)
    return found[-1].replace(",", "") if found else None


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=DEFAULT_EMBEDDED_MODEL, help="alias, hub id or local checkpoint")
    parser.add_argument("--levels", type=int, nargs="+", default=sorted(ARITHMETIC_LEVELS))
    parser.add_argument("--num-questions", type=int, default=32, help="questions per level")
    parser.add_argument("--samples", type=int, default=4, help="completions per question")
    parser.add_argument("--temperatures", type=float, nargs="+", default=[1.0, 0.6])
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--split", default="train", help="arithmetic split to draw the questions from")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--no-system-prompt", action="store_true")
    parser.add_argument("--output", type=Path, help="write the results (and example completions) as JSON here")
    return parser.parse_args()


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    args = parse_args()
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    path = resolve_model_name_or_path(args.model)
    tokenizer = AutoTokenizer.from_pretrained(path)
    tokenizer.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    logger.info("Model %s ready in %.1f s", path, time.perf_counter() - start)

    results = []
    for level in args.levels:
        dataset = load_math_dataset(
            "arithmetic",
            args.split,
            num_per_level={level: args.num_questions},
            seed=args.seed,
            system_prompt=None if args.no_system_prompt else SYSTEM_PROMPT,
        )
        texts = [
            tokenizer.apply_chat_template(p, tokenize=False, add_generation_prompt=True) for p in dataset["prompt"]
        ]
        inputs = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        for temperature in args.temperatures:
            torch.manual_seed(args.seed)
            tic = time.perf_counter()
            with torch.no_grad():
                output = model.generate(
                    **inputs,
                    do_sample=True,
                    temperature=temperature,
                    top_p=1.0,
                    top_k=0,
                    max_new_tokens=args.max_new_tokens,
                    num_return_sequences=args.samples,
                )
            seconds = time.perf_counter() - tic
            completions = tokenizer.batch_decode(output[:, inputs["input_ids"].shape[1] :], skip_special_tokens=True)
            golds = [answer for answer in dataset["answer"] for _ in range(args.samples)]
            boxed = [boxed_answer(c) for c in completions]
            strict = sum(b == g for b, g in zip(boxed, golds, strict=True)) / len(golds)
            lenient = sum(
                (b if b is not None else last_integer(c)) == g
                for b, c, g in zip(boxed, completions, golds, strict=True)
            ) / len(golds)
            box_rate = sum(b is not None for b in boxed) / len(golds)
            results.append(
                {
                    "level": level,
                    "description": ARITHMETIC_LEVELS[level].description,
                    "temperature": temperature,
                    "n": len(golds),
                    "boxed": strict,
                    "boxed_or_last": lenient,
                    "box_rate": box_rate,
                    "seconds": round(seconds, 1),
                    "examples": [
                        {"question": dataset["question"][i // args.samples], "completion": completions[i]}
                        for i in range(0, len(completions), max(1, len(completions) // 4))
                    ],
                }
            )
            logger.info(
                "level %d T=%.1f: boxed %.2f, boxed_or_last %.2f, box rate %.2f (n=%d, %.0f s)",
                level,
                temperature,
                strict,
                lenient,
                box_rate,
                len(golds),
                seconds,
            )

    total = time.perf_counter() - start
    logger.info("\n| level | definition | T | boxed | boxed_or_last | box rate | n |")
    logger.info("|---|---|---|---|---|---|---|")
    for row in results:
        logger.info(
            "| %d | %s | %.1f | %.2f | %.2f | %.2f | %d |",
            row["level"],
            row["description"],
            row["temperature"],
            row["boxed"],
            row["boxed_or_last"],
            row["box_rate"],
            row["n"],
        )
    logger.info("Total %.0f s (%d threads, max %d new tokens)", total, args.threads, args.max_new_tokens)
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        payload = {"args": {k: str(v) for k, v in vars(args).items()}, "seconds": total, "results": results}
        args.output.write_text(json.dumps(payload, indent=2) + "\n")


if __name__ == "__main__":
    main()
