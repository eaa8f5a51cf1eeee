"""Grading cost: CPU milliseconds per answer of `grade_answers`, the grader behind the maths reward and `codapo-eval`.

Two workloads, graded in the calling process (`configure_grader(num_workers=0)`, so that the CPU time of this process
is the whole cost and no pool start-up is counted) with every cache emptied before each pass:

- `arithmetic`: the real completions of the experiments' arithmetic task (every `samples.jsonl` under
  `experiments/`, `answer_type` `number`), the workload of the demo recipes;
- `math`: MATH-style answers (fractions, radicals, polynomials, tuples, intervals, matrices, restatements, hedges and
  statements after the box), each boxed in a sentence, against their golds under `answer_type` `math`.

    nice -n 10 python benchmarks/grading_throughput.py                         # both workloads, 3 passes
    nice -n 10 python benchmarks/grading_throughput.py --limit 2000 --passes 5
    python benchmarks/grading_throughput.py --workload math --grader math-verify  # plain math-verify, same items

The printed figure per workload is min / median / max over the passes of CPU ms per answer.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import inspect
import json
import logging
import statistics
import time
from pathlib import Path

from codapo_trl.rewards import configure_grader, grade_answers, grading


logger = logging.getLogger("grading_throughput")

ROOT = Path(__file__).resolve().parent.parent

# (gold, answers): MATH-style golds with honest and hostile answers in several forms.
MATH_CASES: list[tuple[str, list[str]]] = [
    ("\\frac{3}{4}", ["\\frac{3}{4}", "0.75", "\\dfrac34", "\\frac{6}{8}", "\\frac{3}{5}"]),
    ("2\\sqrt{2}", ["2\\sqrt{2}", "\\sqrt{8}", "8^{1/2}", "2 \\sqrt 2", "\\sqrt{2}\\cdot 2"]),
    ("x^2+2x+1", ["x^2+2x+1", "1 + 2x + x^2", "(x+1)^2", "(x+1)(x+1)", "x^2+2x+2"]),
    ("(x-1)(x+1)", ["(x+1)(x-1)", "x^2-1", "(x-1)(x+1)", "-1 + x^2", "(x-1)^2"]),
    ("19", ["19", "12+7", "(12+7)", "x = 19", "19\\text{ or 20}", "20 = 19", "19.0"]),
    ("70", ["70", "\\binom{8}{4}", "{8 \\choose 4}", "\\binom{8}{4}\\cdot 1", "71"]),
    ("6", ["6", "\\log_{2} 64", "3!", "2^{3}-2", "\\lfloor 6.5 \\rfloor"]),
    ("(1, -2)", ["(1,-2)", "(1, 3-5)", "(-2, 1)", "\\left(1, -2\\right)"]),
    ("[0, 5)", ["[0,5)", "(0, 5]", "[0, 10/2)"]),
    (
        "\\begin{pmatrix} 1 \\\\ -2 \\end{pmatrix}",
        ["\\begin{pmatrix}1\\\\-2\\end{pmatrix}", "\\begin{pmatrix}1\\\\2\\end{pmatrix}"],
    ),
    ("\\frac{\\sqrt{3}}{2}", ["\\frac{\\sqrt{3}}{2}", "\\frac{\\sqrt{12}}{4}", "\\frac{3}{2\\sqrt{3}}", "0.866"]),
    ("\\frac{x+1}{x-1}", ["\\frac{x+1}{x-1}", "\\frac{x^2+2x+1}{x^2-1}", "\\frac{1+x}{-1+x}"]),
]
AFTER_BOX = ["", " = 19. The answer is 19.", " = 26.", ". The answer is 26.", ". I hope it is correct."]


def arithmetic_workload(limit: int | None) -> list[tuple[str, str, str, str]]:
    items = []
    for path in sorted(glob.glob(str(ROOT / "experiments" / "**" / "samples.jsonl"), recursive=True)):
        with open(path) as handle:
            for line in handle:
                row = json.loads(line)
                for sample in row["samples"]:
                    items.append((sample["completion"], row["gold"], row["answer_type"], row["question"]))
    return items[:limit] if limit else items


def math_workload() -> list[tuple[str, str, str, str]]:
    items = []
    for gold, answers in MATH_CASES:
        for answer in answers:
            for tail in AFTER_BOX:
                items.append((f"We work it out. So the answer is $\\boxed{{{answer}}}${tail}", gold, "math", "Q"))
    return items


def _clear_caches() -> None:
    """Empty every cache of the grader's modules (those of this version and of earlier ones that exist)."""
    import importlib

    grading._cache.clear()
    grading._gold_cache.clear()
    for module_name in ("grading", "form_reading", "final_form", "computation", "equality", "judging"):
        try:
            module = importlib.import_module(f"codapo_trl.rewards.{module_name}")
        except ImportError:
            continue
        for name in dir(module):
            function = getattr(module, name)
            if callable(getattr(function, "cache_clear", None)) and name != "_latex_extraction_config":
                function.cache_clear()


def one_pass_math_verify(items: list[tuple[str, str, str, str]]) -> float:
    """CPU seconds for plain math-verify on the same items: `parse` of the gold (in a box) and of the completion,
    `verify`, default settings but its own signal timeouts off (this process is the whole cost)."""
    from math_verify import parse, verify

    start = time.process_time()
    for completion, gold, _, _ in items:
        with contextlib.suppress(Exception):  # a failure is a verdict of 0, and costs what it cost
            verify(
                parse("\\boxed{" + gold + "}", parsing_timeout=None),
                parse(completion, parsing_timeout=None),
                timeout_seconds=None,
            )
    return time.process_time() - start


def one_pass(items: list[tuple[str, str, str, str]]) -> float:
    """CPU seconds to grade `items` once, caches emptied first."""
    _clear_caches()
    start = time.process_time()
    columns = [[i[0] for i in items], [i[1] for i in items], [i[2] for i in items]]
    if "questions" in inspect.signature(grade_answers).parameters:  # before issue 25, and since issue 60
        grade_answers(*columns, questions=[i[3] for i in items])
    else:
        grade_answers(*columns)
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", choices=["arithmetic", "math", "both"], default="both")
    parser.add_argument("--passes", type=int, default=3, help="timed passes per workload")
    parser.add_argument("--limit", type=int, default=None, help="at most this many arithmetic completions")
    parser.add_argument(
        "--grader",
        choices=["codapo", "math-verify"],
        default="codapo",
        help="time this project's grader (`grade_answers`) or plain math-verify (`parse` and `verify`) on the same items",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    configure_grader(num_workers=0)
    grade_answers(["\\boxed{1}"], ["1"])  # imports math-verify and SymPy outside the timed passes
    workloads = {}
    if args.workload in ("arithmetic", "both"):
        workloads["arithmetic"] = arithmetic_workload(args.limit)
    if args.workload in ("math", "both"):
        workloads["math"] = math_workload()
    for name, items in workloads.items():
        timed = one_pass if args.grader == "codapo" else one_pass_math_verify
        per_answer_ms = [1000 * timed(items) / len(items) for _ in range(args.passes)]
        logger.info(
            "%-10s %5d answers: CPU ms per answer min %.2f / median %.2f / max %.2f",
            name,
            len(items),
            min(per_answer_ms),
            statistics.median(per_answer_ms),
            max(per_answer_ms),
        )


if __name__ == "__main__":
    main()
