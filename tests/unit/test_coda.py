"""The pure CoDaPO functions against hand-computed values."""

import doctest
import importlib
import math

import pytest
import torch

from codapo_trl import coda


LN_HALF = math.log(0.5)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        # x = 0, 0.25, 0.5, 1
        ("linear", [0.0, 0.25, 0.5, 1.0]),
        ("reverse", [1.0, 0.75, 0.5, 0.0]),
        ("edges", [1.0, 0.25, 0.0, 1.0]),  # 4 (x - 1/2)^2
        ("center", [0.0, 0.75, 1.0, 0.0]),  # 1 - 4 (x - 1/2)^2
        ("constant", [1.0, 1.0, 1.0, 1.0]),
    ],
)
def test_value_functions(name, expected):
    x = torch.tensor([0.0, 0.25, 0.5, 1.0])
    torch.testing.assert_close(coda.VALUE_FUNCTIONS[name](x), torch.tensor(expected))


def test_value_functions_are_exactly_the_five_of_the_paper():
    assert set(coda.VALUE_FUNCTIONS) == {"linear", "reverse", "edges", "center", "constant"}


def test_group_confidence_masks_padding_and_averages_per_rollout_first():
    # Group of 2 rollouts: rollout 0 has 2 tokens (log 0.5, log 0.5) and one padding token that must be ignored;
    # rollout 1 has 1 token (log 0.25). c = exp(mean(log 0.5, log 0.25)) = exp(1.5 * log 0.5) = 0.5 ** 1.5.
    logps = torch.tensor([[LN_HALF, LN_HALF, -50.0], [math.log(0.25), -50.0, -50.0]])
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    c = coda.group_confidence(logps, mask, num_generations=2)
    torch.testing.assert_close(c, torch.tensor([0.5**1.5]))


def test_group_confidence_is_per_group_and_not_per_token():
    # A per-token mean would give exp((2*log 0.5 + log 0.25)/3) = 0.5 ** (4/3); the paper averages per rollout.
    logps = torch.tensor([[LN_HALF, LN_HALF], [math.log(0.25), 0.0]])
    mask = torch.tensor([[1, 1], [1, 0]])
    c = coda.group_confidence(logps, mask, num_generations=2)
    assert abs(c.item() - 0.5**1.5) < 1e-6
    assert abs(c.item() - 0.5 ** (4 / 3)) > 1e-3


def test_group_confidence_skips_empty_and_non_finite():
    logps = torch.tensor(
        [
            [LN_HALF, float("nan")],  # vLLM could not score the 2nd token: left out
            [-3.0, -3.0],  # fully masked rollout: left out
            [-1.0, -1.0],  # second group: all rollouts empty -> NaN
            [-1.0, -1.0],
        ]
    )
    mask = torch.tensor([[1, 1], [0, 0], [0, 0], [0, 0]])
    c = coda.group_confidence(logps, mask, num_generations=2)
    assert c[0].item() == pytest.approx(0.5)
    assert math.isnan(c[1].item())


def test_trajectory_log_confidence():
    logps = torch.tensor([[-1.0, -2.0, -9.0], [-4.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    torch.testing.assert_close(coda.trajectory_log_confidence(logps, mask), torch.tensor([-1.5, -4.0]))


def test_group_difficulty():
    correctness = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0])
    torch.testing.assert_close(coda.group_difficulty(correctness, 4), torch.tensor([0.25, 1.0]))


def test_group_difficulty_clamps_and_skips_undefined():
    # 2.0 is clamped to 1, -1 to 0; pass rates (0.5) are kept; a group whose rewards are all None is NaN.
    correctness = torch.tensor([2.0, -1.0, 0.5, float("nan"), float("nan"), float("nan")])
    d = coda.group_difficulty(correctness, 3)
    assert d[0].item() == pytest.approx(1 - (1 + 0 + 0.5) / 3)
    assert math.isnan(d[1].item())
    # a partly undefined group averages over the defined rollouts
    d = coda.group_difficulty(torch.tensor([1.0, float("nan"), 0.0, 0.0]), 4)
    assert d.item() == pytest.approx(1 - 1 / 3)


@pytest.mark.parametrize("confidence_fn", sorted(coda.VALUE_FUNCTIONS))
@pytest.mark.parametrize("difficulty_fn", sorted(coda.VALUE_FUNCTIONS))
def test_coda_values_every_shape_pair(confidence_fn, difficulty_fn):
    shapes = {
        "linear": lambda x: x,
        "reverse": lambda x: 1 - x,
        "edges": lambda x: 4 * (x - 0.5) ** 2,
        "center": lambda x: 1 - 4 * (x - 0.5) ** 2,
        "constant": lambda x: 1.0,
    }
    c = [0.1, 0.5, 0.9, 1.0]
    d = [0.0, 0.25, 0.5, 1.0]
    v = coda.coda_values(torch.tensor(c), torch.tensor(d), confidence_fn, difficulty_fn, offset=0.1)
    expected = [0.1 + shapes[confidence_fn](ci) * shapes[difficulty_fn](di) for ci, di in zip(c, d)]
    torch.testing.assert_close(v, torch.tensor(expected))


def test_coda_values_paper_default():
    # v = c (1 - 4 (d - 1/2)^2): zero for solved and for hopeless questions, c at d = 1/2.
    v = coda.coda_values(torch.tensor([0.8, 0.8, 0.8, 0.6]), torch.tensor([0.0, 0.5, 1.0, 0.25]))
    torch.testing.assert_close(v, torch.tensor([0.0, 0.8, 0.0, 0.6 * 0.75]))


def test_coda_values_no_gradient_and_nan_propagates():
    c = torch.tensor([0.5, 0.5], requires_grad=True)
    v = coda.coda_values(c, torch.tensor([0.5, float("nan")]), "constant", "constant")
    assert not v.requires_grad
    assert v[0].item() == 1.0 and math.isnan(v[1].item())


def test_coda_values_unknown_shape():
    with pytest.raises(ValueError, match="choose one of"):
        coda.coda_values(torch.ones(1), torch.ones(1), confidence_fn="quadratic")


@pytest.mark.parametrize(
    ("values", "k", "batch_size", "expected"),
    [
        ([0.1, 0.9, 0.5, 0.3], 2, 4, [1, 1, 2, 2]),  # K divides |B|: |B|/K copies each, highest first
        ([0.1, 0.9, 0.5, 0.3], 4, 4, [1, 2, 3, 0]),
        ([0.1, 0.9, 0.5, 0.3], 1, 4, [1, 1, 1, 1]),
        ([0.1, 0.9, 0.5, 0.3, 0.7], 2, 5, [1, 1, 1, 4, 4]),  # the highest-valued gets the extra copy
        ([0.2, 0.4, 0.6, 0.8, 0.1, 0.3, 0.5], 3, 7, [3, 3, 3, 2, 2, 6, 6]),
        ([0.5, 0.5, 0.5, 0.5], 2, 4, [0, 0, 1, 1]),  # ties: earlier position first (stable)
        ([0.0, 0.9, 0.0, 0.9], 2, 4, [1, 1, 3, 3]),
    ],
)
def test_select_top_k(values, k, batch_size, expected):
    assert coda.select_top_k(torch.tensor(values), k, batch_size) == expected
    assert coda.select_top_k(values, k, batch_size) == expected  # plain sequences too


def test_select_top_k_below_k_positive_values():
    nan = float("nan")
    # v = 0 is a real (low) value and beats an undefined question
    assert coda.select_top_k(torch.tensor([nan, 0.0, nan, 0.2]), 2, 4) == [3, 3, 1, 1]
    # fewer than K positive: then the hardest of the rest (unsolved before solved), then position; a group whose
    # difficulty is undefined comes after them
    values, difficulty = [0.0, 0.0, 0.3, 0.0, 0.0], [0.0, 1.0, 0.5, nan, 1.0]
    assert coda.select_top_k(values, 3, 6, difficulty=difficulty) == [2, 2, 1, 1, 4, 4]
    assert coda.select_top_k(values, 5, 5, difficulty=difficulty) == [2, 1, 4, 0, 3]
    assert coda.select_top_k(values, 3, 3) == [2, 0, 1]  # without difficulty: position
    # fewer defined values than k: the defined ones share the batch
    assert coda.select_top_k(torch.tensor([nan, 0.3, nan, nan]), 2, 4) == [1, 1, 1, 1]
    # nothing defined at all: fall back to position order
    assert coda.select_top_k(torch.tensor([nan, nan, nan]), 2, 3) == [0, 0, 1]
    with pytest.raises(ValueError, match="3 values but 2 difficulties"):
        coda.select_top_k([0.0, 0.0, 0.0], 2, 3, difficulty=[0.0, 1.0])


def test_select_top_k_errors():
    with pytest.raises(ValueError, match="k must be between 1"):
        coda.select_top_k(torch.ones(4), 0, 4)
    with pytest.raises(ValueError, match="k must be between 1"):
        coda.select_top_k(torch.ones(4), 5, 8)
    with pytest.raises(ValueError, match="at least k"):
        coda.select_top_k(torch.ones(4), 3, 2)


def test_select_uniform_draws_k_distinct_groups_evenly_and_reproducibly():
    picks = coda.select_uniform(8, 3, 8, seed=11)
    assert len(picks) == 8 and len(set(picks)) == 3
    assert [picks.count(g) for g in dict.fromkeys(picks)] == [3, 3, 2]  # copies as in select_top_k, in draw order
    assert coda.select_uniform(8, 3, 8, seed=11) == picks  # the same seed, the same draw (every process agrees)
    draws = [tuple(sorted(set(coda.select_uniform(8, 2, 8, seed)))) for seed in range(4000)]
    assert len(set(draws)) == 28  # every pair of 8 groups occurs
    counts = [sum(g in d for d in draws) for g in range(8)]
    # each group is kept with probability 2/8: 1000 of 4000 expected, SD about 27
    assert all(880 < c < 1120 for c in counts), counts
    with pytest.raises(ValueError, match="k must be between 1"):
        coda.select_uniform(4, 5, 8, seed=0)
    with pytest.raises(ValueError, match="at least k"):
        coda.select_uniform(4, 3, 2, seed=0)


def test_group_token_counts_and_sample_weights():
    mask = torch.tensor([[1, 1, 1], [1, 0, 0], [1, 1, 0], [1, 1, 0], [0, 0, 0], [0, 0, 0]])
    counts = coda.group_token_counts(mask, 2)
    torch.testing.assert_close(counts, torch.tensor([4.0, 4.0, 0.0]))
    torch.testing.assert_close(coda.group_token_counts(mask.sum(-1), 2), counts)
    w = coda.codapo_sample_weights(torch.tensor([0.6, float("nan"), 0.9]), counts, 2)
    # v_j / (|B| T_j) with |B| = 3; NaN value and empty group -> 0
    torch.testing.assert_close(w, torch.tensor([0.05, 0.05, 0.0, 0.0, 0.0, 0.0]))


def _reference_loss(logps, old, adv, mask, values, G, eps_low, eps_high, objective):
    """The paper's Eq. (3), negated and averaged over questions, written as explicit loops."""
    num_groups = len(values)
    total = 0.0
    for j in range(num_groups):
        rows = range(j * G, (j + 1) * G)
        tokens = sum(int(mask[i].sum()) for i in rows)
        inner = 0.0
        for i in rows:
            for t in range(logps.size(1)):
                if not mask[i, t]:
                    continue
                if objective == "clip":
                    rho = torch.exp(logps[i, t] - old[i, t])
                    inner = inner + torch.minimum(rho * adv[i], torch.clamp(rho, 1 - eps_low, 1 + eps_high) * adv[i])
                else:
                    inner = inner + adv[i] * logps[i, t]
        if tokens:
            total = total + values[j] * inner / tokens
    return -total / num_groups


@pytest.mark.parametrize("objective", ["clip", "gpg"])
def test_codapo_loss_matches_paper_formula_and_gradient(objective):
    torch.manual_seed(0)
    G, T = 3, 5
    mask = torch.tensor(
        [[1, 1, 1, 1, 0], [1, 1, 0, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0], [1, 1, 1, 0, 0], [1, 1, 0, 0, 0]]
    )
    old = -torch.rand(6, T) * 3
    theta = (old + 0.4 * torch.randn(6, T)).requires_grad_(True)  # ratios spread across the clip boundaries
    adv = torch.tensor([1.2, -0.6, -0.6, 0.9, -0.45, -0.45])
    values = torch.tensor([0.7, 0.3])

    loss = coda.codapo_loss(theta, old, adv, mask, values, G, 0.2, 0.28, objective=objective)
    ref_theta = theta.detach().clone().requires_grad_(True)
    ref = _reference_loss(ref_theta, old, adv, mask, values, G, 0.2, 0.28, objective)
    torch.testing.assert_close(loss, ref)
    loss.backward()
    ref.backward()
    torch.testing.assert_close(theta.grad, ref_theta.grad)
    assert not torch.all(theta.grad == 0)


def test_codapo_loss_clipping_zeroes_clipped_token_gradients():
    # One group, G = 2: rollout 0 has A > 0 and rho = 1.5 > 1 + eps (clipped: no gradient), rollout 1 has A < 0 and
    # rho = 1 (unclipped). The unclipped token's gradient is -v * A * rho / (|B| T) = -(0.5 * -1 * 1) / 2 = 0.25.
    old = torch.zeros(2, 1)
    theta = torch.tensor([[math.log(1.5)], [0.0]], requires_grad=True)
    loss = coda.codapo_loss(theta, old, torch.tensor([1.0, -1.0]), torch.ones(2, 1), torch.tensor([0.5]), 2)
    loss.backward()
    torch.testing.assert_close(theta.grad, torch.tensor([[0.0], [0.25]]))


def test_codapo_loss_is_length_invariant_within_question():
    # Micro-averaging: each question contributes v_j times the mean over *all its tokens* (T_j), and questions are
    # averaged. Two questions (G = 2) with unequal rollout lengths, asymmetric advantages and different token means:
    # q0 has lengths 1 and 3 with A = (+1, -1) (token mean -0.5, per-rollout mean 0), q1 lengths 2 and 2 with
    # A = (+1.5, -0.5) (mean 0.5). A per-rollout mean gives a different number, and so does a global token mean
    # (over both questions) or a token sum, once q0's tokens are all duplicated (lengths 2 and 6).
    ratio = math.exp(0.1)  # theta - old = 0.1 on every token: inside the clip range, so g_it = rho A
    adv = torch.tensor([1.0, -1.0, 1.5, -0.5])
    values = torch.tensor([1.0, 0.5])

    def loss_for(lengths):
        mask = torch.tensor([[1.0] * n + [0.0] * (6 - n) for n in lengths])
        return coda.codapo_loss(torch.full((4, 6), 0.1), torch.zeros(4, 6), adv, mask, values, 2)

    short = loss_for([1, 3, 2, 2])
    long = loss_for([2, 6, 2, 2])  # every token of q0 twice
    # -(1/|B|) sum_j v_j / T_j sum_i L_i rho A_i
    expected = -(1.0 * (1 * 1.0 + 3 * -1.0) / 4 + 0.5 * (2 * 1.5 + 2 * -0.5) / 4) * ratio / 2
    torch.testing.assert_close(short, torch.tensor(expected))
    torch.testing.assert_close(long, short)


def test_codapo_loss_rejects_unknown_objective_and_partial_groups():
    with pytest.raises(ValueError, match="objective"):
        coda.codapo_loss(
            torch.zeros(2, 1), torch.zeros(2, 1), torch.zeros(2), torch.ones(2, 1), torch.ones(1), 2, objective="x"
        )
    with pytest.raises(ValueError, match="whole groups"):
        coda.group_difficulty(torch.zeros(5), 2)


@pytest.mark.parametrize(
    "module_name",
    [
        "codapo_trl.coda",
        "codapo_trl.dynamics.bins",
        "codapo_trl.dynamics.groups",
        "codapo_trl.dynamics.question_log",
        "codapo_trl.protocol",
        "codapo_trl.rewards.extraction",
        "codapo_trl.rewards.grading",
        "codapo_trl.rewards.math",
    ],
)
def test_docstring_examples_run(module_name):
    # The examples are written in HF style (inside ```python fences), which plain doctest would read as output.
    module = importlib.import_module(module_name)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    examples = 0
    for test in doctest.DocTestFinder().find(module, module.__name__, globs={"torch": torch, **vars(module)}):
        for example in test.examples:
            example.want = example.want.replace("```\n", "")
        examples += len(test.examples)
        runner.run(test)
    assert examples > 0
    assert runner.failures == 0, f"{runner.failures} docstring example(s) of {module_name} failed (see the output)"
