"""`codapo_trl.correctness`: which reward is correctness and of what kind, and each rollout's correctness."""

import math

import pytest
import torch
from trl.rewards import accuracy_reward, get_cosine_scaled_reward, think_format_reward

from codapo_trl.correctness import CorrectnessSpec, declared_kind, read_correctness, resolve_correctness
from codapo_trl.rewards import code_execution_reward, math_accuracy_reward


def plain(completions, **kwargs): ...


def other(completions, **kwargs): ...


def names(funcs):
    return [getattr(f, "__name__", "rm") for f in funcs]


def resolve(funcs, **kwargs):
    return resolve_correctness(funcs, names(funcs), **kwargs)


def test_declared_kinds():
    assert declared_kind(math_accuracy_reward) == ("binary", None)
    assert declared_kind(code_execution_reward) == ("pass_rate", None)
    assert declared_kind(accuracy_reward) == ("binary", None)
    assert declared_kind(think_format_reward) is None  # a format score is no verifier
    assert declared_kind(get_cosine_scaled_reward(max_len=100)) is None
    assert declared_kind(plain) is None


@pytest.mark.parametrize(
    ("funcs", "expected"),
    [
        ([plain], "'plain' (binary)"),  # a single reward: no doubt, binary by default
        ([think_format_reward, accuracy_reward], "'accuracy_reward' (binary)"),
        ([accuracy_reward, think_format_reward], "'accuracy_reward' (binary)"),
        ([plain, code_execution_reward], "'code_execution_reward' (pass_rate)"),
    ],
)
def test_picked_only_without_doubt(funcs, expected):
    assert resolve(funcs).describe() == expected


@pytest.mark.parametrize(
    "funcs", [[plain, other], [think_format_reward, plain], [math_accuracy_reward, accuracy_reward]]
)
def test_doubt_is_a_one_line_error_naming_the_option(funcs):
    with pytest.raises(ValueError, match=r"Set codapo_correctness_reward to its name") as error:
        resolve(funcs)
    assert "\n" not in str(error.value)


def test_named_kinds_and_thresholds():
    spec = resolve([plain, other], names=["other", "plain"])
    assert spec.indices == (1, 0) and spec.kinds == ("binary", "binary") and not spec.picked
    assert resolve([plain, code_execution_reward], names="code_execution_reward", kind="binary").kinds == ("binary",)
    spec = resolve([plain], threshold=0.5)
    assert spec.kinds == ("threshold",) and spec.thresholds == (0.5,) and spec.describe() == "'plain' (score >= 0.5)"
    rm = torch.nn.Linear(1, 1)
    with pytest.raises(ValueError, match="is a reward model, whose scores are not 0/1: set codapo_correctness_thresh"):
        resolve_correctness([rm], ["rm"])
    assert resolve_correctness([rm], ["rm"], threshold=1.0).kinds == ("threshold",)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(names="nope"), r"names \['nope'\] which is not one of"),
        (dict(names=["plain", "plain"]), "names a reward twice"),
        (dict(kind="fraction"), "is not a correctness kind"),
        (dict(kind="binary", threshold=0.5), "not both"),
        (dict(threshold=math.nan), "finite"),
    ],
)
def test_bad_options(kwargs, message):
    with pytest.raises(ValueError, match=message):
        resolve([plain, other], **kwargs)


def spec(*kinds, thresholds=None):
    n = len(kinds)
    return CorrectnessSpec(tuple(range(n)), tuple(f"r{i}" for i in range(n)), kinds, thresholds or (None,) * n)


NAN = float("nan")


@pytest.mark.parametrize(
    ("kind", "column", "bad"),
    [
        ("binary", [0.0, 1.0, 0.5, 1.0], 0.5),  # a 0/0.5/1 format score is no binary correctness
        ("binary", [0.0, 1.0, 0.3, 0.7], 0.3),  # nor a [0, 1] reward-model score
        ("pass_rate", [0.0, 0.25, 1.5, NAN], 1.5),
        ("pass_rate", [0.0, -0.5, 1.0, 1.0], -0.5),
    ],
)
def test_values_that_break_the_kind_are_reported_with_name_and_value(kind, column, bad):
    reading = read_correctness(torch.tensor(column).unsqueeze(1), spec(kind))
    assert reading.problem.startswith(f"The correctness reward 'r0' returned {bad!r}, which is not ")
    assert read_correctness(torch.tensor([[0.0], [1.0], [NAN]]), spec(kind)).problem is None


def test_reading_binary_pass_rate_and_threshold():
    rewards = torch.tensor([[1.0, 0.25, -3.0], [0.0, 1.0, 2.0], [NAN, 0.5, 0.7]])
    assert torch.equal(read_correctness(rewards[:, :1], spec("binary")).correctness[:2], torch.tensor([1.0, 0.0]))
    torch.testing.assert_close(
        read_correctness(rewards[:, 1:2], spec("pass_rate")).correctness, torch.tensor([0.25, 1.0, 0.5])
    )
    reading = read_correctness(rewards[:, 2:], spec("threshold", thresholds=(0.7,)))
    assert reading.problem is None and torch.equal(reading.correctness, torch.tensor([0.0, 1.0, 1.0]))
    assert read_correctness(torch.tensor([[math.inf]]), spec("threshold", thresholds=(0.0,))).problem


def test_multitask_rows_take_their_own_reward_and_unowned_rows_are_counted():
    # columns: task A's verifier, task B's pass rate, a format reward
    rewards = torch.tensor([[1.0, NAN, 1.0], [NAN, 0.5, 1.0], [NAN, NAN, 1.0], [NAN, NAN, NAN]])
    reading = read_correctness(rewards, spec("binary", "pass_rate"))
    assert reading.problem is None and reading.unowned == 1  # row 2: only the format reward scored it
    torch.testing.assert_close(reading.correctness, torch.tensor([1.0, 0.5, NAN, NAN]), equal_nan=True)
    doubly = read_correctness(torch.tensor([[1.0, 0.5]]), spec("binary", "pass_rate"))
    assert "['r0', 'r1'] both scored rollout 0" in doubly.problem
