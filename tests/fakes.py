"""Deterministic stand-ins for the parts of a training run the tests must control: data, rollouts, rewards."""

from __future__ import annotations

import hashlib
import math

import torch
from datasets import Dataset
from transformers import TrainerCallback


def question_dataset(n: int = 16) -> Dataset:
    """Conversational prompts "What is i + j?" with their sum as the `answer` column."""
    rows = [(i % 7, (3 * i) % 5) for i in range(n)]
    return Dataset.from_dict(
        {
            "prompt": [[{"role": "user", "content": f"What is {a} + {b}?"}] for a, b in rows],
            "answer": [str(a + b) for a, b in rows],
            "qid": list(range(n)),
        }
    )


def _digest(text: str) -> int:
    return int(hashlib.sha256(text.encode("utf-8")).hexdigest(), 16)


def deterministic_rollout(prompts, trainer):
    """A TRL `rollout_func`: completions and log-probs that depend only on the prompt and the rollout's slot in its
    group, so that every way of splitting a batch (per-device size, accumulation, processes) sees the same rollouts.

    Every token's log-prob is returned as `log(0.5)`, so the group confidence the trainer computes from these
    generator log-probs is exactly 0.5.
    """
    tokenizer = trainer.processing_class
    num_generations = trainer.num_generations
    offset = trainer.accelerator.process_index * len(prompts)
    eos = tokenizer.eos_token_id
    prompt_ids, completion_ids, logprobs = [], [], []
    for i, prompt in enumerate(prompts):
        text = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        key = _digest(f"{text}|{(offset + i) % num_generations}")
        length = 1 + key % 6
        completion = [10 + (key >> (7 * t)) % (len(tokenizer) - 10) for t in range(length)] + [eos]
        prompt_ids.append(ids)
        completion_ids.append(completion)
        logprobs.append([math.log(0.5)] * len(completion))
    return {"prompt_ids": prompt_ids, "completion_ids": completion_ids, "logprobs": logprobs}


def hash_reward(completion_ids, **kwargs):
    """A deterministic 0/1 "correctness": about half the completions are right."""
    return [float(_digest(str(ids)) % 2) for ids in completion_ids]


def parity_reward(completions, **kwargs):
    """A 0/1 reward from the completion text (works with real generation from a random model)."""
    texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
    return [float(sum(map(ord, t)) % 2) for t in texts]


class GradRecorder(TrainerCallback):
    """Records, at every optimizer update, the parameters before it and the (synchronised) gradients it applies."""

    def __init__(self):
        self.params: list[dict[str, torch.Tensor]] = []
        self.grads: list[dict[str, torch.Tensor]] = []

    def on_step_begin(self, args, state, control, model=None, **kwargs):
        self.params.append({n: p.detach().clone() for n, p in model.named_parameters()})

    def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
        self.grads.append({n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None})


# A tool for the tool-calling tests (its Google-style docstring is what TRL turns into the tool's JSON schema).
def multiply_tool(a: int, b: int) -> int:
    """
    Multiplies two integers.

    Args:
        a: The first integer.
        b: The second integer.

    Returns:
        The product of the two integers.
    """
    return a * b
