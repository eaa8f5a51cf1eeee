"""The run: [`analyze_checkpoints`], the paper's Appendix B.2 protocol on your own checkpoints.

For a fixed, seeded set of questions per difficulty level ([`codapo_trl.analysis.questions`]), every checkpoint (in
step order, optionally with the base model as step 0; [`codapo_trl.analysis.checkpoints`]) samples `M` trajectories
per question with evaluation's generators ([`codapo_trl.evaluation.generation`]: the same per-sample random streams,
so sample `i` of a question draws the same random numbers at every checkpoint), grades them with evaluation's maths
grading, and scores each one under the checkpoint that sampled it ([`codapo_trl.analysis.scoring`]: confidence,
advantage, gradient norms). The result ([`codapo_trl.analysis.results.AnalysisResult`]) holds the tables and draws
the figures.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from codapo_trl.analysis.checkpoints import TRAINER_STATE_FILE, Checkpoint, find_checkpoints
from codapo_trl.analysis.questions import Question, select_questions
from codapo_trl.analysis.results import GROUP_BY, TRAJECTORIES_FILE, AnalysisResult
from codapo_trl.analysis.scoring import (
    ADVANTAGE_EPSILON,
    TrajectoryRecord,
    check_lm_head_path,
    grade_groups,
    group_records,
    resolve_grad_params,
    trajectory_statistics,
)
from codapo_trl.analysis.training_logs import find_training_logs
from codapo_trl.data import SYSTEM_PROMPT, load_math_dataset
from codapo_trl.evaluation.generation import (
    Completion,
    GenerationRequest,
    Generator,
    Progress,
    SamplingConfig,
    TransformersGenerator,
    build_generator,
    render_prompt,
    vllm_available,
    vllm_importable,
)


logger = logging.getLogger(__name__)

__all__ = ["analyze_checkpoints"]


def _load_dataset(dataset: Any, split: str, system_prompt: str | None) -> tuple[Any, str]:
    if isinstance(dataset, (str, os.PathLike)):
        name = os.fspath(dataset)
        return load_math_dataset(name, split, system_prompt=system_prompt), name
    if not hasattr(dataset, "column_names"):
        raise ValueError("dataset must be a registry name, a local file or a datasets.Dataset.")
    return dataset, "dataset"


def _sample(
    generator: Generator, requests: Sequence[GenerationRequest], config: SamplingConfig, progress: bool, desc: str
) -> list[list[Completion]]:
    bar = Progress(len(requests), desc=desc) if progress else None
    try:
        return generator.generate(requests, config, bar)
    finally:
        if bar is not None:
            bar.close()


def _vllm_sample(
    checkpoint: Checkpoint,
    requests: Sequence[GenerationRequest],
    config: SamplingConfig,
    *,
    dtype: str,
    vllm_kwargs: Mapping[str, Any] | None,
    progress: bool,
    desc: str,
) -> list[list[Completion]]:
    """Sample with vLLM, then shut the engine down so that the scoring model gets the GPU memory back."""
    kwargs = {"gpu_memory_utilization": 0.5, **dict(vllm_kwargs or {})}
    generator = build_generator(checkpoint.path, backend="vllm", dtype=dtype, seed=config.seed, vllm_kwargs=kwargs)
    try:
        return _sample(generator, requests, config, progress, desc)
    finally:
        engine = getattr(getattr(generator.llm, "llm_engine", None), "engine_core", None)
        with contextlib.suppress(Exception):
            if engine is not None and hasattr(engine, "shutdown"):
                engine.shutdown()
        del generator
        gc.collect()
        with contextlib.suppress(Exception):
            torch.cuda.empty_cache()


def _analyze_checkpoint(
    checkpoint: Checkpoint,
    questions: Sequence[Question],
    *,
    dataset_key: str,
    config: SamplingConfig,
    grad_params: str,
    backend: str,
    batch_size: int,
    dtype: str,
    device: str,
    vllm_kwargs: Mapping[str, Any] | None,
    tokenizer: str | None,
    progress: bool,
) -> tuple[list[TrajectoryRecord], dict[str, Any], str]:
    from transformers import AutoTokenizer

    timing: dict[str, Any] = {}
    requests = [GenerationRequest(f"{dataset_key}/{q.question_id}", q.prompt) for q in questions]
    desc = f"Sampling {checkpoint.label}"
    tic = time.perf_counter()
    if backend == "vllm":
        completions = _vllm_sample(
            checkpoint, requests, config, dtype=dtype, vllm_kwargs=vllm_kwargs, progress=progress, desc=desc
        )
        timing["sampling_s"] = time.perf_counter() - tic
        tic = time.perf_counter()
    tok = AutoTokenizer.from_pretrained(tokenizer or checkpoint.path)
    # the scoring model; with the transformers backend, also the sampler
    scorer = TransformersGenerator.from_pretrained(
        checkpoint.path, dtype=dtype, device=device, batch_size=batch_size, tokenizer=tok
    )
    model = scorer.model
    timing["load_s"] = time.perf_counter() - tic
    if backend != "vllm":
        tic = time.perf_counter()
        completions = _sample(scorer, requests, config, progress, desc)
        timing["sampling_s"] = time.perf_counter() - tic
    if len(completions) != len(requests) or any(len(samples) != config.num_samples for samples in completions):
        raise RuntimeError("The sampling backend returned the wrong number of completions.")
    if any(not c.token_ids for samples in completions for c in samples):
        raise RuntimeError("The sampling backend returned completions without token ids.")

    tic = time.perf_counter()
    verdicts = grade_groups(questions, completions)
    timing["grading_s"] = time.perf_counter() - tic

    target = resolve_grad_params(model, grad_params)
    prompt_ids = {q.index: tok(render_prompt(tok, q.prompt), add_special_tokens=False)["input_ids"] for q in questions}
    flat = [(q, c) for q, samples in zip(questions, completions) for c in samples]
    if target.kind == "lm_head" and flat:
        q0, c0 = flat[0]
        check_lm_head_path(model, prompt_ids[q0.index], c0.token_ids, config.temperature)
    tic = time.perf_counter()
    scores: list[tuple[float, float | None]] = []
    iterator: Iterable = flat
    if progress:
        from tqdm.auto import tqdm

        iterator = tqdm(flat, desc=f"Scoring {checkpoint.label}", unit="traj", dynamic_ncols=True)
    for q, c in iterator:
        scores.append(
            trajectory_statistics(
                model, prompt_ids[q.index], c.token_ids, temperature=config.temperature, target=target
            )
        )
    timing["scoring_s"] = time.perf_counter() - tic
    timing["generated_tokens"] = sum(c.num_tokens for _, c in flat)

    records: list[TrajectoryRecord] = []
    m = config.num_samples
    for i, (question, samples, graded) in enumerate(zip(questions, completions, verdicts)):
        records += group_records(checkpoint, question, samples, graded, scores[i * m : (i + 1) * m])
    ungraded = len({r.question_index for r in records if not r.graded})
    if ungraded:
        logger.warning(
            "%s: %d of %d questions have ungraded samples (the grader cannot use their gold answer) and are left out "
            "of the tables and figures; their trajectories are kept with graded=false.",
            checkpoint.label,
            ungraded,
            len(questions),
        )
    del model, scorer
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return records, timing, target.describe()


def analyze_checkpoints(
    checkpoints: Sequence[str | os.PathLike | Checkpoint] | str | os.PathLike,
    dataset: Any,
    *,
    base: str | None = None,
    steps: Iterable[int] | None = None,
    split: str = "test",
    levels: Iterable[int | str] | None = None,
    questions_per_level: int = 100,
    samples_per_question: int = 20,
    temperature: float = 1.0,
    top_p: float = 1.0,
    max_new_tokens: int = 3072,
    seed: int = 0,
    system_prompt: str | None = SYSTEM_PROMPT,
    grad_params: str = "all",
    group_by: str = "level",
    batch_size: int = 32,
    backend: str = "auto",
    dtype: str = "auto",
    device: str | None = None,
    tokenizer: str | None = None,
    vllm_kwargs: Mapping[str, Any] | None = None,
    output_dir: str | os.PathLike | None = None,
    trainer_state: str | os.PathLike | None = None,
    question_log: str | os.PathLike | None = None,
    plots: bool = True,
    progress: bool = True,
) -> AnalysisResult:
    """Run the paper's Appendix B.2 protocol on checkpoints: the same seeded questions per level for every checkpoint,
    `samples_per_question` trajectories each, and per trajectory correctness, confidence, advantage and gradient norms.

    Args:
        checkpoints: run directories and/or checkpoint folders (see [`find_checkpoints`]), or [`Checkpoint`]s.
        dataset: a [`codapo_trl.data.load_math_dataset`] name or file (`"math500"`, `"arithmetic"`, a `.jsonl` with a
            `level` column, ...) or a loaded `datasets.Dataset` with its columns.
        base (`str`, *optional*): the model training started from, analysed as step 0.
        steps (`Iterable[int]`, *optional*): analyse only these steps.
        split (`str`, *optional*, defaults to `"test"`): split of a registry dataset.
        levels (`Iterable`, *optional*): levels to analyse (default: all of the dataset's).
        questions_per_level (`int`, *optional*, defaults to 100): the paper's 100.
        samples_per_question (`int`, *optional*, defaults to 20): the paper's 20 (at least 2, for advantages).
        temperature (`float`, *optional*, defaults to 1.0): sampling temperature, also the one confidence is computed
            at (use the training temperature).
        top_p (`float`, *optional*, defaults to 1.0): nucleus sampling (confidence still uses the full distribution,
            as TRL's log-probs do).
        max_new_tokens (`int`, *optional*, defaults to 3072): longest trajectory (the recipes' max_completion_length).
        seed (`int`, *optional*, defaults to 0): seed of the question selection and of every sample's random stream
            (sample `i` of a question draws the same random numbers at every checkpoint).
        system_prompt (`str` or `None`, *optional*, defaults to the paper's prompt): system turn of the prompts.
        grad_params (`str`, *optional*, defaults to `"all"`): parameters of the gradient norms (see
            [`resolve_grad_params`]): `"all"`, `"lm_head"`, `"last_layer"`, `"none"` or regexes.
        group_by (`str`, *optional*, defaults to `"level"`): columns of the tables and figures: the dataset's levels
            (Appendix B) or the five difficulty bins of the group error rate (Section 3.2).
        batch_size (`int`, *optional*, defaults to 32): sequences per `generate` call (transformers backend).
        backend (`str`, *optional*, defaults to `"auto"`): sampling backend: `"transformers"`, `"vllm"` (GPU, or CPU
            with vLLM's CPU build; the engine is shut down before the scoring model loads, and gets
            `gpu_memory_utilization=0.5` unless `vllm_kwargs` says otherwise), or `"auto"` (vLLM when importable
            with a GPU).
        dtype (`str`, *optional*, defaults to `"auto"`): bfloat16 on a GPU that supports it, else float32.
        device (`str`, *optional*): default CUDA when available, else CPU.
        tokenizer (`str`, *optional*): load the tokenizer from here instead of each checkpoint.
        vllm_kwargs (`Mapping`, *optional*): extra `vllm.LLM` arguments.
        output_dir (`str` or `os.PathLike`, *optional*): write the files and figures there (trajectories are
            appended checkpoint by checkpoint, so a long run keeps what it did).
        trainer_state, question_log (*optional*): training logs for the training-log figures; default: found in the
            first run directory given (see [`find_training_logs`]).
        plots (`bool`, *optional*, defaults to `True`): draw the figures (with `output_dir`).
        progress (`bool`, *optional*, defaults to `True`): progress bars.

    Returns:
        [`AnalysisResult`].
    """
    start = time.perf_counter()
    if group_by not in GROUP_BY:
        raise ValueError(f"group_by must be one of {GROUP_BY}, got {group_by!r}")
    if samples_per_question < 2:
        raise ValueError(f"samples_per_question must be >= 2 (advantages need a group), got {samples_per_question}")
    if temperature <= 0:
        raise ValueError(
            f"temperature must be > 0 (confidence is taken at the sampling temperature), got {temperature}"
        )
    if backend not in ("auto", "transformers", "vllm"):
        raise ValueError(f"backend must be 'auto', 'transformers' or 'vllm', got {backend!r}")
    config = SamplingConfig(samples_per_question, temperature, top_p, max_new_tokens, seed)

    if isinstance(checkpoints, (str, os.PathLike)):
        checkpoints = [checkpoints]
    given = [c for c in checkpoints if not isinstance(c, Checkpoint)]
    resolved = [c for c in checkpoints if isinstance(c, Checkpoint)]
    if given or base is not None or not resolved:
        resolved += find_checkpoints(given, base=base, steps=None)
    resolved = sorted({c.step: c for c in resolved}.values(), key=lambda c: c.step)
    if steps is not None:
        wanted = set(steps)
        missing = sorted(wanted - {c.step for c in resolved})
        if missing:
            raise ValueError(f"No checkpoint for step(s) {missing}; available steps: {[c.step for c in resolved]}.")
        resolved = [c for c in resolved if c.step in wanted]

    loaded, dataset_key = _load_dataset(dataset, split, system_prompt)
    questions = select_questions(
        loaded,
        levels=levels,
        questions_per_level=questions_per_level,
        seed=seed,
        require_levels=group_by == "level",
    )
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if backend == "auto":
        backend = "vllm" if vllm_available() and device.startswith("cuda") else "transformers"
    elif backend == "vllm" and not vllm_importable():
        raise RuntimeError("backend='vllm' needs the vllm package; use backend='transformers'.")

    logs: dict[str, str | None] = {"trainer_state": None, "question_log": None}
    run_dirs = [Path(c) for c in given if Path(c).is_dir() and any(Path(c).glob("checkpoint-*"))]
    if run_dirs:
        logs = find_training_logs(run_dirs[0])
    else:  # checkpoint folders only: the latest one's trainer_state.json has the log history up to its step
        states = [Path(c.path) / TRAINER_STATE_FILE for c in reversed(resolved)]
        logs["trainer_state"] = next((str(p) for p in states if p.is_file()), None)
    if trainer_state is not None:
        logs["trainer_state"] = str(trainer_state)
    if question_log is not None:
        logs["question_log"] = str(question_log)

    settings = {
        "dataset": dataset_key,
        "split": split,
        "levels": list(dict.fromkeys(q.level for q in questions)),
        "questions_per_level": questions_per_level,
        "num_questions": len(questions),
        "samples_per_question": samples_per_question,
        "temperature": temperature,
        "top_p": top_p,
        "max_new_tokens": max_new_tokens,
        "seed": seed,
        "system_prompt": system_prompt,
        "grad_params": grad_params,
        "group_by": group_by,
        "backend": backend,
        "dtype": dtype,
        "device": device,
        "batch_size": batch_size,
        "advantage_epsilon": ADVANTAGE_EPSILON,
    }
    logger.info(
        "Analysing %d checkpoint(s) (steps %s) on %d questions x %d samples (%s, levels %s), %s backend on %s.",
        len(resolved),
        [c.step for c in resolved],
        len(questions),
        samples_per_question,
        dataset_key,
        settings["levels"],
        backend,
        device,
    )
    out = Path(output_dir) if output_dir is not None else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / TRAJECTORIES_FILE).write_text("", encoding="utf-8")
    result = AnalysisResult(resolved, questions, [], group_by, settings, {}, logs)
    timing: dict[str, Any] = {"checkpoints": {}}
    for checkpoint in resolved:
        logger.info("Checkpoint %s: %s", checkpoint.label, checkpoint.path)
        records, checkpoint_timing, described = _analyze_checkpoint(
            checkpoint,
            questions,
            dataset_key=dataset_key,
            config=config,
            grad_params=grad_params,
            backend=backend,
            batch_size=batch_size,
            dtype=dtype,
            device=device,
            vllm_kwargs=vllm_kwargs,
            tokenizer=tokenizer,
            progress=progress,
        )
        settings["grad_params_description"] = described
        result.records.extend(records)
        timing["checkpoints"][str(checkpoint.step)] = {k: round(v, 3) for k, v in checkpoint_timing.items()}
        if out is not None:
            result.write_records(out / TRAJECTORIES_FILE, records, mode="a")
    timing["total_s"] = round(time.perf_counter() - start, 3)
    result.timing = timing
    if out is not None:
        result.save(out, plots=plots, records=False)
    return result
