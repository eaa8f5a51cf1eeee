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
        return weightless_message(
            torch.tensor(difficulty), 5, "'r' (binary)", threshold, (0.2, 0.9), [], difficulty_fn
        )

    assert "every group is solved" in message([0.0, 0.0, float("nan")])
    assert "every group is either all correct or all wrong" in message([0.0, 1.0])
    assert "V_c(c) V_d(d) is 0 for every group" in message([0.5, 0.5])
    assert "V_d='center' is 0 (the paper's" in message([1.0])
    assert "V_d='reverse' is 0." in message([1.0], "reverse")  # not the paper's shape: no claim about the paper
    assert "V_d=" not in message([0.5])
    assert "inside the range of the scores (this batch's scores: 0.2 to 0.9)" in message([0.0], threshold=0.1)
    assert "correctness_threshold" not in message([0.0])


def test_placeholder_logps_are_told_from_real_ones():
    from codapo_trl.dynamics import groups

    assert doctest.testmod(groups).failed == 0
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    reason = groups.placeholder_logps_reason
    assert (
        reason(torch.tensor([[0.0, 0.0, -3.0], [0.0, 0.0, 0.0]]), mask) == "every log-prob is exactly 0"
    )  # masked -3
    assert reason(torch.tensor([[-1.0, 0.0, 0.0], [0.0, 0.0, 0.0]]), mask) is None  # p = 1 for some tokens is real
    assert reason(torch.tensor([[-1.0, float("nan"), 0.0], [-0.2, -0.1, -0.3]]), mask) is None  # vLLM's odd NaN
    assert "no finite log-prob" in reason(torch.tensor([[float("nan")] * 3, [-0.2, -0.1, -0.3]]), mask)
    assert "positive (0.5)" in reason(torch.tensor([[-1.0, 0.5, 0.0], [-0.2, -0.1, -0.3]]), mask)
    assert reason(torch.tensor([[-1.0, 1e-6, 0.0], [-0.2, -0.1, -0.3]]), mask) is None  # rounding of a real 0
    assert reason(torch.zeros(2, 3), torch.zeros(2, 3)) is None  # no token to judge
