"""The `codapo-eval` command (also `python -m codapo_trl.evaluation`).

codapo-eval MODEL --benchmarks math500 aime24 [options]     # evaluate
codapo-eval --compare runA/summary.json runB/summary.json   # side by side, differences vs the first
codapo-eval --list-benchmarks                               # the registry
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from codapo_trl.command_line import configure_logging, timestamped_output_dir, usage_error
from codapo_trl.data import SYSTEM_PROMPT
from codapo_trl.data.code import CODE_SYSTEM_PROMPT
from codapo_trl.evaluation.benchmarks import (
    BENCHMARK_GROUPS,
    describe_benchmarks,
    expand_benchmarks,
    get_benchmark_spec,
    load_benchmark,
)
from codapo_trl.evaluation.code import LCB_DEFAULT_VERSION, CodeGradingConfig
from codapo_trl.evaluation.metrics import AVG_KEY, compare_summaries, format_level_table, format_pass_at_k_table


logger = logging.getLogger("codapo_trl.evaluation")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `codapo-eval`."""
    parser = argparse.ArgumentParser(
        prog="codapo-eval",
        description="Evaluate a model on reasoning benchmarks (avg@n and pass@k, per benchmark and level), or "
        "compare evaluation summaries.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("model", nargs="?", help="model alias (embedded/SmolLM2-135M-Instruct), local path or hub id")
    parser.add_argument(
        "-b",
        "--benchmarks",
        nargs="+",
        default=[],
        metavar="BENCHMARK",
        help="registered names (see --list-benchmarks), groups (" + ", ".join(BENCHMARK_GROUPS) + "), NAME=PATH "
        "(a registered benchmark from a local file in the hub's format) or local .jsonl/.json/.parquet files",
    )
    sampling = parser.add_argument_group("sampling")
    sampling.add_argument("--num-samples", "-n", type=int, default=32, help="samples per question (paper: 32)")
    sampling.add_argument("--temperature", type=float, default=0.6, help="sampling temperature (paper: 0.6)")
    sampling.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling mass")
    sampling.add_argument("--max-new-tokens", type=int, default=3072, help="longest completion")
    sampling.add_argument("--seed", type=int, default=0, help="seed of every sample's random stream")
    sampling.add_argument("--k", type=int, nargs="+", default=None, help="k of pass@k (default: powers of 2 up to n)")
    sampling.add_argument("--batch-size", type=int, default=64, help="sequences per generate call (transformers)")
    sampling.add_argument("--backend", choices=("auto", "transformers", "vllm"), default="auto")
    sampling.add_argument("--dtype", default="auto", help="model dtype: auto, float32, bfloat16, float16")
    sampling.add_argument(
        "--vllm-kwargs",
        type=json.loads,
        default=None,
        help="extra vllm.LLM arguments as JSON, e.g. '{\"max_model_len\": 4096}'",
    )
    prompts = parser.add_argument_group("prompts")
    prompts.add_argument("--system-prompt", default=SYSTEM_PROMPT, help="system turn of maths/science prompts")
    prompts.add_argument("--no-system-prompt", action="store_true", help="no system turn for maths/science prompts")
    prompts.add_argument("--code-system-prompt", default=CODE_SYSTEM_PROMPT, help="system turn of code prompts")
    data = parser.add_argument_group("data")
    data.add_argument(
        "--limit",
        type=int,
        default=None,
        help="first N questions of each benchmark, in its own order: not balanced across levels (the levels kept "
        "are logged)",
    )
    data.add_argument(
        "--lcb-version", default=LCB_DEFAULT_VERSION, help="LiveCodeBench release (release_v1..v6, v1..v6)"
    )
    code = parser.add_argument_group("code benchmarks (run in the sandbox)")
    code.add_argument("--code-timeout", type=float, default=6.0, help="seconds per test case")
    code.add_argument("--code-memory-mb", type=int, default=1024, help="memory limit per test case")
    code.add_argument("--code-workers", type=int, default=2, help="test cases run at the same time")
    code.add_argument("--code-max-tests", type=int, default=None, help="first N test cases per problem (default all)")
    output = parser.add_argument_group("output")
    output.add_argument("--output-dir", type=Path, default=None, help="default: outputs/eval/<model>-<time>")
    output.add_argument("--label", default=None, help="row label in tables (default: the model)")
    output.add_argument("--no-progress", action="store_true", help="no progress bar")
    modes = parser.add_argument_group("other modes")
    modes.add_argument("--compare", nargs="+", type=Path, metavar="SUMMARY", help="compare summary.json files")
    modes.add_argument("--metric", default=AVG_KEY, help="metric of --compare tables: avg@n or pass@k")
    modes.add_argument("--list-benchmarks", action="store_true", help="print the benchmark registry and exit")
    return parser


def _list_benchmarks() -> str:
    rows = describe_benchmarks()
    lines = ["| name | column | kind | hub id | split | fields | answer | aliases |", "|" + "---|" * 8]
    lines += [
        f"| {r['name']} | {r['display_name']} | {r['kind']} | {r['hub_id']} | {r['split']} | {r['fields']} | "
        f"{r['answer_type']} | {r['aliases']} |"
        for r in rows
    ]
    lines += ["", "Groups: " + "; ".join(f"{g} = {' '.join(b)}" for g, b in BENCHMARK_GROUPS.items())]
    return "\n".join(lines)


def _error(message: str) -> int:
    return usage_error("codapo-eval", message)


def main(argv: Sequence[str] | None = None) -> int:
    """Run `codapo-eval` with `argv` (default: the command line); returns the exit status (0, or 2 on errors)."""
    from rich.console import Console

    from codapo_trl.evaluation.evaluate import evaluate_model

    parser = build_parser()
    args = parser.parse_args(argv)
    # The report goes to standard output as plain text (markdown tables), exactly as written: no markup, no wrapping.
    console = Console(soft_wrap=True, markup=False, highlight=False, emoji=False)
    if not logging.getLogger().handlers:
        configure_logging()

    if args.list_benchmarks:
        console.print(_list_benchmarks())
        return 0
    if args.compare:
        try:
            report = compare_summaries(args.compare, metric=args.metric)
        except (ValueError, FileNotFoundError) as err:
            return _error(str(err))
        console.print(report)
        if args.output_dir is not None:
            args.output_dir.mkdir(parents=True, exist_ok=True)
            (args.output_dir / "comparison.md").write_text(report + "\n", encoding="utf-8")
        return 0
    if not args.model:
        return _error("give a model (alias, path or hub id), or use --compare / --list-benchmarks.")
    if not args.benchmarks:
        return _error("give at least one benchmark with --benchmarks (see --list-benchmarks).")

    system_prompt = None if args.no_system_prompt else args.system_prompt
    benchmarks = []
    try:
        for name in expand_benchmarks(args.benchmarks):
            extra = {}
            key = name.split("=", 1)[0]
            if _is_livecodebench(key) and "=" not in name:
                extra["version"] = args.lcb_version
            benchmarks.append(
                load_benchmark(
                    name,
                    system_prompt=system_prompt,
                    code_system_prompt=args.code_system_prompt or None,
                    limit=args.limit,
                    **extra,
                )
            )
        output_dir = args.output_dir or timestamped_output_dir("eval", args.model, fallback="model")
        result = evaluate_model(
            args.model,
            benchmarks,
            num_samples=args.num_samples,
            temperature=args.temperature,
            top_p=args.top_p,
            max_new_tokens=args.max_new_tokens,
            ks=args.k,
            seed=args.seed,
            limit=args.limit,
            batch_size=args.batch_size,
            system_prompt=system_prompt,
            code_system_prompt=args.code_system_prompt or None,
            output_dir=output_dir,
            backend=args.backend,
            dtype=args.dtype,
            label=args.label,
            code_grading=CodeGradingConfig(
                timeout=args.code_timeout,
                memory_mb=args.code_memory_mb,
                workers=args.code_workers,
                max_tests=args.code_max_tests,
            ),
            progress=not args.no_progress,
            vllm_kwargs=args.vllm_kwargs,
        )
    except (ValueError, FileNotFoundError) as err:
        return _error(str(err))

    summary = result.to_summary()
    console.print(f"\nBackend: {result.backend}")
    console.print(f"\n## Accuracy (avg@{args.num_samples}, %)\n")
    console.print(result.format_table())
    console.print("\n## pass@k (%)\n")
    console.print(format_pass_at_k_table(summary))
    for name, bench in summary["benchmarks"].items():
        if bench["levels"]:
            console.print(f"\n## {bench['display_name']} per level\n")
            console.print(format_level_table(summary, name))
    timing = result.timing
    console.print(
        f"\n{timing['completions']} completions, {timing['generated_tokens']} tokens in {timing['generation_s']:.1f} s "
        f"({timing['tokens_per_s']:.1f} tok/s); grading {timing['grading_s']:.1f} s. Files in {output_dir}/"
    )
    return 0


def _is_livecodebench(name: str) -> bool:
    try:
        return get_benchmark_spec(name).name == "livecodebench"
    except ValueError:
        return False


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
