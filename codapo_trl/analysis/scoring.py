"""Per-trajectory scoring: what the analysis adds to evaluation's sampling and grading.

Each sampled trajectory of a question's group of `M` gets:

- `correct`: the verdict of evaluation's maths grading ([`grade_groups`], i.e. [`codapo_trl.rewards.grade_answers`],
  the training reward's grader, given the question so that an answer copied from it scores 0);
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

**Ungraded samples** (the grader's `None`: the gold answer cannot be used) follow evaluation's rule, where a question
with an ungraded sample is left out of the metrics: a group with an ungraded sample is *ungraded*. Its records keep
the sample's text, verdict (`None` where there is none), confidence and gradient norm, with `graded: false` and no
reward, advantage or difficulty (`None`), and [`codapo_trl.analysis.results.AnalysisResult`] leaves them out of every
table, accuracy and figure. (Counting them as incorrect would put a question nobody can answer into the hardest bin
and pull the accuracy of its level down.)
"""

from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.nn.functional as F

from codapo_trl.analysis.checkpoints import Checkpoint
from codapo_trl.analysis.questions import Question
from codapo_trl.dynamics import BIN_EDGES, NUM_BINS, difficulty_bins
from codapo_trl.evaluation.evaluate import grade_math_samples


if TYPE_CHECKING:
    from transformers import PreTrainedModel

    from codapo_trl.evaluation.generation import Completion
    from codapo_trl.rewards import GradeResult


__all__ = [
    "ADVANTAGE_EPSILON",
    "GradientTarget",
    "TrajectoryRecord",
    "bin_label",
    "check_lm_head_path",
    "difficulty_bin",
    "grade_groups",
    "group_advantages",
    "group_records",
    "resolve_grad_params",
    "trajectory_statistics",
]

ADVANTAGE_EPSILON = 1e-4
"""The stabiliser of TRL's group-normalised advantage ``(r - mean) / (std + 1e-4)``."""


# ---------------------------------------------------------------------------------------------------------------------
# Advantages and gradient norms
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


def check_lm_head_path(model: PreTrainedModel, prompt_ids: Sequence[int], completion_ids: Sequence[int], T: float):
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
# Records
# ---------------------------------------------------------------------------------------------------------------------


@dataclass
class TrajectoryRecord:
    """One sampled trajectory: one line of `trajectories.jsonl`.

    Args:
        step (`int`): training step of the checkpoint. checkpoint (`str`): its path.
        level (`int` or `str`): the question's level. question_id (`str`), question_index (`int`): which question.
        sample (`int`): sample index within the question's group.
        correct (`bool` or `None`): the grader's verdict (`None`: ungraded).
        graded (`bool`): whether the group was graded (every sample of the question at this checkpoint has a verdict);
            records of an ungraded group are left out of the tables and figures (see the module docstring).
        reward (`float` or `None`): 1.0 or 0.0; `None` in an ungraded group.
        advantage (`float` or `None`): group-normalised advantage within the question's `M` samples.
        confidence (`float`): ``exp(log_confidence)``. log_confidence (`float`): mean token log-prob.
        grad_norm (`float` or `None`): norm of the gradient of the mean token log-prob.
        grad_norm_weighted (`float` or `None`): ``|advantage| * grad_norm``, the GRPO surrogate's per-trajectory norm.
        group_accuracy (`float` or `None`): mean reward of the group. difficulty (`float` or `None`):
            ``1 - group_accuracy``.
        difficulty_bin (`int` or `None`): 1-5, the paper's bins [0, 0.2), ..., [0.8, 1].
        num_tokens (`int`): completion tokens (stop token included). finish_reason (`str`): `"stop"` or `"length"`.
        extracted (`str` or `None`): the answer the grader read. completion (`str`): the text.
    """

    step: int
    checkpoint: str
    level: int | str
    question_id: str
    question_index: int
    sample: int
    correct: bool | None
    graded: bool
    reward: float | None
    advantage: float | None
    confidence: float
    log_confidence: float
    grad_norm: float | None
    grad_norm_weighted: float | None
    group_accuracy: float | None
    difficulty: float | None
    difficulty_bin: int | None
    num_tokens: int
    finish_reason: str
    extracted: str | None
    completion: str


def difficulty_bin(difficulty: float) -> int:
    """The paper's bin (1-5) of a group difficulty, via [`codapo_trl.dynamics.difficulty_bins`]."""
    return int(difficulty_bins(torch.tensor([difficulty]))[0]) + 1


def bin_label(index: int) -> str:
    """`"d in [0.2, 0.4)"` for bin 2 (1-based); the last bin is closed."""
    lo, hi = BIN_EDGES[index - 1], BIN_EDGES[index]
    return f"d∈[{lo:g}, {hi:g}{']' if index == NUM_BINS else ')'}"


def grade_groups(
    questions: Sequence[Question], completions: Sequence[Sequence[Completion]]
) -> list[list[GradeResult]]:
    """Evaluation's maths grading ([`codapo_trl.evaluation.evaluate.grade_math_samples`]) of every trajectory of
    every question: against its gold answer and answer type, in final form (as in training and evaluation). Returns,
    per question, its samples' results."""
    return grade_math_samples(completions, [q.answer for q in questions], [q.answer_type for q in questions])


def group_records(
    checkpoint: Checkpoint,
    question: Question,
    completions: Sequence[Completion],
    verdicts: Sequence[GradeResult],
    scores: Sequence[tuple[float, float | None]],
) -> list[TrajectoryRecord]:
    """The records of one question's group of samples at one checkpoint.

    Args:
        checkpoint ([`Checkpoint`]): the checkpoint that sampled them.
        question ([`Question`]): the question.
        completions (`Sequence[Completion]`): its `M` samples, in sample order.
        verdicts (`Sequence[GradeResult]`): their grades ([`grade_groups`]).
        scores (`Sequence[tuple[float, float | None]]`): their `(mean_logp, grad_norm)` ([`trajectory_statistics`]).

    Returns:
        `list[TrajectoryRecord]`: one per sample. A group with an ungraded sample is ungraded: `graded=False` and no
        reward, advantage or difficulty (see the module docstring).
    """
    if not len(completions) == len(verdicts) == len(scores):
        raise ValueError(
            f"A group needs one verdict and one score per sample: got {len(completions)} samples, {len(verdicts)} "
            f"verdicts and {len(scores)} scores."
        )
    graded = all(v.correct is not None for v in verdicts)
    if graded:
        rewards = [float(v.reward) for v in verdicts]
        advantages = [float(a) for a in group_advantages(rewards)]
        accuracy = float(np.mean(rewards))
        difficulty, bin_index = 1.0 - accuracy, difficulty_bin(1.0 - accuracy)
    else:
        rewards, advantages = [None] * len(verdicts), [None] * len(verdicts)
        accuracy = difficulty = bin_index = None
    records = []
    for s, (completion, verdict, reward, advantage, (logp, norm)) in enumerate(
        zip(completions, verdicts, rewards, advantages, scores)
    ):
        records.append(
            TrajectoryRecord(
                step=checkpoint.step,
                checkpoint=checkpoint.path,
                level=question.level,
                question_id=question.question_id,
                question_index=question.index,
                sample=s,
                correct=verdict.correct,
                graded=graded,
                reward=reward,
                advantage=advantage,
                confidence=math.exp(logp),
                log_confidence=logp,
                grad_norm=norm,
                grad_norm_weighted=None if norm is None or advantage is None else abs(advantage) * norm,
                group_accuracy=accuracy,
                difficulty=difficulty,
                difficulty_bin=bin_index,
                num_tokens=completion.num_tokens,
                finish_reason=completion.finish_reason,
                extracted=verdict.predicted,
                completion=completion.text,
            )
        )
    return records
