"""Offline builders for tiny models: no network, a few hundred kB on disk, built in seconds.

`build_tiny_model(path)` writes a random Qwen2 causal LM and its ChatML tokenizer to `path`, loadable by path like
any checkpoint. They are user tools as much as the tests' and benchmarks': a script can be checked end to end on a
laptop with one (`python examples/dropin_offline.py --model tiny`) before it trains a real model. A random model
learns nothing: it checks the wiring, not the method.
"""

from __future__ import annotations

from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import GenerationConfig, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM


SPECIAL_TOKENS = ["<pad>", "<|im_start|>", "<|im_end|>", "<unk>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def build_tiny_tokenizer() -> PreTrainedTokenizerFast:
    """A small byte-level BPE tokenizer (Qwen2-compatible) with ChatML special tokens and a chat template."""
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=320,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    corpus = [
        "Please reason step by step, and put your final answer within \boxed{}.",
        "What is 12 + 7? The answer is \boxed{19}. Compute the sum of the numbers.",
        "0 1 2 3 4 5 6 7 8 9 + - * = ( ) . , ? user assistant system",
    ]
    tok.train_from_iterator(corpus * 20, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<pad>",
        eos_token="<|im_end|>",
        unk_token="<unk>",
        padding_side="left",
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build_tiny_model(path: str | Path, seed: int = 0, hidden_size: int = 32, num_layers: int = 2) -> Path:
    """Build a randomly initialised Qwen2 causal LM plus tokenizer and save both to `path`."""
    import torch

    path = Path(path)
    tokenizer = build_tiny_tokenizer()
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        tie_word_embeddings=False,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
        attention_dropout=0.0,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None
    )
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it), for a test's rendezvous or server."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
