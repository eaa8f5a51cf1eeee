"""Training-dynamics analysis of checkpoints: the protocol of the paper's Appendix B.2, on your own runs.

For a fixed, seeded set of questions per difficulty level, every checkpoint (in step order, optionally with the base
model as step 0) samples `M` trajectories per question. Each trajectory gets:

- `correct`: the verdict of [`codapo_trl.rewards.grade_answers`] (the training reward's grader); ungraded samples
  (unusable gold answer) count as incorrect and are flagged `graded: false`;
- `confidence`: ``exp(mean_t log p(o_t))``, the geometric-mean probability of the sampled tokens under that
  checkpoint with logits divided by the temperature, as TRL computes log-probs in training (the paper's Section 3.2
  ``Confidence`` in probability space, the quantity of its Table "Confidence statistics"); `log_confidence` is the
  mean log-prob itself. The stop token counts as a token of the trajectory, as in TRL's completion mask;
- `advantage`: the GRPO advantage within its group of `M`: ``(r - mean(r)) / (std(r) + 1e-4)`` with the Bessel
  (unbiased) standard deviation, TRL's convention;
- `grad_norm`: ``|| grad_theta (1/|o|) sum_t log p(o_t) ||``, the norm of the gradient of the mean token log-prob,
  and `grad_norm_weighted`: ``|| grad_theta A (1/|o|) sum_t log p(o_t) ||``, the per-trajectory gradient of the
  GRPO surrogate at ratio 1 (on-policy, unclipped, no KL). The advantage is a constant, so
  ``grad_norm_weighted = |A| * grad_norm`` exactly: one backward pass per trajectory gives both. The paper's
  gradient table has strictly positive minima even where advantages vanish (all-correct groups), so it most likely
  reports something close to the unweighted norm; both are reported. The parameters the norm is taken over are
  chosen with `grad_params` (see [`resolve_grad_params`]).

Then, per checkpoint and level: accuracy, the min / max / mean / std / median / excess kurtosis of confidence,
gradient norms and advantages (the layout of the paper's Appendix B tables), and the figures of its Section 3
(see [`codapo_trl.analysis_plots`]).

Command line: `codapo-analyze` (or `python -m codapo_trl.analysis`), e.g. on CPU:

```bash
codapo-analyze outputs/SmolLM2-135M-Instruct-CoDaPO-demo --base embedded/SmolLM2-135M-Instruct --dataset arithmetic \\
    --levels 1 3 5 --questions-per-level 5 --samples-per-question 4 --max-new-tokens 48 --grad-params lm_head
```

Python:

```python
>>> from codapo_trl.analysis import analyze_checkpoints
>>> result = analyze_checkpoints(["outputs/SmolLM2-135M-Instruct-CoDaPO-demo"], "arithmetic",
...                              base="embedded/SmolLM2-135M-Instruct", levels=[1, 3, 5], questions_per_level=5,
...                              samples_per_question=4, max_new_tokens=48, grad_params="lm_head",
...                              output_dir="outputs/analysis/demo")
>>> print(result.format_table("confidence"))  # doctest: +SKIP
```
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import datetime as _dt
import importlib.metadata
import importlib.util
import json
import logging
import math
import os
import platform
import random
import re
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from codapo_trl.command_line import read_json_file, timestamped_output_dir, usage_error
from codapo_trl.data import SYSTEM_PROMPT, parse_level
from codapo_trl.dynamics import BIN_EDGES, NUM_BINS, describe


if TYPE_CHECKING:
    import torch
    from matplotlib.figure import Figure
    from transformers import PreTrainedModel


logger = logging.getLogger(__name__)

__all__ = [
    "ADVANTAGE_EPSILON",
    "AnalysisResult",
    "Checkpoint",
    "GradientTarget",
    "Question",
    "TrajectoryRecord",
    "analyze_checkpoints",
    "bin_label",
    "difficulty_bin",
    "find_checkpoints",
    "find_training_logs",
    "group_advantages",
    "load_question_log",
    "load_trainer_state",
    "main",
    "plot_training_dynamics",
    "resolve_grad_params",
    "select_questions",
    "statistics_table",
    "trajectory_statistics",
]

ADVANTAGE_EPSILON = 1e-4
"""The stabiliser of TRL's group-normalised advantage ``(r - mean) / (std + 1e-4)``."""

STATISTICS = ("min", "max", "mean", "std", "median", "kurtosis")
"""The rows of the paper's Appendix B tables, as returned by [`codapo_trl.dynamics.describe`]."""
STATISTIC_LABELS = {
    "min": "Minimum",
    "max": "Maximum",
    "mean": "Mean",
    "std": "Std",
    "median": "Median",
    "kurtosis": "Kurtosis",
}
TABLE_METRICS = {
    "confidence": "Confidence",
    "grad_norm": "Gradient",
    "grad_norm_weighted": "Gradient (advantage-weighted)",
    "advantage": "Advantage",
}
"""Per-trajectory values summarised in tables: name in the records -> table title."""
GROUP_BY = ("level", "difficulty")

TRAJECTORIES_FILE, SUMMARY_FILE, TABLES_FILE, ACCURACY_FILE = (
    "trajectories.jsonl",
    "summary.json",
    "tables.md",
    "accuracy.csv",
)
TRAINER_STATE_FILE = "trainer_state.json"
_CHECKPOINT_RE = re.compile(r"checkpoint-(\d+)")
_ID_COLUMNS = ("id", "unique_id", "question_id", "qid", "problem_id", "task_id")
_MODEL_FILES = ("config.json", "adapter_config.json")


# ---------------------------------------------------------------------------------------------------------------------
# Checkpoints
# ---------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Checkpoint:
    """A model to analyse: its training step, where it is loaded from and a label for tables and figures."""

    step: int
    path: str
    label: str


def _is_model_dir(path: Path) -> bool:
    return any((path / name).is_file() for name in _MODEL_FILES)


def _step_of(path: Path) -> int | None:
    match = _CHECKPOINT_RE.fullmatch(path.name)
    if match:
        return int(match.group(1))
    state = path / TRAINER_STATE_FILE
    if state.is_file():
        with contextlib.suppress(ValueError, OSError, KeyError, TypeError):
            return int(json.loads(state.read_text())["global_step"])
    return None


def find_checkpoints(
    paths: Sequence[str | os.PathLike],
    *,
    base: str | None = None,
    steps: Iterable[int] | None = None,
) -> list[Checkpoint]:
    """The checkpoints to analyse, in step order.

    Args:
        paths (`Sequence[str | os.PathLike]`): run directories (every `checkpoint-<step>` folder in them is taken, and
            the final model in the run's root when its `trainer_state.json` step is past the last checkpoint) or model
            folders (`checkpoint-<step>`, or any folder with a `trainer_state.json` that gives its step).
        base (`str`, *optional*): the model training started from (alias, path or hub id), analysed as step 0.
        steps (`Iterable[int]`, *optional*): keep only these steps (e.g. the paper's 0, 60 and 240).

    Returns:
        `list[Checkpoint]` sorted by step.

    Raises:
        `FileNotFoundError`: a path that does not exist.
        `ValueError`: no checkpoint found, a model folder whose step cannot be told, two checkpoints with the same
            step, or a requested step that is not there.
    """
    found: list[Checkpoint] = []
    for raw in paths:
        path = Path(raw).expanduser()
        if not path.exists():
            raise FileNotFoundError(f"No such checkpoint or run directory: {path}")
        if not path.is_dir():
            raise ValueError(f"{path} is not a directory: give a run directory or a checkpoint folder.")
        subdirs = sorted(
            (d for d in path.iterdir() if d.is_dir() and _CHECKPOINT_RE.fullmatch(d.name)),
            key=lambda d: int(_CHECKPOINT_RE.fullmatch(d.name).group(1)),
        )
        if subdirs:
            for sub in subdirs:
                if not _is_model_dir(sub):
                    logger.warning("Skipping %s: no config.json or adapter_config.json in it.", sub)
                    continue
                step = int(_CHECKPOINT_RE.fullmatch(sub.name).group(1))
                found.append(Checkpoint(step, str(sub), f"step {step}"))
            # the final model saved in the run's root, when it is newer than its last checkpoint
            final = _step_of(path) if _is_model_dir(path) else None
            if final is not None and all(final > c.step for c in found if Path(c.path).parent == path):
                found.append(Checkpoint(final, str(path), f"step {final} (final)"))
        elif _is_model_dir(path):
            step = _step_of(path)
            if step is None:
                raise ValueError(
                    f"Cannot tell the training step of {path}: name it checkpoint-<step>, keep its trainer_state.json, "
                    "or pass the model as --base (step 0)."
                )
            found.append(Checkpoint(step, str(path), f"step {step}"))
        else:
            raise ValueError(
                f"No checkpoints found in {path}: expected checkpoint-<step> folders (a training run's output_dir) "
                "or a model folder with a config.json."
            )
    if base is not None:
        from codapo_trl.models import resolve_model_name_or_path

        found.append(Checkpoint(0, resolve_model_name_or_path(base), "step 0 (base)"))
    if not found:
        raise ValueError("No checkpoints found: give a run directory, checkpoint folders or --base.")
    by_step: dict[int, Checkpoint] = {}
    for checkpoint in found:
        if checkpoint.step in by_step:
            raise ValueError(
                f"Two checkpoints with step {checkpoint.step}: {by_step[checkpoint.step].path} and {checkpoint.path}."
            )
        by_step[checkpoint.step] = checkpoint
    if steps is not None:
        wanted = sorted(set(steps))
        missing = [s for s in wanted if s not in by_step]
        if missing:
            raise ValueError(f"No checkpoint for step(s) {missing}; available steps: {sorted(by_step)}.")
        by_step = {s: by_step[s] for s in wanted}
    return [by_step[s] for s in sorted(by_step)]


# ---------------------------------------------------------------------------------------------------------------------
# Questions
# ---------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Question:
    """One analysed question: its row in the dataset, an id, its level and what grading needs."""

    index: int
    question_id: str
    level: int | str
    prompt: list[dict[str, str]]
    question: str
    answer: str
    answer_type: str


def _row_id(row: Mapping[str, Any], index: int) -> str:
    for column in _ID_COLUMNS:
        if row.get(column) is not None:
            return str(row[column])
    return str(index)


def _normalise_level(value: Any) -> int | str | None:
    if value is None:
        return None
    parsed = parse_level(value)
    return parsed if parsed is not None else str(value)


def select_questions(
    dataset: Any,
    *,
    levels: Iterable[int | str] | None = None,
    questions_per_level: int = 100,
    seed: int = 0,
    require_levels: bool = True,
) -> list[Question]:
    """A fixed, seeded set of questions per level (the same for every checkpoint).

    Each level draws `questions_per_level` of its rows with its own random stream (seeded by `seed` and the level, so
    adding a level does not change the others); a level with fewer rows contributes all of them, with a warning.

    Args:
        dataset (`datasets.Dataset`): rows with `prompt`, `question`, `answer`, `level`, `answer_type` (as returned by
            [`codapo_trl.data.load_math_dataset`]).
        levels (`Iterable`, *optional*): levels to keep (default: every level of the dataset).
        questions_per_level (`int`, *optional*, defaults to 100): the paper's 100.
        seed (`int`, *optional*, defaults to 0): seed of the selection.
        require_levels (`bool`, *optional*, defaults to `True`): raise for a dataset without levels; when `False`,
            such a dataset is one level named `"all"`.

    Returns:
        `list[Question]`, level by level (in the order of `levels`, else sorted), rows in dataset order within a level.

    Raises:
        `ValueError`: a dataset without levels (when `require_levels`), an unknown level, `questions_per_level < 1`.
    """
    from codapo_trl.evaluation.metrics import level_sort_key

    if questions_per_level < 1:
        raise ValueError(f"questions_per_level must be >= 1, got {questions_per_level}")
    missing_columns = [c for c in ("prompt", "answer", "level") if c not in dataset.column_names]
    if missing_columns and missing_columns != ["level"]:
        raise ValueError(f"The dataset lacks column(s) {missing_columns}; load it with load_math_dataset.")
    raw_levels = dataset["level"] if "level" in dataset.column_names else [None] * len(dataset)
    row_levels = [_normalise_level(v) for v in raw_levels]
    if all(level is None for level in row_levels):
        if require_levels:
            raise ValueError(
                "The dataset has no difficulty levels (no level/difficulty column, or every value empty): use a "
                "leveled dataset (math500, math, arithmetic, or a file with a `level` column), or group by the "
                "model's own difficulty (group_by='difficulty', --group-by difficulty)."
            )
        row_levels = ["all"] * len(row_levels)
    by_level: dict[int | str, list[int]] = {}
    for index, level in enumerate(row_levels):
        if level is not None:
            by_level.setdefault(level, []).append(index)
    present = sorted(by_level, key=level_sort_key)
    if levels is None:
        chosen = present
    else:
        chosen = list(dict.fromkeys(_normalise_level(level) for level in levels))
        unknown = [level for level in chosen if level not in by_level]
        if unknown:
            raise ValueError(f"Unknown level(s) {unknown}: the dataset has levels {present}.")
    questions = []
    for level in chosen:
        indices = by_level[level]
        if len(indices) <= questions_per_level:
            if len(indices) < questions_per_level:
                logger.warning(
                    "Level %s has only %d questions (asked for %d): using all of them.",
                    level,
                    len(indices),
                    questions_per_level,
                )
            picked = indices
        else:
            picked = sorted(random.Random(f"codapo-analysis-{seed}-{level}").sample(indices, questions_per_level))
        for index in picked:
            row = dataset[index]
            questions.append(
                Question(
                    index=index,
                    question_id=_row_id(row, index),
                    level=level,
                    prompt=list(row["prompt"]),
                    question=str(row.get("question", "")),
                    answer=row["answer"],
                    answer_type=row.get("answer_type") or "math",
                )
            )
    return questions


# ---------------------------------------------------------------------------------------------------------------------
# Per-trajectory statistics
# ---------------------------------------------------------------------------------------------------------------------


def group_advantages(rewards: Sequence[float], epsilon: float = ADVANTAGE_EPSILON) -> np.ndarray:
    """GRPO advantages of one group: ``(r - mean(r)) / (std(r) + epsilon)`` with the Bessel standard deviation (TRL).

    Example:
    ```python
    >>> group_advantages([1.0, 0.0, 0.0, 0.0]).round(4)
    array([ 1.4997, -0.4999, -0.4999, -0.4999])
    ```
    """
    r = np.asarray(rewards, dtype=np.float64)
    if r.size < 2:
        raise ValueError("A group needs at least 2 rewards for its (Bessel) standard deviation.")
    return (r - r.mean()) / (r.std(ddof=1) + epsilon)


@dataclass
class GradientTarget:
    """The parameters a per-trajectory gradient norm is taken over (see [`resolve_grad_params`]).

    Args:
        spec (`str`): what was asked for.
        kind (`str`): `"none"` (no gradient), `"lm_head"` (the output projection only) or `"params"` (a set of
            parameters, all of them for `"all"`).
        names (`tuple[str, ...]`): the parameters' names.
        params (`list[torch.nn.Parameter]`): the parameters (`kind="params"`).
        num_parameters (`int`): scalars the gradient has.
    """

    spec: str
    kind: str
    names: tuple[str, ...] = ()
    params: list[Any] = field(default_factory=list, repr=False)
    num_parameters: int = 0

    def describe(self) -> str:
        if self.kind == "none":
            return "none (no gradient norms)"
        shown = ", ".join(self.names[:3]) + (f", ... ({len(self.names)} tensors)" if len(self.names) > 3 else "")
        return f"{self.spec}: {self.num_parameters:,} parameters ({shown})"


def resolve_grad_params(model: PreTrainedModel, spec: str = "all") -> GradientTarget:
    """Which parameters the per-trajectory gradient norm is taken over.

    Args:
        model (`PreTrainedModel`): the causal LM.
        spec (`str`, *optional*, defaults to `"all"`):
            - `"all"`: every parameter (the full gradient; one full backward pass per trajectory);
            - `"lm_head"`: the output projection, as the output layer uses it: the body runs without gradient and the
              gradient is that of ``lm_head(h)`` with respect to its weight (and bias). With tied embeddings (e.g.
              SmolLM2) the shared matrix's contribution through the input embedding is left out. The cheapest choice
              (no backward through the network), for CPU runs;
            - `"last_layer"`: the parameters of the last transformer block (the backward pass stops there);
            - `"none"`: no gradient (confidence, advantages and accuracy only);
            - anything else: comma-separated regular expressions, a parameter is kept when one matches its name
              (`re.search`), e.g. `"layers\\.2[0-7]\\.,norm"`.

    Returns:
        [`GradientTarget`].

    Raises:
        `ValueError`: no parameter matches, or the model has no output projection / numbered layers.
    """
    spec = spec.strip()
    named = list(model.named_parameters())
    if spec == "none":
        return GradientTarget(spec, "none")
    if spec == "lm_head":
        head = model.get_output_embeddings()
        if head is None or getattr(head, "weight", None) is None:
            raise ValueError("The model has no output projection (get_output_embeddings()): use --grad-params all.")
        tensors = [head.weight] + ([head.bias] if getattr(head, "bias", None) is not None else [])
        names = tuple(
            name for name, p in model.named_parameters(remove_duplicate=False) if any(p is t for t in tensors)
        )
        return GradientTarget(spec, "lm_head", names, [], sum(t.numel() for t in tensors))
    if spec == "all":
        selected = named
    elif spec == "last_layer":
        indices = {int(m.group(1)) for name, _ in named if (m := re.search(r"\blayers\.(\d+)\.", name))}
        if not indices:
            raise ValueError("No numbered `layers.<i>.` parameters in this model: name the parameters with a regex.")
        last = f"layers.{max(indices)}."
        selected = [(name, p) for name, p in named if re.search(rf"\b{re.escape(last)}", name)]
    else:
        patterns = [re.compile(p.strip()) for p in spec.split(",") if p.strip()]
        selected = [(name, p) for name, p in named if any(pattern.search(name) for pattern in patterns)]
        if not selected:
            examples = ", ".join(name for name, _ in named[:6])
            raise ValueError(f"No parameter name matches {spec!r} (names look like: {examples}, ...).")
    return GradientTarget(
        spec, "params", tuple(n for n, _ in selected), [p for _, p in selected], sum(p.numel() for _, p in selected)
    )


@contextlib.contextmanager
def _only_requires_grad(model: PreTrainedModel, params: Sequence[Any]) -> Iterator[None]:
    """Make exactly `params` require grad while the block runs (so autograd builds the smallest graph)."""
    chosen = {id(p) for p in params}
    saved = [(p, p.requires_grad) for p in model.parameters()]
    try:
        for p, _ in saved:
            p.requires_grad_(id(p) in chosen)
        yield
    finally:
        for p, flag in saved:
            p.requires_grad_(flag)


def _mean_logp(logits: torch.Tensor, targets: torch.Tensor, temperature: float) -> torch.Tensor:
    """Mean over positions of ``log_softmax(logits / T)[target]``, in float32 (no vocabulary-sized log-softmax)."""
    import torch

    scaled = logits.float() / temperature
    picked = scaled.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return (picked - torch.logsumexp(scaled, dim=-1)).mean()


def _completion_logits(model: PreTrainedModel, input_ids: torch.Tensor, num_completion: int) -> torch.Tensor:
    """Logits predicting the last `num_completion` tokens of `input_ids` (one row)."""
    try:
        logits = model(input_ids=input_ids, logits_to_keep=num_completion + 1).logits
    except TypeError:  # a model without `logits_to_keep`
        logits = model(input_ids=input_ids).logits
    return logits[0, -(num_completion + 1) : -1]


def trajectory_statistics(
    model: PreTrainedModel,
    prompt_ids: Sequence[int],
    completion_ids: Sequence[int],
    *,
    temperature: float = 1.0,
    target: GradientTarget | None = None,
) -> tuple[float, float | None]:
    """Mean token log-prob of one trajectory and the norm of its gradient.

    ``s = (1/|o|) sum_t log softmax(logits_t / T)[o_t]`` over the completion tokens (the stop token included when
    present), and ``|| d s / d theta ||_2`` over `target`'s parameters (float32 accumulation). One trajectory at a
    time: memory stays that of one forward and backward pass.

    Args:
        model (`PreTrainedModel`): the causal LM (in eval mode).
        prompt_ids (`Sequence[int]`): the prompt's token ids, as given to the generator.
        completion_ids (`Sequence[int]`): the sampled token ids.
        temperature (`float`, *optional*, defaults to 1.0): the sampling temperature (logits are divided by it).
        target ([`GradientTarget`], *optional*): the parameters of the gradient; `None` or kind `"none"`: no gradient.

    Returns:
        `(mean_logp, grad_norm)`; `grad_norm` is `None` without a target.
    """
    import torch
    import torch.nn.functional as F

    if not completion_ids:
        raise ValueError("A trajectory needs at least one completion token.")
    if not prompt_ids:
        raise ValueError("A trajectory needs at least one prompt token.")
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    device = next(model.parameters()).device
    input_ids = torch.tensor([list(prompt_ids) + list(completion_ids)], dtype=torch.long, device=device)
    n = len(completion_ids)
    targets = input_ids[0, -n:]
    if target is None or target.kind == "none":
        with torch.no_grad():
            return _mean_logp(_completion_logits(model, input_ids, n), targets, temperature).item(), None
    if target.kind == "lm_head":
        head = model.get_output_embeddings()
        with torch.no_grad():
            hidden = model.base_model(input_ids=input_ids).last_hidden_state[0, -(n + 1) : -1]
        weight = head.weight.detach().requires_grad_(True)
        bias = head.bias.detach().requires_grad_(True) if getattr(head, "bias", None) is not None else None
        with torch.enable_grad():
            mean_logp = _mean_logp(F.linear(hidden, weight, bias), targets, temperature)
            grads = torch.autograd.grad(mean_logp, [weight] if bias is None else [weight, bias])
    else:
        with _only_requires_grad(model, target.params), torch.enable_grad():
            mean_logp = _mean_logp(_completion_logits(model, input_ids, n), targets, temperature)
            grads = torch.autograd.grad(mean_logp, target.params, allow_unused=True)
    squares = [g.detach().float().pow(2).sum() for g in grads if g is not None]
    norm = torch.stack(squares).sum().sqrt().item() if squares else 0.0
    return mean_logp.item(), norm


def _check_lm_head_path(model: PreTrainedModel, prompt_ids: Sequence[int], completion_ids: Sequence[int], T: float):
    """The `lm_head` path recomputes the logits as `lm_head(base_model(x).last_hidden_state)`: make sure that is what
    the model's own forward gives (no logit scaling or soft-capping), on one trajectory."""
    full, _ = trajectory_statistics(model, prompt_ids, completion_ids, temperature=T, target=None)
    head, _ = trajectory_statistics(
        model, prompt_ids, completion_ids, temperature=T, target=GradientTarget("lm_head", "lm_head")
    )
    if not math.isclose(full, head, rel_tol=2e-2, abs_tol=2e-2):
        raise RuntimeError(
            f"--grad-params lm_head: this model's logits are not lm_head(last hidden state) (mean log-prob {full:.4f} "
            f"from the model, {head:.4f} recomputed); use --grad-params last_layer or all."
        )


# ---------------------------------------------------------------------------------------------------------------------
# Records and tables
# ---------------------------------------------------------------------------------------------------------------------


@dataclass
class TrajectoryRecord:
    """One sampled trajectory: one line of `trajectories.jsonl`.

    Args:
        step (`int`): training step of the checkpoint. checkpoint (`str`): its path.
        level (`int` or `str`): the question's level. question_id (`str`), question_index (`int`): which question.
        sample (`int`): sample index within the question's group.
        correct (`bool`): the grader's verdict (ungraded counts as incorrect). graded (`bool`): whether it had one.
        reward (`float`): 1.0 or 0.0.
        advantage (`float`): group-normalised advantage within the question's `M` samples.
        confidence (`float`): ``exp(log_confidence)``. log_confidence (`float`): mean token log-prob.
        grad_norm (`float` or `None`): norm of the gradient of the mean token log-prob.
        grad_norm_weighted (`float` or `None`): ``|advantage| * grad_norm``, the GRPO surrogate's per-trajectory norm.
        group_accuracy (`float`): mean reward of the group. difficulty (`float`): ``1 - group_accuracy``.
        difficulty_bin (`int`): 1-5, the paper's bins [0, 0.2), ..., [0.8, 1].
        num_tokens (`int`): completion tokens (stop token included). finish_reason (`str`): `"stop"` or `"length"`.
        extracted (`str` or `None`): the answer the grader read. completion (`str`): the text.
    """

    step: int
    checkpoint: str
    level: int | str
    question_id: str
    question_index: int
    sample: int
    correct: bool
    graded: bool
    reward: float
    advantage: float
    confidence: float
    log_confidence: float
    grad_norm: float | None
    grad_norm_weighted: float | None
    group_accuracy: float
    difficulty: float
    difficulty_bin: int
    num_tokens: int
    finish_reason: str
    extracted: str | None
    completion: str


def difficulty_bin(difficulty: float) -> int:
    """The paper's bin (1-5) of a group difficulty, via [`codapo_trl.dynamics.difficulty_bins`]."""
    import torch

    from codapo_trl.dynamics import difficulty_bins

    return int(difficulty_bins(torch.tensor([difficulty]))[0]) + 1


def bin_label(index: int) -> str:
    """`"d in [0.2, 0.4)"` for bin 2 (1-based); the last bin is closed."""
    lo, hi = BIN_EDGES[index - 1], BIN_EDGES[index]
    return f"d∈[{lo:g}, {hi:g}{']' if index == NUM_BINS else ')'}"


def statistics_table(values: Mapping[Any, Mapping[Any, Sequence[float]]]) -> dict[Any, dict[Any, dict[str, float]]]:
    """[`codapo_trl.dynamics.describe`] of every cell: `{step: {group: {"min": ..., ..., "kurtosis": ...}}}`."""
    return {step: {group: describe(cell) for group, cell in groups.items()} for step, groups in values.items()}


def _fmt(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:.4g}"


# ---------------------------------------------------------------------------------------------------------------------
# The result
# ---------------------------------------------------------------------------------------------------------------------


@dataclass
class AnalysisResult:
    """What [`analyze_checkpoints`] returns: every trajectory, and the tables and figures built from them.

    Args:
        checkpoints (`list[Checkpoint]`): in step order.
        questions (`list[Question]`): the fixed questions.
        records (`list[TrajectoryRecord]`): every trajectory of every checkpoint.
        group_by (`str`): `"level"` (the dataset's levels, the paper's Appendix B tables) or `"difficulty"` (the
            group error rate's five bins of Section 3.2, recomputed at every checkpoint).
        config (`dict`): the settings.
        timing (`dict`): seconds per checkpoint and phase.
        training_logs (`dict`): paths of the `trainer_state.json` and question log used for the training-log figures.
    """

    checkpoints: list[Checkpoint]
    questions: list[Question]
    records: list[TrajectoryRecord]
    group_by: str = "level"
    config: dict[str, Any] = field(default_factory=dict)
    timing: dict[str, Any] = field(default_factory=dict)
    training_logs: dict[str, str | None] = field(default_factory=dict)
    created: str = field(default_factory=lambda: _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"))

    @property
    def steps(self) -> list[int]:
        return [c.step for c in self.checkpoints]

    @property
    def groups(self) -> list[int | str]:
        """Column keys: the levels in selection order, or the bins 1-5."""
        if self.group_by == "difficulty":
            return list(range(1, NUM_BINS + 1))
        return list(dict.fromkeys(q.level for q in self.questions))

    def group_of(self, record: TrajectoryRecord) -> int | str:
        return record.difficulty_bin if self.group_by == "difficulty" else record.level

    def group_label(self, group: int | str) -> str:
        if self.group_by == "difficulty":
            return bin_label(int(group))
        return f"Level {group}" if isinstance(group, int) else str(group)

    def checkpoint_label(self, step: int) -> str:
        return next(c.label for c in self.checkpoints if c.step == step)

    def cell(self, step: int, group: int | str) -> list[TrajectoryRecord]:
        """The trajectories of one checkpoint and level (or bin)."""
        return [r for r in self.records if r.step == step and self.group_of(r) == group]

    def values(self, metric: str, step: int, group: int | str) -> np.ndarray:
        """One per-trajectory value (`confidence`, `grad_norm`, ...) of a cell; `None` becomes NaN."""
        cell = [getattr(r, metric) for r in self.cell(step, group)]
        return np.array([np.nan if v is None else v for v in cell], dtype=np.float64)

    def table(self, metric: str) -> dict[int, dict[int | str, dict[str, float]]]:
        """`{step: {group: describe(values)}}` of one metric (see [`TABLE_METRICS`])."""
        if metric not in TABLE_METRICS:
            raise ValueError(f"Unknown metric {metric!r}; choose from {list(TABLE_METRICS)}.")
        return statistics_table({s: {g: self.values(metric, s, g) for g in self.groups} for s in self.steps})

    def accuracy(self) -> dict[int, dict[int | str, dict[str, float]]]:
        """Per checkpoint and group: trajectories, questions, accuracy, mean confidence of correct and incorrect
        trajectories, and the fractions of questions solved by every sample (`d = 0`) and by none (`d = 1`)."""
        out: dict[int, dict[int | str, dict[str, float]]] = {}
        for step in self.steps:
            out[step] = {}
            for group in self.groups:
                cell = self.cell(step, group)
                questions = {r.question_index: r.difficulty for r in cell}
                correct = [r.confidence for r in cell if r.correct]
                incorrect = [r.confidence for r in cell if not r.correct]
                out[step][group] = {
                    "num_trajectories": len(cell),
                    "num_questions": len(questions),
                    "accuracy": float(np.mean([r.correct for r in cell])) if cell else math.nan,
                    "confidence_correct": float(np.mean(correct)) if correct else math.nan,
                    "confidence_incorrect": float(np.mean(incorrect)) if incorrect else math.nan,
                    "solved_frac": float(np.mean([d == 0 for d in questions.values()])) if questions else math.nan,
                    "unsolved_frac": float(np.mean([d == 1 for d in questions.values()])) if questions else math.nan,
                }
        return out

    def format_table(self, metric: str) -> str:
        """A markdown table laid out like the paper's: rows = statistic, columns = step x level."""
        table = self.table(metric)
        columns = [(s, g) for s in self.steps for g in self.groups]
        header = [TABLE_METRICS[metric]] + [f"Step {s} · {self.group_label(g)}" for s, g in columns]
        lines = ["| " + " | ".join(header) + " |", "|---" + "|---:" * len(columns) + "|"]
        for stat in STATISTICS:
            cells = [_fmt(table[s][g][stat]) for s, g in columns]
            lines.append(f"| {STATISTIC_LABELS[stat]} | " + " | ".join(cells) + " |")
        return "\n".join(lines)

    def format_accuracy(self) -> str:
        """Accuracy per checkpoint (rows) and group (columns), in %, with trajectories per cell."""
        accuracy = self.accuracy()
        header = ["Checkpoint"] + [self.group_label(g) for g in self.groups]
        lines = ["| " + " | ".join(header) + " |", "|---" + "|---:" * len(self.groups) + "|"]
        for step in self.steps:
            cells = []
            for g in self.groups:
                cell = accuracy[step][g]
                value = cell["accuracy"]
                cells.append("–" if math.isnan(value) else f"{100 * value:.1f} (n={cell['num_trajectories']})")
            lines.append(f"| {self.checkpoint_label(step)} | " + " | ".join(cells) + " |")
        return "\n".join(lines)

    def to_markdown(self) -> str:
        """The content of `tables.md`."""
        config = self.config
        grouping = "dataset level" if self.group_by == "level" else "difficulty bin (group error rate)"
        parts = [
            "# Training-dynamics analysis",
            "",
            f"Dataset {config.get('dataset')} ({config.get('split')}), {len(self.questions)} questions, "
            f"{config.get('samples_per_question')} samples per question at temperature {config.get('temperature')}, "
            f"at most {config.get('max_new_tokens')} new tokens, seed {config.get('seed')}. Columns: checkpoint x "
            f"{grouping}. Gradient norms over: {config.get('grad_params_description')}.",
            "",
            "## Accuracy (%)",
            "",
            self.format_accuracy(),
        ]
        notes = {
            "confidence": "Geometric-mean probability of the sampled tokens, exp(mean log-prob) at the sampling "
            "temperature (the paper's Table 'Confidence statistics').",
            "grad_norm": "‖grad (1/|o|) sum_t log p(o_t)‖, the unweighted per-trajectory norm (closest to the "
            "paper's Table 'Gradient statistics', whose minima stay positive where advantages vanish).",
            "grad_norm_weighted": "‖grad A (1/|o|) sum_t log p(o_t)‖ = |A| x the unweighted norm: the GRPO "
            "surrogate's per-trajectory gradient at ratio 1 (0 for groups whose samples all agree).",
            "advantage": "(r - mean) / (std + 1e-4) within each question's group (Bessel std, TRL's convention).",
        }
        for metric, title in TABLE_METRICS.items():
            if metric.startswith("grad") and config.get("grad_params") == "none":
                continue
            parts += ["", f"## {title}", "", notes[metric], "", self.format_table(metric)]
        return "\n".join(parts) + "\n"

    def to_summary(self) -> dict[str, Any]:
        """The JSON-able summary written to `summary.json`."""

        def keyed(mapping: Mapping) -> dict:
            return {str(k): v for k, v in mapping.items()}

        return {
            "config": self.config,
            "group_by": self.group_by,
            "checkpoints": [asdict(c) for c in self.checkpoints],
            "questions": {
                str(g): [q.question_id for q in self.questions if q.level == g]
                for g in dict.fromkeys(q.level for q in self.questions)
            },
            "accuracy": {str(s): keyed(cells) for s, cells in self.accuracy().items()},
            "tables": {
                metric: {str(s): keyed(cells) for s, cells in self.table(metric).items()}
                for metric in TABLE_METRICS
                if not (metric.startswith("grad") and self.config.get("grad_params") == "none")
            },
            "timing": self.timing,
            "training_logs": self.training_logs,
            "versions": _versions(),
            "created": self.created,
        }

    @classmethod
    def load(cls, output_dir: str | os.PathLike) -> AnalysisResult:
        """Read a saved analysis back (`summary.json` and `trajectories.jsonl`), e.g. to redraw its figures or
        tables without sampling again. Questions come back with their id, row index and level only."""
        out = Path(output_dir)
        for name in (SUMMARY_FILE, TRAJECTORIES_FILE):
            if not (out / name).is_file():
                raise FileNotFoundError(f"No {name} in {out}: not the output directory of an analysis.")
        summary = json.loads((out / SUMMARY_FILE).read_text(encoding="utf-8"))
        with (out / TRAJECTORIES_FILE).open(encoding="utf-8") as f:
            records = [TrajectoryRecord(**json.loads(line)) for line in f if line.strip()]
        levels = {str(r.level): r.level for r in records}  # JSON object keys are strings; the records keep the type
        index = {r.question_id: r.question_index for r in records}
        questions = [
            Question(index.get(qid, -1), qid, levels.get(level, level), [], "", "", "")
            for level, ids in summary["questions"].items()
            for qid in ids
        ]
        return cls(
            checkpoints=[Checkpoint(**c) for c in summary["checkpoints"]],
            questions=questions,
            records=records,
            group_by=summary["group_by"],
            config=summary["config"],
            timing=summary["timing"],
            training_logs=summary.get("training_logs", {}),
            created=summary.get("created", ""),
        )

    def write_records(self, path: str | os.PathLike, records: Sequence[TrajectoryRecord] | None = None, mode="w"):
        with open(path, mode, encoding="utf-8") as f:
            for record in self.records if records is None else records:
                f.write(json.dumps(asdict(record), ensure_ascii=False) + "\n")

    def save(self, output_dir: str | os.PathLike, *, plots: bool = True, records: bool = True) -> dict[str, Any]:
        """Write the trajectories, `summary.json`, `tables.md`, the CSV tables and (with `plots`) the figures.

        Returns:
            `dict` of what was written: name -> path (figures: name -> list of PNG and SVG paths).
        """
        out = Path(output_dir)
        out.mkdir(parents=True, exist_ok=True)
        paths: dict[str, Any] = {}
        if records:
            self.write_records(out / TRAJECTORIES_FILE)
        paths["trajectories"] = out / TRAJECTORIES_FILE
        paths["tables"] = out / TABLES_FILE
        paths["tables"].write_text(self.to_markdown(), encoding="utf-8")
        for metric in TABLE_METRICS:
            if metric.startswith("grad") and self.config.get("grad_params") == "none":
                continue
            paths[f"{metric}_csv"] = self._write_stats_csv(out / f"{metric}_stats.csv", metric)
        paths["accuracy_csv"] = self._write_accuracy_csv(out / ACCURACY_FILE)
        if plots:
            paths["figures"] = self.plot(out)
        summary = self.to_summary()
        summary["files"] = {k: [str(p) for p in v] if isinstance(v, list) else str(v) for k, v in paths.items()}
        if "figures" in paths:
            summary["files"]["figures"] = {k: [str(p) for p in v] for k, v in paths["figures"].items()}
        paths["summary"] = out / SUMMARY_FILE
        paths["summary"].write_text(json.dumps(summary, indent=2, ensure_ascii=False, default=_json_default) + "\n")
        logger.info("Wrote the analysis to %s", out)
        return paths

    def plot(self, output_dir: str | os.PathLike) -> dict[str, list[Path]]:
        """Draw and save the figures (PNG and SVG): confidence-advantage (paper Fig. 1), gradient norms (Fig. 2,
        unweighted and advantage-weighted), accuracy per level over steps (App. B.1), and, when training logs were
        found, the live per-bin dynamics over updates."""
        import matplotlib.pyplot as plt

        from codapo_trl import analysis_plots as plots

        figures: dict[str, Figure] = {
            "confidence_advantage": plots.plot_confidence_advantage(self),
            "accuracy": plots.plot_accuracy(
                self,
                question_log=self.training_logs.get("question_log"),
                trainer_state=self.training_logs.get("trainer_state"),
            ),
        }
        if self.config.get("grad_params") != "none":
            figures["gradient_norms"] = plots.plot_gradient_norms(self, weighted=False)
            figures["gradient_norms_weighted"] = plots.plot_gradient_norms(self, weighted=True)
        state = self.training_logs.get("trainer_state")
        if state:
            try:
                figures["training_dynamics"] = plots.plot_training_dynamics(state)
            except ValueError as err:
                logger.warning("No training-dynamics figure: %s", err)
        saved = {}
        for name, figure in figures.items():
            saved[name] = plots.save_figure(figure, output_dir, name)
            plt.close(figure)
        return saved

    def _write_stats_csv(self, path: Path, metric: str) -> Path:
        table = self.table(metric)
        columns = [(s, g) for s in self.steps for g in self.groups]
        with path.open("w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow([metric] + [f"step{s}/{self._group_slug(g)}" for s, g in columns])
            for stat in STATISTICS:
                writer.writerow([stat] + [table[s][g][stat] for s, g in columns])
        return path

    def _write_accuracy_csv(self, path: Path) -> Path:
        accuracy = self.accuracy()
        keys = list(next(iter(next(iter(accuracy.values())).values())).keys()) if accuracy else []
        with path.open("w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(["step", self.group_by, *keys])
            for step, cells in accuracy.items():
                for group, cell in cells.items():
                    writer.writerow([step, group, *(cell[k] for k in keys)])
        return path

    def _group_slug(self, group: int | str) -> str:
        return f"bin{group}" if self.group_by == "difficulty" else f"level{group}"


def _json_default(value: Any) -> Any:
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"Not JSON-serialisable: {type(value).__name__}")


def _versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for package in ("codapo-trl", "torch", "transformers", "trl", "vllm"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            versions[package] = importlib.metadata.version(package)
    return versions


# ---------------------------------------------------------------------------------------------------------------------
# Training logs
# ---------------------------------------------------------------------------------------------------------------------


def load_trainer_state(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The `log_history` entries of a `trainer_state.json` that have a `step` (nulls kept as `None`)."""
    state = read_json_file(path, "trainer state")
    history = state.get("log_history") if isinstance(state, dict) else None
    if not isinstance(history, list):
        raise ValueError(f"{path} has no log_history: is it a Trainer's trainer_state.json?")
    return [entry for entry in history if isinstance(entry, dict) and "step" in entry]


def load_question_log(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The rows of a per-question JSONL log (`codapo_question_log`): step, phase, question_id, level, ...,
    num_correct, num_generations."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"No such question log: {path}")
    rows = []
    with path.open(encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}:{number} is not JSON: {err}") from err
            if not {"step", "num_correct", "num_generations"} <= set(row):
                raise ValueError(f"{path}:{number} is not a question-log row (step, num_correct, num_generations).")
            rows.append(row)
    return rows


def _looks_like_question_log(path: Path) -> bool:
    try:
        with path.open(encoding="utf-8") as f:
            first = json.loads(f.readline())
    except (OSError, ValueError):
        return False
    return isinstance(first, dict) and {"step", "question_id", "num_correct", "num_generations"} <= set(first)


def find_training_logs(run_dir: str | os.PathLike) -> dict[str, str | None]:
    """The `trainer_state.json` (the run's own, else the latest checkpoint's) and the question log (`*.jsonl` with
    question-log rows) of a run directory; `None` for what is not there."""
    run = Path(run_dir)
    state: Path | None = run / TRAINER_STATE_FILE if (run / TRAINER_STATE_FILE).is_file() else None
    if state is None:
        checkpoints = sorted(
            (d for d in run.glob("checkpoint-*") if _CHECKPOINT_RE.fullmatch(d.name)),
            key=lambda d: int(_CHECKPOINT_RE.fullmatch(d.name).group(1)),
        )
        for checkpoint in reversed(checkpoints):
            if (checkpoint / TRAINER_STATE_FILE).is_file():
                state = checkpoint / TRAINER_STATE_FILE
                break
    log = next((p for p in sorted(run.glob("*.jsonl")) if _looks_like_question_log(p)), None)
    return {"trainer_state": str(state) if state else None, "question_log": str(log) if log else None}


def plot_training_dynamics(
    trainer_state: str | os.PathLike,
    output_dir: str | os.PathLike | None = None,
    *,
    smoothing: int | None = None,
) -> Figure:
    """The live `dynamics/` metrics of a training run over updates, per difficulty bin: share of trajectories, mean
    confidence of correct and of incorrect trajectories, mean positive / negative advantage, mean |token weight| and
    clipped fraction (see [`codapo_trl.analysis_plots.plot_training_dynamics`]).

    Args:
        trainer_state (`str` or `os.PathLike`): a `trainer_state.json`, or a run directory holding one.
        output_dir (`str` or `os.PathLike`, *optional*): save `training_dynamics.png` and `.svg` there.
        smoothing (`int`, *optional*): moving-average window in logged steps (default: about 1/25 of the run).

    Returns:
        `matplotlib.figure.Figure`.

    Raises:
        `FileNotFoundError`: no such file. `ValueError`: no `dynamics/` metrics in it.
    """
    from codapo_trl import analysis_plots as plots

    path = Path(trainer_state)
    if path.is_dir():
        found = find_training_logs(path)["trainer_state"]
        if found is None:
            raise FileNotFoundError(f"No trainer_state.json in {path} or its checkpoints.")
        path = Path(found)
    figure = plots.plot_training_dynamics(path, smoothing=smoothing)
    if output_dir is not None:
        plots.save_figure(figure, output_dir, "training_dynamics")
    return figure


# ---------------------------------------------------------------------------------------------------------------------
# The API
# ---------------------------------------------------------------------------------------------------------------------


def _load_dataset(dataset: Any, split: str, system_prompt: str | None) -> tuple[Any, str]:
    from codapo_trl.data import load_math_dataset

    if isinstance(dataset, (str, os.PathLike)):
        name = os.fspath(dataset)
        return load_math_dataset(name, split, system_prompt=system_prompt), name
    if not hasattr(dataset, "column_names"):
        raise ValueError("dataset must be a registry name, a local file or a datasets.Dataset.")
    return dataset, "dataset"


def _torch_dtype(dtype: str, device: str):
    import torch

    if dtype == "auto":
        return torch.bfloat16 if device.startswith("cuda") and torch.cuda.is_bf16_supported() else torch.float32
    return getattr(torch, dtype)


def _vllm_sample(
    checkpoint: Checkpoint, requests, config, *, dtype: str, seed: int, vllm_kwargs, progress: bool, desc: str
):
    """Sample with vLLM, then shut the engine down so that the scoring model gets the GPU memory back."""
    import gc

    from codapo_trl.evaluation.generation import Progress, VLLMGenerator

    kwargs = {"gpu_memory_utilization": 0.5, **dict(vllm_kwargs or {})}
    generator = VLLMGenerator(checkpoint.path, dtype=dtype, seed=seed, **kwargs)
    bar = Progress(len(requests), enabled=progress, desc=desc)
    try:
        return generator.generate(requests, config, bar if progress else None)
    finally:
        bar.close()
        engine = getattr(getattr(generator.llm, "llm_engine", None), "engine_core", None)
        with contextlib.suppress(Exception):
            if engine is not None and hasattr(engine, "shutdown"):
                engine.shutdown()
        del generator
        gc.collect()
        with contextlib.suppress(Exception):
            import torch

            torch.cuda.empty_cache()


def _analyze_checkpoint(
    checkpoint: Checkpoint,
    questions: Sequence[Question],
    *,
    dataset_key: str,
    config,
    grad_params: str,
    backend: str,
    batch_size: int,
    dtype: str,
    device: str,
    vllm_kwargs: Mapping[str, Any] | None,
    tokenizer: str | None,
    progress: bool,
) -> tuple[list[TrajectoryRecord], dict[str, Any], str]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from codapo_trl.evaluation.generation import GenerationRequest, Progress, TransformersGenerator, render_prompt
    from codapo_trl.rewards import grade_answers

    timing: dict[str, Any] = {}
    requests = [GenerationRequest(f"{dataset_key}/{q.question_id}", q.prompt) for q in questions]
    tic = time.perf_counter()
    if backend == "vllm":
        completions = _vllm_sample(
            checkpoint,
            requests,
            config,
            dtype=dtype,
            seed=config.seed,
            vllm_kwargs=vllm_kwargs,
            progress=progress,
            desc=f"Sampling {checkpoint.label}",
        )
        timing["sampling_s"] = time.perf_counter() - tic
        tic = time.perf_counter()
    tok = AutoTokenizer.from_pretrained(tokenizer or checkpoint.path)
    model = AutoModelForCausalLM.from_pretrained(checkpoint.path, dtype=_torch_dtype(dtype, device)).to(device).eval()
    timing["load_s"] = time.perf_counter() - tic
    if backend != "vllm":
        generator = TransformersGenerator(model, tok, batch_size=batch_size)
        bar = Progress(len(requests), enabled=progress, desc=f"Sampling {checkpoint.label}")
        tic = time.perf_counter()
        try:
            completions = generator.generate(requests, config, bar)
        finally:
            bar.close()
        timing["sampling_s"] = time.perf_counter() - tic
    if any(not c.token_ids for samples in completions for c in samples):
        raise RuntimeError("The sampling backend returned completions without token ids.")

    tic = time.perf_counter()
    flat = [(q, s, c) for q, samples in zip(questions, completions) for s, c in enumerate(samples)]
    verdicts = grade_answers(
        [c.text for _, _, c in flat], [q.answer for q, _, _ in flat], [q.answer_type for q, _, _ in flat]
    )
    timing["grading_s"] = time.perf_counter() - tic

    target = resolve_grad_params(model, grad_params)
    prompt_ids = {q.index: tok(render_prompt(tok, q.prompt), add_special_tokens=False)["input_ids"] for q in questions}
    if target.kind == "lm_head" and flat:
        q0, _, c0 = flat[0]
        _check_lm_head_path(model, prompt_ids[q0.index], c0.token_ids, config.temperature)
    tic = time.perf_counter()
    scores: list[tuple[float, float | None]] = []
    iterator: Iterable = flat
    if progress:
        from tqdm.auto import tqdm

        iterator = tqdm(flat, desc=f"Scoring {checkpoint.label}", unit="traj", dynamic_ncols=True)
    for q, _, c in iterator:
        scores.append(
            trajectory_statistics(
                model, prompt_ids[q.index], c.token_ids, temperature=config.temperature, target=target
            )
        )
    timing["scoring_s"] = time.perf_counter() - tic
    timing["generated_tokens"] = sum(c.num_tokens for _, _, c in flat)

    records: list[TrajectoryRecord] = []
    m = config.num_samples
    for start in range(0, len(flat), m):
        group = flat[start : start + m]
        rewards = [0.0 if v.reward is None else v.reward for v in verdicts[start : start + m]]
        advantages = group_advantages(rewards)
        accuracy = float(np.mean(rewards))
        for (q, s, c), verdict, reward, adv, (logp, norm) in zip(
            group, verdicts[start : start + m], rewards, advantages, scores[start : start + m]
        ):
            records.append(
                TrajectoryRecord(
                    step=checkpoint.step,
                    checkpoint=checkpoint.path,
                    level=q.level,
                    question_id=q.question_id,
                    question_index=q.index,
                    sample=s,
                    correct=bool(reward == 1.0),
                    graded=verdict.correct is not None,
                    reward=reward,
                    advantage=float(adv),
                    confidence=math.exp(logp),
                    log_confidence=logp,
                    grad_norm=norm,
                    grad_norm_weighted=None if norm is None else abs(float(adv)) * norm,
                    group_accuracy=accuracy,
                    difficulty=1.0 - accuracy,
                    difficulty_bin=difficulty_bin(1.0 - accuracy),
                    num_tokens=c.num_tokens,
                    finish_reason=c.finish_reason,
                    extracted=verdict.predicted,
                    completion=c.text,
                )
            )
    del model
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
    import torch

    from codapo_trl.evaluation.generation import SamplingConfig, vllm_available

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
    elif backend == "vllm" and importlib.util.find_spec("vllm") is None:
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


# ---------------------------------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `codapo-analyze`."""
    parser = argparse.ArgumentParser(
        prog="codapo-analyze",
        description="Training dynamics of checkpoints as in the CoDaPO paper (Section 3, Appendix B): sample fixed "
        "questions per level at every checkpoint, and report accuracy, confidence, advantages and per-trajectory "
        "gradient norms per level (tables and figures). With --logs-only, plot a run's logged dynamics only.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "checkpoints",
        nargs="*",
        help="run directories (all their checkpoint-<step> folders) and/or checkpoint folders",
    )
    parser.add_argument("--base", default=None, help="the model training started from, analysed as step 0")
    parser.add_argument(
        "--steps", type=int, nargs="+", default=None, help="analyse only these steps (paper: 0 60 240)"
    )
    data = parser.add_argument_group("questions")
    data.add_argument("--dataset", default="math500", help="registry name (math500, math, arithmetic) or local file")
    data.add_argument("--split", default="test", help="split of a registry dataset")
    data.add_argument("--levels", nargs="+", default=None, help="levels to analyse (default: all)")
    data.add_argument("--questions-per-level", type=int, default=100, help="fixed questions per level (paper: 100)")
    data.add_argument("--group-by", choices=GROUP_BY, default="level", help="table/figure columns")
    data.add_argument("--system-prompt", default=SYSTEM_PROMPT, help="system turn of the prompts")
    data.add_argument("--no-system-prompt", action="store_true", help="no system turn")
    sampling = parser.add_argument_group("sampling")
    sampling.add_argument("--samples-per-question", type=int, default=20, help="trajectories per question (paper: 20)")
    sampling.add_argument("--temperature", type=float, default=1.0, help="sampling temperature (use the training one)")
    sampling.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling mass")
    sampling.add_argument("--max-new-tokens", type=int, default=3072, help="longest trajectory")
    sampling.add_argument("--seed", type=int, default=0, help="seed of the question selection and of the samples")
    sampling.add_argument("--batch-size", type=int, default=32, help="sequences per generate call (transformers)")
    sampling.add_argument("--backend", choices=("auto", "transformers", "vllm"), default="auto")
    sampling.add_argument("--dtype", default="auto", help="auto (bf16 on GPU, else fp32), float32, bfloat16")
    sampling.add_argument("--device", default=None, help="default: cuda if available, else cpu")
    sampling.add_argument("--tokenizer", default=None, help="tokenizer to use instead of each checkpoint's")
    sampling.add_argument("--vllm-kwargs", type=json.loads, default=None, help="extra vllm.LLM arguments as JSON")
    grads = parser.add_argument_group("gradients")
    grads.add_argument(
        "--grad-params",
        default="all",
        help="parameters of the per-trajectory gradient norm: all (full gradient), lm_head (output projection only; "
        "cheap, for CPU), last_layer (last transformer block), none, or comma-separated regexes of parameter names",
    )
    logs = parser.add_argument_group("training logs")
    logs.add_argument(
        "--trainer-state", type=Path, default=None, help="trainer_state.json (default: found in the run)"
    )
    logs.add_argument("--question-log", type=Path, default=None, help="per-question JSONL (default: found in the run)")
    logs.add_argument("--logs-only", action="store_true", help="only plot the training logs (no sampling)")
    logs.add_argument(
        "--replot", type=Path, default=None, metavar="DIR", help="redraw the tables and figures of a saved analysis"
    )
    output = parser.add_argument_group("output")
    output.add_argument("--output-dir", type=Path, default=None, help="default: outputs/analysis/<run>-<time>")
    output.add_argument("--no-plots", action="store_true", help="no figures")
    output.add_argument("--no-progress", action="store_true", help="no progress bars")
    return parser


def _default_output_dir(name: str) -> Path:
    return timestamped_output_dir("analysis", name, fallback="run")


def _error(message: str) -> int:
    return usage_error("codapo-analyze", message)


def _logs_only(args: argparse.Namespace) -> int:
    from codapo_trl import analysis_plots as plots

    state, log = args.trainer_state, args.question_log
    for path in args.checkpoints:
        found = find_training_logs(path)
        state = state or (Path(found["trainer_state"]) if found["trainer_state"] else None)
        log = log or (Path(found["question_log"]) if found["question_log"] else None)
    if state is None and log is None:
        return _error("--logs-only needs a run directory, --trainer-state or --question-log.")
    out = args.output_dir or _default_output_dir(str(args.checkpoints[0] if args.checkpoints else state or log))
    written = []
    if state is not None:
        plot_training_dynamics(state, out)
        written.append("training_dynamics")
    if log is not None:
        figure = plots.plot_training_accuracy(log)
        plots.save_figure(figure, out, "training_accuracy")
        written.append("training_accuracy")
    from rich.console import Console

    Console().print(f"Figures {', '.join(written)} (PNG and SVG) in {out}/", markup=False, highlight=False)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run `codapo-analyze` with `argv` (default: the command line); returns the exit status (0, or 2 on errors)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        if args.logs_only:
            return _logs_only(args)
        if args.replot is not None:
            result = AnalysisResult.load(args.replot)
            output_dir = args.output_dir or args.replot
            result.save(output_dir, plots=not args.no_plots, records=output_dir != args.replot)
            _report(result, output_dir)
            return 0
        if not args.checkpoints and args.base is None:
            return _error("give checkpoints (a run directory or checkpoint folders) and/or --base.")
        name = str(args.checkpoints[0]) if args.checkpoints else str(args.base)
        output_dir = args.output_dir or _default_output_dir(name)
        result = analyze_checkpoints(
            args.checkpoints,
            args.dataset,
            base=args.base,
            steps=args.steps,
            split=args.split,
            levels=args.levels,
            questions_per_level=args.questions_per_level,
            samples_per_question=args.samples_per_question,
            temperature=args.temperature,
            top_p=args.top_p,
            max_new_tokens=args.max_new_tokens,
            seed=args.seed,
            system_prompt=None if args.no_system_prompt else args.system_prompt,
            grad_params=args.grad_params,
            group_by=args.group_by,
            batch_size=args.batch_size,
            backend=args.backend,
            dtype=args.dtype,
            device=args.device,
            tokenizer=args.tokenizer,
            vllm_kwargs=args.vllm_kwargs,
            output_dir=output_dir,
            trainer_state=args.trainer_state,
            question_log=args.question_log,
            plots=not args.no_plots,
            progress=not args.no_progress,
        )
    except (ValueError, FileNotFoundError) as err:
        return _error(str(err))
    _report(result, output_dir)
    return 0


def _report(result: AnalysisResult, output_dir: Path) -> None:
    """A compact console summary: one row per checkpoint and level (the paper-layout tables are in tables.md)."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    console = Console()
    with_grads = result.config.get("grad_params") != "none"
    accuracy, confidence = result.accuracy(), result.table("confidence")
    gradient = result.table("grad_norm") if with_grads else {}

    def short(value: float) -> str:
        return "–" if math.isnan(value) else f"{value:.3g}"

    table = Table(title=f"Per checkpoint and {result.group_by}", box=box.SIMPLE, title_justify="left")
    columns = ["step", "level" if result.group_by == "level" else "bin", "n", "acc %", "conf mean", "conf med"]
    if with_grads:
        columns += ["grad mean", "grad med"]
    for name in columns:
        table.add_column(name, justify="right", no_wrap=True)
    for step in result.steps:
        for group in result.groups:
            cell, conf = accuracy[step][group], confidence[step][group]
            acc = cell["accuracy"]
            row = [
                str(step),
                str(group),
                str(cell["num_trajectories"]),
                "–" if math.isnan(acc) else f"{100 * acc:.1f}",
            ]
            row += [short(conf["mean"]), short(conf["median"])]
            if with_grads:
                row += [short(gradient[step][group]["mean"]), short(gradient[step][group]["median"])]
            table.add_row(*row)
    console.print(table)
    total = result.timing.get("total_s", math.nan)
    console.print(
        f"{len(result.records)} trajectories from {len(result.checkpoints)} checkpoint(s) in {total:.1f} s; "
        f"gradient norms over {result.config.get('grad_params_description')}. Tables in the paper's layout: "
        f"{output_dir / TABLES_FILE}; files and figures in {output_dir}/"
    )


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
