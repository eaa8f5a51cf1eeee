"""`evaluate_model`: sample, grade and score a model on benchmarks; the results and the files they are saved to.

Output files (under `output_dir`):

- `samples.jsonl`: one line per question: benchmark, index, id, level, question, gold answer (the tests' JSON for
  code, when under 64 KiB), answer type, and every sample with its completion, extracted answer (or code), parsed
  form, correctness, score, grading reason, token count and finish reason. Enough to re-grade and audit a run.
- `summary.json`: configuration, backend, versions, per-benchmark and per-level metrics, the average over
  benchmarks, counts (ungraded questions, truncated and unanswered samples) and timing.
- `results.md`: the paper-style table (benchmarks as columns, then Average), the pass@k table and per-level tables.

Length: about 640 lines: the evaluation loop, the records it fills and the files it writes share one schema and are
kept together so that what is saved can be checked against what is computed in one reading.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import logging
import math
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codapo_trl.data import SYSTEM_PROMPT
from codapo_trl.data.code import CODE_SYSTEM_PROMPT
from codapo_trl.evaluation.benchmarks import Benchmark, load_benchmark
from codapo_trl.evaluation.code import CodeGradingConfig, grade_code
from codapo_trl.evaluation.generation import (
    Completion,
    GenerationRequest,
    Generator,
    Progress,
    SamplingConfig,
    build_generator,
)
from codapo_trl.evaluation.metrics import (
    AVG_KEY,
    QuestionOutcome,
    average_over_benchmarks,
    default_ks,
    format_level_table,
    format_pass_at_k_table,
    format_results_table,
    level_sort_key,
    summarise_outcomes,
)
from codapo_trl.versions import package_versions


if TYPE_CHECKING:
    from codapo_trl.rewards import GradeResult


logger = logging.getLogger(__name__)

__all__ = [
    "BenchmarkResult",
    "EvaluationResult",
    "QuestionRecord",
    "SampleRecord",
    "evaluate_model",
    "grade_math_samples",
]

SCHEMA_VERSION = 1
SAMPLES_FILE, SUMMARY_FILE, TABLE_FILE = "samples.jsonl", "summary.json", "results.md"
_MAX_STORED_TESTS_CHARS = 64 * 1024


@dataclass
class SampleRecord:
    """One graded sample.

    Args:
        sample (`int`): sample index within its question.
        completion (`str`): the model output.
        extracted (`str` or `None`): the anchored final answer (maths) or the program that ran (code).
        parsed (`str` or `None`): how the grader read the answer (maths), when it got that far.
        correct (`bool` or `None`): the verdict; `None` when ungraded (unusable gold answer or tests, sandbox error).
        score (`float` or `None`): 1/0 for maths; the fraction of test cases passed for code.
        reason (`str` or `None`): why a sample is not an ordinary right-or-wrong verdict, or the test summary.
        num_tokens (`int`): generated tokens (the stop token included).
        finish_reason (`str`): `"stop"` or `"length"` (truncated at `max_new_tokens`).
    """

    sample: int
    completion: str
    extracted: str | None
    parsed: str | None
    correct: bool | None
    score: float | None
    reason: str | None
    num_tokens: int
    finish_reason: str


@dataclass
class QuestionRecord:
    """A question with its samples."""

    benchmark: str
    index: int
    item_id: str
    level: int | str | None
    question: str
    gold: str | None
    answer_type: str
    samples: list[SampleRecord] = field(default_factory=list)

    @property
    def num_correct(self) -> int:
        return sum(s.correct is True for s in self.samples)

    @property
    def graded(self) -> bool:
        """Every sample has a verdict (otherwise the question is left out of the metrics)."""
        return all(s.correct is not None for s in self.samples)

    def to_json(self, gold_hash: str | None = None) -> dict[str, Any]:
        record = {
            "benchmark": self.benchmark,
            "index": self.index,
            "id": self.item_id,
            "level": self.level,
            "question": self.question,
            "gold": self.gold,
            "answer_type": self.answer_type,
            "num_samples": len(self.samples),
            "num_correct": self.num_correct,
            "samples": [asdict(s) for s in self.samples],
        }
        if gold_hash is not None:
            record["gold_sha256"] = gold_hash
        return record


@dataclass
class BenchmarkResult:
    """Metrics and records of one benchmark.

    Args:
        name, display_name, kind, source: from the [`Benchmark`].
        metrics (`dict[str, float]`): `"avg@n"` and `"pass@k"` over the graded questions.
        levels (`dict[str, dict]`): per level: `{"num_questions": ..., "metrics": {...}}` (empty without levels).
        questions (`list[QuestionRecord]`): every question with its samples.
    """

    name: str
    display_name: str
    kind: str
    source: str
    metrics: dict[str, float]
    levels: dict[str, dict[str, Any]]
    questions: list[QuestionRecord]

    @property
    def num_questions(self) -> int:
        """Graded questions (the ones the metrics average over)."""
        return sum(q.graded for q in self.questions)

    @property
    def accuracy(self) -> float:
        """avg@n: mean accuracy over all samples of the graded questions."""
        return self.metrics[AVG_KEY]

    def _samples(self) -> list[SampleRecord]:
        return [s for q in self.questions for s in q.samples]

    def to_summary(self) -> dict[str, Any]:
        samples = self._samples()
        count = max(len(samples), 1)
        return {
            "display_name": self.display_name,
            "kind": self.kind,
            "source": self.source,
            "num_questions": self.num_questions,
            "num_ungraded_questions": len(self.questions) - self.num_questions,
            "num_samples": len(samples),
            "metrics": self.metrics,
            "levels": self.levels,
            "mean_tokens": sum(s.num_tokens for s in samples) / count,
            "truncated_frac": sum(s.finish_reason == "length" for s in samples) / count,
            "no_answer_frac": sum(s.extracted is None for s in samples) / count,
        }


@dataclass
class EvaluationResult:
    """What [`evaluate_model`] returns.

    Args:
        model (`str`): the model as given (alias, path, hub id, or the loaded model's `name_or_path`).
        label (`str`): row label in tables (defaults to `model`).
        backend (`str`): `"transformers"`, `"vllm"` or the custom generator's name, with details.
        config (`dict`): sampling and evaluation settings.
        benchmarks (`dict[str, BenchmarkResult]`): per benchmark, in the order given.
        average (`dict[str, float]`): each metric averaged over benchmarks (the tables' Average column).
        timing (`dict[str, float]`): seconds per phase, generated tokens, tokens/s and completions/s.
    """

    model: str
    label: str
    backend: str
    config: dict[str, Any]
    benchmarks: dict[str, BenchmarkResult]
    average: dict[str, float]
    timing: dict[str, float]
    created: str = field(default_factory=lambda: _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"))

    @property
    def samples(self) -> Iterator[tuple[QuestionRecord, SampleRecord]]:
        """Every `(question, sample)` pair of every benchmark."""
        for bench in self.benchmarks.values():
            for question in bench.questions:
                for sample in question.samples:
                    yield question, sample

    def accuracy(self, benchmark: str | None = None) -> float:
        """avg@n of one benchmark, or the average over benchmarks."""
        return self.benchmarks[benchmark].accuracy if benchmark else self.average[AVG_KEY]

    def to_summary(self) -> dict[str, Any]:
        """The JSON-able summary written to `summary.json` (also what the table formatters read)."""
        return {
            "schema_version": SCHEMA_VERSION,
            "model": self.model,
            "label": self.label,
            "backend": self.backend,
            "config": self.config,
            "benchmarks": {name: bench.to_summary() for name, bench in self.benchmarks.items()},
            "average": self.average,
            "timing": self.timing,
            "versions": package_versions(),
            "grader": _grader_rule(),
            "created": self.created,
        }

    def format_table(self, metric: str = AVG_KEY) -> str:
        """The paper-style markdown table (benchmarks as columns, then Average)."""
        return format_results_table(self.to_summary(), metric)

    def to_markdown(self) -> str:
        """The content of `results.md`."""
        summary = self.to_summary()
        config = self.config
        parts = [
            f"# Evaluation of {self.model}",
            "",
            f"Backend: {self.backend}. {config['num_samples']} samples per question, temperature "
            f"{config['temperature']}, top-p {config['top_p']}, at most {config['max_new_tokens']} new tokens, "
            f"seed {config['seed']}"
            + (
                f", first {config['limit']} questions per benchmark (in its order, not balanced across levels)"
                if config["limit"]
                else ""
            )
            + ".",
            "",
            f"## Accuracy (avg@{config['num_samples']}, %)",
            "",
            format_results_table(summary),
            "",
            "## pass@k (%)",
            "",
            format_pass_at_k_table(summary),
        ]
        for name, bench in summary["benchmarks"].items():
            if bench["levels"]:
                parts += ["", f"## {bench['display_name']} per level", "", format_level_table(summary, name)]
        return "\n".join(parts) + "\n"

    def save(self, output_dir: str | os.PathLike) -> dict[str, Path]:
        """Write `samples.jsonl`, `summary.json` and `results.md` into `output_dir` (created if needed)."""
        out = Path(output_dir)
        out.mkdir(parents=True, exist_ok=True)
        paths = {"samples": out / SAMPLES_FILE, "summary": out / SUMMARY_FILE, "table": out / TABLE_FILE}
        with paths["samples"].open("w", encoding="utf-8") as f:
            for bench in self.benchmarks.values():
                for question in bench.questions:
                    gold_hash = None
                    if question.answer_type == "code" and question.gold is not None:
                        gold_hash = hashlib.sha256(question.gold.encode("utf-8")).hexdigest()
                        if len(question.gold) > _MAX_STORED_TESTS_CHARS:
                            question = QuestionRecord(**{**question.__dict__, "gold": None})
                    f.write(json.dumps(question.to_json(gold_hash), ensure_ascii=False) + "\n")
        paths["summary"].write_text(json.dumps(self.to_summary(), indent=2, ensure_ascii=False) + "\n")
        paths["table"].write_text(self.to_markdown(), encoding="utf-8")
        logger.info("Wrote %s", ", ".join(str(p) for p in paths.values()))
        return paths


# ---------------------------------------------------------------------------------------------------------------------
# Grading and scoring
# ---------------------------------------------------------------------------------------------------------------------


def _grader_rule() -> dict[str, Any]:
    """The grader settings that decide a verdict (`read_after_box`, `timeout`), for `summary.json`."""
    from codapo_trl.rewards import grader_settings

    settings = grader_settings()
    return {"read_after_box": bool(settings["read_after_box"]), "timeout": settings["timeout"]}


def grade_math_samples(
    completions: Sequence[Sequence[Completion]],
    golds: Sequence[str | None],
    answer_types: Sequence[str | None],
) -> list[list[GradeResult]]:
    """Grade the samples of maths questions in one [`codapo_trl.rewards.grade_answers`] call (one pass through the
    worker pool), each against its question's gold answer and answer type (an answer is paid only in its final form,
    judged on its own parse tree, never on the question's wording). The evaluation's maths grading, also used by the
    analysis.

    Args:
        completions (`Sequence[Sequence[Completion]]`): per question, its samples.
        golds, answer_types (`Sequence[str | None]`): per question, its gold answer and answer type.

    Returns:
        `list[list[GradeResult]]`: per question, its samples' results, in order (`correct=None`: ungraded).
    """
    from codapo_trl.rewards import grade_answers

    if not len(completions) == len(golds) == len(answer_types):
        raise ValueError(
            f"Got {len(completions)} questions' samples but {len(golds)} gold answers and {len(answer_types)} answer "
            "types."
        )
    texts, item_golds, item_types = [], [], []
    for samples, gold, answer_type in zip(completions, golds, answer_types):
        for completion in samples:
            texts.append(completion.text)
            item_golds.append(gold)
            item_types.append(answer_type)
    flat = grade_answers(texts, item_golds, item_types) if texts else []
    results, offset = [], 0
    for samples in completions:
        results.append(flat[offset : offset + len(samples)])
        offset += len(samples)
    return results


def _grade_math(benchmarks: Sequence[Benchmark], completions: Mapping[str, list[list[Completion]]]) -> dict:
    """Grade every maths sample of all benchmarks in one `grade_answers` call (one pass through the worker pool)."""
    items = [(bench, item) for bench in benchmarks for item in bench.items]
    samples = [samples for bench in benchmarks for samples in completions[bench.name]]
    results = grade_math_samples(samples, [i.gold for _, i in items], [i.answer_type for _, i in items])
    return {
        (bench.name, item.index, s): (r.predicted, r.predicted_parsed, r.correct, r.reward, r.reason)
        for (bench, item), item_results in zip(items, results)
        for s, r in enumerate(item_results)
    }


def _grade_code(
    bench: Benchmark, completions: list[list[Completion]], config: CodeGradingConfig, sandbox: Any
) -> dict:
    texts, tests, owners = [], [], []
    for item, samples in zip(bench.items, completions):
        for s, completion in enumerate(samples):
            texts.append(completion.text)
            tests.append(item.gold)
            owners.append((bench.name, item.index, s))
    verdicts = grade_code(texts, tests, prelude=bench.code_prelude, config=config, sandbox=sandbox)
    return {owner: (v.code, None, v.correct, v.score, v.reason) for owner, v in zip(owners, verdicts)}


def _score(bench: Benchmark, completions: list[list[Completion]], verdicts: Mapping, ks: Sequence[int]):
    questions = []
    for item, samples in zip(bench.items, completions):
        record = QuestionRecord(
            bench.name, item.index, item.item_id, item.level, item.question, item.gold, item.answer_type
        )
        for s, completion in enumerate(samples):
            extracted, parsed, correct, score, reason = verdicts[(bench.name, item.index, s)]
            record.samples.append(
                SampleRecord(
                    sample=s,
                    completion=completion.text,
                    extracted=extracted,
                    parsed=parsed,
                    correct=correct,
                    score=score,
                    reason=reason,
                    num_tokens=completion.num_tokens,
                    finish_reason=completion.finish_reason,
                )
            )
        questions.append(record)
    graded = [q for q in questions if q.graded]
    if len(graded) < len(questions):
        logger.warning(
            "%s: %d of %d questions have ungraded samples (unusable gold answer or tests, sandbox error) and are left "
            "out of the metrics; see their `reason` in samples.jsonl.",
            bench.name,
            len(questions) - len(graded),
            len(questions),
        )
    outcomes = [QuestionOutcome(len(q.samples), q.num_correct, q.level) for q in graded]
    metrics = summarise_outcomes(outcomes, ks)
    levels: dict[str, dict[str, Any]] = {}
    if any(o.level is not None for o in outcomes):
        by_level: dict[str, list[QuestionOutcome]] = {}
        for outcome in outcomes:
            by_level.setdefault(str(outcome.level), []).append(outcome)
        for level in sorted(by_level, key=level_sort_key):
            group = by_level[level]
            levels[level] = {"num_questions": len(group), "metrics": summarise_outcomes(group, ks)}
    return BenchmarkResult(bench.name, bench.display_name, bench.kind, bench.source, metrics, levels, questions)


# ---------------------------------------------------------------------------------------------------------------------
# The API
# ---------------------------------------------------------------------------------------------------------------------


def _resolve_ks(ks: Sequence[int] | None, n: int) -> list[int]:
    if ks is None:
        return default_ks(n)
    if any(k < 1 for k in ks):
        raise ValueError(f"Every k must be >= 1, got {list(ks)}")
    kept = sorted({k for k in ks if k <= n})
    dropped = sorted({k for k in ks if k > n})
    if dropped:
        logger.warning("pass@k needs k <= num_samples=%d: leaving out k = %s.", n, dropped)
    if not kept:
        raise ValueError(f"No k in {list(ks)} is <= num_samples={n}.")
    return kept


def evaluate_model(
    model_name_or_path: Any,
    benchmarks: Sequence[str | os.PathLike | Benchmark] | str,
    *,
    num_samples: int = 32,
    temperature: float = 0.6,
    top_p: float = 1.0,
    max_new_tokens: int = 3072,
    ks: Sequence[int] | None = None,
    seed: int = 0,
    limit: int | None = None,
    batch_size: int = 64,
    system_prompt: str | None = SYSTEM_PROMPT,
    code_system_prompt: str | None = CODE_SYSTEM_PROMPT,
    output_dir: str | os.PathLike | None = None,
    backend: str = "auto",
    tokenizer: Any = None,
    generator: Generator | None = None,
    dtype: str = "auto",
    label: str | None = None,
    code_grading: CodeGradingConfig | None = None,
    sandbox: Any = None,
    progress: bool = True,
    vllm_kwargs: Mapping[str, Any] | None = None,
) -> EvaluationResult:
    """Sample `num_samples` completions per question, grade them, and compute avg@n and pass@k per benchmark and level.

    Args:
        model_name_or_path (`str`, `os.PathLike` or `PreTrainedModel`): a model alias (e.g.
            `"embedded/SmolLM2-135M-Instruct"`), local checkpoint or hub id; or a loaded causal LM (then pass
            `tokenizer`).
        benchmarks (`str` or sequence): benchmark names, `NAME=PATH`, local files or hub ids (see
            [`load_benchmark`]), or already loaded [`Benchmark`] objects.
        num_samples (`int`, *optional*, defaults to 32): samples per question (`n`).
        temperature (`float`, *optional*, defaults to 0.6): sampling temperature.
        top_p (`float`, *optional*, defaults to 1.0): nucleus sampling mass.
        max_new_tokens (`int`, *optional*, defaults to 3072): longest completion.
        ks (`Sequence[int]`, *optional*): the k of pass@k; default: powers of two up to `n`. Values above `n` are
            dropped with a warning.
        seed (`int`, *optional*, defaults to 0): seed of the samples (see [`codapo_trl.evaluation.generation`] for
            what is reproducible).
        limit (`int`, *optional*): first `limit` questions of each benchmark loaded here, in the benchmark's own order:
            not balanced across difficulty levels (the levels kept are logged, and shown in the report's table).
        batch_size (`int`, *optional*, defaults to 64): sequences per `generate` call (transformers backend).
        system_prompt (`str` or `None`, *optional*, defaults to the paper's prompt): system turn of maths prompts.
        code_system_prompt (`str` or `None`, *optional*): system turn of code prompts.
        output_dir (`str` or `os.PathLike`, *optional*): write `samples.jsonl`, `summary.json` and `results.md` here.
        backend (`str`, *optional*, defaults to `"auto"`): `"auto"` (vLLM when importable with a GPU, else
            transformers), `"transformers"` or `"vllm"`.
        tokenizer (*optional*): the tokenizer, with a loaded model (or to override the checkpoint's).
        generator ([`Generator`], *optional*): a ready backend; `model_name_or_path` is then only a label.
        dtype (`str`, *optional*, defaults to `"auto"`): model dtype (`"float32"`, `"bfloat16"`, ...).
        label (`str`, *optional*): row label in tables; defaults to the model name.
        code_grading ([`CodeGradingConfig`], *optional*): sandbox limits for code benchmarks.
        sandbox ([`codapo_trl.sandbox.Sandbox`], *optional*): run code there instead of a shared sandbox.
        progress (`bool`, *optional*, defaults to `True`): show a progress bar.
        vllm_kwargs (`Mapping`, *optional*): extra `vllm.LLM` arguments.

    Returns:
        [`EvaluationResult`]: per-benchmark and per-level metrics, the average over benchmarks, every sample.

    Example:

    ```python
    >>> result = evaluate_model("embedded/SmolLM2-135M-Instruct", ["arithmetic"], num_samples=4, max_new_tokens=64)
    >>> print(format_level_table(result))  # doctest: +SKIP
    ```
    """
    start = time.perf_counter()
    config = SamplingConfig(num_samples, temperature, top_p, max_new_tokens, seed)
    ks = _resolve_ks(ks, num_samples)
    if isinstance(benchmarks, (str, os.PathLike)):
        benchmarks = [benchmarks]
    if not benchmarks:
        raise ValueError("No benchmark to evaluate on.")
    loaded = [
        b
        if isinstance(b, Benchmark)
        else load_benchmark(b, system_prompt=system_prompt, code_system_prompt=code_system_prompt, limit=limit)
        for b in benchmarks
    ]
    if limit is not None:
        for benchmark in loaded:
            _say_limit_is_unbalanced(benchmark, limit)
    names = [b.name for b in loaded]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"Benchmark(s) {duplicates} given more than once.")
    load_seconds = time.perf_counter() - start

    model_name = model_name_or_path if isinstance(model_name_or_path, str) else None
    if model_name is None and isinstance(model_name_or_path, os.PathLike):
        model_name = os.fspath(model_name_or_path)
    if model_name is None:
        model_name = getattr(model_name_or_path, "name_or_path", None) or type(model_name_or_path).__name__
    if generator is None:
        from codapo_trl.models import resolve_model_name_or_path

        model_arg = model_name if isinstance(model_name_or_path, (str, os.PathLike)) else model_name_or_path
        generator = build_generator(
            model_arg,
            backend=backend,
            tokenizer=tokenizer,
            batch_size=batch_size,
            dtype=dtype,
            seed=seed,
            vllm_kwargs=vllm_kwargs,
            resolve=resolve_model_name_or_path,
        )
    backend_name = generator.describe() if hasattr(generator, "describe") else str(generator.backend)
    logger.info("Backend: %s", backend_name)
    model_seconds = time.perf_counter() - start - load_seconds

    requests = [GenerationRequest(f"{b.name}/{item.index}", item.prompt) for b in loaded for item in b.items]
    logger.info(
        "Sampling %d x %d completions on %s",
        len(requests),
        num_samples,
        ", ".join(f"{b.name} ({len(b)})" for b in loaded),
    )
    bar = Progress(len(requests), enabled=progress)
    tic = time.perf_counter()
    try:
        flat = generator.generate(requests, config, bar)
    finally:
        bar.close()
    generation_seconds = time.perf_counter() - tic
    if len(flat) != len(requests) or any(len(samples) != num_samples for samples in flat):
        raise RuntimeError(f"The {generator.backend} backend returned the wrong number of completions.")
    completions: dict[str, list[list[Completion]]] = {}
    offset = 0
    for bench in loaded:
        completions[bench.name] = flat[offset : offset + len(bench)]
        offset += len(bench)

    tic = time.perf_counter()
    verdicts = _grade_math([b for b in loaded if b.kind == "math"], completions)
    for bench in loaded:
        if bench.kind == "code":
            verdicts.update(_grade_code(bench, completions[bench.name], code_grading or CodeGradingConfig(), sandbox))
    grading_seconds = time.perf_counter() - tic

    results = {b.name: _score(b, completions[b.name], verdicts, ks) for b in loaded}
    average = average_over_benchmarks({name: {"metrics": r.metrics} for name, r in results.items()})
    tokens = sum(c.num_tokens for samples in flat for c in samples)
    num_completions = len(requests) * num_samples
    timing = {
        "load_benchmarks_s": round(load_seconds, 3),
        "load_model_s": round(model_seconds, 3),
        "generation_s": round(generation_seconds, 3),
        "grading_s": round(grading_seconds, 3),
        "total_s": round(time.perf_counter() - start, 3),
        "generated_tokens": tokens,
        "completions": num_completions,
        "tokens_per_s": round(tokens / generation_seconds, 2) if generation_seconds > 0 else math.nan,
        "completions_per_s": round(num_completions / generation_seconds, 3) if generation_seconds > 0 else math.nan,
    }
    result = EvaluationResult(
        model=model_name,
        label=label or model_name,
        backend=backend_name,
        config={
            "num_samples": num_samples,
            "temperature": temperature,
            "top_p": top_p,
            "max_new_tokens": max_new_tokens,
            "ks": ks,
            "seed": seed,
            "limit": limit,
            "batch_size": batch_size,
            "system_prompt": system_prompt,
            "code_system_prompt": code_system_prompt,
            "dtype": dtype,
            "benchmarks": {b.name: b.source for b in loaded},
            "code_grading": asdict(code_grading or CodeGradingConfig()),
        },
        benchmarks=results,
        average=average,
        timing=timing,
    )
    if output_dir is not None:
        result.save(output_dir)
    return result


def _say_limit_is_unbalanced(benchmark: Benchmark, limit: int) -> None:
    """Log which difficulty levels the first `limit` questions of a leveled benchmark kept: `--limit` takes them in
    the benchmark's own order, so a sorted file may keep a single level."""
    if not benchmark.has_levels:
        return
    counts: dict[str, int] = {}
    for item in benchmark.items:
        counts[str(item.level)] = counts.get(str(item.level), 0) + 1
    logger.warning(
        "limit=%d keeps the first %d questions of %s in its own order, not balanced across levels: %s.",
        limit,
        len(benchmark.items),
        benchmark.name,
        ", ".join(f"level {level}: {n}" for level, n in sorted(counts.items())),
    )
