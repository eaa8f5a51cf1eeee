"""CoDaPOTrainer inside TRL's own training loop, on a tiny offline model (one process)."""

import copy
import itertools
from unittest.mock import patch

import pytest
import torch
from fakes import GradRecorder, deterministic_rollout, hash_reward, parity_reward, question_dataset
from helpers_training import (
    StopAfter,
    make_args,
    phases,
    record_outputs,
    record_parent_generations,
    train_recording_generations,
)

from codapo_trl import CoDaPOTrainer, coda


SHAPES = sorted(coda.VALUE_FUNCTIONS)


def shape_cases():
    # every (V_c, V_d) pair; the timings alternate so that each is exercised on about half of the pairs
    pairs = list(itertools.product(SHAPES, SHAPES))
    return [(c, d, ("before_update", "after_update")[i % 2]) for i, (c, d) in enumerate(pairs)]


@pytest.mark.parametrize(("confidence_fn", "difficulty_fn", "timing"), shape_cases())
def test_train_every_shape_pair(tiny_model_dir, tmp_path, confidence_fn, difficulty_fn, timing):
    args = make_args(
        tmp_path,
        codapo_confidence_fn=confidence_fn,
        codapo_difficulty_fn=difficulty_fn,
        codapo_resample_timing=timing,
        codapo_weight_offset=0.05,  # so that every shape gives a non-zero gradient on a random model
    )
    trainer = CoDaPOTrainer(tiny_model_dir, parity_reward, args=args, train_dataset=question_dataset())
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.train()
    assert phases(trainer) == [0.0, 1.0]
    for name, param in trainer.model.named_parameters():
        assert not torch.equal(param, before[name]), f"{name} did not change"


@pytest.mark.slow
@pytest.mark.parametrize("timing", ["before_update", "after_update"])
@pytest.mark.parametrize(("confidence_fn", "difficulty_fn"), list(itertools.product(SHAPES, SHAPES)))
def test_train_every_shape_pair_both_timings(tiny_model_dir, tmp_path, confidence_fn, difficulty_fn, timing):
    test_train_every_shape_pair(tiny_model_dir, tmp_path, confidence_fn, difficulty_fn, timing)


@pytest.mark.parametrize("timing", ["before_update", "after_update"])
def test_resampled_batch_is_the_top_k_repeated(tiny_model_dir, tmp_path, timing):
    # |B| = 8 rows / G = 2 -> 4 questions per update; K = 2, so each selected question fills 4/2 * G = 4 rows.
    args = make_args(
        tmp_path,
        num_generations=2,
        max_steps=4,
        codapo_top_k=2,
        codapo_resample_timing=timing,
        shuffle_dataset=False,
    )
    trainer = CoDaPOTrainer(tiny_model_dir, parity_reward, args=args, train_dataset=question_dataset())
    weigh_stats = []
    original_weigh = trainer._codapo_weigh
    trainer._codapo_weigh = lambda output, stats: weigh_stats.append(original_weigh(output, stats)) or weigh_stats[-1]
    calls, parent_patch = record_parent_generations(trainer)
    with parent_patch, patch.object(CoDaPOTrainer, "training_step", wraps=trainer.training_step) as step:
        trainer.train()

    assert phases(trainer) == [0.0, 1.0, 0.0, 1.0]
    # The Trainer loop took 4 updates of GA = 1 micro-step; the dataloader handed each B batch over twice.
    delivered = [call.args[1] for call in step.call_args_list]
    assert len(delivered) == 4
    assert delivered[0] == delivered[1] and delivered[2] == delivered[3] and delivered[0] != delivered[2]

    # Parent generations: B1, S1, B2, S2 (S1 right after B1 for before_update, at update 2 for after_update).
    assert len(calls) == 4 and len(weigh_stats) == 4
    for b_call, s_call, stats in ((calls[0], calls[1], weigh_stats[0]), (calls[2], calls[3], weigh_stats[2])):
        questions = b_call[::2]
        values = stats.tolist()
        ranked = sorted(range(len(questions)), key=lambda j: (-values[j], j))[:2]
        expected = [questions[j] for j in ranked for _ in range(4)]
        assert s_call == expected
    # S's questions come from B's, never from the next batch
    assert set(calls[1]) <= set(calls[0]) and set(calls[3]) <= set(calls[2])


def test_uniform_selection_ignores_values(tiny_model_dir, tmp_path):
    """The uniform-resampling control: S holds K distinct questions of B drawn at random (not the top-K by value),
    repeated like CoDaSampling's, and two seeds draw differently."""
    drawn = {}
    for seed in (0, 1):
        args = make_args(
            tmp_path / str(seed),
            num_generations=2,
            max_steps=4,
            codapo_top_k=2,
            codapo_selection="uniform",
            shuffle_dataset=False,
            seed=seed,
        )
        trainer = CoDaPOTrainer(tiny_model_dir, parity_reward, args=args, train_dataset=question_dataset())
        selections = []
        original_select = trainer._select
        trainer._select = lambda *a, _sel=selections, _orig=original_select, **k: (
            _sel.append(_orig(*a, **k)) or _sel[-1]
        )
        calls, parent_patch = record_parent_generations(trainer)
        with parent_patch, patch.object(coda, "select_top_k", side_effect=AssertionError("value ranking used")):
            trainer.train()
        assert phases(trainer) == [0.0, 1.0, 0.0, 1.0]
        assert len(calls) == 4 and len(selections) == 2
        for b_call, s_call, selection in ((calls[0], calls[1], selections[0]), (calls[2], calls[3], selections[1])):
            questions = b_call[::2]
            assert len(set(selection)) == 2 and len(selection) == 4
            assert s_call == [questions[j] for j in selection for _ in range(2)]
        drawn[seed] = selections
    assert drawn[0] != drawn[1]


def gradient_recording_trainer(model_dir, args):
    """A CoDaPO trainer on deterministic rollouts that records every update's gradients and batches, with a copy of
    its initial model for the reference computation: `(trainer, recorder, outputs, reference_model)`."""
    recorder = GradRecorder()
    trainer = CoDaPOTrainer(
        model_dir,
        hash_reward,
        args=args,
        train_dataset=question_dataset(),
        rollout_func=deterministic_rollout,
        callbacks=[recorder],
    )
    outputs = record_outputs(trainer)
    return trainer, recorder, outputs, copy.deepcopy(trainer.model)


@pytest.mark.parametrize("loss_type", ["codapo", "gpg"])
def test_gradients_equal_the_codapo_loss(tiny_model_dir, tmp_path, loss_type):
    """The trainer's gradient for B (on-policy) and S (off-policy, before_update) is that of `coda.codapo_loss`."""
    # One micro-batch per update, so that the trainer pads exactly like the reference computation below.
    args = make_args(tmp_path, loss_type=loss_type)
    trainer, recorder, outputs, reference_model = gradient_recording_trainer(tiny_model_dir, args)
    trainer.train()
    assert len(outputs) == 2 and len(recorder.grads) == 2

    objective = "clip" if loss_type == "codapo" else "gpg"
    G = trainer.num_generations
    for update, output in enumerate(outputs):
        reference_model.load_state_dict(recorder.params[update])
        reference_model.zero_grad()
        input_ids = torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1)
        attention_mask = torch.cat([output["prompt_mask"], output["completion_mask"]], dim=1)
        logps, _, _ = trainer._get_per_token_logps_and_entropies(
            reference_model, input_ids, attention_mask, output["completion_ids"].size(1)
        )
        old = output.get("old_per_token_logps")
        if update == 0:
            assert old is None  # B is on-policy: TRL computes no old log-probs
            old = logps.detach()
        else:
            assert old is not None  # S was generated before B's update: its ratio needs the behaviour log-probs
        loss = coda.codapo_loss(
            logps,
            old,
            output["dynamics_advantages"],
            output["completion_mask"],
            output["codapo_value"][::G],
            G,
            args.epsilon,
            args.epsilon,
            objective=objective,
        )
        loss.backward()
        for name, param in reference_model.named_parameters():
            torch.testing.assert_close(recorder.grads[update][name], param.grad, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("loss_type", ["codapo", "gpg"])
def test_gradient_invariant_to_batch_split(tiny_model_dir, tmp_path, loss_type):
    grads = {}
    for per_device, accumulation in ((8, 1), (4, 2), (2, 4)):
        recorder = GradRecorder()
        args = make_args(
            tmp_path / f"{per_device}x{accumulation}",
            per_device_train_batch_size=per_device,
            gradient_accumulation_steps=accumulation,
            loss_type=loss_type,
            # S's update is off-policy: a token whose ratio sits on a clipping boundary may flip between clipped and
            # unclipped with float noise. SGD with a small step keeps every ratio near 1 (Adam's first step, about
            # lr * sign(g), would amplify the noise instead); clipping itself is covered by the exactness test.
            optim="sgd",
            learning_rate=1e-3,
        )
        trainer = CoDaPOTrainer(
            tiny_model_dir,
            hash_reward,
            args=args,
            train_dataset=question_dataset(),
            rollout_func=deterministic_rollout,
            callbacks=[recorder],
        )
        trainer.train()
        grads[(per_device, accumulation)] = recorder.grads
    reference = grads.pop((8, 1))
    for split, recorded in grads.items():
        for update in range(2):
            # Regrouping the same rows into other backward passes moves single entries by up to ~1e-3 of a tensor's
            # largest entry on this tiny random model (plain autograd does the same), so compare the whole gradient:
            # a weighting or normalisation error changes it by 10 % or more.
            ref = torch.cat([g.flatten() for g in reference[update].values()])
            got = torch.cat([recorded[update][name].flatten() for name in reference[update]])
            relative_error = ((got - ref).norm() / ref.norm()).item()
            assert relative_error < 1e-3, f"{split}, update {update}: relative gradient error {relative_error:.2e}"


@pytest.mark.parametrize("timing", ["before_update", "after_update"])
def test_rollout_func_log_probs_give_confidence_without_forward(tiny_model_dir, tmp_path, timing):
    args = make_args(tmp_path, max_steps=4, codapo_resample_timing=timing)
    trainer = CoDaPOTrainer(
        tiny_model_dir, hash_reward, args=args, train_dataset=question_dataset(), rollout_func=deterministic_rollout
    )
    with patch.object(CoDaPOTrainer, "_policy_logps", wraps=trainer._policy_logps) as forward:
        trainer.train()
    confidences = [h["codapo/confidence_mean"] for h in trainer.state.log_history if "codapo/phase" in h]
    assert confidences == pytest.approx([0.5] * 4)  # every generator log-prob is log(0.5)
    # Only S's off-policy update (before_update) needs a forward pass, for its ratio's denominator.
    assert forward.call_count == (2 if timing == "before_update" else 0)


# How far bf16 recording may drift from the training forward: bf16 keeps 8 significant bits (unit roundoff 2^-8), and a
# token's log-prob is a difference of rounded logits; 8 units of roundoff, 2^-5 = 0.031 nats. Measured on the tiny
# model: 4.8e-7 on one AMD EPYC (its decode and forward kernels round alike), 5.2e-3 on another; bf16 against float32
# 2.1e-3. The same bound is stated in docs/method.md and `DynamicsMixin.recording_matches_training`.
BF16_RECORDING_BOUND = 2**-5


@pytest.mark.parametrize("bf16, bound", [(False, 1e-4), (True, BF16_RECORDING_BOUND)], ids=["fp32", "bf16"])
def test_generate_log_probs_are_recorded_without_forward(tiny_model_dir, tmp_path, bf16, bound):
    """With TRL's plain `model.generate`, the sampled tokens' log-probs are recorded while generating: they equal
    TRL's own forward-pass log-probs (to float precision in float32, within `BF16_RECORDING_BOUND` under bf16
    autocast, whatever the CPU), and confidence needs no extra forward pass."""
    args = make_args(tmp_path, max_steps=2, codapo_resample_timing="after_update", temperature=0.7, bf16=bf16)
    trainer = CoDaPOTrainer(tiny_model_dir, parity_reward, args=args, train_dataset=question_dataset())
    assert trainer.recording_matches_training is not bf16
    outputs = record_outputs(trainer)
    checked = []
    original_weigh = trainer._codapo_weigh

    def weigh_and_check(output, stats):
        # before the update, the policy is the one that generated: its forward must give the recorded log-probs
        mask = output["completion_mask"].bool()
        recorded, forward = output["sampling_per_token_logps"], trainer._policy_logps(output)
        checked.append((recorded[mask] - forward[mask]).abs().max().item())
        return original_weigh(output, stats)

    trainer._codapo_weigh = weigh_and_check
    with patch.object(CoDaPOTrainer, "_policy_logps", wraps=trainer._policy_logps) as forward:
        trainer.train()
    assert forward.call_count == 2  # only the test's own checks above
    assert len(checked) == 2 and max(checked) <= bound
    for out in outputs:
        mask = out["completion_mask"].bool()
        assert mask.any() and (out["sampling_per_token_logps"][mask] < 0).all()


def test_before_update_uses_recorded_log_probs_as_behaviour_policy(tiny_model_dir, tmp_path):
    """S's importance ratio needs the behaviour policy's log-probs; with TRL's own generation they were recorded while
    the very same model generated, so no forward pass is needed, and they equal that forward's to float precision."""
    args = make_args(tmp_path, max_steps=2, codapo_resample_timing="before_update", bf16=False)
    trainer = CoDaPOTrainer(tiny_model_dir, parity_reward, args=args, train_dataset=question_dataset())
    assert trainer.recording_matches_training
    outputs = record_outputs(trainer)
    snapshots = []
    original = trainer._generate_pending

    def generate_and_check(num_rows):
        pending = original(num_rows)
        snapshots.append(trainer._policy_logps(pending.output))  # still the behaviour policy here
        return pending

    trainer._generate_pending = generate_and_check
    with patch.object(CoDaPOTrainer, "_policy_logps", wraps=trainer._policy_logps) as forward:
        trainer.train()
    assert forward.call_count == 1  # the check above, nothing else
    s_out = outputs[1]
    mask = s_out["completion_mask"].bool()
    assert torch.equal(s_out["old_per_token_logps"], s_out["sampling_per_token_logps"])
    assert (s_out["old_per_token_logps"][mask] - snapshots[0][mask]).abs().max() < 1e-4


def test_sampling_off_takes_one_update_per_batch(tiny_model_dir, tmp_path):
    args = make_args(tmp_path, max_steps=3, codapo_sampling=False, shuffle_dataset=False)
    trainer = CoDaPOTrainer(tiny_model_dir, parity_reward, args=args, train_dataset=question_dataset())
    calls, parent_patch = record_parent_generations(trainer)
    with parent_patch:
        trainer.train()
    assert phases(trainer) == [0.0, 0.0, 0.0]
    assert len(calls) == 3 and len({tuple(c) for c in calls}) == 3  # three different batches, no resampling
    assert not any("codapo/selected_value_mean" in h for h in trainer.state.log_history)


def test_weighting_off_keeps_per_question_averaging(tiny_model_dir, tmp_path):
    args = make_args(tmp_path, max_steps=1, codapo_weighting=False)
    trainer = CoDaPOTrainer(
        tiny_model_dir, hash_reward, args=args, train_dataset=question_dataset(), rollout_func=deterministic_rollout
    )
    outputs = record_outputs(trainer)
    trainer.train()
    out = outputs[0]
    G = trainer.num_generations
    counts = coda.group_token_counts(out["completion_mask"], G).repeat_interleave(G)
    num_groups = out["completion_mask"].size(0) // G
    expected = out["dynamics_advantages"] * out["num_items_in_batch"] / (num_groups * counts)  # v = 1
    torch.testing.assert_close(out["advantages"], expected)


def test_loss_only_arm_is_grpo_with_the_per_question_token_average(tiny_model_dir, tmp_path):
    """Round 2's loss-isolating arm (codapo_weighting=False, codapo_sampling=False, loss_type="codapo"): one update
    per fresh batch, no S, and each update's gradient is `coda.codapo_loss` with every value 1, i.e. GRPO's
    advantages under the per-question token average instead of TRL's per-sequence loss."""
    args = make_args(
        tmp_path, max_steps=2, codapo_weighting=False, codapo_sampling=False, loss_type="codapo", shuffle_dataset=False
    )
    trainer, recorder, outputs, reference_model = gradient_recording_trainer(tiny_model_dir, args)
    calls, parent_patch = record_parent_generations(trainer)
    with parent_patch:
        trainer.train()
    assert phases(trainer) == [0.0, 0.0]
    assert len(calls) == 2 and len({tuple(c) for c in calls}) == 2  # two fresh batches, nothing resampled
    G = trainer.num_generations
    for update, output in enumerate(outputs):
        assert torch.all(output["dynamics_value"] == 1.0)  # the v used in the loss
        reference_model.load_state_dict(recorder.params[update])
        reference_model.zero_grad()
        input_ids = torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1)
        attention_mask = torch.cat([output["prompt_mask"], output["completion_mask"]], dim=1)
        logps, _, _ = trainer._get_per_token_logps_and_entropies(
            reference_model, input_ids, attention_mask, output["completion_ids"].size(1)
        )
        ones = torch.ones(output["completion_mask"].size(0) // G)
        loss = coda.codapo_loss(
            logps, logps.detach(), output["dynamics_advantages"], output["completion_mask"], ones, G, args.epsilon,
            args.epsilon, objective="clip",
        )  # fmt: skip
        loss.backward()
        for name, param in reference_model.named_parameters():
            torch.testing.assert_close(recorder.grads[update][name], param.grad, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("loss_type", ["grpo", "bnpo", "dr_grpo", "dapo"])
def test_trl_loss_types_weight_each_sample_by_its_value(tiny_model_dir, tmp_path, loss_type):
    args = make_args(tmp_path, max_steps=2, loss_type=loss_type)
    trainer = CoDaPOTrainer(
        tiny_model_dir, hash_reward, args=args, train_dataset=question_dataset(), rollout_func=deterministic_rollout
    )
    outputs = record_outputs(trainer)
    trainer.train()
    assert trainer.loss_type == loss_type  # TRL's aggregation is kept
    for out in outputs:
        expected = out["dynamics_advantages"] * torch.nan_to_num(out["codapo_value"], nan=0.0)
        torch.testing.assert_close(out["advantages"], expected)


def test_undefined_correctness_gets_zero_value_and_is_never_resampled(tiny_model_dir, tmp_path):
    def sometimes_undefined(completions, qid, completion_ids, **kwargs):
        return [None if q % 4 == 0 else float(sum(ids) % 2) for q, ids in zip(qid, completion_ids)]

    args = make_args(tmp_path, max_steps=4, num_generations=2, codapo_top_k=3, shuffle_dataset=False)
    trainer = CoDaPOTrainer(
        tiny_model_dir,
        sometimes_undefined,
        args=args,
        train_dataset=question_dataset(),
        rollout_func=deterministic_rollout,
    )
    outputs = record_outputs(trainer)
    calls, parent_patch = record_parent_generations(trainer)
    with parent_patch:
        trainer.train()
    undefined = {f"What is {i % 7} + {(3 * i) % 5}?" for i in range(16) if i % 4 == 0}
    for b_out, b_call, s_call in ((outputs[0], calls[0], calls[1]), (outputs[2], calls[2], calls[3])):
        for row, prompt in enumerate(b_call):
            if prompt in undefined:
                assert torch.isnan(b_out["codapo_value"][row]) and b_out["advantages"][row] == 0
        assert any(p in undefined for p in b_call)
        assert not any(p in undefined for p in s_call)


def test_correctness_reward_by_name(tiny_model_dir, tmp_path):
    def always_right(completions, **kwargs):
        return [1.0] * len(completions)

    args = make_args(tmp_path, max_steps=1, codapo_correctness_reward="always_right")
    trainer = CoDaPOTrainer(
        tiny_model_dir,
        [hash_reward, always_right],
        args=args,
        train_dataset=question_dataset(),
        rollout_func=deterministic_rollout,
    )
    trainer.train()
    logged = trainer.state.log_history[0]
    assert logged["codapo/difficulty_mean"] == 0.0 and logged["codapo/solved_frac"] == 1.0
    assert logged["codapo/value_max"] == 0.0  # V_d(0) = 0 for every question


def test_evaluate_is_unaffected(tiny_model_dir, tmp_path):
    args = make_args(tmp_path, per_device_eval_batch_size=8, eval_strategy="no")
    trainer = CoDaPOTrainer(
        tiny_model_dir,
        parity_reward,
        args=args,
        train_dataset=question_dataset(),
        eval_dataset=question_dataset(8),
    )
    with (
        patch.object(CoDaPOTrainer, "_codapo_weigh") as weigh,
        patch.object(CoDaPOTrainer, "_annotate_groups") as note,
    ):
        metrics = trainer.evaluate()
    weigh.assert_not_called()
    note.assert_not_called()
    assert "eval_loss" in metrics and not any(("codapo" in key or "dynamics" in key) for key in metrics)
    assert trainer._codapo.selection is None


@pytest.mark.parametrize("timing", ["before_update", "after_update"])
def test_resume_between_b_and_s_continues_with_s(tiny_model_dir, tmp_path, timing):
    common = dict(
        max_steps=4,
        codapo_resample_timing=timing,
        save_strategy="steps",
        save_steps=100,
        codapo_question_log="questions.jsonl",
    )
    dataset = question_dataset()

    def run(args, callbacks=(), resume=None):
        return train_recording_generations(tiny_model_dir, args, dataset, callbacks, resume)

    straight, straight_calls = run(make_args(tmp_path / "straight", **common))
    interrupted_args = make_args(tmp_path / "interrupted", **common)
    first, first_calls = run(interrupted_args, callbacks=[StopAfter(1)])
    assert first.state.global_step == 1 and phases(first) == [0.0]
    checkpoint = tmp_path / "interrupted" / "out" / "checkpoint-1"
    assert (checkpoint / "codapo_state-rank0.pt").exists()

    resumed, resumed_calls = run(interrupted_args, resume=str(checkpoint))
    assert phases(resumed)[-3:] == [1.0, 0.0, 1.0]  # the first update after resuming is S
    # the same S questions as the uninterrupted run, and nothing generated twice
    assert first_calls + resumed_calls == straight_calls
    for name, param in straight.model.named_parameters():
        torch.testing.assert_close(dict(resumed.model.named_parameters())[name], param, rtol=1e-5, atol=1e-6)
    straight_log = [h for h in straight.state.log_history if "codapo/phase" in h]
    resumed_log = [h for h in resumed.state.log_history if "codapo/phase" in h]
    assert [h["budget/unique_prompts"] for h in resumed_log] == [h["budget/unique_prompts"] for h in straight_log]
    assert resumed_log[-1]["budget/generated_tokens"] == straight_log[-1]["budget/generated_tokens"]
    # the question log holds each update's rows once, as if the run had never stopped
    straight_rows = (tmp_path / "straight" / "out" / "questions.jsonl").read_text()
    resumed_rows = (tmp_path / "interrupted" / "out" / "questions.jsonl").read_text()
    assert resumed_rows == straight_rows and len(straight_rows.splitlines()) == 4 * 2


# ---------------------------------------------------------------------- several optimizer steps per phase
# (per_device_train_batch_size, gradient_accumulation_steps, steps_per_generation, num_iterations): one generation
# batch of 8 rows (4 questions of G = 2) in every case, consumed by m = spg / GA chunks, each seen num_iterations times.
SCHEDULES = [(4, 1, 2, 1), (8, 1, 1, 2), (2, 2, 4, 1), (4, 1, 2, 2)]


def schedule_args(tmp_path, per_device, accumulation, spg, iterations, **overrides):
    return make_args(
        tmp_path,
        per_device_train_batch_size=per_device,
        gradient_accumulation_steps=accumulation,
        steps_per_generation=spg,
        num_iterations=iterations,
        num_generations=2,
        codapo_top_k=2,
        **overrides,
    )


@pytest.mark.parametrize("timing", ["before_update", "after_update"])
@pytest.mark.parametrize(("per_device", "accumulation", "spg", "iterations"), SCHEDULES)
def test_each_phase_takes_its_own_optimizer_steps(
    tiny_model_dir, tmp_path, per_device, accumulation, spg, iterations, timing
):
    steps_per_phase = spg // accumulation * iterations
    args = schedule_args(
        tmp_path,
        per_device,
        accumulation,
        spg,
        iterations,
        max_steps=4 * steps_per_phase,
        codapo_resample_timing=timing,
    )
    assert args.codapo_steps_per_phase == steps_per_phase
    trainer = CoDaPOTrainer(
        tiny_model_dir, hash_reward, args=args, train_dataset=question_dataset(), rollout_func=deterministic_rollout
    )
    weigh_stats = []
    original_weigh = trainer._codapo_weigh

    def weigh(output, stats):
        weigh_stats.append((original_weigh(output, stats), stats.difficulty))
        return weigh_stats[-1][0]

    trainer._codapo_weigh = weigh
    calls, parent_patch = record_parent_generations(trainer)
    with parent_patch, patch.object(CoDaPOTrainer, "training_step", wraps=trainer.training_step) as step:
        trainer.train()
    # every optimizer step is logged with its phase: B's steps, then S's, never mixed
    assert phases(trainer) == ([0.0] * steps_per_phase + [1.0] * steps_per_phase) * 2
    assert step.call_count == 4 * steps_per_phase * accumulation
    # one generation per phase (B1, S1, B2, S2), S from the top-K of the B just before it
    assert len(calls) == 4 and len(weigh_stats) == 4
    for b_call, s_call, (values, difficulty) in (
        (calls[0], calls[1], weigh_stats[0]),
        (calls[2], calls[3], weigh_stats[2]),
    ):
        questions = b_call[::2]
        selection = coda.select_top_k(values, 2, 4, difficulty)  # the rule itself is tested in test_coda.py
        assert s_call == [questions[j] for j in selection for _ in range(2)]
    assert calls[0] != calls[2]


@pytest.mark.parametrize(("per_device", "accumulation", "spg", "iterations"), SCHEDULES)
def test_steps_of_a_phase_average_to_the_one_step_gradient(
    tiny_model_dir, tmp_path, per_device, accumulation, spg, iterations
):
    """At a fixed policy (learning rate 0), the m x num_iterations steps of a phase have gradients whose mean is the
    gradient of the one-step CoDaPO loss on the whole phase: each step holds its chunk's share of the paper's
    objective (T_j over the question's whole group), scaled by m, like TRL's own "dapo" with steps_per_generation."""
    grads = {}
    for schedule in ((8, 1, 1, 1), (per_device, accumulation, spg, iterations)):
        recorder = GradRecorder()
        steps_per_phase = schedule[2] // schedule[1] * schedule[3]
        args = schedule_args(
            tmp_path / "x".join(map(str, schedule)), *schedule, max_steps=2 * steps_per_phase, learning_rate=0.0
        )
        trainer = CoDaPOTrainer(
            tiny_model_dir,
            hash_reward,
            args=args,
            train_dataset=question_dataset(),
            rollout_func=deterministic_rollout,
            callbacks=[recorder],
        )
        trainer.train()
        assert len(recorder.grads) == 2 * steps_per_phase
        grads[schedule] = (steps_per_phase, recorder.grads)
    (_, reference), (steps_per_phase, recorded) = grads.values()
    for phase in range(2):
        ref = torch.cat([g.flatten() for g in reference[phase].values()])
        steps = recorded[phase * steps_per_phase : (phase + 1) * steps_per_phase]
        got = sum(torch.cat([g[name].flatten() for name in reference[phase]]) for g in steps) / steps_per_phase
        relative_error = ((got - ref).norm() / ref.norm()).item()
        assert relative_error < 1e-3, f"phase {phase}: relative gradient error {relative_error:.2e}"
        if steps_per_phase > 1 and iterations == 1:  # the chunks hold different rollouts: no step alone is the mean
            first = torch.cat([steps[0][name].flatten() for name in reference[phase]])
            assert ((first - ref).norm() / ref.norm()).item() > 1e-2


@pytest.mark.parametrize("timing", ["before_update", "after_update"])
@pytest.mark.parametrize("stop", [1, 3])  # between B's two steps, between S's two steps
def test_resume_inside_a_phase_continues_on_its_rollouts(tiny_model_dir, tmp_path, timing, stop):
    common = dict(max_steps=8, codapo_resample_timing=timing, save_strategy="steps", save_steps=100)
    dataset = question_dataset()

    def run(args, callbacks=(), resume=None):
        return train_recording_generations(tiny_model_dir, args, dataset, callbacks, resume)

    straight, straight_calls = run(schedule_args(tmp_path / "straight", 4, 1, 2, 1, **common))
    interrupted = schedule_args(tmp_path / "interrupted", 4, 1, 2, 1, **common)
    first, first_calls = run(interrupted, callbacks=[StopAfter(stop)])
    checkpoint = tmp_path / "interrupted" / "out" / f"checkpoint-{stop}"
    resumed, resumed_calls = run(interrupted, resume=str(checkpoint))
    assert phases(first) == phases(straight)[:stop] and phases(resumed) == phases(straight)
    # the interrupted phase's remaining step trains on the saved rollouts: nothing is generated twice
    assert first_calls + resumed_calls == straight_calls
    for name, param in straight.model.named_parameters():
        torch.testing.assert_close(dict(resumed.model.named_parameters())[name], param, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------- options that would change the objective
def mismatched_rollout(prompts, trainer):
    """`deterministic_rollout` whose generator log-probs are far below the policy's for the first rollout of every
    group (-20 per token): TRL's vLLM importance-sampling correction ("sequence_mask") then masks that rollout."""
    out = deterministic_rollout(prompts, trainer)
    offset = trainer.accelerator.process_index * len(prompts)
    out["logprobs"] = [
        [-20.0] * len(lp) if (offset + i) % trainer.num_generations == 0 else lp
        for i, lp in enumerate(out["logprobs"])
    ]
    return out


def test_vllm_importance_sampling_mask_leaves_masked_rollouts_out_of_t_j(tiny_model_dir, tmp_path):
    """With TRL's importance-sampling correction in "sequence_mask" mode, a masked rollout carries no loss: T_j
    counts only the tokens of the rollouts that remain, so each question's loss is its token mean over those."""
    args = make_args(tmp_path, max_steps=2, vllm_importance_sampling_mode="sequence_mask")
    trainer = CoDaPOTrainer(
        tiny_model_dir, hash_reward, args=args, train_dataset=question_dataset(), rollout_func=mismatched_rollout
    )
    # stand in for vLLM: TRL's correction runs on the rollout_func's log-probs, no weight sync is needed
    trainer.use_vllm, trainer.vllm_importance_sampling_correction = True, True
    trainer._last_loaded_step = -1
    trainer.vllm_generation = type("NoSync", (), {"sync_weights": lambda self: None})()
    outputs = record_outputs(trainer)
    seen = []
    original_weigh = trainer._codapo_weigh
    trainer._codapo_weigh = lambda output, stats: seen.append(stats) or original_weigh(output, stats)
    trainer.train()
    for out, stats in zip(outputs, seen, strict=True):
        kept = (out["importance_sampling_ratio"] != 0).view(-1).float()
        assert kept.view(-1, 4)[:, 0].eq(0).all() and kept.view(-1, 4)[:, 1:].eq(1).all()
        tokens = out["completion_mask"].sum(1).float()
        torch.testing.assert_close(stats.token_counts, (tokens * kept).view(-1, 4).sum(1))
        # the normaliser TRL divides by still counts the masked tokens; the weights multiply it back out
        weights = coda.codapo_sample_weights(out["codapo_value"][::4], stats.token_counts, 4)
        expected = out["dynamics_advantages"] * weights * out["num_items_in_batch"]
        torch.testing.assert_close(out["advantages"], expected)


def test_correctness_undefined_for_whole_batches_warns_then_stops(tiny_model_dir, tmp_path, caplog):
    def never(completions, **kwargs):
        return [None] * len(completions)

    args = make_args(tmp_path, max_steps=8, codapo_correctness_reward="never")
    trainer = CoDaPOTrainer(
        tiny_model_dir,
        [never, hash_reward],
        args=args,
        train_dataset=question_dataset(),
        rollout_func=deterministic_rollout,
    )
    with caplog.at_level("WARNING"), pytest.raises(RuntimeError, match="None for every rollout of 5 batches in a row"):
        trainer.train()
    assert (
        "['never'] returned None for every rollout of this batch (1 batch(es) in a row), while ['hash_reward'] "
        "scored it" in caplog.text
    )
    assert trainer.state.global_step == 4  # B, S, B, S trained (on nothing); the 5th batch stops the run
    logged = [
        h["rewards/correctness_undefined_frac"]
        for h in trainer.state.log_history
        if "rewards/correctness_undefined_frac" in h
    ]
    assert logged == [1.0] * 4


def test_several_reward_functions_warn_once(tiny_model_dir, tmp_path, caplog):
    args = make_args(tmp_path, reward_weights=[1.0, 0.5], codapo_correctness_reward="hash_reward")
    with caplog.at_level("WARNING", logger="codapo_trl.trainer"):
        CoDaPOTrainer(tiny_model_dir, [hash_reward, parity_reward], args=args, train_dataset=question_dataset())
    assert len(caplog.records) == 1 and "uses the correctness reward 'hash_reward' (binary) alone" in caplog.text


def test_bf16_recording_is_bounded_and_s_ratio_uses_the_training_forward(tiny_model_dir, tmp_path):
    """In bf16 the recorded log-probs come from decoding kernels that round differently from the training forward,
    by an amount that depends on the CPU: the recording then only feeds confidence, within `BF16_RECORDING_BOUND` of
    the forward, and S's importance ratio divides by a forward pass of the behaviour policy, never by the recorded
    numbers (B's ratio is exactly 1: no old log-probs)."""
    args = make_args(tmp_path, max_steps=2, codapo_resample_timing="before_update", bf16=True)
    trainer = CoDaPOTrainer(tiny_model_dir, parity_reward, args=args, train_dataset=question_dataset())
    assert not trainer.recording_matches_training
    outputs = record_outputs(trainer)
    forwards = []
    original = trainer._policy_logps

    def forward(output):
        forwards.append(original(output))
        return forwards[-1]

    trainer._policy_logps = forward
    trainer.train()
    assert len(forwards) == 1  # S's behaviour log-probs, before B's update
    assert outputs[0].get("old_per_token_logps") is None
    s_out = outputs[1]
    mask = s_out["completion_mask"].bool()
    assert torch.equal(s_out["old_per_token_logps"], forwards[0])  # the ratio's denominator is the forward's
    gap = (s_out["sampling_per_token_logps"] - s_out["old_per_token_logps"])[mask].abs().max().item()
    assert mask.any() and gap <= BF16_RECORDING_BOUND
