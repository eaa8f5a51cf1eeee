"""Which reward is correctness, what kind of number it is, and each rollout's correctness read from a batch's rewards.

CoDaPO's difficulty, hence every value and the selection of S, comes from correctness alone, so correctness is never
guessed (docs/method.md, "Which reward is correctness"):

- [`resolve_correctness`] (at construction): the correctness reward is named, or picked only when there is no doubt
  (a single reward function, or exactly one known verifier among several); each named reward's kind is declared
  (`"binary"` by default, `"pass_rate"`, or a threshold); anything doubtful is a `ValueError` that says what to add.
- [`read_correctness`] (every batch): each rollout's correctness from the reward that scored it, and the first value
  that breaks its reward's declared kind, as a message naming the reward and the value.

A reward function declares its own kind with attributes: `correctness_kind = "binary"` or `"pass_rate"`, or
`correctness_threshold = t` (a score `>= t` is correct). The rewards of `codapo_trl.rewards` do (the maths reward is
binary, the code reward a pass rate), which also makes them known verifiers; so are TRL's `accuracy_reward` and
`reasoning_accuracy_reward` (binary).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch


__all__ = [
    "CORRECTNESS_KINDS",
    "CorrectnessReading",
    "CorrectnessSpec",
    "declared_kind",
    "is_known_verifier",
    "read_correctness",
    "resolve_correctness",
]

BINARY, PASS_RATE, THRESHOLD = "binary", "pass_rate", "threshold"
CORRECTNESS_KINDS = (BINARY, PASS_RATE)
"""The kinds a user declares by name; a threshold is declared by its value."""

_TRL_VERIFIERS = ("accuracy_reward", "reasoning_accuracy_reward")
"""TRL's reward functions (in `trl.rewards`) that return 1/0 for right/wrong (None when the gold cannot be parsed)."""


def _trl_verifiers() -> tuple[Any, ...]:
    try:
        from trl import rewards
    except ImportError:  # pragma: no cover - TRL is a dependency
        return ()
    return tuple(getattr(rewards, name) for name in _TRL_VERIFIERS if hasattr(rewards, name))


def declared_kind(func: Any) -> tuple[str, float | None] | None:
    """The correctness kind a reward function declares itself, or `None` when it declares none.

    Args:
        func: a reward function (or reward model) as given to the trainer.

    Returns:
        `(kind, threshold)`: `("binary", None)`, `("pass_rate", None)`, `("threshold", t)`, or `None`. TRL's
        `accuracy_reward` and `reasoning_accuracy_reward` count as `("binary", None)`.

    Raises:
        `ValueError`: for a `correctness_kind` that is not one of `CORRECTNESS_KINDS` or a non-finite
        `correctness_threshold`.
    """
    threshold = getattr(func, "correctness_threshold", None)
    kind = getattr(func, "correctness_kind", None)
    name = getattr(func, "__name__", type(func).__name__)
    if threshold is not None:
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not math.isfinite(threshold):
            raise ValueError(f"The reward {name!r} declares correctness_threshold={threshold!r}; it must be a number.")
        return THRESHOLD, float(threshold)
    if kind is not None:
        if kind not in CORRECTNESS_KINDS:
            raise ValueError(
                f"The reward {name!r} declares correctness_kind={kind!r}; it must be one of {list(CORRECTNESS_KINDS)}."
            )
        return kind, None
    if any(func is verifier for verifier in _trl_verifiers()):
        return BINARY, None
    return None


def is_known_verifier(func: Any) -> bool:
    """Whether `func` declares what kind of correctness it returns (ours, or TRL's accuracy rewards)."""
    return declared_kind(func) is not None


@dataclass(frozen=True)
class CorrectnessSpec:
    """Where a batch's correctness comes from, settled at construction by [`resolve_correctness`].

    Attributes:
        indices (`tuple[int, ...]`): the correctness rewards' columns among the trainer's reward functions.
        names (`tuple[str, ...]`): their names.
        kinds (`tuple[str, ...]`): each one's kind: `"binary"`, `"pass_rate"` or `"threshold"`.
        thresholds (`tuple[float | None, ...]`): each one's threshold (`None` unless its kind is `"threshold"`).
        picked (`bool`): whether it was picked (the only known verifier among several) rather than named or alone.
    """

    indices: tuple[int, ...]
    names: tuple[str, ...]
    kinds: tuple[str, ...]
    thresholds: tuple[float | None, ...]
    picked: bool = False

    def describe(self) -> str:
        """One phrase per correctness reward, e.g. `'accuracy_reward' (binary)` or `'rm' (score >= 0.5)`."""
        parts = []
        for name, kind, threshold in zip(self.names, self.kinds, self.thresholds, strict=True):
            parts.append(f"{name!r} ({f'score >= {threshold:g}' if kind == THRESHOLD else kind})")
        return ", ".join(parts)


def resolve_correctness(
    reward_funcs: Sequence[Any],
    reward_func_names: Sequence[str],
    names: str | Sequence[str] | None = None,
    kind: str | None = None,
    threshold: float | None = None,
    prefix: str = "codapo_",
) -> CorrectnessSpec:
    """Settle which rewards give correctness and of what kind, or say in one line what to add.

    Args:
        reward_funcs: the trainer's reward functions (reward models included), in order.
        reward_func_names: their names, as TRL computed them.
        names: the correctness reward's name, or a list of names for multi-task data (each row's correctness comes
            from the one of them that scored it); `None`: the only reward function, or the only known verifier.
        kind: `"binary"` or `"pass_rate"` for every named reward, or `None` for each one's own declaration
            ([`declared_kind`]), else binary.
        threshold: when set, every named reward's score counts as correct when `>= threshold`.
        prefix: prefix of the option names quoted in error messages (`"codapo_"` for `CoDaPOConfig`).

    Returns:
        [`CorrectnessSpec`].

    Raises:
        `ValueError`: an unknown or repeated name, several reward functions and no way to tell which is
        correctness, a reward model without a threshold, `kind` and `threshold` both set, or an unknown kind.

    Example:
    ```python
    >>> def format_reward(completions, **kw): ...
    >>> from trl.rewards import accuracy_reward
    >>> resolve_correctness([format_reward, accuracy_reward], ["format_reward", "accuracy_reward"]).describe()
    "'accuracy_reward' (binary)"
    ```
    """
    option, kind_option, threshold_option = (f"{prefix}correctness_{s}" for s in ("reward", "kind", "threshold"))
    if kind is not None and kind not in CORRECTNESS_KINDS:
        raise ValueError(
            f"{kind_option}={kind!r} is not a correctness kind; set it to one of {list(CORRECTNESS_KINDS)}."
        )
    if kind is not None and threshold is not None:
        raise ValueError(
            f"Set either {kind_option} or {threshold_option}, not both (a threshold is its own kind: score >= t)."
        )
    if threshold is not None and not math.isfinite(threshold):
        raise ValueError(f"{threshold_option} must be a finite number, got {threshold}.")
    all_names = list(reward_func_names)
    picked = False
    if names is None:
        if not all_names:
            raise ValueError("CoDaPO needs a reward function that scores correctness; pass one in reward_funcs.")
        verifiers = [i for i, func in enumerate(reward_funcs) if is_known_verifier(func)]
        if len(all_names) == 1:
            indices = [0]
        elif len(verifiers) == 1:
            indices, picked = verifiers, True
        else:
            raise ValueError(_which_reward_message(reward_funcs, all_names, verifiers, option))
    else:
        wanted = [names] if isinstance(names, str) else list(names)
        unknown = [n for n in wanted if n not in all_names]
        if unknown or not wanted:
            raise ValueError(
                f"{option}={wanted} names {unknown} which is not one of the trainer's reward functions {all_names}; "
                "set it to the name(s) of the reward(s) that score correctness."
            )
        if len(set(wanted)) != len(wanted):
            raise ValueError(f"{option}={wanted} names a reward twice; name each correctness reward once.")
        indices = [all_names.index(n) for n in wanted]
    kinds, thresholds = [], []
    for index in indices:
        func, name = reward_funcs[index], all_names[index]
        declared = declared_kind(func)
        if threshold is not None:
            chosen = (THRESHOLD, float(threshold))
        elif kind is not None:
            chosen = (kind, None)
        elif declared is not None:
            chosen = declared
        elif isinstance(func, torch.nn.Module):
            raise ValueError(
                f"The correctness reward {name!r} is a reward model, whose scores are not 0/1: set {threshold_option} "
                "to the score from which a completion counts as correct."
            )
        else:
            chosen = (BINARY, None)
        kinds.append(chosen[0])
        thresholds.append(chosen[1])
    return CorrectnessSpec(
        indices=tuple(indices),
        names=tuple(all_names[i] for i in indices),
        kinds=tuple(kinds),
        thresholds=tuple(thresholds),
        picked=picked,
    )


def _which_reward_message(reward_funcs: Sequence[Any], names: list[str], verifiers: list[int], option: str) -> str:
    """The error for several rewards and no single known verifier: what is recognised, and how to name one."""
    lookalikes = [
        name
        for func, name in zip(reward_funcs, names, strict=True)
        if getattr(func, "__name__", None) in _TRL_VERIFIERS and not is_known_verifier(func)
    ]
    known = (
        f" {[names[i] for i in verifiers]} are all known verifiers, so the choice is yours."
        if len(verifiers) > 1
        else ""
    )
    same_name = ""
    if lookalikes:
        same_name = (
            f" {lookalikes} {'is' if len(lookalikes) == 1 else 'are'} not TRL's own function of that name (a function "
            "with the same name, e.g. open-r1's accuracy_reward): a verifier is recognised by identity, never by name."
        )
    example = f" ({option}={lookalikes[0]!r})" if lookalikes else ""
    return (
        f"Which of the reward functions {names} scores correctness?{known}{same_name} Only codapo_trl.rewards' "
        "verifiers, TRL's own trl.rewards.accuracy_reward and reasoning_accuracy_reward, and a function that declares "
        f"its kind (f.correctness_kind = 'binary' or 'pass_rate') are picked without a name. Set {option} to its "
        f"name{example}, or to a list of names for multi-task data, one per task."
    )


@dataclass
class CorrectnessReading:
    """One batch's correctness, read by [`read_correctness`].

    Attributes:
        correctness (`torch.Tensor` of shape `(N,)`): each rollout's correctness in [0, 1], NaN where no correctness
            reward scored it.
        problem (`str` or `None`): the first value that breaks its reward's declared kind, or a row that two
            correctness rewards scored, as a one-line message with what to change; `None` when there is none.
        unowned (`int`): rollouts that no correctness reward scored but another reward did.
        score_range (`tuple[float, float]` or `None`): the lowest and highest finite value the correctness rewards
            returned for the batch (before any threshold); `None` when they returned none.
    """

    correctness: torch.Tensor
    problem: str | None = None
    unowned: int = 0
    score_range: tuple[float, float] | None = None


def _kind_problem(name: str, kind: str, values: torch.Tensor, prefix: str) -> str | None:
    """The message for the first value of `values` (one reward's defined outputs) that breaks `kind`, or `None`."""
    if kind == BINARY:
        bad = values[(values != 0) & (values != 1)]
        expected = "0 or 1 (binary, the default)"
    elif kind == PASS_RATE:
        bad = values[~((values >= 0) & (values <= 1))]
        expected = "a pass rate in [0, 1]"
    else:
        bad = values[~torch.isfinite(values)]
        expected = "a finite score"
    if not bad.numel():
        return None
    fix = {
        BINARY: f"if it reports a fraction of tests passed set {prefix}correctness_kind='pass_rate'; for a score, set "
        f"{prefix}correctness_threshold to the score from which a completion counts as correct",
        PASS_RATE: f"for a score, set {prefix}correctness_threshold to the score from which a completion counts as "
        "correct",
        THRESHOLD: "make the reward return finite scores (None for a row it cannot score)",
    }[kind]
    return f"The correctness reward {name!r} returned {float(bad[0]):.6g}, which is not {expected}: {fix}."


def read_correctness(
    rewards_per_func: torch.Tensor, spec: CorrectnessSpec, prefix: str = "codapo_"
) -> CorrectnessReading:
    """Each rollout's correctness from a batch's rewards (all processes' rollouts x reward functions, None as NaN).

    A row's correctness comes from the one correctness reward that scored it: binary and pass-rate values as they are,
    a thresholded score as `1.0 if score >= t else 0.0`. A value that breaks its reward's kind, or a row scored by two
    correctness rewards, is reported in `problem` (the caller refuses it or, for logged metrics only, warns), and the
    value is then read clamped to [0, 1] (the first reward's, for a doubly scored row).

    Args:
        rewards_per_func (`torch.Tensor` of shape `(N, num_reward_funcs)`): the rewards as TRL computed them.
        spec ([`CorrectnessSpec`]): from [`resolve_correctness`].
        prefix (`str`): prefix of the option names quoted in messages.

    Returns:
        [`CorrectnessReading`].

    Example:
    ```python
    >>> spec = CorrectnessSpec(indices=(1,), names=("rm",), kinds=("threshold",), thresholds=(0.5,))
    >>> read_correctness(torch.tensor([[1.0, 0.7], [0.0, 0.2]]), spec).correctness
    tensor([1., 0.])
    ```
    """
    rewards = rewards_per_func.float()
    correctness = torch.full((rewards.size(0),), float("nan"), device=rewards.device)
    scored_by = torch.zeros(rewards.size(0), dtype=torch.long, device=rewards.device)
    problem = None
    for index, name, kind, threshold in zip(spec.indices, spec.names, spec.kinds, spec.thresholds, strict=True):
        column = rewards[:, index]
        defined = ~torch.isnan(column)
        problem = problem or _kind_problem(name, kind, column[defined], prefix)
        if kind == THRESHOLD:
            values = (column >= threshold).float()
        else:
            values = torch.nan_to_num(column, nan=0.0, posinf=1.0, neginf=0.0).clamp(0.0, 1.0)
        correctness = torch.where(defined & (scored_by == 0), values, correctness)
        scored_by = scored_by + defined.long()
    if problem is None and bool((scored_by > 1).any()):
        row = int(torch.nonzero(scored_by > 1)[0])
        both = [n for i, n in zip(spec.indices, spec.names, strict=True) if not torch.isnan(rewards[row, i])]
        problem = (
            f"The correctness rewards {both} both scored rollout {row} of this batch: for multi-task data each row's "
            "correctness comes from one of them, so each must return None for the rows of the other tasks."
        )
    others = [i for i in range(rewards.size(1)) if i not in spec.indices]
    unowned = 0
    if others:
        unowned = int(((scored_by == 0) & ~torch.isnan(rewards[:, others]).all(dim=1)).sum())
    scores = rewards[:, list(spec.indices)]
    scores = scores[torch.isfinite(scores)]
    score_range = (float(scores.min()), float(scores.max())) if scores.numel() else None
    return CorrectnessReading(correctness=correctness, problem=problem, unowned=unowned, score_range=score_range)
