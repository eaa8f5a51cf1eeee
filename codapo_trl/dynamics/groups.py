"""`GroupStats`: the per-group statistics of one generated batch, CoDaPO's inputs (confidence, difficulty, T_j).

Computed from tensors gathered from all processes (rollouts of a question contiguous), by [`group_stats`], a pure
function of the batch's rollout log-confidences, correctness and trained-token counts.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .. import coda


# Per-rollout columns that `DynamicsMixin` adds to TRL's generation output (this process's rows). They travel with
# the batch through TRL's shuffling and splitting to the loss, where the per-bin metrics read them.
LOG_CONFIDENCE_KEY = "dynamics_log_confidence"  # the rollout's mean token log-prob under the behaviour policy
CORRECTNESS_KEY = "dynamics_correctness"  # the rollout's correctness in [0, 1] (NaN if undefined)
DIFFICULTY_KEY = "dynamics_difficulty"  # its question's difficulty
ADVANTAGES_KEY = "dynamics_advantages"  # TRL's advantages, before any weighting
LOSS_VALUE_KEY = "dynamics_value"
"""The question's weight in the loss (the `v` of the token update weight), written by a trainer that weights each
question (CoDaPO); when absent, every question weighs 1."""

IS_MASK_MODES = ("sequence_mask", "token_mask")
"""TRL's vLLM importance-sampling modes that zero the loss of rollouts (or tokens) whose ratio leaves the bounds."""


@dataclass
class GroupStats:
    """Statistics of one generated batch over all processes; rollouts of a question are contiguous.

    Attributes:
        log_confidence (`torch.Tensor` of shape `(N,)`): mean token log-prob of each rollout (NaN if empty).
        correctness (`torch.Tensor` of shape `(N,)`): correctness in [0, 1] (NaN if undefined).
        confidence (`torch.Tensor` of shape `(Q,)`): group confidence `c`.
        difficulty (`torch.Tensor` of shape `(Q,)`): group difficulty `d`.
        token_counts (`torch.Tensor` of shape `(Q,)`): loss tokens over each group's rollouts.
    """

    log_confidence: torch.Tensor
    correctness: torch.Tensor
    confidence: torch.Tensor
    difficulty: torch.Tensor
    token_counts: torch.Tensor


def group_stats(
    log_confidence: torch.Tensor, correctness: torch.Tensor, trained_tokens: torch.Tensor, num_generations: int
) -> GroupStats:
    """The [`GroupStats`] of a batch from its rollouts (all processes, each question's `num_generations` contiguous).

    Args:
        log_confidence (`torch.Tensor` of shape `(N,)`): each rollout's mean token log-prob (NaN if empty).
        correctness (`torch.Tensor` of shape `(N,)`): each rollout's correctness in [0, 1] (NaN if undefined).
        trained_tokens (`torch.Tensor` of shape `(N,)`): each rollout's loss tokens (see [`trained_token_mask`]).
        num_generations (`int`): group size G.

    Example:
    ```python
    >>> stats = group_stats(torch.log(torch.tensor([0.5, 0.5])), torch.tensor([1.0, 0.0]), torch.tensor([3.0, 1.0]), 2)
    >>> stats.confidence, stats.difficulty, stats.token_counts
    (tensor([0.5000]), tensor([0.5000]), tensor([4.]))

    ```
    """
    return GroupStats(
        log_confidence=log_confidence,
        correctness=correctness,
        confidence=coda.group_confidence_from_trajectories(log_confidence, num_generations),
        difficulty=coda.group_difficulty(correctness, num_generations),
        token_counts=coda.group_token_counts(trained_tokens.float(), num_generations),
    )


def trained_token_mask(mask: torch.Tensor, importance_sampling_ratio: torch.Tensor | None) -> torch.Tensor:
    """The tokens that carry loss: `mask` (completion and model tokens) without those that TRL's vLLM
    importance-sampling correction masks (ratio set to 0 in its `*_mask` modes, per rollout `(N, 1)` or per token).

    T_j counts these, so that the CoDaPO objective is exact for the rollouts and tokens that remain: each question's
    loss is its token average over what is trained, not diluted by masked tokens.

    Example:
    ```python
    >>> trained_token_mask(torch.ones(2, 3), torch.tensor([[1.2], [0.0]]))
    tensor([[1., 1., 1.],
            [0., 0., 0.]])

    ```
    """
    if importance_sampling_ratio is None:
        return mask
    return mask * (importance_sampling_ratio != 0).to(mask.dtype)


POSITIVE_LOGP_TOLERANCE = 1e-3
"""A sampled token's log-prob above this (in nats) is no log-prob at all: float rounding of a real one stays far
below it."""


def placeholder_logps_reason(per_token_logps: torch.Tensor, mask: torch.Tensor) -> str | None:
    """Why a generator's per-token log-probs cannot be the sampled tokens' (placeholders a `rollout_func` filled
    in), or `None` when they can be: every loss token exactly 0 (probability 1 for every token of every rollout),
    a positive log-prob, or a rollout with loss tokens and no finite log-prob (NaN placeholders). A NaN for some
    tokens of a rollout is allowed (vLLM returns none for a token now and then; confidence leaves them out).

    Args:
        per_token_logps (`torch.Tensor` of shape `(N, T)`): the generator's log-probs of the sampled tokens.
        mask (`torch.Tensor` of shape `(N, T)`): 1 for the loss tokens (completion and model tokens).

    Example:
    ```python
    >>> mask = torch.ones(2, 3)
    >>> placeholder_logps_reason(torch.zeros(2, 3), mask)
    'every log-prob is exactly 0'
    >>> placeholder_logps_reason(torch.tensor([[-0.5, 0.0, -1.0], [-2.0, -0.1, -0.3]]), mask) is None
    True

    ```
    """
    tokens = mask.bool()
    if not bool(tokens.any()):
        return None
    finite = tokens & torch.isfinite(per_token_logps)
    if bool((tokens.any(-1) & ~finite.any(-1)).any()):
        return "a rollout has no finite log-prob (NaN)"
    values = per_token_logps[finite]
    if bool((values > POSITIVE_LOGP_TOLERANCE).any()):
        return f"a log-prob is positive ({float(values.max()):.4g})"
    if bool((values == 0).all()):
        return "every log-prob is exactly 0"
    return None
