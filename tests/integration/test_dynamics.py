"""Training dynamics: the per-bin statistics, the paper's closed forms against the trainers' numbers, the logs."""

import json
import math
import random

import numpy as np
import pytest
import torch
from fakes import deterministic_rollout, hash_reward, question_dataset
from helpers_training import make_args, record_outputs

from codapo_trl import CoDaPOTrainer, GRPODynamicsTrainer
from codapo_trl.dynamics import (
    BIN_LABELS,
    SUM_COLUMNS,
    bin_sums,
    binary_advantages,
    describe,
    difficulty_bins,
    discovery_probability,
    summarize_bins,
    token_update_weights,
)


def test_difficulty_bins_follow_the_papers_edges():
    d = torch.tensor([0.0, 0.1999, 0.2, 0.25, 0.4, 0.5, 0.6, 0.75, 0.8, 0.999, 1.0, 1 - 0.8, float("nan")])
    assert difficulty_bins(d).tolist() == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 4, 1, -1]


def test_token_update_weights_and_clipping():
    # rho = 1.5 with A > 0: clipped (above 1 + 0.2); rho = 0.5 with A > 0: not clipped (w = 0.5 * A);
    # rho = 0.5 with A < 0: clipped (below 1 - 0.2); rho = 1.5 with A < 0: not clipped (w = 1.5 * A).
    logps = torch.log(torch.tensor([[1.5, 0.5], [0.5, 1.5]]))
    weights, clipped = token_update_weights(
        logps, torch.zeros(2, 2), torch.tensor([2.0, -1.0]), torch.tensor([0.5, 1.0])
    )
    assert clipped.tolist() == [[True, False], [True, False]]
    torch.testing.assert_close(weights, torch.tensor([[0.0, 0.5 * 0.5 * 2.0], [0.0, 1.5 * -1.0]]))


def test_bin_sums_and_summary_match_a_direct_computation():
    rng = np.random.default_rng(0)
    n, t = 40, 6
    difficulty = torch.tensor(rng.choice([0.0, 0.25, 0.5, 0.75, 1.0], n))
    correctness = torch.tensor(rng.integers(0, 2, n), dtype=torch.float32)
    confidence = torch.tensor(rng.uniform(0.1, 1.0, n))
    advantages = torch.tensor(rng.normal(size=n))
    mask = torch.tensor(rng.integers(0, 2, (n, t)))
    weights = torch.tensor(rng.normal(size=(n, t)))
    clipped = torch.tensor(rng.integers(0, 2, (n, t)), dtype=torch.bool)
    sums = bin_sums(difficulty, correctness, confidence, advantages, weights, clipped, mask)
    assert sums.shape == (5, len(SUM_COLUMNS))
    # two halves summed give the same as the whole (micro-batches and processes are added up)
    half = bin_sums(*(x[:20] for x in (difficulty, correctness, confidence, advantages, weights, clipped, mask)))
    rest = bin_sums(*(x[20:] for x in (difficulty, correctness, confidence, advantages, weights, clipped, mask)))
    torch.testing.assert_close(half + rest, sums)

    metrics = summarize_bins(sums)
    bins = [min(int(d * 5 + 1e-6), 4) for d in difficulty.tolist()]
    for b, label in enumerate(BIN_LABELS):
        rows = [i for i in range(n) if bins[i] == b]
        assert metrics[f"{label}/count"] == len(rows)
        right = [confidence[i].item() for i in rows if correctness[i] == 1]
        wrong = [confidence[i].item() for i in rows if correctness[i] == 0]
        pos = [advantages[i].item() for i in rows if advantages[i] > 0]
        neg = [advantages[i].item() for i in rows if advantages[i] < 0]
        tokens = mask[rows].bool()
        expect = {
            "confidence_correct": np.mean(right) if right else math.nan,
            "confidence_incorrect": np.mean(wrong) if wrong else math.nan,
            "advantage_positive": np.mean(pos) if pos else math.nan,
            "advantage_negative": np.mean(neg) if neg else math.nan,
            "token_weight": weights[rows].abs()[tokens].mean().item() if tokens.any() else math.nan,
            "clipped_frac": clipped[rows][tokens].float().mean().item() if tokens.any() else math.nan,
        }
        for key, value in expect.items():
            assert metrics[f"{label}/{key}"] == pytest.approx(value, nan_ok=True, rel=1e-6), (label, key)


def test_describe_matches_numpy():
    x = np.random.default_rng(1).gamma(2.0, size=500)
    stats = describe(np.append(x, np.nan))  # NaN ignored
    centred = x - x.mean()
    excess_kurtosis = np.mean(centred**4) / np.mean(centred**2) ** 2 - 3
    assert stats["min"] == x.min() and stats["max"] == x.max() and stats["median"] == np.median(x)
    assert stats["mean"] == pytest.approx(x.mean()) and stats["std"] == pytest.approx(x.std())
    assert stats["kurtosis"] == pytest.approx(excess_kurtosis)


def test_closed_forms():
    plus, minus = binary_advantages(0.25)
    assert plus == pytest.approx(math.sqrt(3)) and minus == pytest.approx(-math.sqrt(1 / 3))
    with pytest.raises(ValueError):
        binary_advantages(1.0)
    assert discovery_probability(0.1, 8) == pytest.approx(1 - 0.9**8)
    assert discovery_probability(0.1, 8, repeats=4) == pytest.approx(1 - 0.9**32)
    rng = np.random.default_rng(0)  # Monte Carlo of "at least one success among G m trials"
    draws = (rng.random((20000, 4 * 3)) < 0.1).any(axis=1).mean()
    assert draws == pytest.approx(discovery_probability(0.1, 4, 3), abs=0.02)


def test_trainer_advantages_are_the_papers_two_point_values(tiny_model_dir, tmp_path):
    """A+ = sqrt((1 - r)/r), A- = -sqrt(r/(1 - r)) for binary rewards; TRL's group std is Bessel-corrected, so its
    advantages are these times sqrt((G - 1)/G) (up to its 1e-4 stabiliser)."""
    args = make_args(tmp_path, max_steps=2, num_generations=4)
    trainer = CoDaPOTrainer(
        tiny_model_dir, hash_reward, args=args, train_dataset=question_dataset(), rollout_func=deterministic_rollout
    )
    outputs = record_outputs(trainer)
    trainer.train()
    G = trainer.num_generations
    checked = 0
    for out in outputs:
        for rewards, advantages in zip(
            out["dynamics_correctness"].view(-1, G), out["dynamics_advantages"].view(-1, G)
        ):
            mean = rewards.mean().item()
            if 0 < mean < 1:
                plus, minus = binary_advantages(mean)
                scale = math.sqrt((G - 1) / G)
                expected = torch.where(rewards == 1, torch.tensor(plus * scale), torch.tensor(minus * scale))
                torch.testing.assert_close(advantages, expected.float(), rtol=1e-3, atol=1e-3)
                checked += 1
            else:
                assert torch.all(advantages == 0)
    assert checked >= 2


def test_grpo_with_dynamics_logs_the_bins(tiny_model_dir, tmp_path):
    from trl import GRPOConfig

    args = make_args(tmp_path, config_class=GRPOConfig, max_steps=2)
    trainer = GRPODynamicsTrainer(
        tiny_model_dir, hash_reward, args=args, train_dataset=question_dataset(), rollout_func=deterministic_rollout
    )
    outputs = record_outputs(trainer)
    trainer.train()
    logs = [h for h in trainer.state.log_history if "dynamics/bin1/count" in h]
    assert len(logs) == 2
    for log, out in zip(logs, outputs):
        assert sum(log[f"dynamics/{label}/count"] for label in BIN_LABELS) == out["advantages"].numel()
        mask = out["completion_mask"].bool()
        for b, label in enumerate(BIN_LABELS):
            rows = difficulty_bins(out["dynamics_difficulty"]) == b
            if not rows.any():
                continue
            # on-policy GRPO: rho = 1 and v = 1, so |w| = |A| on every token and nothing is clipped
            token_adv = out["dynamics_advantages"][rows].abs().unsqueeze(1).expand_as(mask[rows])[mask[rows]]
            assert log[f"dynamics/{label}/token_weight"] == pytest.approx(token_adv.mean().item(), rel=1e-5)
            assert log[f"dynamics/{label}/clipped_frac"] == 0.0
            if (out["dynamics_correctness"][rows] == 1).any():
                assert log[f"dynamics/{label}/confidence_correct"] == pytest.approx(0.5)  # every log-prob is log 0.5
        assert log["budget/unique_prompts"] > 0 and log["budget/generated_tokens"] > 0
    assert not any(key.startswith("codapo/") for log in logs for key in log)


def test_dynamics_can_be_turned_off(tiny_model_dir, tmp_path):
    args = make_args(tmp_path, max_steps=2, codapo_dynamics=False)
    trainer = CoDaPOTrainer(
        tiny_model_dir, hash_reward, args=args, train_dataset=question_dataset(), rollout_func=deterministic_rollout
    )
    trainer.train()
    assert not any(key.startswith("dynamics/") for h in trainer.state.log_history for key in h)
    assert any("budget/generated_tokens" in h for h in trainer.state.log_history)


def test_discovery_and_the_question_log(tiny_model_dir, tmp_path):
    """With a success rate pi per rollout, the fraction of B's groups with a correct rollout is 1 - (1 - pi)^G, and
    a question repeated m times in S is discovered with probability 1 - (1 - pi)^(G m) (paper Eq. (2), App. D.3)."""
    pi, updates, G, K, questions = 0.1, 24, 4, 2, 8
    rng = random.Random(0)

    def lucky(completions, **kwargs):
        return [float(rng.random() < pi) for _ in completions]

    args = make_args(
        tmp_path,
        max_steps=updates,
        num_generations=G,
        per_device_train_batch_size=questions * G,
        codapo_top_k=K,
        codapo_question_log="questions.jsonl",
    )
    trainer = CoDaPOTrainer(
        tiny_model_dir, lucky, args=args, train_dataset=question_dataset(64), rollout_func=deterministic_rollout
    )
    trainer.train()
    rows = [json.loads(line) for line in (tmp_path / "out" / "questions.jsonl").read_text().splitlines()]
    assert len(rows) == updates * questions
    b_rows = [r for r in rows if r["phase"] == 0]
    s_rows = [r for r in rows if r["phase"] == 1]
    assert sorted({r["step"] for r in b_rows}) == list(range(1, updates + 1, 2))
    assert sorted({r["step"] for r in s_rows}) == list(range(2, updates + 1, 2))
    for step in range(1, updates + 1, 2):
        batch = [r for r in b_rows if r["step"] == step]
        assert len({r["question_id"] for r in batch}) == questions and sum(r["selected"] for r in batch) == K
        chosen = {r["question_id"] for r in batch if r["selected"]}
        resampled = [r for r in s_rows if r["step"] == step + 1]
        assert {r["question_id"] for r in resampled} == chosen
        assert all(r["selected"] is None and r["value"] is not None for r in resampled)
        assert all(0 <= r["num_correct"] <= G for r in batch + resampled)

    discovered_b = np.mean([r["num_correct"] > 0 for r in b_rows])
    assert discovered_b == pytest.approx(discovery_probability(pi, G), abs=0.15)  # 96 groups: 3 sigma ~ 0.15
    repeats = questions // K
    per_question = {}
    for r in s_rows:
        per_question.setdefault((r["step"], r["question_id"]), []).append(r["num_correct"])
    assert all(len(v) == repeats for v in per_question.values())
    discovered_s = np.mean([sum(v) > 0 for v in per_question.values()])
    assert discovered_s == pytest.approx(discovery_probability(pi, G, repeats), abs=0.3)  # 24 questions
    assert discovered_s > discovered_b
