"""`dynamics.streaks`: runs of batches that train nothing, reported once, and the message for values all 0."""

import doctest

import torch

from codapo_trl.dynamics import streaks
from codapo_trl.dynamics.streaks import STALL_BATCHES, BatchStreak, weightless_message


def test_doctests():
    result = doctest.testmod(streaks)
    assert result.attempted >= 4 and result.failed == 0


def test_a_streak_is_due_once_when_it_reaches_its_length_even_if_it_breaks_and_returns():
    streak = BatchStreak()
    due = []
    for _ in range(STALL_BATCHES):
        streak.update(True)
        due.append(streak.due())
    assert due == [False] * (STALL_BATCHES - 1) + [True]
    streak.update(False)
    for _ in range(STALL_BATCHES):
        streak.update(True)
    assert not streak.due()  # reported once per run


def test_the_message_names_the_reason_of_each_kind_of_batch():
    def message(difficulty, difficulty_fn="center", threshold=None):
        return weightless_message(torch.tensor(difficulty), 5, "'r' (binary)", threshold, (0.2, 0.9), [], difficulty_fn)

    assert "every group is solved" in message([0.0, 0.0, float("nan")])
    assert "every group is either all correct or all wrong" in message([0.0, 1.0])
    assert "V_c(c) V_d(d) is 0 for every group" in message([0.5, 0.5])
    assert "V_d='center' is 0 (the paper's" in message([1.0])
    assert "V_d='reverse' is 0." in message([1.0], "reverse")  # not the paper's shape: no claim about the paper
    assert "V_d=" not in message([0.5])
    assert "inside the range of the scores (this batch's scores: 0.2 to 0.9)" in message([0.0], threshold=0.1)
    assert "correctness_threshold" not in message([0.0])
