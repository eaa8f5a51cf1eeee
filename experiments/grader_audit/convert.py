"""Convert public MATH-500 evaluation outputs into one normalised jsonl for the grader audit (issue 32).

Two public repositories committed the outputs of their own MATH-500 evaluations (every completion written by a model,
none by us); `SOURCES.md` next to this script names them, their commits and licences, and how to fetch the files:

- `labrem/neus2026-labre`: Markdown reports of its "baseline" condition (the problem, then "Please reason step by
  step, and put your final answer within \\boxed{}.", no system prompt), one per model and decoding mode, with the
  full response to each of the 500 problems (`--- LLM Response ---`); models served by Ollama: `gemma2:2b`,
  `gemma2:9b`, `johnnyboy/qwen2.5-math-7b:latest`; `greedy`, and `best-of-n` (the report keeps the last of up to 5
  samples at temperature 0.6);
- `XinghanLi66/rl-sft`: jsonl files of the Qwen2.5-Math evaluation harness (`question`, `answer`, `code` = the
  completions, `score`), four runs of Qwen2.5-Math-1.5B and -7B (greedy, at most 3072 new tokens).

The raw files are kept outside the repository (default `outputs/grader_audit/raw/<owner+repo>/<path>`); nothing from them
is committed here.

    python experiments/grader_audit/convert.py                      # outputs/grader_audit/raw -> outputs/grader_audit/normalised.jsonl
    python experiments/grader_audit/convert.py --raw DIR --out FILE

Each output line has:

- `id`: `<run>/<problem_id>`, unique in the corpus;
- `source`: `<owner/repo>@<commit>:<path>` of the file the completion came from;
- `model`: what wrote the completion (the run's model, decoding and prompt, as far as the source records them);
- `problem_id`: MATH's `unique_id` (`test/precalculus/807.json`), from the harness's copy of MATH-500 (both sources
  keep MATH-500's order; the problem text is checked against it);
- `problem`, `gold` (MATH's final answer), `gold_solution` (MATH's full solution);
- `completion`: the model's text exactly as the source saved it (some rl-sft runs put the opening word "To" in the
  prompt, so their completions start mid-sentence);
- `source_verdict`: the source's own grader's verdict, kept only as a pointer (the audit never uses it as truth).
"""

from __future__ import annotations

import argparse
import json
import logging
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path


logger = logging.getLogger("grader_audit.convert")

RL_SFT = "XinghanLi66/rl-sft"
RL_SFT_COMMIT = "c981ccd10c5db8fd32c7c6b21680ff0f272bb49c"
RL_SFT_RESULTS = "one-shot-em/results"
RL_SFT_FILE = "math500/test_qwen25-math-cot_-1_seed0_t0.0_s0_e-1.jsonl"
MATH500_COPY = "one-shot-em/Qwen2.5-Eval/evaluation/data/math500/test.jsonl"

LABREM = "labrem/neus2026-labre"
LABREM_COMMIT = "7c1b7a33412bda5983b9b63511bb02dd96c9a02d"


@dataclass(frozen=True)
class Run:
    """One evaluation run: its name in the corpus, the file it is read from (relative to its repository), and the
    model, decoding and prompt that produced it."""

    name: str
    path: str
    model: str


# rl-sft runs, with the model as the source's own scripts name it (`one-shot-em/Qwen2.5-Eval/evaluation/sh/`); all
# greedy, at most 3072 new tokens, a system prompt asking for the answer in \boxed{}.
RL_SFT_RUNS = (
    Run("rl-sft/1.5B-eval-to", f"{RL_SFT_RESULTS}/1.5B-eval-to/{RL_SFT_FILE}", "Qwen2.5-Math-1.5B, greedy"),
    Run("rl-sft/7B-eval-to", f"{RL_SFT_RESULTS}/7B-eval-to/{RL_SFT_FILE}", "Qwen2.5-Math-7B, greedy"),
    Run(
        "rl-sft/7B-eval-pi1-modify",
        f"{RL_SFT_RESULTS}/7B-eval-pi1-modify/{RL_SFT_FILE}",
        "Qwen2.5-Math-7B, greedy, contest prompt with one worked example",
    ),
    Run(
        "rl-sft/7B-eval-offRLVR-20",
        f"{RL_SFT_RESULTS}/7B-eval-offRLVR-20/{RL_SFT_FILE}",
        "Qwen2.5-Math-7B after 20 steps of offline GRPO, greedy",
    ),
)

LABREM_RUNS = (
    Run("labrem/gemma2-2b-greedy", "results/experiment_gemma2-2b_baseline_greedy_260204_1607.md", "gemma2:2b, greedy"),
    Run(
        "labrem/gemma2-2b-best-of-n",
        "results/experiment_gemma2-2b_baseline_best-of-n_260204_1918.md",
        "gemma2:2b, best-of-n (T=0.6)",
    ),
    Run("labrem/gemma2-9b-greedy", "results/experiment_gemma2-9b_baseline_greedy_260206_1156.md", "gemma2:9b, greedy"),
    Run(
        "labrem/gemma2-9b-best-of-n",
        "results/experiment_gemma2-9b_baseline_best-of-n_260207_1151.md",
        "gemma2:9b, best-of-n (T=0.6)",
    ),
    Run(
        "labrem/qwen2.5-math-7b-greedy",
        "results/experiment_qwen2.5-math-7b_baseline_greedy_260205_0001.md",
        "qwen2.5-math-7b (Ollama), greedy",
    ),
    Run(
        "labrem/qwen2.5-math-7b-best-of-n",
        "results/experiment_qwen2.5-math-7b_baseline_best-of-n_260205_0841.md",
        "qwen2.5-math-7b (Ollama), best-of-n (T=0.6)",
    ),
)


def read_jsonl(path: Path) -> list[dict]:
    """Every JSON object of a jsonl file, with a clear error naming the file and line of a bad one."""
    rows = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{number} is not JSON ({exc}); fetch the file again") from exc
    return rows


def math500(raw: Path) -> list[dict]:
    """MATH-500 in its usual order (problem, answer, solution, unique_id), from the harness copy in rl-sft."""
    path = raw / RL_SFT.replace("/", "+") / MATH500_COPY
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing; see experiments/grader_audit/SOURCES.md to fetch it")
    rows = read_jsonl(path)
    if len(rows) != 500 or len({row["unique_id"] for row in rows}) != 500:
        raise ValueError(f"{path} is not MATH-500 (500 distinct problems); fetch it again")
    return rows


def record(run: Run, repo: str, commit: str, problem: dict, completion: str, verdict: bool | None) -> dict:
    return {
        "id": f"{run.name}/{problem['unique_id']}",
        "source": f"{repo}@{commit}:{run.path}",
        "model": run.model,
        "problem_id": problem["unique_id"],
        "problem": problem["problem"],
        "gold": problem["answer"],
        "gold_solution": problem["solution"],
        "completion": completion,
        "source_verdict": verdict,
    }


def same_problem(a: str, b: str) -> bool:
    return " ".join(a.split()) == " ".join(b.split())


def convert_rl_sft(run: Run, rows: list[dict], problems: list[dict]) -> list[dict]:
    """One rl-sft harness file: one record per completion, the harness's row index being MATH-500's."""
    records = []
    for row in rows:
        problem = problems[row["idx"]]
        if not same_problem(row["question"], problem["problem"]) or row["answer"] != problem["answer"]:
            raise ValueError(f"{run.name}: row {row['idx']} is not MATH-500 problem {problem['unique_id']}")
        (completion,) = row["code"]  # greedy: one completion per problem
        records.append(record(run, RL_SFT, RL_SFT_COMMIT, problem, completion, (row.get("score") or [None])[0]))
    return records


_LABREM_ITEM = re.compile(
    r"^## Problem math_(?P<index>\d+)\n.*?^  Problem Statement: (?P<problem>.*?)\n  Ground Truth: (?P<gold>.*?)\n\n"
    r"## Response math_(?P=index)\n.*?^  Is Correct: (?P<correct>True|False)\n"
    r".*?^--- LLM Response ---\n(?P<response>.*?)\n--- End LLM Response ---$",
    re.DOTALL | re.MULTILINE,
)


def convert_labrem(run: Run, text: str, problems: list[dict]) -> list[dict]:
    """One labrem report: the response to each of the 500 problems, matched to MATH-500 by index and text."""
    records = []
    for match in _LABREM_ITEM.finditer(text):
        problem = problems[int(match["index"])]
        if not same_problem(match["problem"], problem["problem"]) or match["gold"].strip() != problem["answer"]:
            raise ValueError(f"{run.name}: item {match['index']} is not MATH-500 problem {problem['unique_id']}")
        records.append(record(run, LABREM, LABREM_COMMIT, problem, match["response"], match["correct"] == "True"))
    if len(records) != 500:
        raise ValueError(f"{run.name}: read {len(records)} responses, expected 500; the report format changed?")
    return records


def convert(raw: Path) -> list[dict]:
    """Every run of both sources under `raw/<owner+repo>/`, in order."""
    problems = math500(raw)
    records = []
    for repo, runs in ((LABREM, LABREM_RUNS), (RL_SFT, RL_SFT_RUNS)):
        for run in runs:
            path = raw / repo.replace("/", "+") / run.path
            if not path.exists():
                raise FileNotFoundError(f"{path} is missing; see experiments/grader_audit/SOURCES.md to fetch it")
            if repo == LABREM:
                records.extend(convert_labrem(run, path.read_text(encoding="utf-8"), problems))
            else:
                records.extend(convert_rl_sft(run, read_jsonl(path), problems))
    repeated = [key for key, count in Counter(r["id"] for r in records).items() if count > 1]
    if repeated:
        raise ValueError(f"Repeated ids in the corpus: {repeated[:5]}")
    return records


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--raw", type=Path, default=Path("outputs/grader_audit/raw"), help="Folder holding the raw sources."
    )
    parser.add_argument(
        "--out", type=Path, default=Path("outputs/grader_audit/normalised.jsonl"), help="Normalised jsonl to write."
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    records = convert(args.raw)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    for model, count in Counter(record["model"] for record in records).items():
        logger.info("%5d  %s", count, model)
    logger.info("%d completions on %d problems -> %s", len(records), len({r["problem_id"] for r in records}), args.out)


if __name__ == "__main__":
    main()
