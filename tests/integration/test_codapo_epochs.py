"""CoDaPO over several epochs of a small fixed pool (round 3's regime, issue 63), for both S timings: every epoch's B
batches cover the pool once, each B is followed by its S (the K picks of that B, |B| / K copies each), a run resumed
mid-run continues as if never stopped, and the compressed question log (`.jsonl.gz`) holds every update's rows once."""

import gzip
import json
from collections import Counter

import pytest
from fakes import deterministic_rollout, hash_reward, question_dataset
from helpers_training import StopAfter, make_args, phases, train_recording_generations
from trl import GRPOConfig

from codapo_trl.analysis import load_question_log
from codapo_trl.dynamics import GRPODynamicsTrainer


POOL = 8  # questions; |B| = 4 questions of G = 2, so 2 B batches per epoch
EPOCHS = 3
TOP_K = 2
# timing -> (rollouts per optimizer step, optimizer steps per phase)
TIMINGS = {"before_update": (8, 1), "after_update": (4, 2)}


def epoch_args(tmp_path, timing, **overrides):
    per_device, steps_per_phase = TIMINGS[timing]
    settings = dict(
        per_device_train_batch_size=per_device,
        steps_per_generation=steps_per_phase,
        num_generations=2,
        codapo_top_k=TOP_K,
        codapo_resample_timing=timing,
        codapo_question_log="questions.jsonl.gz",
        max_steps=EPOCHS * (POOL // 4) * 2 * steps_per_phase,  # EPOCHS passes of B, each B followed by its S
    )
    settings.update(overrides)
    return make_args(tmp_path, **settings)


def phase_rows(rows):
    """The log's rows grouped by update batch, in order: [(step, phase, [rows])]."""
    out = []
    for row in rows:
        if not out or out[-1][0] != row["step"] or out[-1][1] != row["phase"]:
            out.append((row["step"], row["phase"], []))
        out[-1][2].append(row)
    return out


def check_epochs(rows, steps_per_phase):
    batches = phase_rows(rows)
    assert [phase for _, phase, _ in batches] == [0, 1] * (EPOCHS * POOL // 4)  # B, S, B, S, ...
    b_batches = [b for b in batches if b[1] == 0]
    for epoch in range(EPOCHS):
        seen = Counter(r["question_id"] for _, _, group in b_batches[2 * epoch : 2 * epoch + 2] for r in group)
        assert seen == Counter(str(q) for q in range(POOL)), f"epoch {epoch} is not one pass over the pool"
    for (b_step, _, b_group), (s_step, _, s_group) in zip(batches[::2], batches[1::2]):
        assert s_step == b_step + steps_per_phase  # S trains on the steps right after its B
        picks = [r["question_id"] for r in b_group if r["selected"]]
        assert len(picks) == TOP_K
        assert Counter(r["question_id"] for r in s_group) == Counter({q: 4 // TOP_K for q in picks})
        assert all(r["selected"] is None for r in s_group)


@pytest.mark.parametrize("timing", sorted(TIMINGS))
def test_epochs_of_a_pool_pair_every_b_with_its_s(tiny_model_dir, tmp_path, timing):
    _, steps_per_phase = TIMINGS[timing]
    args = epoch_args(tmp_path, timing)
    trainer, _ = train_recording_generations(tiny_model_dir, args, question_dataset(POOL))
    assert trainer.state.global_step == args.max_steps
    pair = [0.0] * steps_per_phase + [1.0] * steps_per_phase
    assert phases(trainer) == pair * (args.max_steps // len(pair))
    log = tmp_path / "out" / "questions.jsonl.gz"
    with gzip.open(log, "rt") as f:  # a valid gzip stream (one member per batch): 4 rows per B and per S batch
        assert len(f.read().splitlines()) == EPOCHS * (POOL // 4) * 2 * 4
    check_epochs(load_question_log(log), steps_per_phase)


def resume_matches_straight(tiny_model_dir, tmp_path, timing, stop, **overrides):
    """Train straight and stopped after optimizer step `stop` then resumed; assert the same generations, phases and
    question log (compressed, byte for byte)."""
    dataset = question_dataset(POOL)
    overrides.update(save_strategy="steps", save_steps=1000)
    args = epoch_args(tmp_path / "straight", timing, **overrides)
    straight, straight_calls = train_recording_generations(tiny_model_dir, args, dataset)
    interrupted = epoch_args(tmp_path / "interrupted", timing, **overrides)
    first, first_calls = train_recording_generations(tiny_model_dir, interrupted, dataset, [StopAfter(stop)])
    assert first.state.global_step == stop
    checkpoint = tmp_path / "interrupted" / "out" / f"checkpoint-{stop}"
    resumed, resumed_calls = train_recording_generations(tiny_model_dir, interrupted, dataset, resume=str(checkpoint))
    assert resumed.state.global_step == args.max_steps and phases(resumed) == phases(straight)
    assert first_calls + resumed_calls == straight_calls  # the same questions in the same order, none generated twice
    log = tmp_path / "straight" / "out" / "questions.jsonl.gz"
    assert (tmp_path / "interrupted" / "out" / "questions.jsonl.gz").read_bytes() == log.read_bytes()


# Stops inside the first epoch: before_update after B of the second pair (S pending), after_update inside B of the
# second pair (steps 5-6).
@pytest.mark.slow
@pytest.mark.parametrize(("timing", "stop"), [("before_update", 3), ("after_update", 6)])
def test_resume_inside_the_first_epoch_continues_as_if_never_stopped(tiny_model_dir, tmp_path, timing, stop):
    resume_matches_straight(tiny_model_dir, tmp_path, timing, stop)


# Stops after the first epoch boundary. TRL's RepeatSampler draws each epoch's order from one torch generator seeded
# once and has no set_epoch, so a resumed process (a fresh sampler) would draw epoch 1's order again for the epoch it
# resumes in (issue 63's report); the trainers' EpochRepeatSampler (`_trl_compat`) is set to the resumed epoch by the
# Trainer loop and draws that epoch's order. Epoch 2 is steps 5-8 (before_update) or 9-16 (after_update): stops
# after B of its second pair (S pending), inside its first S, and at the end of epoch 1 (the next epoch starts fresh);
# with gradient accumulation the same phases (|B| = 4 questions, 1 or 2 optimizer steps a phase) in 2 micro-batches
# per optimizer step.
ACCUMULATE = {
    "before_update": dict(per_device_train_batch_size=4, gradient_accumulation_steps=2, steps_per_generation=2),
    "after_update": dict(per_device_train_batch_size=2, gradient_accumulation_steps=2, steps_per_generation=4),
}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("timing", "stop", "accumulate"),
    [
        ("before_update", 7, False),
        ("after_update", 11, False),
        ("before_update", 4, False),
        ("before_update", 7, True),
        ("after_update", 11, True),
    ],
)
def test_resume_after_an_epoch_boundary_continues_as_if_never_stopped(
    tiny_model_dir, tmp_path, timing, stop, accumulate
):
    resume_matches_straight(tiny_model_dir, tmp_path, timing, stop, **(ACCUMULATE[timing] if accumulate else {}))


def grpo_batches(tiny_model_dir, out, callbacks=(), resume=None):
    """GRPO (TRL's trainer, with the question log) on the pool for EPOCHS epochs of 2 batches; its logged question
    ids per batch."""
    args = make_args(out, config_class=GRPOConfig, per_device_train_batch_size=8, num_generations=2,
                     max_steps=EPOCHS * POOL // 4, save_strategy="steps", save_steps=1000)  # fmt: skip
    trainer = GRPODynamicsTrainer(
        tiny_model_dir, hash_reward, args=args, train_dataset=question_dataset(POOL),
        rollout_func=deterministic_rollout, question_log="questions.jsonl.gz", callbacks=list(callbacks),
    )  # fmt: skip
    trainer.train(resume_from_checkpoint=resume)
    rows = load_question_log(out / "out" / "questions.jsonl.gz")
    return [[r["question_id"] for r in group] for _, _, group in phase_rows(rows)]


@pytest.mark.slow
def test_grpo_resume_after_an_epoch_boundary_continues_as_if_never_stopped(tiny_model_dir, tmp_path):
    straight = grpo_batches(tiny_model_dir, tmp_path / "straight")
    assert Counter(q for batch in straight[:2] for q in batch) == Counter(str(q) for q in range(POOL))
    grpo_batches(tiny_model_dir, tmp_path / "interrupted", [StopAfter(3)])
    resumed = grpo_batches(
        tiny_model_dir, tmp_path / "interrupted", resume=str(tmp_path / "interrupted" / "out" / "checkpoint-3")
    )
    assert resumed == straight


def test_num_train_epochs_makes_that_many_passes_of_b_each_with_its_s(tiny_model_dir, tmp_path):
    """Without max_steps, num_train_epochs = N gives N passes of B over the pool, each B followed by its S (so twice
    GRPO's optimizer steps)."""
    args = epoch_args(tmp_path, "before_update", max_steps=-1, num_train_epochs=EPOCHS)
    trainer, _ = train_recording_generations(tiny_model_dir, args, question_dataset(POOL))
    assert trainer.state.global_step == EPOCHS * (POOL // 4) * 2
    check_epochs(load_question_log(tmp_path / "out" / "questions.jsonl.gz"), 1)
    with gzip.open(tmp_path / "out" / "questions.jsonl.gz", "rt") as f:
        assert [json.loads(line) for line in f] == load_question_log(tmp_path / "out" / "questions.jsonl.gz")


def test_a_pool_off_the_batch_size_drops_its_remainder_each_epoch_and_keeps_the_pairs(tiny_model_dir, tmp_path):
    """10 questions, |B| = 4: TRL's sampler drops each epoch's incomplete last batch, so an epoch is 2 full B
    batches of distinct questions (8 of the 10), each followed by its S.
    This is why round 3's pools are multiples of |B| (experiments/codapo_vs_grpo_r3/pools.py refuses others)."""
    args = epoch_args(tmp_path, "before_update", max_steps=EPOCHS * 2 * 2)
    train_recording_generations(tiny_model_dir, args, question_dataset(10))
    batches = phase_rows(load_question_log(tmp_path / "out" / "questions.jsonl.gz"))
    assert [phase for _, phase, _ in batches] == [0, 1] * (EPOCHS * 2)
    b_batches = [[r["question_id"] for r in group] for _, phase, group in batches if phase == 0]
    for epoch in range(EPOCHS):
        seen = b_batches[2 * epoch] + b_batches[2 * epoch + 1]
        assert len(seen) == len(set(seen)) == 8 and set(seen) <= {str(q) for q in range(10)}
    for (_, _, b_group), (_, _, s_group) in zip(batches[::2], batches[1::2]):
        picks = [r["question_id"] for r in b_group if r["selected"]]
        assert Counter(r["question_id"] for r in s_group) == Counter({q: 4 // TOP_K for q in picks})
