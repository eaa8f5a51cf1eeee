"""The CoDaPO method as pure torch functions (paper Sections 4.1-4.2, Appendix D, Algorithm 1).

Everything here works on one *update batch* whose rollouts are laid out group after group: rows
``[j * G, (j + 1) * G)`` are the ``G`` rollouts of question ``j``. Nothing here knows about processes,
trainers or models; [`CoDaPOTrainer`] gathers the global tensors and calls these functions.

- CoDaWeighting: [`group_confidence`] (c_q), [`group_difficulty`] (d_q), [`coda_values`] (v_q = offset + Vc(c) Vd(d)).
- CoDaSampling: [`select_top_k`] (the top-K questions, repeated to fill the batch).
- CoDaLearning: [`codapo_sample_weights`] (v_j / (|B| T_j) per rollout) and [`codapo_loss`] (the whole objective).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence

import torch
from torch import Tensor


__all__ = [
    "VALUE_FUNCTIONS",
    "codapo_loss",
    "codapo_sample_weights",
    "coda_values",
    "group_confidence",
    "group_confidence_from_trajectories",
    "group_difficulty",
    "group_token_counts",
    "select_top_k",
    "select_uniform",
    "trajectory_log_confidence",
]


def _linear(x: Tensor) -> Tensor:
    return x


def _reverse(x: Tensor) -> Tensor:
    return 1.0 - x


def _edges(x: Tensor) -> Tensor:
    return 4.0 * (x - 0.5) ** 2


def _center(x: Tensor) -> Tensor:
    return 1.0 - 4.0 * (x - 0.5) ** 2


def _constant(x: Tensor) -> Tensor:
    # NaN stays NaN so that an undefined statistic is never silently turned into a weight of 1.
    return torch.where(torch.isnan(x), x, torch.ones_like(x))


VALUE_FUNCTIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "linear": _linear,  # x
    "reverse": _reverse,  # 1 - x
    "edges": _edges,  # 4 (x - 1/2)^2
    "center": _center,  # 1 - 4 (x - 1/2)^2
    "constant": _constant,  # 1
}
"""The five shapes of the paper's ablation (its Tables 2, 6 and 7), usable for both V_c and V_d."""


def _check_groups(num_rows: int, num_generations: int) -> int:
    if num_generations < 1 or num_rows % num_generations != 0:
        raise ValueError(
            f"Expected whole groups: {num_rows} rollouts cannot be split into groups of num_generations="
            f"{num_generations}."
        )
    return num_rows // num_generations


def trajectory_log_confidence(per_token_logps: Tensor, mask: Tensor) -> Tensor:
    """Mean token log-probability of each rollout, the paper's trajectory ``Confidence`` (Section 3.2).

    Tokens outside `mask` (padding, tool output) and non-finite log-probs (vLLM may return none for a token) are
    left out. A rollout with no token left gets NaN.

    Args:
        per_token_logps (`torch.Tensor` of shape `(N, T)`):
            Log-probabilities of the sampled tokens under the behaviour policy.
        mask (`torch.Tensor` of shape `(N, T)`):
            1 for tokens that belong to the completion and count in the loss, 0 elsewhere.

    Returns:
        `torch.Tensor` of shape `(N,)`: the mean log-probability per rollout (NaN for an empty rollout).
    """
    valid = mask.bool() & torch.isfinite(per_token_logps)
    logps = torch.where(valid, per_token_logps, torch.zeros_like(per_token_logps)).float()
    counts = valid.sum(-1)
    means = logps.sum(-1) / counts.clamp(min=1)
    return torch.where(counts > 0, means, torch.full_like(means, float("nan")))


def group_confidence(per_token_logps: Tensor, mask: Tensor, num_generations: int) -> Tensor:
    """Group confidence ``c_q = exp(mean_i mean_t log f(o_it))`` (paper Eq. in Section 4.2).

    The geometric-mean token probability of a question's rollouts, in (0, 1]. Rollouts without any token (see
    [`trajectory_log_confidence`]) are left out of the mean; a group with none left gets NaN.

    Args:
        per_token_logps (`torch.Tensor` of shape `(num_groups * num_generations, T)`):
            Behaviour-policy log-probabilities of the sampled tokens, groups contiguous.
        mask (`torch.Tensor` of the same shape):
            Loss mask (completion tokens up to EOS, tool tokens excluded).
        num_generations (`int`):
            Group size G.

    Returns:
        `torch.Tensor` of shape `(num_groups,)`.

    Example:
    ```python
    >>> logps = torch.log(torch.tensor([[0.5, 0.5], [0.5, 0.5]]))
    >>> group_confidence(logps, torch.ones(2, 2), num_generations=2)
    tensor([0.5000])
    ```
    """
    return group_confidence_from_trajectories(trajectory_log_confidence(per_token_logps, mask), num_generations)


def group_confidence_from_trajectories(log_confidences: Tensor, num_generations: int) -> Tensor:
    """[`group_confidence`] from per-rollout mean log-probs (see [`trajectory_log_confidence`]).

    Lets a caller gather one number per rollout across processes instead of whole log-prob matrices.

    Args:
        log_confidences (`torch.Tensor` of shape `(num_groups * num_generations,)`): mean log-prob per rollout, NaN
            for a rollout without tokens.
        num_generations (`int`): group size G.

    Returns:
        `torch.Tensor` of shape `(num_groups,)`.
    """
    num_groups = _check_groups(log_confidences.numel(), num_generations)
    return torch.exp(torch.nanmean(log_confidences.float().view(num_groups, num_generations), dim=1))


def group_difficulty(correctness: Tensor, num_generations: int) -> Tensor:
    """Group difficulty ``d_q = 1 - mean_i r_i``, the empirical error rate of a question's rollouts.

    Correctness is clamped to [0, 1] (a pass rate works as well as a binary reward). NaN entries (a reward
    function returned None) are left out; a group with no defined correctness gets NaN.

    Args:
        correctness (`torch.Tensor` of shape `(num_groups * num_generations,)`):
            Correctness of each rollout, groups contiguous.
        num_generations (`int`):
            Group size G.

    Returns:
        `torch.Tensor` of shape `(num_groups,)`, values in [0, 1] or NaN.
    """
    num_groups = _check_groups(correctness.numel(), num_generations)
    grouped = correctness.float().clamp(0.0, 1.0).view(num_groups, num_generations)
    return 1.0 - torch.nanmean(grouped, dim=1)


def _value_function(name: str) -> Callable[[Tensor], Tensor]:
    try:
        return VALUE_FUNCTIONS[name]
    except KeyError:
        raise ValueError(f"Unknown value function {name!r}; choose one of {sorted(VALUE_FUNCTIONS)}.") from None


def coda_values(
    confidence: Tensor,
    difficulty: Tensor,
    confidence_fn: str = "linear",
    difficulty_fn: str = "center",
    offset: float = 0.0,
) -> Tensor:
    """Per-question value ``v_q = offset + V_c(c_q) * V_d(d_q)`` (CoDaWeighting).

    The paper's choice is ``V_c(x) = x`` and ``V_d(x) = 1 - 4 (x - 1/2)^2`` with no offset; the authors' released
    code adds an offset of 0.1. The result carries no gradient. NaN confidence or difficulty gives NaN: callers
    weight such a question by 0 and [`select_top_k`] never picks it while a defined value is left.

    Args:
        confidence (`torch.Tensor` of shape `(num_groups,)`): c_q in (0, 1].
        difficulty (`torch.Tensor` of shape `(num_groups,)`): d_q in [0, 1].
        confidence_fn (`str`, *optional*, defaults to `"linear"`): name of V_c in [`VALUE_FUNCTIONS`].
        difficulty_fn (`str`, *optional*, defaults to `"center"`): name of V_d in [`VALUE_FUNCTIONS`].
        offset (`float`, *optional*, defaults to `0.0`): constant added to every value.

    Returns:
        `torch.Tensor` of shape `(num_groups,)`.

    Example:
    ```python
    >>> coda_values(torch.tensor([0.8, 0.8, 0.8]), torch.tensor([0.0, 0.5, 1.0]))
    tensor([0.0000, 0.8000, 0.0000])
    ```
    """
    v_c, v_d = _value_function(confidence_fn), _value_function(difficulty_fn)
    with torch.no_grad():
        return offset + v_c(confidence.detach().float()) * v_d(difficulty.detach().float())


def select_top_k(
    values: Tensor | Sequence[float],
    k: int,
    batch_size: int,
    difficulty: Tensor | Sequence[float] | None = None,
) -> list[int]:
    """CoDaSampling: the indices of the top-`k` groups by value, each repeated to fill `batch_size` slots.

    Groups are ranked by value, highest first. Among groups of value 0 or less (when fewer than `k` have a positive
    value; with no offset these are the solved and the unsolved questions), the ones with the higher `difficulty`
    come first, so unsolved before solved: fresh rollouts of an unsolved question may discover a solution, a solved
    one's carry no signal. Remaining ties go to the earlier group. NaN values (correctness undefined) are never
    selected while any defined value remains; if fewer than `k` are defined, the defined ones share the batch, and
    only when none is the first `k` groups by position are taken. The result depends only on its arguments, so every
    process that holds the same gathered values selects the same groups.

    Each selected group appears ``batch_size // n`` times (``n`` the number of selected groups); the highest-ranked
    ``batch_size % n`` groups get one extra copy. The result is ordered by rank, copies of one group together.

    Args:
        values (`torch.Tensor` or sequence of floats of length `num_groups`): v_q per group.
        k (`int`): number of distinct groups to keep, ``1 <= k <= num_groups``.
        batch_size (`int`): number of slots to fill, ``batch_size >= k``.
        difficulty (`torch.Tensor` or sequence of floats, *optional*): d_q per group, to order the groups whose value
            is not positive (without it they go by position).

    Returns:
        `list[int]` of length `batch_size`: group indices.

    Example:
    ```python
    >>> select_top_k(torch.tensor([0.1, 0.9, 0.5, 0.9]), k=2, batch_size=5)
    [1, 1, 1, 3, 3]
    >>> select_top_k([0.0, 0.6, 0.0, 0.0], k=2, batch_size=4, difficulty=[0.0, 0.5, 1.0, 1.0])  # unsolved next
    [1, 1, 2, 2]
    ```
    """
    flat = _floats(values)
    if not 1 <= k <= len(flat):
        raise ValueError(f"k must be between 1 and the number of groups ({len(flat)}), got {k}.")
    if batch_size < k:
        raise ValueError(f"batch_size ({batch_size}) must be at least k ({k}).")
    hardness = _floats(difficulty) if difficulty is not None else [0.0] * len(flat)
    if len(hardness) != len(flat):
        raise ValueError(f"Got {len(flat)} values but {len(hardness)} difficulties.")
    defined = [i for i, v in enumerate(flat) if not math.isnan(v)]

    def rank(i: int) -> tuple:
        if flat[i] > 0:
            return (0, -flat[i], 0.0, i)
        return (1, 0.0, -_nan_to(hardness[i], -1.0), i)  # undefined difficulty after every defined one

    ranked = sorted(defined, key=rank)[:k] if defined else list(range(k))
    return _fill(ranked, batch_size)


def select_uniform(num_groups: int, k: int, batch_size: int, seed: int) -> list[int]:
    """The uniform-resampling control: `k` distinct groups drawn at random, each repeated to fill `batch_size` slots.

    The ablation that separates "a second update on repeated questions" from "value-guided selection" (issue 14's
    control arm, `codapo_selection="uniform"`): the groups are drawn without replacement, uniformly, from a generator
    seeded with `seed` alone, so the draw ignores values and difficulty and every process that passes the same seed
    draws the same groups. Copies are laid out as in [`select_top_k`], in the order drawn.

    Args:
        num_groups (`int`): number of groups in the batch.
        k (`int`): number of distinct groups to keep, ``1 <= k <= num_groups``.
        batch_size (`int`): number of slots to fill, ``batch_size >= k``.
        seed (`int`): seed of the draw (the trainer derives it from `args.seed` and the update).

    Returns:
        `list[int]` of length `batch_size`: group indices.

    Example:
    ```python
    >>> picks = select_uniform(8, k=2, batch_size=8, seed=3)
    >>> len(picks), len(set(picks)), picks == select_uniform(8, k=2, batch_size=8, seed=3)
    (8, 2, True)
    ```
    """
    if not 1 <= k <= num_groups:
        raise ValueError(f"k must be between 1 and the number of groups ({num_groups}), got {k}.")
    if batch_size < k:
        raise ValueError(f"batch_size ({batch_size}) must be at least k ({k}).")
    return _fill(random.Random(seed).sample(range(num_groups), k), batch_size)


def _fill(ranked: list[int], batch_size: int) -> list[int]:
    """Repeat the ranked groups to `batch_size` slots, the first ``batch_size % len(ranked)`` one copy more."""
    copies, extra = divmod(batch_size, len(ranked))
    return [index for rank, index in enumerate(ranked) for _ in range(copies + (1 if rank < extra else 0))]


def _floats(values: Tensor | Sequence[float]) -> list[float]:
    return [float(v) for v in (values.detach().flatten().tolist() if isinstance(values, Tensor) else values)]


def _nan_to(value: float, default: float) -> float:
    return default if math.isnan(value) else value


def group_token_counts(mask: Tensor, num_generations: int) -> Tensor:
    """``T_j``: the number of loss tokens over all rollouts of each group.

    Args:
        mask (`torch.Tensor` of shape `(num_groups * num_generations, T)` or `(num_groups * num_generations,)`):
            A loss mask, or the number of loss tokens per rollout.
        num_generations (`int`): group size G.

    Returns:
        `torch.Tensor` of shape `(num_groups,)`.
    """
    per_rollout = mask.sum(-1) if mask.dim() == 2 else mask
    num_groups = _check_groups(per_rollout.numel(), num_generations)
    return per_rollout.float().view(num_groups, num_generations).sum(1)


def codapo_sample_weights(values: Tensor, token_counts: Tensor, num_generations: int) -> Tensor:
    """Per-rollout weight ``v_j / (|B| T_j)`` of the CoDaPO objective.

    With these weights the CoDaPO loss of an update batch is ``-sum_i w_i sum_t l_it``: each question contributes
    its value times the token mean over all its rollouts (token-level micro-averaging within the question), and the
    questions are averaged. Groups with no loss token, or an undefined (NaN) value, get weight 0.

    Args:
        values (`torch.Tensor` of shape `(num_groups,)`): v_j.
        token_counts (`torch.Tensor` of shape `(num_groups,)`): T_j, see [`group_token_counts`].
        num_generations (`int`): group size G.

    Returns:
        `torch.Tensor` of shape `(num_groups * num_generations,)`.
    """
    num_groups = values.numel()
    if token_counts.numel() != num_groups:
        raise ValueError(f"Got {num_groups} values but {token_counts.numel()} token counts.")
    values = torch.nan_to_num(values.detach().float(), nan=0.0)
    counts = token_counts.to(values.device).float()
    per_group = torch.where(counts > 0, values / (num_groups * counts.clamp(min=1.0)), torch.zeros_like(values))
    return per_group.repeat_interleave(num_generations)


def codapo_loss(
    per_token_logps: Tensor,
    old_per_token_logps: Tensor,
    advantages: Tensor,
    mask: Tensor,
    values: Tensor,
    num_generations: int,
    epsilon_low: float = 0.2,
    epsilon_high: float = 0.2,
    objective: str = "clip",
) -> Tensor:
    r"""The CoDaPO loss of one whole update batch (paper Eq. (3), negated and averaged over questions).

    ``L = -(1/|B|) sum_j v_j / T_j sum_{i in j} sum_t g_it`` where ``T_j`` counts the loss tokens of question j's G
    rollouts and ``g_it = min(rho A, clip(rho, 1 - eps_low, 1 + eps_high) A)`` with
    ``rho = exp(logp - old_logp)`` (`objective="clip"`), or ``g_it = A logp`` (`objective="gpg"`, the GPG form).
    No KL term. `values` and `advantages` are constants (no gradient flows through them).

    Args:
        per_token_logps (`torch.Tensor` of shape `(num_groups * G, T)`): current-policy log-probs.
        old_per_token_logps (`torch.Tensor` of the same shape): behaviour-policy log-probs (ignored by `"gpg"`).
        advantages (`torch.Tensor` of shape `(num_groups * G,)`): group-normalised advantages.
        mask (`torch.Tensor` of shape `(num_groups * G, T)`): loss mask.
        values (`torch.Tensor` of shape `(num_groups,)`): v_j.
        num_generations (`int`): group size G.
        epsilon_low (`float`, *optional*, defaults to `0.2`): lower clipping range.
        epsilon_high (`float`, *optional*, defaults to `0.2`): upper clipping range.
        objective (`str`, *optional*, defaults to `"clip"`): `"clip"` or `"gpg"`.

    Returns:
        `torch.Tensor`: the scalar loss.
    """
    advantages = advantages.detach().unsqueeze(-1)
    if objective == "clip":
        ratio = torch.exp(per_token_logps - old_per_token_logps.detach())
        clipped = torch.clamp(ratio, 1.0 - epsilon_low, 1.0 + epsilon_high)
        gain = torch.minimum(ratio * advantages, clipped * advantages)
    elif objective == "gpg":
        gain = advantages * per_token_logps
    else:
        raise ValueError(f"Unknown objective {objective!r}; choose 'clip' or 'gpg'.")
    weights = codapo_sample_weights(values, group_token_counts(mask, num_generations), num_generations)
    per_rollout = (gain * mask).sum(-1)
    return -(weights.to(per_rollout.dtype) * per_rollout).sum()
