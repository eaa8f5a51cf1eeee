"""The uniform-resampling control arm of the CoDaPO-vs-GRPO experiment needs no library change.

`experiments/codapo_vs_grpo/PREREGISTRATION.md` runs the control as CoDaPO with both value functions constant
(`--codapo_confidence_fn constant --codapo_difficulty_fn constant`): every question's value is 1, so the loss weights
are constant and `select_top_k` keeps the first K groups of B by position; TRL's sampler shuffles the questions
(seeded), so those are K questions drawn at random, the same on every process. These tests pin the library behaviour
that arm relies on: if it changes, the control stops being a control.
"""

from __future__ import annotations

import torch

from codapo_trl import coda


def test_constant_value_functions_give_every_group_value_one():
    confidence = torch.tensor([0.9, 0.3, 0.6, 0.5])
    difficulty = torch.tensor([0.0, 1.0, 0.5, 0.25])  # solved, unsolved, learnable, learnable
    values = coda.coda_values(confidence, difficulty, confidence_fn="constant", difficulty_fn="constant")
    assert torch.equal(values, torch.ones(4))
    # the paper's value functions do not: solved and unsolved questions get 0, learnable ones differ
    paper = coda.coda_values(confidence, difficulty)
    assert paper[0] == 0 and paper[1] == 0 and paper[2] != paper[3]


def test_equal_values_select_the_first_k_groups_by_position_whatever_the_difficulty():
    difficulty = torch.tensor([0.0, 1.0, 0.5, 0.25, 0.75, 0.125, 0.0, 1.0])
    selection = coda.select_top_k(torch.ones(8), k=2, batch_size=8, difficulty=difficulty)
    assert selection == [0, 0, 0, 0, 1, 1, 1, 1]
    # with the paper's values the learnable questions are chosen instead
    paper = coda.coda_values(torch.full((8,), 0.8), difficulty)
    assert set(coda.select_top_k(paper, k=2, batch_size=8, difficulty=difficulty)) == {2, 3}
