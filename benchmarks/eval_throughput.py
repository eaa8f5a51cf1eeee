"""Throughput of the evaluation's CPU backend: completions/s and tokens/s of batched generation, against a plain loop.

The batched path is `codapo_trl.evaluation`'s `TransformersGenerator` (all samples of all questions as rows, sorted
by prompt length, `--batch-size` rows per `generate` call, per-sample random streams). The baseline is the plain
loop an evaluation script would write: one `model.generate(..., do_sample=True, num_return_sequences=n)` call per
question. Both sample at the same temperature and top-p with the same number of new tokens; the baseline is run on
a subset of the questions (`--baseline-questions`) to keep the run short, and rates are per second, so they compare.

    nice -n 10 python benchmarks/eval_throughput.py                       # 32 questions x 4 samples, 64 new tokens
    nice -n 10 python benchmarks/eval_throughput.py --batch-sizes 32 64 128 --threads 2

`--vllm` adds a row for the vLLM backend (`VLLMGenerator`; on CPU run it with `.venv-vllm/bin/python` after
`make install-vllm`), timed after a warm-up call; the engine's start-up is reported apart.
"""

from __future__ import annotations

import argparse
import json
import logging
import time

import torch

from codapo_trl.evaluation import load_benchmark
from codapo_trl.evaluation.generation import (
    GenerationRequest,
    SamplingConfig,
    TransformersGenerator,
    VLLMGenerator,
    render_prompt,
)
from codapo_trl.models import DEFAULT_EMBEDDED_MODEL, resolve_model_name_or_path


logger = logging.getLogger("eval_throughput")


def batched(generator: TransformersGenerator, requests: list[GenerationRequest], config: SamplingConfig) -> dict:
    start = time.perf_counter()
    results = generator.generate(requests, config)
    seconds = time.perf_counter() - start
    tokens = sum(c.num_tokens for samples in results for c in samples)
    completions = sum(len(samples) for samples in results)
    return {"seconds": seconds, "completions": completions, "tokens": tokens}


def plain_loop(generator: TransformersGenerator, requests: list[GenerationRequest], config: SamplingConfig) -> dict:
    model, tokenizer = generator.model, generator.tokenizer
    stop = set(generator.stop_ids)
    torch.manual_seed(config.seed)
    start = time.perf_counter()
    tokens = completions = 0
    for request in requests:
        ids = tokenizer(render_prompt(tokenizer, request.prompt), add_special_tokens=False, return_tensors="pt")
        with torch.inference_mode():
            output = model.generate(
                **ids,
                do_sample=True,
                temperature=config.temperature,
                top_p=config.top_p,
                top_k=0,
                max_new_tokens=config.max_new_tokens,
                num_return_sequences=config.num_samples,
                eos_token_id=generator.stop_ids,
                pad_token_id=generator.pad_id,
            )
        for row in output[:, ids["input_ids"].shape[1] :].tolist():
            end = next((i for i, t in enumerate(row) if t in stop), None)
            tokens += len(row) if end is None else end + 1
            completions += 1
    return {"seconds": time.perf_counter() - start, "completions": completions, "tokens": tokens}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=DEFAULT_EMBEDDED_MODEL)
    parser.add_argument("--questions", type=int, default=32, help="arithmetic test questions")
    parser.add_argument("--samples", type=int, default=4, help="samples per question")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--temperature", type=float, default=0.6)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[64, 128], help="rows per generate call")
    parser.add_argument("--baseline-questions", type=int, default=8, help="questions run by the plain loop")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--vllm", action="store_true", help="also time the vLLM backend (same questions, fp32)")
    parser.add_argument("--output", help="write the numbers as JSON here")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.set_num_threads(args.threads)

    generator = TransformersGenerator.from_pretrained(resolve_model_name_or_path(args.model), dtype="float32")
    bench = load_benchmark("arithmetic", limit=args.questions)
    requests = [GenerationRequest(f"arithmetic/{item.index}", item.prompt) for item in bench.items]
    config = SamplingConfig(args.samples, args.temperature, 1.0, args.max_new_tokens, seed=0)
    generator.generate(requests[:2], SamplingConfig(1, args.temperature, 1.0, 4))  # warm-up

    rows = {}
    for batch_size in args.batch_sizes:
        generator.batch_size = batch_size
        rows[f"batched (batch size {batch_size})"] = batched(generator, requests, config)
    rows["plain loop (one question per generate)"] = plain_loop(generator, requests[: args.baseline_questions], config)
    if args.vllm:
        start = time.perf_counter()
        engine = VLLMGenerator(generator.model.name_or_path, dtype="float32", max_model_len=1024)
        engine_start = time.perf_counter() - start
        engine.generate(requests[:2], SamplingConfig(1, args.temperature, 1.0, 4))  # warm-up
        row = batched(engine, requests, config)
        row["engine_start_s"] = engine_start
        rows[f"vllm backend ({engine.describe()}; engine start {engine_start:.0f} s not counted)"] = row

    base = rows["plain loop (one question per generate)"]
    base_rate = base["completions"] / base["seconds"]
    logger.info(
        "\n%s, %d questions x %d samples, %d new tokens, T=%.1f, %d threads\n",
        args.model,
        args.questions,
        args.samples,
        args.max_new_tokens,
        args.temperature,
        args.threads,
    )
    logger.info("| path | completions | tokens | seconds | completions/s | tokens/s | speed-up |")
    logger.info("|---|---|---|---|---|---|---|")
    for name, row in rows.items():
        row["completions_per_s"] = row["completions"] / row["seconds"]
        row["tokens_per_s"] = row["tokens"] / row["seconds"]
        row["speedup"] = row["completions_per_s"] / base_rate
        logger.info(
            "| %s | %d | %d | %.1f | %.2f | %.1f | %.1fx |",
            name,
            row["completions"],
            row["tokens"],
            row["seconds"],
            row["completions_per_s"],
            row["tokens_per_s"],
            row["speedup"],
        )
    if args.output:
        with open(args.output, "w") as f:
            json.dump({"args": vars(args), "results": rows}, f, indent=2)


if __name__ == "__main__":
    main()
