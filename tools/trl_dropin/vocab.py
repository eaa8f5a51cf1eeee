"""Byte-level tokenizers for the local stand-ins of the hub's tiny models.

TRL's tests feed hand-written token ids to the model (a mocked `generate` returns them) and read the decoded text back,
e.g. Qwen's `151657` is `<tool_call>` and `4913` is `{"`. A stand-in tokenizer therefore keeps, for each family the tests
use, the real ids of its special tokens and of every text piece a test writes by id; the first 256 ids are the 256
bytes in the GPT-2 byte-level order that Qwen's vocabulary also uses (`198` is a newline, `220` a space). Where the
family leaves room below its special tokens (Qwen), the words of a corpus (TRL's chat template for the family and
the stand-in datasets' prompts) get merges, so that a tool-describing prompt is a few hundred tokens as with Qwen's own
BPE rather than one token per byte; the merged words take free ids, never one a test writes by hand. Every other id
below the special tokens is an unused placeholder, so the vocabulary has the real size and the real ids. No test
depends on how text splits into tokens, only on the ids it writes and the text they decode to.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast


# Bytes that GPT-2's byte-level alphabet writes as themselves; every other byte gets a character from 256 up.
_PRINTABLE = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]


def _byte_order() -> list[int]:
    return _PRINTABLE + [b for b in range(256) if b not in _PRINTABLE]


def byte_alphabet() -> list[str]:
    """The 256 byte-level characters in GPT-2's order: printable bytes map to themselves, the rest to `chr(256 + k)`."""
    return [chr(b) for b in _PRINTABLE] + [chr(256 + k) for k in range(256 - len(_PRINTABLE))]


def _to_byte_level(text: str) -> str:
    table = dict(zip(_byte_order(), byte_alphabet(), strict=True))
    return "".join(table[b] for b in text.encode("utf-8"))


# Qwen's text pieces that TRL's GRPO tests write by id (their comments give the text), read off those comments: a run of
# ids decodes to the commented string. Where a test splits a word over two ids the split is ours; only the
# concatenation is tested.
QWEN2_PIECES = {
    293: " b", 314: " {", 330: ' "', 397: ">\n", 411: "out", 450: "dec", 497: '",', 522: "</", 606: "name",
    788: '":', 894: " any", 927: "sh", 944: "'t", 1318: "text", 1414: " know", 1513: " don", 2765: " won",
    4913: '{"', 5212: ' {"', 5392: " tool", 6023: "hi", 6659: "call", 7692: "async", 9520: "step", 11248: "}}\n",
    13477: "rement", 14172: "tool", 16252: " increment", 16370: "arguments", 17453: "Done", 22785: "_tool",
    35744: "increment", 64648: "multiply", 93054: "_multiply", 95642: '"}}\n',
}  # fmt: skip
# Qwen's special tokens in id order from the first; `special=False` ones stay in decoded text (tool calls, thinking).
QWEN_SPECIALS = [
    ("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True), ("<|object_ref_start|>", True),
    ("<|object_ref_end|>", True), ("<|box_start|>", True), ("<|box_end|>", True), ("<|quad_start|>", True),
    ("<|quad_end|>", True), ("<|vision_start|>", True), ("<|vision_end|>", True), ("<|vision_pad|>", True),
    ("<|image_pad|>", True), ("<|video_pad|>", True), ("<tool_call>", False), ("</tool_call>", False),
    ("<|fim_prefix|>", False), ("<|fim_middle|>", False), ("<|fim_suffix|>", False), ("<|fim_pad|>", False),
    ("<|repo_name|>", False), ("<|file_sep|>", False), ("<tool_response>", False), ("</tool_response>", False),
    ("<think>", False), ("</think>", False),
]  # fmt: skip


def word_merges(corpus: Iterable[str], vocab: dict[str, int], free_ids: Iterable[int]) -> list[tuple[str, str]]:
    """The merges of a byte-level BPE trained on `corpus` (`tokenizers`' trainer, until every word is one token); each
    merged token not in `vocab` yet takes the next id of `free_ids` and is added to `vocab` (in place), so a text
    piece already placed at its fixed id keeps it.

    Example:
        >>> vocab = {c: i for i, c in enumerate(byte_alphabet())}
        >>> word_merges(["to tool to tool"], vocab, iter(range(300, 400)))
        [('t', 'o'), ('Ġ', 'to'), ('o', 'l'), ('Ġto', 'ol')]
        >>> {token: i for token, i in vocab.items() if i >= 256}
        {'to': 300, 'Ġto': 301, 'ol': 302, 'Ġtool': 303}
    """
    splitter = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trained = Tokenizer(models.BPE())
    trained.pre_tokenizer = splitter
    trainer = trainers.BpeTrainer(
        vocab_size=1_000_000, min_frequency=1, show_progress=False, initial_alphabet=splitter.alphabet()
    )
    trained.train_from_iterator(list(corpus), trainer)
    merges = [
        tuple(m.split(" ")) if isinstance(m, str) else tuple(m)
        for m in json.loads(trained.to_str())["model"]["merges"]
    ]
    free = iter(free_ids)
    for left, right in merges:
        if left + right not in vocab:
            vocab[left + right] = next(free)
    return merges


def build_tokenizer(
    first_special: int,
    specials: list[tuple[str, bool]],
    pieces: dict[int, str] | None = None,
    corpus: Iterable[str] = (),
    **tokenizer_kwargs,
) -> PreTrainedTokenizerFast:
    """A byte-level tokenizer whose `specials` take the ids `first_special, first_special + 1, ...`.

    Args:
        first_special (`int`):
            Id of the first special token; ids `256` to `first_special - 1` hold `pieces` and placeholders.
        specials (`list[tuple[str, bool]]`):
            Added tokens in id order, each with whether it is special (dropped by `skip_special_tokens`).
        pieces (`dict[int, str]`, *optional*):
            Text pieces at fixed ids (the ids a test writes by hand).
        corpus (`Iterable[str]`, *optional*):
            Texts whose words get merges ([`word_merges`]), in the free ids between the bytes and `first_special`.
        **tokenizer_kwargs:
            Passed to `PreTrainedTokenizerFast` (`eos_token`, `pad_token`, `bos_token`, `padding_side`, ...).

    Returns:
        `PreTrainedTokenizerFast`: the tokenizer; `len(tokenizer) == first_special + len(specials)`.
    """
    pieces = pieces or {}
    vocab = {c: i for i, c in enumerate(byte_alphabet())}
    for i, piece in sorted(pieces.items()):
        token = _to_byte_level(piece)
        if not 256 <= i < first_special:
            raise ValueError(f"piece {piece!r} at id {i} is outside the free ids 256-{first_special - 1}")
        if token in vocab:
            raise ValueError(f"piece {piece!r} at id {i} is already id {vocab[token]}")
        vocab[token] = i
    merges = word_merges(corpus, vocab, (i for i in range(256, first_special) if i not in pieces))
    taken = set(vocab.values())
    vocab.update({f"<unused{i}>": i for i in range(256, first_special) if i not in taken})
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_tokens([AddedToken(text, special=special, normalized=False) for text, special in specials])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, **tokenizer_kwargs)
    for offset, (text, _) in enumerate(specials):
        if fast.convert_tokens_to_ids(text) != first_special + offset:
            raise RuntimeError(f"{text} landed at id {fast.convert_tokens_to_ids(text)}, not {first_special + offset}")
    return fast
