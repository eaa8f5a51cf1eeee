"""Reward functions by name (`REWARD_FUNCS`, `get_reward_funcs`) and the early check that a dataset has the
columns they read (`check_reward_columns`).

To add a reward: write a TRL reward function (`completions, **columns -> list[float | None]`), give it a
`required_columns` tuple and, if it scores correctness, a `correctness_kind` (`"binary"` or `"pass_rate"`, read by
`codapo_trl.correctness`), and add it to `REWARD_FUNCS` (or pass its dotted import path).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any

from codapo_trl.rewards.grading import grader_settings
from codapo_trl.rewards.math import math_accuracy_reward, report_unreadable_golds


__all__ = ["REWARD_FUNCS", "check_reward_columns", "code_execution_reward", "get_reward_funcs"]


def code_execution_reward(completions, tests, **kwargs) -> list[float | None]:
    """Pass rate of the completion's last Python code block on the problem's tests, run in the sandbox (see
    `codapo_trl.rewards.code`); imported on first use so that maths training never loads the sandbox."""
    from codapo_trl.rewards.code import code_execution_reward as reward

    return reward(completions, tests, **kwargs)


code_execution_reward.required_columns = ("tests",)  # type: ignore[attr-defined]
code_execution_reward.correctness_kind = "pass_rate"  # type: ignore[attr-defined]  # codapo_trl.correctness


def check_reward_columns(reward_funcs: Any, train_dataset: Any, eval_dataset: Any = None) -> None:
    """Fail early when a dataset lacks a column one of the reward functions needs.

    Reward functions declare the dataset columns they read in a `required_columns` attribute (a tuple of names,
    e.g. `("answer",)` for `math_accuracy_reward`); functions without it, and reward models, are not checked.
    Called by the training recipes after loading the data and by the trainers at construction, so that a missing
    column stops the job before the first generation instead of inside the first reward call. With
    `math_accuracy_reward`, every gold answer the grader cannot read is reported by name there too
    (`report_unreadable_golds`): its questions would be skipped (reward `None`), never paid.

    Args:
        reward_funcs: one reward function or a list of them (as given to the trainer).
        train_dataset: the training dataset (`datasets.Dataset` / `IterableDataset`, or anything with
            `column_names`); `None` is not checked.
        eval_dataset: the evaluation dataset, or a dict of them; `None` is not checked.

    Raises:
        `ValueError`: naming the reward function, the missing column(s), the dataset and its columns; or, with
        `math_accuracy_reward`, naming a grader environment variable that is set to an invalid value.

    Example:
        ```python
        >>> from datasets import Dataset
        >>> check_reward_columns([math_accuracy_reward], Dataset.from_dict({"prompt": ["1+1?"], "solution": ["2"]}))
        Traceback (most recent call last):
        ...
        ValueError: The reward function 'math_accuracy_reward' reads the dataset column(s) ['answer'], ...
        ```
    """
    funcs = reward_funcs if isinstance(reward_funcs, (list, tuple)) else [reward_funcs]
    datasets_to_check: list[tuple[str, Any]] = [("train_dataset", train_dataset)]
    if isinstance(eval_dataset, dict):
        datasets_to_check += [(f"eval_dataset[{k!r}]", v) for k, v in eval_dataset.items()]
    else:
        datasets_to_check.append(("eval_dataset", eval_dataset))
    for label, dataset in datasets_to_check:
        columns = getattr(dataset, "column_names", None)
        if dataset is None or columns is None:  # streaming datasets may not know their columns
            continue
        for func in funcs:
            needed = getattr(func, "required_columns", ())
            missing = [c for c in needed if c not in columns]
            if missing:
                name = getattr(func, "__name__", type(func).__name__)
                raise ValueError(
                    f"The reward function {name!r} reads the dataset column(s) {missing}, which {label} lacks (its "
                    f"columns: {sorted(columns)}). Add or rename the column (e.g. `dataset.rename_column`), or use a "
                    "reward function that matches the data."
                )
    if any(func is math_accuracy_reward for func in funcs):
        grader_settings()  # a bad CODAPO_GRADER_READ_AFTER_BOX fails here, before the first generation
        for label, dataset in datasets_to_check:
            report_unreadable_golds(dataset, label)


REWARD_FUNCS: dict[str, Callable[..., list[float | None]]] = {
    "math_accuracy": math_accuracy_reward,
    "accuracy": math_accuracy_reward,
    "code_execution": code_execution_reward,
}
"""Reward functions by name, for the training script's `reward_funcs` list. A plain dict: add entries to extend."""


def get_reward_funcs(names: Sequence[str] | str) -> list[Callable[..., list[float | None]]]:
    """Look up reward functions by registry name or dotted import path.

    Args:
        names (`list[str]` or `str`):
            Names from `REWARD_FUNCS` (e.g. `"math_accuracy"`) or import paths such as `"my_pkg.rewards.my_reward"`.

    Returns:
        `list[Callable]`: The reward functions, in order.

    Raises:
        `ValueError`: For an unknown name or an import path that does not lead to a callable; the message lists the
        valid names.

    Example:
        ```python
        >>> [f.__name__ for f in get_reward_funcs(["accuracy"])]
        ['math_accuracy_reward']
        ```
    """
    if isinstance(names, str):
        names = [names]
    funcs = []
    for name in names:
        if name in REWARD_FUNCS:
            funcs.append(REWARD_FUNCS[name])
            continue
        valid = ", ".join(sorted(REWARD_FUNCS))
        hint = f"Valid names: {valid}; or give a dotted import path like 'my_package.my_module.my_reward'."
        module_name, _, attr = name.rpartition(".")
        if not module_name:
            raise ValueError(f"Unknown reward function {name!r}. {hint}")
        try:
            func = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise ValueError(f"Could not import reward function {name!r}: {exc}. {hint}") from exc
        if not callable(func):
            raise ValueError(f"{name!r} is not callable. {hint}")
        funcs.append(func)
    return funcs
