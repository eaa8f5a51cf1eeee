"""Which reward is correctness, as a TRL user writes it: each script trains as the user meant or stops at
construction (or, for a value that breaks the declared kind, on the first batch) with a one-line fix.

The rollouts are text: slot 0 and 2 of each question's 4 answer it right (`\\boxed{a+b}`), slots 1 and 3 wrong, so
a correctness read from the accuracy reward gives every question difficulty 0.5, and one read from a format reward
(every completion has a box) difficulty 0.
"""

from __future__ import annotations

import math
import re

import pytest
import torch
from fakes import deterministic_rollout, hash_reward, question_dataset
from helpers_training import make_args, record_outputs
from trl import GRPOConfig
from trl.rewards import accuracy_reward

from codapo_trl import CoDaPOTrainer
from codapo_trl.dynamics import GRPODynamicsTrainer


def answer_rollout(prompts, trainer):
    """A `rollout_func` whose completion is `\\boxed{a+b}` on even slots of a group and `\\boxed{a+b+1}` on odd ones."""
    tokenizer, num_generations = trainer.processing_class, trainer.num_generations
    offset = trainer.accelerator.process_index * len(prompts)
    prompt_ids, completion_ids, logprobs = [], [], []
    for i, prompt in enumerate(prompts):
        a, b = map(int, re.findall(r"\d+", prompt[-1]["content"]))
        answer = a + b + (offset + i) % num_generations % 2
        text = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
        completion = tokenizer(f"so \\boxed{{{answer}}}", add_special_tokens=False)["input_ids"]
        prompt_ids.append(tokenizer(text, add_special_tokens=False)["input_ids"])
        completion_ids.append(completion + [tokenizer.eos_token_id])
        logprobs.append([math.log(0.5)] * len(completion_ids[-1]))
    return {"prompt_ids": prompt_ids, "completion_ids": completion_ids, "logprobs": logprobs}


def format_reward(completions, **kwargs):
    """A 0/1 format score: 1 when the completion has a box (every completion here)."""
    return [float("\\boxed" in c[-1]["content"]) for c in completions]


def graded_format_reward(completions, **kwargs):
    """An open-r1-style 0/0.5/1 format score (0.5 here: a box but no think tags)."""
    return [0.5 + 0.5 * ("<think>" in c[-1]["content"]) for c in completions]


def my_verifier(completions, answer, **kwargs):
    """A user's own 0/1 verifier, which declares nothing."""
    return [float(f"\\boxed{{{a}}}" in c[-1]["content"]) for c, a in zip(completions, answer)]


def math_data(n: int = 16):
    data = question_dataset(n)
    return data.add_column("solution", data["answer"])


def build(tiny_model_dir, tmp_path, reward_funcs, dataset=None, rollout=answer_rollout, peft_config=None, **overrides):
    args = make_args(tmp_path, **{"max_steps": 2, **overrides})
    return CoDaPOTrainer(
        tiny_model_dir,
        reward_funcs,
        args=args,
        train_dataset=dataset or math_data(),
        rollout_func=rollout,
        peft_config=peft_config,
    )


def train_recorded(trainer):
    outputs = record_outputs(trainer)
    trainer.train()
    return outputs


def logged(trainer, key):
    return [h[key] for h in trainer.state.log_history if key in h]


# ------------------------------------------------------------------ several rewards
@pytest.mark.parametrize("order", ["format_first", "accuracy_first"])
@pytest.mark.parametrize("named", [False, True])
def test_format_and_accuracy_in_either_order_train_on_accuracy(tiny_model_dir, tmp_path, order, named):
    rewards = [format_reward, accuracy_reward] if order == "format_first" else [accuracy_reward, format_reward]
    extra = {"codapo_correctness_reward": "accuracy_reward"} if named else {}
    trainer = build(tiny_model_dir, tmp_path, rewards, **extra)
    assert trainer.correctness_spec.describe() == "'accuracy_reward' (binary)"
    outputs = train_recorded(trainer)
    assert trainer.state.global_step == 2
    for out in outputs:  # two right and two wrong rollouts per question: the accuracy, not the format score
        assert out["dynamics_correctness"].view(-1, 4).sum(1).eq(2).all()
    assert logged(trainer, "codapo/difficulty_mean") == [0.5, 0.5]


@pytest.mark.parametrize("order", ["format_first", "verifier_first"])
def test_several_undeclared_rewards_stop_at_construction_with_the_fix(tiny_model_dir, tmp_path, order):
    rewards = [format_reward, my_verifier] if order == "format_first" else [my_verifier, format_reward]
    with pytest.raises(ValueError, match=r"^Which of the reward functions .* Set codapo_correctness_reward") as error:
        build(tiny_model_dir, tmp_path, rewards)
    assert "\n" not in str(error.value)
    trainer = build(tiny_model_dir, tmp_path, rewards, codapo_correctness_reward="my_verifier")
    train_recorded(trainer)
    assert logged(trainer, "codapo/difficulty_mean") == [0.5, 0.5]


def test_a_graded_format_score_is_not_read_as_a_pass_rate(tiny_model_dir, tmp_path):
    trainer = build(
        tiny_model_dir,
        tmp_path,
        [graded_format_reward, my_verifier],
        codapo_correctness_reward=["graded_format_reward"],
    )
    with pytest.raises(ValueError, match=r"'graded_format_reward' returned 0.5, which is not 0 or 1 .*pass_rate"):
        trainer.train()
    assert trainer.state.global_step == 0  # refused on the first batch
    # declared a pass rate, it trains on it (the user's choice, said out loud)
    trainer = build(
        tiny_model_dir,
        tmp_path,
        [graded_format_reward, my_verifier],
        codapo_correctness_reward="graded_format_reward",
        codapo_correctness_kind="pass_rate",
    )
    train_recorded(trainer)
    assert logged(trainer, "codapo/difficulty_mean") == [0.5, 0.5]


def test_two_known_verifiers_need_a_name(tiny_model_dir, tmp_path):
    from codapo_trl.rewards import math_accuracy_reward

    with pytest.raises(ValueError, match="Set codapo_correctness_reward"):
        build(tiny_model_dir, tmp_path, [math_accuracy_reward, accuracy_reward])


# ------------------------------------------------------------------ a reward model, a continuous score
@pytest.fixture
def reward_model(tiny_model_dir):
    from transformers import AutoModelForSequenceClassification

    torch.manual_seed(0)
    return AutoModelForSequenceClassification.from_pretrained(tiny_model_dir, num_labels=1, dtype=torch.float32)


def test_reward_model_needs_a_threshold_and_then_counts_scores_above_it(tiny_model_dir, tmp_path, reward_model):
    with pytest.raises(
        ValueError, match=r"is a reward model, whose scores are not 0/1: set codapo_correctness_threshold"
    ):
        build(tiny_model_dir, tmp_path, reward_model)
    trainer = build(tiny_model_dir, tmp_path, reward_model, codapo_correctness_threshold=0.075)
    name = trainer.reward_func_names[0]
    assert trainer.correctness_spec.describe() == f"{name!r} (score >= 0.075)"
    scores = []
    original = trainer._calculate_rewards

    def spy(*args):
        rewards = original(*args)
        scores.append(rewards[:, 0].clone())
        return rewards

    trainer._calculate_rewards = spy
    outputs = train_recorded(trainer)
    assert len(outputs) == len(scores) == 2  # B, then S
    for out, score in zip(outputs, scores):
        torch.testing.assert_close(out["dynamics_correctness"], (score >= 0.075).float())
        assert not ((score == 0) | (score == 1)).all()  # real scores, not 0/1


def continuous_score(completion_ids, **kwargs):
    """A length score outside [0, 1], like TRL's cosine-scaled reward."""
    return [len(ids) / 4.0 - 1.0 for ids in completion_ids]


def unit_score(completion_ids, **kwargs):
    """A score that happens to lie in [0, 1], like a reward model's probability."""
    return [min(len(ids), 20) / 20.0 for ids in completion_ids]


@pytest.mark.parametrize("reward", [continuous_score, unit_score])
def test_a_continuous_score_is_refused_on_the_first_batch_then_trains_with_a_threshold(
    tiny_model_dir, tmp_path, reward
):
    trainer = build(tiny_model_dir, tmp_path, reward, rollout=deterministic_rollout)
    with pytest.raises(
        ValueError, match=rf"^The correctness reward '{reward.__name__}' returned .*, which is not 0 or 1"
    ):
        trainer.train()
    assert trainer.state.global_step == 0
    trainer = build(tiny_model_dir, tmp_path, reward, rollout=deterministic_rollout, codapo_correctness_threshold=0.5)
    for out in train_recorded(trainer):
        lengths = out["completion_mask"].sum(1)
        torch.testing.assert_close(
            out["dynamics_correctness"], (torch.tensor(reward([[0] * int(n) for n in lengths])) >= 0.5).float()
        )


# ------------------------------------------------------------------ multi-task data
def multitask_data(n: int = 16):
    data = math_data(n)
    return data.add_column("task", ["sum" if i % 2 == 0 else "code" for i in range(n)])


def sum_verifier(completions, answer, task, **kwargs):
    """Task "sum": 0/1; None for the other task's rows."""
    return [
        float(f"\\boxed{{{a}}}" in c[-1]["content"]) if t == "sum" else None
        for c, a, t in zip(completions, answer, task)
    ]


def code_pass_rate(completions, task, **kwargs):
    """Task "code": a pass rate (0.25 here); None for the other task's rows."""
    return [0.25 if t == "code" else None for t in task]


code_pass_rate.correctness_kind = "pass_rate"


def test_multitask_rows_take_correctness_from_their_own_reward(tiny_model_dir, tmp_path):
    trainer = build(
        tiny_model_dir,
        tmp_path,
        [sum_verifier, code_pass_rate, format_reward],
        dataset=multitask_data(),
        codapo_correctness_reward=["sum_verifier", "code_pass_rate"],
        shuffle_dataset=False,
    )
    assert trainer.correctness_spec.kinds == ("binary", "pass_rate")
    outputs = train_recorded(trainer)
    assert logged(trainer, "rewards/correctness_undefined_frac") == [0.0, 0.0]
    grouped = outputs[0]["dynamics_correctness"].view(-1, 4)
    sums = grouped.sum(1)
    assert {float(s) for s in sums} == {2.0, 1.0}  # a "sum" question: 2 of 4 right; a "code" one: 4 x 0.25
    assert not torch.isnan(outputs[0]["codapo_value"]).any()


def test_multitask_rows_no_correctness_reward_scored_carry_no_value(tiny_model_dir, tmp_path):
    trainer = build(
        tiny_model_dir,
        tmp_path,
        [sum_verifier, code_pass_rate],
        dataset=multitask_data(),
        codapo_correctness_reward="sum_verifier",
        shuffle_dataset=False,
    )
    outputs = train_recorded(trainer)
    out = outputs[0]
    undefined = torch.isnan(out["dynamics_correctness"])
    assert undefined.any() and not undefined.all()
    assert torch.isnan(out["codapo_value"][undefined]).all() and out["advantages"][undefined].eq(0).all()
    assert logged(trainer, "rewards/correctness_undefined_frac")[0] == 0.5


def test_a_picked_verifier_that_leaves_another_task_unscored_stops_with_the_fix(tiny_model_dir, tmp_path):
    def other_task(completions, task, **kwargs):
        return [1.0 if t == "code" else None for t in task]

    sum_verifier.correctness_kind = "binary"  # known verifier: picked as the only one
    try:
        trainer = build(tiny_model_dir, tmp_path, [sum_verifier, other_task], dataset=multitask_data())
        assert trainer.correctness_spec.picked
        with pytest.raises(ValueError, match=r"picked as the only known verifier.*\['other_task'\] scored: set "):
            trainer.train()
    finally:
        del sum_verifier.correctness_kind


def test_a_row_scored_by_two_correctness_rewards_is_refused(tiny_model_dir, tmp_path):
    trainer = build(
        tiny_model_dir,
        tmp_path,
        [my_verifier, format_reward],
        codapo_correctness_reward=["my_verifier", "format_reward"],
    )
    with pytest.raises(ValueError, match=r"\['my_verifier', 'format_reward'\] both scored rollout 0"):
        trainer.train()


# ------------------------------------------------------------------ what keeps working as before
def test_a_single_binary_verifier_script_runs_unchanged(tiny_model_dir, tmp_path):
    trainer = build(tiny_model_dir, tmp_path, hash_reward, rollout=deterministic_rollout)
    assert trainer.correctness_spec.describe() == "'hash_reward' (binary)"
    train_recorded(trainer)
    assert trainer.state.global_step == 2


def test_metrics_only_runs_are_never_stopped_for_correctness(tiny_model_dir, tmp_path, caplog):
    """Plain GRPO with the dynamics, and CoDaPO with weighting and sampling off (the drop-in "off" run), read
    correctness for their metrics only: several undeclared rewards and a continuous score are warnings."""
    off = dict(codapo_weighting=False, codapo_sampling=False, loss_type="dapo")
    with caplog.at_level("WARNING"):
        trainer = build(
            tiny_model_dir, tmp_path, [continuous_score, my_verifier], rollout=deterministic_rollout, **off
        )
        train_recorded(trainer)
    assert trainer.state.global_step == 2
    assert "Which of the reward functions" in caplog.text and "which is not a pass rate in [0, 1]" in caplog.text
    args = make_args(tmp_path / "grpo", config_class=GRPOConfig, max_steps=1)
    grpo = GRPODynamicsTrainer(
        tiny_model_dir,
        [format_reward, my_verifier],
        args=args,
        train_dataset=math_data(),
        rollout_func=answer_rollout,
        correctness_reward="my_verifier",
    )
    grpo.train()
    assert grpo.correctness_reward_name == "my_verifier"


# ------------------------------------------------------------------ with PEFT and gradient accumulation
def test_several_rewards_with_peft(tiny_model_dir, tmp_path):
    from peft import LoraConfig

    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")
    trainer = build(tiny_model_dir, tmp_path, [format_reward, accuracy_reward], peft_config=lora)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
    train_recorded(trainer)
    assert logged(trainer, "codapo/difficulty_mean") == [0.5, 0.5]
    assert before and all(n.count("lora_") for n in before)
    assert any(not torch.equal(p, before[n]) for n, p in trainer.model.named_parameters() if n in before)


def test_several_rewards_with_gradient_accumulation(tiny_model_dir, tmp_path):
    trainer = build(
        tiny_model_dir,
        tmp_path,
        [accuracy_reward, format_reward],
        per_device_train_batch_size=4,
        gradient_accumulation_steps=2,
        max_steps=4,
    )
    train_recorded(trainer)
    assert trainer.state.global_step == 4
    assert logged(trainer, "codapo/difficulty_mean") == [0.5] * 4
