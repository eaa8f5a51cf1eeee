"""The sampled-token log-prob recorder: when it can be trusted, and the forward-pass fallback when it cannot."""

import math
from unittest.mock import patch

import pytest
import torch
from fakes import deterministic_rollout, hash_reward, multiply_tool, parity_reward, question_dataset
from helpers_training import make_args, record_outputs, record_parent_generations
from transformers import GenerationMixin

from codapo_trl import CoDaPOConfig, CoDaPOTrainer, GRPODynamicsTrainer
from codapo_trl.logprob_recorder import SampledTokenLogprobs


class FakeOutput:
    def __init__(self, logits):
        self.logits = logits


def feed(recorder, calls, vocab=10, batch=2):
    """Drive the recorder's hook with forward calls of the given input tokens; returns the logits it saw."""
    seen = []
    for tokens in calls:
        ids = torch.tensor(tokens).view(batch, -1) if tokens else None
        logits = torch.randn(batch, max(1, ids.size(1) if ids is not None else 1), vocab)
        seen.append(torch.log_softmax(logits[:, -1], -1))
        recorder.hook(None, (), {"input_ids": ids}, FakeOutput(logits))
    return seen


def test_one_forward_per_token_is_recorded():
    recorder = SampledTokenLogprobs(temperature=1.0)
    # prefill of 3 prompt tokens, then the sampled tokens [1, 2] and [3, 4] fed back one per step
    seen = feed(recorder, [[0, 0, 0, 0, 0, 0], [1, 3], [2, 4]])
    rows = recorder.per_row([[1, 2, 0], [3]])  # row 0: three tokens; row 1 stopped after one (EOS)
    assert rows[0] == pytest.approx([seen[0][0, 1].item(), seen[1][0, 2].item(), seen[2][0, 0].item()])
    assert rows[1] == pytest.approx([seen[0][1, 3].item()])


def test_without_cache_the_growing_inputs_are_recorded():
    recorder = SampledTokenLogprobs(temperature=1.0)
    seen = feed(recorder, [[0, 0, 0, 0], [0, 0, 1, 0, 0, 3]])  # use_cache=False: the whole sequence every step
    rows = recorder.per_row([[1, 2], [3, 4]])
    assert rows[0] == pytest.approx([seen[0][0, 1].item(), seen[1][0, 2].item()])
    assert rows[1] == pytest.approx([seen[0][1, 3].item(), seen[1][1, 4].item()])


@pytest.mark.parametrize(
    ("calls", "completions", "reason"),
    [
        ([], [[1], [2]], "never ran"),  # a replaced generate (tools, environments, a test's fake)
        ([[0, 0, 0, 0], [0, 0, 0, 0], [1, 3]], [[1, 2], [3, 4]], "not one token per step"),  # chunked prefill
        ([[0, 0], [1, 2, 3, 4, 5, 6]], [[1, 2, 3], [4, 5, 6]], "not one token per step"),  # assisted: 3 per call
        ([[0, 0], [1, 3], [2, 4]], [[1, 2], [3, 4]], "3 forward steps were recorded for at most 2"),
        ([[0, 0], [1, 3]], [[2, 9], [3, 4]], "not the generated ones"),  # a step fed another token
        ([[0, 0], [1, 3]], [[1, 2]], "2 rows were recorded for 1 completions"),
    ],
)
def test_untrusted_recordings_are_refused(calls, completions, reason):
    recorder = SampledTokenLogprobs(temperature=1.0)
    feed(recorder, calls)
    assert recorder.per_row(completions) is None
    assert reason in recorder.reason


def fallback_count(trainer):
    return [
        h["generation/recorded_logps_fallback"]
        for h in trainer.state.log_history
        if "generation/recorded_logps_fallback" in h
    ]


@pytest.mark.parametrize("timing", ["before_update", "after_update"])
def test_chunked_prefill_falls_back_to_a_forward_pass(tiny_model_dir, tmp_path, timing, caplog):
    """`prefill_chunk_size` runs several forwards over the prompt: the recording is refused and the behaviour
    log-probs (confidence, S's ratio) come from a forward pass, equal to the policy's own."""
    args = make_args(tmp_path, codapo_resample_timing=timing, generation_kwargs={"prefill_chunk_size": 4}, bf16=False)
    trainer = CoDaPOTrainer(tiny_model_dir, parity_reward, args=args, train_dataset=question_dataset())
    outputs = record_outputs(trainer)
    checked = []
    original_weigh = trainer._codapo_weigh

    def weigh_and_check(output, stats):
        forward = trainer._policy_logps(output)
        mask = output["completion_mask"].bool()
        expected = torch.exp(((forward * mask).sum(1) / mask.sum(1)).view(-1, trainer.num_generations).mean(1))
        checked.append((stats.confidence - expected).abs().max().item())
        return original_weigh(output, stats)

    trainer._codapo_weigh = weigh_and_check
    with caplog.at_level("WARNING"):
        trainer.train()
    assert "could not be recorded while generating" in caplog.text and "not one token per step" in caplog.text
    assert max(checked) < 1e-5 and len(checked) == 2
    assert all("sampling_per_token_logps" not in out for out in outputs)
    assert fallback_count(trainer) == [1.0, 1.0]
    if timing == "before_update":
        assert outputs[1]["old_per_token_logps"] is not None  # S's ratio from the forward pass


def fixed_generate(self, input_ids=None, **kwargs):
    """A `generate` that never runs the model (as a tool or environment loop, or TRL's own tests, replace it):
    the same 5 tokens after every prompt, the last one EOS for even rows and not for odd rows (truncated)."""
    eos = self.generation_config.eos_token_id
    eos = eos[0] if isinstance(eos, list) else eos
    rows = []
    for i in range(input_ids.size(0)):
        tail = [20 + (i % 3), 30 + (i % 5), 40, 41, eos if i % 2 == 0 else 42]
        rows.append(tail)
    return torch.cat([input_ids, torch.tensor(rows, device=input_ids.device)], dim=1)


@pytest.mark.parametrize("trainer_class", [CoDaPOTrainer, GRPODynamicsTrainer])
def test_replaced_generate_trains(tiny_model_dir, tmp_path, trainer_class):
    """TRL's own tests (tools, environments, mask_truncated_completions) replace `generate`: no RuntimeError, the
    confidence comes from a forward pass."""
    config_class = CoDaPOConfig if trainer_class is CoDaPOTrainer else __import__("trl").GRPOConfig
    args = make_args(tmp_path, config_class=config_class)
    trainer = trainer_class(tiny_model_dir, hash_reward, args=args, train_dataset=question_dataset())
    seen = []
    original = trainer._annotate_groups
    trainer._annotate_groups = lambda output: seen.append(original(output)) or seen[-1]
    with patch.object(GenerationMixin, "generate", fixed_generate):
        trainer.train()
    assert fallback_count(trainer) == [1.0, 1.0]
    assert len(seen) == 2
    for stats in seen:
        assert ((stats.confidence > 0) & (stats.confidence < 1)).all()


def test_mask_truncated_completions_defines_confidence_on_finished_rollouts(tiny_model_dir, tmp_path):
    """With `mask_truncated_completions`, a truncated rollout has no loss token: it counts in difficulty (it was
    generated and scored) but not in confidence nor in T_j."""
    args = make_args(tmp_path, mask_truncated_completions=True, max_completion_length=5, max_steps=2)
    trainer = CoDaPOTrainer(tiny_model_dir, hash_reward, args=args, train_dataset=question_dataset())
    outputs = record_outputs(trainer)
    seen = []
    original_weigh = trainer._codapo_weigh
    trainer._codapo_weigh = lambda output, stats: seen.append(stats) or original_weigh(output, stats)
    with patch.object(GenerationMixin, "generate", fixed_generate):
        trainer.train()
    for out, stats in zip(outputs, seen, strict=True):
        truncated = out["completion_mask"].sum(1) == 0
        assert truncated.any() and (~truncated).any()
        assert (
            torch.isnan(stats.log_confidence[truncated]).all()
            and not torch.isnan(stats.log_confidence[~truncated]).any()
        )
        assert torch.equal(stats.token_counts, (out["completion_mask"].sum(1).float().view(-1, 4).sum(1)))
        assert not torch.isnan(stats.correctness).any()  # every rollout counts in difficulty
        expected = torch.exp(torch.nanmean(stats.log_confidence.view(-1, 4), dim=1))
        torch.testing.assert_close(stats.confidence, expected)


def env_rollout(prompts, trainer):
    """A multi-turn `rollout_func`: each completion is model tokens, then 3 environment tokens (`env_mask` 0, log-prob
    0 as TRL writes for tool output), then model tokens again."""
    out = deterministic_rollout(prompts, trainer)
    masks, logprobs, completions = [], [], []
    for ids in out["completion_ids"]:
        completions.append(ids[:-1] + [50, 51, 52] + [60, ids[-1]])
        masks.append([1] * (len(ids) - 1) + [0, 0, 0] + [1, 1])
        logprobs.append([math.log(0.5)] * (len(ids) - 1) + [0.0, 0.0, 0.0] + [math.log(0.25)] * 2)
    return {**out, "completion_ids": completions, "logprobs": logprobs, "env_mask": masks}


@pytest.mark.parametrize("timing", ["before_update", "after_update"])
def test_multi_turn_confidence_counts_only_the_models_tokens(tiny_model_dir, tmp_path, timing):
    """Tool or environment output (mask 0) is not the policy's: a rollout's confidence is the geometric-mean
    probability of its own tokens, T_j counts only those, and selection and S work as for single-turn rollouts."""
    args = make_args(tmp_path, max_steps=2, codapo_resample_timing=timing)
    trainer = CoDaPOTrainer(
        tiny_model_dir, hash_reward, args=args, train_dataset=question_dataset(), rollout_func=env_rollout
    )
    outputs = record_outputs(trainer)
    seen = []
    original_weigh = trainer._codapo_weigh
    trainer._codapo_weigh = lambda output, stats: seen.append(stats) or original_weigh(output, stats)
    trainer.train()
    assert len(seen) == 2
    for out, stats in zip(outputs, seen, strict=True):
        own = out["completion_mask"] * out["tool_mask"]
        assert (out["completion_mask"].sum(1) - own.sum(1) == 3).all()
        model_tokens = own.sum(1).float()
        expected = (model_tokens - 2) * math.log(0.5) + 2 * math.log(0.25)
        torch.testing.assert_close(stats.log_confidence, expected / model_tokens)
        torch.testing.assert_close(stats.token_counts, model_tokens.view(-1, 4).sum(1))


# ---------------------------------------------------------------------- tool calling with CoDaPO on


TOOL_CALL = '<tool_call>\n{"name": "multiply_tool", "arguments": {"a": 3, "b": 4}}\n</tool_call><|im_end|>'


@pytest.fixture(scope="module")
def tool_model_dir(tiny_model_dir, tmp_path_factory):
    """The tiny model with TRL's Qwen3 chat template (which renders tool calls) and its response parser."""
    import os

    import trl
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl.chat_template_utils import add_response_schema

    path = tmp_path_factory.mktemp("tool-model")
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    special = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"]
    tokenizer.add_special_tokens({"additional_special_tokens": special})
    with open(os.path.join(os.path.dirname(trl.__file__), "chat_templates", "qwen3.jinja")) as f:
        tokenizer.chat_template = f.read()
    tokenizer = add_response_schema(tokenizer)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    model.resize_token_embeddings(len(tokenizer))
    model.config.max_position_embeddings = 4096  # the tool descriptions make long prompts
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


def tool_generate_for(tokenizer, call_text):
    """A replaced `generate`: even rows call a tool, odd rows answer directly, a turn after a tool answers "Done!"."""
    call_ids = tokenizer(call_text, add_special_tokens=False)["input_ids"]
    done_ids = tokenizer("Done!<|im_end|>", add_special_tokens=False)["input_ids"]
    plain_ids = tokenizer("No tool.<|im_end|>", add_special_tokens=False)["input_ids"]
    response_id = tokenizer.convert_tokens_to_ids("<tool_response>")

    def generate(self, input_ids=None, **kwargs):
        rows = []
        for i, prompt in enumerate(input_ids.tolist()):
            rows.append(done_ids if response_id in prompt else (call_ids if i % 2 == 0 else plain_ids))
        width = max(map(len, rows))
        rows = [r + [tokenizer.pad_token_id] * (width - len(r)) for r in rows]
        return torch.cat([input_ids, torch.tensor(rows, device=input_ids.device)], dim=1)

    return generate


def run_multi_turn(trainer, call_text):
    """Train with tool-calling rollouts; returns the generation outputs, the per-batch checks and the prompts."""
    outputs = record_outputs(trainer)
    checks = []
    original_weigh = trainer._codapo_weigh

    def weigh_and_check(output, stats):
        own = output["completion_mask"] * output["tool_mask"]
        forward = trainer._policy_logps(output)
        expected = (forward * own).sum(1) / own.sum(1)
        checks.append(((stats.log_confidence - expected).abs().max().item(), own, stats))
        return original_weigh(output, stats)

    trainer._codapo_weigh = weigh_and_check
    calls, parent_patch = record_parent_generations(trainer)
    with (
        parent_patch,
        patch.object(GenerationMixin, "generate", tool_generate_for(trainer.processing_class, call_text)),
    ):
        trainer.train()
    assert [h["tools/call_frequency"] for h in trainer.state.log_history if "tools/call_frequency" in h] == [0.5, 0.5]
    assert fallback_count(trainer) == [1.0, 1.0]
    assert len(checks) == 2
    for error, own, stats in checks:
        assert error < 1e-5  # confidence: the policy's own tokens only
        torch.testing.assert_close(stats.token_counts, own.sum(1).float().view(-1, 2).sum(1))
    tool_rows = outputs[0]["tool_mask"].sum(1) < outputs[0]["completion_mask"].sum(1)
    assert tool_rows.sum() == 4  # the even rows called the tool; its output is masked
    return calls


@pytest.mark.parametrize("timing", ["before_update", "after_update"])
def test_tool_calling_with_codapo(tool_model_dir, tmp_path, timing):
    """Multi-turn tool rollouts with CoDaPO on: `generate` is replaced (as in TRL's own tool tests), so confidence
    comes from a forward pass, over the policy's own tokens only (tool output masked); T_j counts those; S holds
    B's top-K questions and runs its own tool calls."""
    args = make_args(tmp_path, codapo_resample_timing=timing, max_completion_length=200, num_generations=2)
    trainer = CoDaPOTrainer(
        tool_model_dir, hash_reward, args=args, train_dataset=question_dataset(), tools=[multiply_tool]
    )
    calls = run_multi_turn(trainer, TOOL_CALL)
    assert set(calls[1]) <= set(calls[0])


class CounterEnvironment:
    """A tiny environment: one counter per rollout, reset from the row, incremented by a tool."""

    def reset(self, **row):
        self.count = int(row.get("qid", 0))

    def increment(self, step: int) -> int:
        """
        Increments the counter.

        Args:
            step: How much to add.

        Returns:
            The new value of the counter.
        """
        self.count += step
        return self.count


def counter_reward(environments, **kwargs):
    return [float(env.count % 2) for env in environments]


@pytest.mark.parametrize("timing", ["before_update", "after_update"])
def test_environment_with_codapo(tool_model_dir, tmp_path, timing, monkeypatch):
    """An `environment_factory` with CoDaPO on: each rollout (S's copies included) gets its own environment reset from
    its question's row, and confidence, T_j and selection work as for tools."""
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    args = make_args(tmp_path, codapo_resample_timing=timing, max_completion_length=200, num_generations=2)
    trainer = CoDaPOTrainer(
        tool_model_dir,
        counter_reward,
        args=args,
        train_dataset=question_dataset(),
        environment_factory=CounterEnvironment,
    )
    call = '<tool_call>\n{"name": "increment", "arguments": {"step": 2}}\n</tool_call><|im_end|>'
    calls = run_multi_turn(trainer, call)
    assert set(calls[1]) <= set(calls[0])
