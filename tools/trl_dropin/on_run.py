"""What the "on" run gives TRL's tests that they cannot say themselves: a correctness CoDaPO can read.

TRL's tests reward with random reward models, completion lengths, constants and environments, and none says which
reward is correctness, so CoDaPO (which never guesses it, docs/method.md) would stop most of them at construction or
at the first batch, and they would never train through CoDaPO's values and selection. The on run therefore names,
for each test that names none, its first reward function as correctness, read with a threshold ([`on_correctness`]:
a rollout is correct when that reward is `>= ON_THRESHOLD`, so a 0/1 reward reads as itself), and adds a value offset
(`ON_OFFSET`). The test's own rewards still drive the advantages, as in stock TRL.
"""

from __future__ import annotations

from typing import Any


ON_THRESHOLD = 0.5
"""A rollout is correct when the test's first reward is >= this (a 0/1 reward reads as itself)."""
ON_OFFSET = 0.1
"""The value offset of the on run (the authors' released code's): a question all of whose rollouts are right (or
wrong) under the stand-in rewards has V_d = 0 and would carry no gradient, so the tests' "parameters changed"
assertions would check what the stand-in rewards happen to score rather than CoDaPO's loss."""


def on_correctness(options: Any, reward_func_names: list[str]) -> Any:
    """Complete the trainer's `DynamicsOptions` for the on run: where the test names no correctness reward, kind or
    threshold, its first reward function with `ON_THRESHOLD`. A test that names any of them is left as it is.

    Example:
    ```python
    >>> from codapo_trl.dynamics.mixin import DynamicsOptions
    >>> options = on_correctness(DynamicsOptions(), ["tiny-Qwen2ForSequenceClassification-2.5", "format_reward"])
    >>> options.correctness_reward, options.correctness_threshold
    (['tiny-Qwen2ForSequenceClassification-2.5'], 0.5)
    ```
    """
    unset = (options.correctness_reward, options.correctness_kind, options.correctness_threshold)
    if all(value is None for value in unset) and reward_func_names:
        options.correctness_reward = [reward_func_names[0]]
        options.correctness_threshold = ON_THRESHOLD
    return options
