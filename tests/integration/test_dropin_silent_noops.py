"""Drop-in scripts on which CoDaPO would otherwise do something other than the user meant, without a word: each one
is built as a TRL user writes it, trained a few steps on the tiny model, and must warn, stop, or say what it does.

- correctness that never varies (a threshold below every score; a verifier still always wrong beside a format reward
  at a cold start): every value is 0 and nothing trains;
- placeholder log-probs from a `rollout_func` (all 0, positive, NaN): confidence must not be read from them;
- `num_train_epochs` without `max_steps`: what an epoch means for CoDaPO, and GRPO's step budget on request;
- open-r1's own `accuracy_reward` (a function of that name, not TRL's object).
"""

from __future__ import annotations

import logging
import math

import pytest
import torch
from fakes import deterministic_rollout, question_dataset
from helpers_training import make_args, phases, record_parent_generations
from trl import GRPOConfig, GRPOTrainer

from codapo_trl import CoDaPOConfig, CoDaPOTrainer
from codapo_trl.dynamics.streaks import STALL_BATCHES


def logged(trainer, key):
    return [h[key] for h in trainer.state.log_history if key in h]


def build(tiny_model_dir, tmp_path, reward_funcs, rollout=deterministic_rollout, dataset=None, **overrides):
    args = make_args(tmp_path, **overrides)
    return CoDaPOTrainer(
        tiny_model_dir, reward_funcs, args=args, train_dataset=dataset or question_dataset(), rollout_func=rollout
    )


def parameters(trainer):
    return {name: p.detach().clone() for name, p in trainer.model.named_parameters()}


def changed(trainer, before):
    return [name for name, p in trainer.model.named_parameters() if not torch.equal(p, before[name])]


# ------------------------------------------------------------------ correctness that never varies
def probability_score(completion_ids, **kwargs):
    """A score in (0, 1], like a reward model's probability: every completion scores above 0."""
    return [min(len(ids), 20) / 20.0 for ids in completion_ids]


def format_reward(completion_ids, **kwargs):
    """A learnable format score: 1 for a short completion, 0 for a long one (varies within every group)."""
    return [float(len(ids) <= 4) for ids in completion_ids]


def strict_verifier(completion_ids, **kwargs):
    """A verifier that a cold-start model never satisfies: always 0."""
    return [0.0 for _ in completion_ids]


WEIGHTLESS = "Every CoDaPO value was 0 for"
STEPS = STALL_BATCHES + 1  # B and S batches alternate; each counts


@pytest.mark.parametrize(
    ("case", "rewards", "overrides", "why", "fix"),
    [
        (
            "threshold_below_every_score",
            [probability_score],
            dict(codapo_correctness_threshold=0.0),
            "every group is solved",
            "put codapo_correctness_threshold (now 0) inside the range of the scores (this batch's scores: 0.",
        ),
        (
            "cold_start_beside_a_format_reward",
            [format_reward, strict_verifier],
            dict(codapo_correctness_reward="strict_verifier"),
            "no group has a correct rollout",
            "set codapo_weight_offset=0.1 (the authors' released code",
        ),
    ],
)
def test_values_that_are_all_zero_warn_once_with_the_reason_and_the_options(
    tiny_model_dir, tmp_path, caplog, case, rewards, overrides, why, fix
):
    trainer = build(tiny_model_dir, tmp_path, rewards, max_steps=STEPS, **overrides)
    before = parameters(trainer)
    with caplog.at_level(logging.WARNING, logger="codapo_trl.trainer"):
        trainer.train()
    warnings = [r.getMessage() for r in caplog.records if r.getMessage().startswith(WEIGHTLESS)]
    assert len(warnings) == 1, warnings  # once, not every batch
    message = warnings[0]
    assert f"{WEIGHTLESS} {STALL_BATCHES} batches in a row" in message and why in message and fix in message
    assert "V_d='center' is 0" in message
    if len(rewards) > 1:
        assert "The advantages of ['format_reward'] are multiplied by these values too" in message
    assert set(logged(trainer, "codapo/value_mean")) == {0.0}
    assert not changed(trainer, before)  # nothing trained, as the warning says

    # what the warning proposes trains, and says nothing
    caplog.clear()
    trainer = build(
        tiny_model_dir, tmp_path / "offset", rewards, max_steps=STEPS, codapo_weight_offset=0.1, **overrides
    )
    before = parameters(trainer)
    with caplog.at_level(logging.WARNING, logger="codapo_trl.trainer"):
        trainer.train()
    assert not [r for r in caplog.records if r.getMessage().startswith(WEIGHTLESS)]
    assert changed(trainer, before)


def test_a_short_run_of_zero_values_is_not_reported(tiny_model_dir, tmp_path, caplog):
    trainer = build(
        tiny_model_dir, tmp_path, [probability_score], max_steps=STALL_BATCHES - 1, codapo_correctness_threshold=0.0
    )
    with caplog.at_level(logging.WARNING, logger="codapo_trl.trainer"):
        trainer.train()
    assert not [r for r in caplog.records if r.getMessage().startswith(WEIGHTLESS)]


# ------------------------------------------------------------------ placeholder log-probs from a rollout_func
def placeholder_rollout(fill):
    """A user's `rollout_func` that generates like `deterministic_rollout` but fills every log-prob with `fill`
    (what a script without access to the generator's log-probs writes)."""

    def my_rollout(prompts, trainer):
        out = deterministic_rollout(prompts, trainer)
        out["logprobs"] = [[fill] * len(ids) for ids in out["completion_ids"]]
        return out

    return my_rollout


def binary_reward(completion_ids, **kwargs):
    return [float(len(ids) % 2) for ids in completion_ids]


@pytest.mark.parametrize(("fill", "reason"), [(0.0, "exactly 0"), (0.7, "positive"), (math.nan, "NaN")])
def test_placeholder_logps_from_a_rollout_func_are_replaced_by_a_forward_pass(
    tiny_model_dir, tmp_path, caplog, fill, reason
):
    trainer = build(tiny_model_dir, tmp_path, binary_reward, rollout=placeholder_rollout(fill), max_steps=2)
    forwards = []
    original = trainer._policy_logps
    trainer._policy_logps = lambda output: forwards.append(1) or original(output)
    with caplog.at_level(logging.WARNING, logger="codapo_trl.dynamics.mixin"):
        trainer.train()
    warnings = [r.getMessage() for r in caplog.records if "cannot be the sampled tokens'" in r.getMessage()]
    assert (
        len(warnings) == 1
        and warnings[0].startswith("The rollout_func 'my_rollout' returned")
        and reason in warnings[0]
    )
    assert len(forwards) >= 2  # one per batch, B and S
    # the confidence is the policy's own: the random tiny model gives each token about 1/|vocabulary|, far from the
    # 1 (or NaN, or above 1) that the placeholders would give
    confidence = logged(trainer, "codapo/confidence_mean")
    assert len(confidence) == 2 and all(0 < c < 0.05 for c in confidence), confidence


def test_real_logps_from_a_rollout_func_are_used_as_they_are(tiny_model_dir, tmp_path, caplog):
    trainer = build(tiny_model_dir, tmp_path, binary_reward, max_steps=2)  # log(0.5) per token
    with caplog.at_level(logging.WARNING, logger="codapo_trl.dynamics.mixin"):
        trainer.train()
    assert "cannot be the sampled tokens'" not in caplog.text
    assert logged(trainer, "codapo/confidence_mean") == [pytest.approx(0.5), pytest.approx(0.5)]


# ------------------------------------------------------------------ num_train_epochs
def epoch_run(tiny_model_dir, tmp_path, trainer_class, config_class, **overrides):
    """One epoch over 8 questions (2 per generation batch of 8 rollouts), no max_steps: optimizer steps and
    generation batches as the Trainer's loop takes them."""
    args = make_args(tmp_path, config_class=config_class, max_steps=-1, num_train_epochs=1, **overrides)
    trainer = trainer_class(
        tiny_model_dir, binary_reward, args=args, train_dataset=question_dataset(8), rollout_func=deterministic_rollout
    )
    calls, parent_patch = record_parent_generations(trainer)
    with parent_patch:
        trainer.train()
    return trainer, len(calls)


def test_an_epoch_is_a_pass_over_b_each_with_its_s_unless_grpo_steps_is_asked(tiny_model_dir, tmp_path, caplog):
    grpo, grpo_generations = epoch_run(tiny_model_dir, tmp_path / "grpo", GRPOTrainer, GRPOConfig)
    assert (grpo.state.global_step, grpo_generations) == (4, 4)

    with caplog.at_level(logging.WARNING, logger="codapo_trl.trainer"):
        passes, passes_generations = epoch_run(tiny_model_dir, tmp_path / "passes", CoDaPOTrainer, CoDaPOConfig)
    assert (passes.state.global_step, passes_generations) == (8, 8)  # twice GRPO's: each B gets its S
    assert "so the run takes 8 optimizer steps, twice GRPO's 4 for the same epochs" in caplog.text
    assert "codapo_epoch_budget='grpo_steps'" in caplog.text

    caplog.clear()
    args = dict(codapo_epoch_budget="grpo_steps")
    with caplog.at_level(logging.WARNING, logger="codapo_trl.trainer"):
        equal, equal_generations = epoch_run(tiny_model_dir, tmp_path / "equal", CoDaPOTrainer, CoDaPOConfig, **args)
    assert (equal.state.global_step, equal_generations) == (4, 4)  # GRPO's budget
    assert phases(equal) == [0.0, 1.0, 0.0, 1.0]  # still B, then its S
    assert "GRPO's budget of 4 optimizer steps" in caplog.text
    assert equal.args.max_steps == 4


def test_max_steps_is_left_as_it_is_by_the_epoch_budget(tiny_model_dir, tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="codapo_trl.trainer"):
        trainer = build(tiny_model_dir, tmp_path, binary_reward, max_steps=2, codapo_epoch_budget="grpo_steps")
    assert trainer.args.max_steps == 2 and "num_train_epochs" not in caplog.text


# ------------------------------------------------------------------ open-r1's accuracy_reward
def accuracy_reward(completions, solution, **kwargs):
    """open-r1's `accuracy_reward` as a user's script imports it: TRL's name, another function (0/1 here)."""
    return [float(len(c[-1]["content"]) % 2) for c, _ in zip(completions, solution, strict=True)]


def open_r1_format_reward(completions, **kwargs):
    return [float("<think>" in c[-1]["content"]) for c in completions]


def test_open_r1s_accuracy_reward_is_refused_with_what_is_recognised_and_how_to_name_it(tiny_model_dir, tmp_path):
    data = question_dataset()
    data = data.add_column("solution", data["answer"])
    rewards = [open_r1_format_reward, accuracy_reward]
    with pytest.raises(ValueError) as error:
        build(tiny_model_dir, tmp_path, rewards, dataset=data)
    message = str(error.value)
    assert "['accuracy_reward'] is not TRL's own function of that name" in message
    assert "recognised by identity, never by name" in message
    assert "TRL's own trl.rewards.accuracy_reward" in message
    assert "Set codapo_correctness_reward to its name (codapo_correctness_reward='accuracy_reward')" in message
    # what the message says to write trains, on that reward
    trainer = build(tiny_model_dir, tmp_path, rewards, dataset=data, codapo_correctness_reward="accuracy_reward")
    trainer.train()
    assert trainer.state.global_step == 2 and trainer.correctness_spec.names == ("accuracy_reward",)


# ------------------------------------------------------------------ the multi-reward notice
def test_the_multi_reward_notice_leaves_out_rewards_of_weight_0(tiny_model_dir, tmp_path, caplog):
    for weights, notice in (([1.0, 0.0], False), ([1.0, 0.5], True)):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="codapo_trl.trainer"):
            build(
                tiny_model_dir,
                tmp_path,
                [binary_reward, format_reward],
                reward_weights=weights,
                codapo_correctness_reward="binary_reward",
            )
        assert ("weighted reward functions ['binary_reward', 'format_reward']" in caplog.text) == notice
