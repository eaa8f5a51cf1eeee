"""Training dynamics of GRPO-style training, per difficulty bin (paper Section 3 and Appendix B), as pure functions.

The paper stratifies trajectories by their question's difficulty into five bins and follows, per bin, the
confidence of correct and incorrect trajectories, the advantages, and the token-level update weight
``w = 1_unclipped * A * rho * v`` (``v = 1`` for GRPO). [`bin_sums`] accumulates these over micro-batches (sums
and counts, so that they can be added across micro-batches and processes); [`summarize_bins`] turns the sums into
the logged means. [`binary_advantages`] and [`discovery_probability`] are the paper's closed forms, used by the
tests to check the trainers' numbers.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor


BIN_EDGES = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
"""Difficulty bins [0, 0.2), [0.2, 0.4), [0.4, 0.6), [0.6, 0.8), [0.8, 1] (the last one closed)."""
NUM_BINS = len(BIN_EDGES) - 1
BIN_LABELS = tuple(f"bin{i + 1}" for i in range(NUM_BINS))

# Columns of the accumulator returned by `bin_sums`, one row per bin.
SUM_COLUMNS = (
    "count",  # trajectories
    "correct",  # correct trajectories
    "confidence_correct",  # sum of trajectory confidence over correct trajectories
    "incorrect",
    "confidence_incorrect",
    "positive",  # trajectories with A > 0
    "advantage_positive",  # sum of A over them
    "negative",
    "advantage_negative",
    "tokens",  # loss tokens
    "token_weight",  # sum of |w| over tokens
    "clipped",  # tokens in the clipped region
)


def difficulty_bins(difficulty: Tensor) -> Tensor:
    """Bin index 0-4 of each difficulty ([0, 0.2) -> 0, ..., [0.8, 1] -> 4); -1 for NaN (undefined).

    Example:
    ```python
    >>> difficulty_bins(torch.tensor([0.0, 0.2, 0.5, 0.79, 0.8, 1.0, float("nan")]))
    tensor([ 0,  1,  2,  3,  4,  4, -1])
    ```
    """
    d = difficulty.detach().float()
    # A small tolerance so that e.g. 1 - 0.8 = 0.19999... still lands in [0.2, 0.4)
    bins = torch.floor(d * NUM_BINS + 1e-6).clamp(0, NUM_BINS - 1).long()
    return torch.where(torch.isnan(d), torch.full_like(bins, -1), bins)


def token_update_weights(
    per_token_logps: Tensor,
    old_per_token_logps: Tensor,
    advantages: Tensor,
    values: Tensor | None = None,
    epsilon_low: float = 0.2,
    epsilon_high: float = 0.2,
) -> tuple[Tensor, Tensor]:
    """Effective token weight ``w = v * 1_unclipped * rho * A`` (paper Eq. (7)) and the clipped-region mask.

    A token is clipped when ``A >= 0`` and ``rho > 1 + eps_high``, or ``A < 0`` and ``rho < 1 - eps_low``: the
    clipped surrogate then has no gradient for it.

    Args:
        per_token_logps (`torch.Tensor` of shape `(N, T)`): current-policy log-probs.
        old_per_token_logps (`torch.Tensor` of shape `(N, T)`): behaviour-policy log-probs.
        advantages (`torch.Tensor` of shape `(N,)`): group-normalised advantages (not weighted by `v`).
        values (`torch.Tensor` of shape `(N,)`, *optional*): each trajectory's question value (1 if `None`).
        epsilon_low (`float`): lower clipping range. epsilon_high (`float`): upper clipping range.

    Returns:
        `(weights, clipped)`, both of shape `(N, T)`.
    """
    ratio = torch.exp(per_token_logps.detach().float() - old_per_token_logps.detach().float())
    adv = advantages.detach().float().unsqueeze(-1)
    clipped = ((adv >= 0) & (ratio > 1 + epsilon_high)) | ((adv < 0) & (ratio < 1 - epsilon_low))
    weights = torch.where(clipped, torch.zeros_like(ratio), ratio * adv)
    if values is not None:
        weights = weights * torch.nan_to_num(values.detach().float(), nan=0.0).unsqueeze(-1)
    return weights, clipped


def bin_sums(
    difficulty: Tensor,
    correctness: Tensor,
    confidence: Tensor,
    advantages: Tensor,
    token_weights: Tensor,
    clipped: Tensor,
    mask: Tensor,
) -> Tensor:
    """Per-bin sums and counts of one micro-batch, shape `(NUM_BINS, len(SUM_COLUMNS))` (see [`SUM_COLUMNS`]).

    Args:
        difficulty (`torch.Tensor` of shape `(N,)`): each trajectory's question difficulty.
        correctness (`torch.Tensor` of shape `(N,)`): in [0, 1]; a trajectory counts as correct when it is >= 0.5.
        confidence (`torch.Tensor` of shape `(N,)`): trajectory confidence (geometric-mean token probability).
        advantages (`torch.Tensor` of shape `(N,)`): group-normalised advantages.
        token_weights, clipped (`torch.Tensor` of shape `(N, T)`): from [`token_update_weights`].
        mask (`torch.Tensor` of shape `(N, T)`): loss mask.

    Returns:
        `torch.Tensor` of shape `(NUM_BINS, len(SUM_COLUMNS))`.
    """
    bins = difficulty_bins(difficulty)
    mask = mask.float()
    correct = (correctness.float() >= 0.5) & ~torch.isnan(correctness.float())
    incorrect = (correctness.float() < 0.5) & ~torch.isnan(correctness.float())
    conf = torch.nan_to_num(confidence.float(), nan=0.0)
    conf_defined = ~torch.isnan(confidence.float())
    adv = advantages.detach().float()
    per_row = torch.stack(
        [
            torch.ones_like(adv),
            (correct & conf_defined).float(),
            conf * (correct & conf_defined),
            (incorrect & conf_defined).float(),
            conf * (incorrect & conf_defined),
            (adv > 0).float(),
            adv.clamp(min=0),
            (adv < 0).float(),
            adv.clamp(max=0),
            mask.sum(-1),
            (token_weights.abs().float() * mask).sum(-1),
            (clipped.float() * mask).sum(-1),
        ],
        dim=1,
    )
    sums = torch.zeros(NUM_BINS, len(SUM_COLUMNS), dtype=torch.float64, device=per_row.device)
    valid = bins >= 0
    sums.index_add_(0, bins[valid], per_row[valid].double())
    return sums


def summarize_bins(sums: Tensor) -> dict[str, float]:
    """The logged per-bin metrics from accumulated [`bin_sums`]: `{"bin3/confidence_correct": ..., ...}`.

    Means over an empty set are NaN (TRL's logger skips NaN values).
    """

    def ratio(num: float, den: float) -> float:
        return num / den if den > 0 else float("nan")

    col = {name: i for i, name in enumerate(SUM_COLUMNS)}
    metrics = {}
    for b, label in enumerate(BIN_LABELS):
        row = sums[b].tolist()
        metrics[f"{label}/count"] = row[col["count"]]
        metrics[f"{label}/confidence_correct"] = ratio(row[col["confidence_correct"]], row[col["correct"]])
        metrics[f"{label}/confidence_incorrect"] = ratio(row[col["confidence_incorrect"]], row[col["incorrect"]])
        metrics[f"{label}/advantage_positive"] = ratio(row[col["advantage_positive"]], row[col["positive"]])
        metrics[f"{label}/advantage_negative"] = ratio(row[col["advantage_negative"]], row[col["negative"]])
        metrics[f"{label}/token_weight"] = ratio(row[col["token_weight"]], row[col["tokens"]])
        metrics[f"{label}/clipped_frac"] = ratio(row[col["clipped"]], row[col["tokens"]])
    return metrics


def binary_advantages(mean_reward: float) -> tuple[float, float]:
    """Advantages of correct and incorrect rollouts for binary rewards with group mean `r` (paper Eq. (1)):
    ``A+ = sqrt((1 - r) / r)`` and ``A- = -sqrt(r / (1 - r))`` (population std, no stabiliser)."""
    if not 0 < mean_reward < 1:
        raise ValueError(f"mean_reward must be in (0, 1), got {mean_reward}.")
    return math.sqrt((1 - mean_reward) / mean_reward), -math.sqrt(mean_reward / (1 - mean_reward))


def discovery_probability(success_rate: float, num_generations: int, repeats: int = 1) -> float:
    """Probability of at least one correct rollout among `repeats` groups of `num_generations` (paper Eq. (2),
    Appendix D.3): ``1 - (1 - pi)^(G m)``."""
    return 1.0 - (1.0 - success_rate) ** (num_generations * repeats)


def describe(values) -> dict[str, float]:
    """Minimum, maximum, mean, standard deviation, median and (excess, Fisher) kurtosis, as in the paper's
    Appendix B tables."""
    from scipy.stats import kurtosis

    x = np.asarray(values, dtype=np.float64)
    x = x[~np.isnan(x)]
    if x.size == 0:
        return dict.fromkeys(("min", "max", "mean", "std", "median", "kurtosis"), float("nan"))
    return {
        "min": float(x.min()),
        "max": float(x.max()),
        "mean": float(x.mean()),
        "std": float(x.std()),
        "median": float(np.median(x)),
        "kurtosis": float(kurtosis(x, fisher=True)) if x.size > 1 else float("nan"),
    }
