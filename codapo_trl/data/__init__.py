"""Datasets for CoDaPO training and evaluation, in the conversational format TRL's `GRPOTrainer` expects.

Every loader returns a `datasets.Dataset` with at least these columns:

- `prompt`: the conversation given to the policy, `[{"role": "system", ...}, {"role": "user", "content": question}]`
  (no system turn when the system prompt is `None` or empty);
- `question`: the raw question text;
- `answer`: the gold final answer as a string (what a math-verify based reward compares a completion with);
- `level`: difficulty level as an `int` (1-5 for MATH-style data) or `None` when the data has no levels;
- `answer_type`: `"math"` (any expression math-verify can compare), `"number"` (a plain number: the completion must
  give the number itself, not an expression that evaluates to it) or `"choice"` (a multiple-choice letter).

Source columns (e.g. MATH's `solution` and `type`) are kept: TRL passes every dataset column to the reward functions.

Datasets are looked up by name in [`DATASET_REGISTRY`] (real hub ids; each entry is a small declarative
[`DatasetSpec`]), or read from a local `.jsonl`/`.json`/`.parquet` file with automatic field detection. The
`arithmetic` entry is a synthetic, seeded, leveled addition task that runs offline on a laptop CPU; it is the
dataset of the embedded SmolLM2-135M default.

Example:

```python
>>> from codapo_trl.data import load_math_dataset
>>> ds = load_math_dataset("arithmetic", "test", num_per_level=2)
>>> ds[0]["prompt"][1]
{'role': 'user', 'content': 'What is 0 + 6?'}
```
"""

from __future__ import annotations

import functools
import hashlib
import logging
import math
import os
import random
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import datasets
from datasets import Dataset

from codapo_trl.answers import (
    ANSWER_PARSERS,
    ANSWER_TYPES,
    auto_answer,
    gsm8k_final_answer,
    plain_answer,
)
from codapo_trl.answers import solution_last_boxed as last_boxed


logger = logging.getLogger(__name__)

SYSTEM_PROMPT = "Please reason step by step, and put your final answer within \\boxed{}."
"""The paper's prompt, used as the system message."""

LOCAL_SUFFIXES = {".jsonl": "json", ".json": "json", ".parquet": "parquet"}
QUESTION_CANDIDATES = ("problem", "question", "prompt")
LEVEL_CANDIDATES = ("level", "difficulty")
CORE_COLUMNS = ("prompt", "question", "answer", "level", "answer_type")
_HUB_ID_RE = re.compile(r"[\w.-]+/[\w.-]+")


# ---------------------------------------------------------------------------------------------------------------------
# Level parsing (gold-answer parsers live in `codapo_trl.answers`)
# ---------------------------------------------------------------------------------------------------------------------


def parse_level(value: Any) -> int | None:
    """Difficulty level as an int: `3`, `"3"` and `"Level 3"` give 3; `None`, `"Level ?"` and the like give `None`."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    match = re.fullmatch(r"\s*(?:level\s*)?(\d+)\s*", str(value), flags=re.IGNORECASE)
    return int(match.group(1)) if match else None


# ---------------------------------------------------------------------------------------------------------------------
# Prompts
# ---------------------------------------------------------------------------------------------------------------------


def make_conversation(question: str, system_prompt: str | None = SYSTEM_PROMPT) -> list[dict[str, str]]:
    """Conversational prompt for one question: an optional system turn, then the user turn.

    Args:
        question (`str`):
            The question text.
        system_prompt (`str` or `None`, *optional*, defaults to [`SYSTEM_PROMPT`]):
            Content of the system turn; `None` or `""` leaves the system turn out (the chat template may then insert
            its own default, e.g. SmolLM2's "You are a helpful AI assistant named SmolLM...").
    """
    messages = []
    if system_prompt:
        messages.append({"role": "system", "content": system_prompt})
    messages.append({"role": "user", "content": question})
    return messages


def _question_text(value: Any) -> str:
    """The question as text; a conversational `prompt` value gives the content of its last user turn."""
    if isinstance(value, list):
        user_turns = [m.get("content") for m in value if isinstance(m, Mapping) and m.get("role") == "user"]
        if user_turns:
            return str(user_turns[-1])
        raise ValueError(f"The question column holds a list without a user message: {value!r:.200}")
    return "" if value is None else str(value)


# ---------------------------------------------------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DatasetSpec:
    """Declarative description of a dataset: where it lives and how its fields map onto the common columns.

    Args:
        name (`str`):
            Registry name, e.g. `"math"`.
        hub_id (`str` or `None`):
            Hugging Face Hub dataset id; `None` for generated datasets (see `builder`).
        config (`str` or `None`, *optional*):
            Hub configuration name (`load_dataset(hub_id, config)`).
        splits (`Mapping[str, str]`, *optional*):
            Our split names mapped to the hub's, e.g. `{"test": "train"}` for a benchmark published as `train`.
        question_field (`str`, *optional*, defaults to `"problem"`):
            Column holding the question.
        answer_field (`str`, *optional*, defaults to `"answer"`):
            Column the gold answer is parsed from.
        answer_parser (`Callable[[Any], str | None]`, *optional*, defaults to [`plain_answer`]):
            Turns the `answer_field` value into the final answer string (`None` drops the row).
        question_builder (`Callable[[dict], str]`, *optional*):
            Builds the question from a whole row instead of `question_field` (e.g. a question plus lettered choices).
        answer_builder (`Callable[[dict], str | None]`, *optional*):
            Builds the answer from a whole row instead of `answer_field` + `answer_parser`.
        level_field (`str`, *optional*):
            Column with the difficulty level, parsed by [`parse_level`]; `None` when the data has no levels.
        answer_type (`str`, *optional*, defaults to `"math"`):
            One of `"math"`, `"number"`, `"choice"`.
        raw_answer_column (`str`, *optional*):
            If set, the unparsed `answer_field` value is kept under this name (e.g. GSM8K's worked solution, whose
            `answer` column is replaced by the bare number).
        builder (`Callable[..., Dataset]`, *optional*):
            For generated datasets: `builder(split=..., **kwargs)` returns the raw rows.
        description (`str`, *optional*):
            One line for listings.
    """

    name: str
    hub_id: str | None
    config: str | None = None
    splits: Mapping[str, str] = field(default_factory=lambda: {"train": "train", "test": "test"})
    question_field: str = "problem"
    answer_field: str = "answer"
    answer_parser: Callable[[Any], str | None] = plain_answer
    question_builder: Callable[[dict], str] | None = None
    answer_builder: Callable[[dict], str | None] | None = None
    level_field: str | None = None
    answer_type: str = "math"
    raw_answer_column: str | None = None
    builder: Callable[..., Dataset] | None = None
    description: str = ""

    def __post_init__(self):
        if self.answer_type not in ANSWER_TYPES:
            raise ValueError(f"answer_type must be one of {ANSWER_TYPES}, got {self.answer_type!r}")
        if self.hub_id is None and self.builder is None:
            raise ValueError(f"Dataset spec {self.name!r} needs a hub_id or a builder.")

    def hub_split(self, split: str) -> str:
        """The hub split name for one of our split names, with a clear error for unknown ones."""
        try:
            return self.splits[split]
        except KeyError:
            raise ValueError(
                f"Dataset {self.name!r} has no split {split!r}; valid splits: {sorted(self.splits)}."
            ) from None

    def load_raw(self, split: str = "train", **kwargs) -> Dataset:
        """Download (or generate) the raw rows of `split`, before formatting.

        Args:
            split (`str`, *optional*, defaults to `"train"`):
                One of our split names (see `splits`).
            kwargs:
                For hub datasets: extra `datasets.load_dataset` arguments (e.g. `cache_dir`, `revision`).
                For generated datasets: the builder's arguments (e.g. `num_per_level`, `seed`).
        """
        hub_split = self.hub_split(split)
        if self.builder is not None:
            return self.builder(split=hub_split, **kwargs)
        return datasets.load_dataset(self.hub_id, self.config, split=hub_split, **kwargs)


def _mmlu_question(row: dict) -> str:
    letters = "ABCDEFGHIJ"
    choices = "\n".join(f"{letters[i]}. {choice}" for i, choice in enumerate(row["choices"]))
    return f"{row['question']}\n\n{choices}"


def _mmlu_answer(row: dict) -> str | None:
    answer = row.get("answer")
    if isinstance(answer, int) and not isinstance(answer, bool):
        return "ABCDEFGHIJ"[answer]
    return plain_answer(answer)


def _required(row: Mapping[str, Any], name: str, *fields: str) -> Any:
    """The first of `fields` present (and not `None`) in `row`; a clear error naming the columns otherwise."""
    for column in fields:
        if row.get(column) is not None:
            return row[column]
    raise ValueError(f"{name}: none of the columns {list(fields)} found in a row with columns {sorted(row)}.")


def _strip_dollars(text: str) -> str:
    """`$\\frac{1}{2}$` -> `\\frac{1}{2}`: unescaped `$` math delimiters removed."""
    return re.sub(r"(?<!\\)\$", "", text).strip()


def _olympiad_answer(value: Any) -> str | None:
    """OlympiadBench's `final_answer`: a list of strings in `$...$` (several for multi-answer questions), joined
    with `", "`."""
    values = value if isinstance(value, (list, tuple)) else [value]
    parts = [_strip_dollars(str(v)) for v in values if v is not None and str(v).strip()]
    return ", ".join(p for p in parts if p) or None


def _olympiad_question(row: dict) -> str:
    question = str(_required(row, "olympiadbench", "question"))
    context = row.get("context")
    return f"{context.strip()}\n\n{question}" if isinstance(context, str) and context.strip() else question


def _minerva_question(row: dict) -> str:
    return str(_required(row, "minerva", "question", "problem"))


def _minerva_answer(row: dict) -> str | None:
    if row.get("answer") is not None:
        return plain_answer(row["answer"])
    return last_boxed(str(_required(row, "minerva", "answer", "solution")))


_GPQA_FIELDS = ("Question", "Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3")


def _gpqa_choices(row: dict) -> tuple[list[str], int]:
    """GPQA's four options in a fixed order (a permutation seeded by the question text, so the gold letter is the
    same on every run and machine) and the index of the correct one."""
    values = [_required(row, "gpqa", column) for column in _GPQA_FIELDS]
    options = [str(v).strip() for v in values[1:]]
    order = list(range(4))
    random.Random(_question_hash(f"gpqa|{values[0]}")).shuffle(order)
    return [options[i] for i in order], order.index(0)


def _gpqa_question(row: dict) -> str:
    options, _ = _gpqa_choices(row)
    choices = "\n".join(f"{letter}. {option}" for letter, option in zip("ABCD", options))
    return f"{str(row['Question']).strip()}\n\n{choices}"


def _gpqa_answer(row: dict) -> str | None:
    _, correct = _gpqa_choices(row)
    return "ABCD"[correct]


DATASET_REGISTRY: dict[str, DatasetSpec] = {}
"""Dataset specs by name; add one with [`register_dataset`]."""


def register_dataset(spec: DatasetSpec, *, overwrite: bool = False) -> DatasetSpec:
    """Add a [`DatasetSpec`] to [`DATASET_REGISTRY`] under `spec.name` and return it."""
    if spec.name in DATASET_REGISTRY and not overwrite:
        raise ValueError(f"A dataset named {spec.name!r} is already registered; pass overwrite=True to replace it.")
    DATASET_REGISTRY[spec.name] = spec
    return spec


def list_datasets() -> list[str]:
    """Names of the registered datasets."""
    return sorted(DATASET_REGISTRY)


# ---------------------------------------------------------------------------------------------------------------------
# Synthetic leveled arithmetic
# ---------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ArithmeticLevel:
    """One difficulty level of the synthetic arithmetic task: `a + b` with operands drawn from two ranges.

    Args:
        level (`int`):
            The level number (1 = easiest).
        a_range (`tuple[int, int]`):
            Inclusive range of the first operand.
        b_range (`tuple[int, int]`):
            Inclusive range of the second operand.
        carry (`bool` or `None`, *optional*):
            `False`: no column may carry; `True`: at least one column carries; `None`: either.
        description (`str`, *optional*):
            Human-readable summary.
    """

    level: int
    a_range: tuple[int, int]
    b_range: tuple[int, int]
    carry: bool | None = None
    description: str = ""

    def accepts(self, a: int, b: int) -> bool:
        """Whether the pair `(a, b)` belongs to this level."""
        if not (self.a_range[0] <= a <= self.a_range[1] and self.b_range[0] <= b <= self.b_range[1]):
            return False
        return self.carry is None or _has_carry(a, b) == self.carry

    def pool_size(self) -> int:
        """Number of distinct `(a, b)` pairs in this level (all splits together)."""
        return sum(
            self.accepts(a, b)
            for a in range(self.a_range[0], self.a_range[1] + 1)
            for b in range(self.b_range[0], self.b_range[1] + 1)
        )


def _has_carry(a: int, b: int) -> bool:
    while a or b:
        if a % 10 + b % 10 >= 10:
            return True
        a, b = a // 10, b // 10
    return False


ARITHMETIC_LEVELS: dict[int, ArithmeticLevel] = {
    1: ArithmeticLevel(1, (0, 9), (0, 9), carry=False, description="one-digit + one-digit, no carry (sum <= 9)"),
    2: ArithmeticLevel(2, (1, 9), (1, 9), carry=True, description="one-digit + one-digit with a carry (sum >= 10)"),
    3: ArithmeticLevel(3, (10, 19), (1, 9), description="10-19 + one-digit"),
    4: ArithmeticLevel(4, (20, 99), (1, 9), description="20-99 + one-digit"),
    5: ArithmeticLevel(5, (100, 999), (10, 99), description="three-digit + two-digit"),
}
"""The frozen level definitions, calibrated on the embedded SmolLM2-135M-Instruct with
`benchmarks/calibrate_arithmetic.py` (32 questions x 4 samples per level, 64 new tokens, the paper's system prompt,
answer = boxed number, else the last integer of the completion). Base accuracy per level 1-5 was
0.38 / 0.33 / 0.22 / 0.04 / 0.00 at temperature 0.6 and 0.17 / 0.11 / 0.09 / 0.02 / 0.00 at temperature 1.0. The
base model almost never writes `\\boxed{}` (at most 2% of completions), so a boxed-only reward scores 0 everywhere."""

ARITHMETIC_TEST_FRACTION = 0.25
"""Share of each level's questions reserved for the held-out `test` split (chosen by a hash of the question)."""

ARITHMETIC_TEMPLATE = "What is {a} + {b}?"


def arithmetic_question(a: int, b: int) -> str:
    """The question text for `a + b`."""
    return ARITHMETIC_TEMPLATE.format(a=a, b=b)


def _question_hash(question: str) -> int:
    return int.from_bytes(hashlib.sha256(question.encode("utf-8")).digest()[:8], "big")


@functools.cache
def _arithmetic_pools(level: int) -> dict[str, tuple[tuple[int, int], ...]]:
    """The `train` and `test` question pools of a level.

    The `ceil(ARITHMETIC_TEST_FRACTION * pool size)` questions with the smallest SHA-256 of their text form the test
    pool: a fixed function of the level definition, independent of seed and sizes, and never empty.
    """
    spec = ARITHMETIC_LEVELS[level]
    pairs = [
        (a, b)
        for a in range(spec.a_range[0], spec.a_range[1] + 1)
        for b in range(spec.b_range[0], spec.b_range[1] + 1)
        if spec.accepts(a, b)
    ]
    pairs.sort(key=lambda pair: _question_hash(arithmetic_question(*pair)))
    num_test = math.ceil(ARITHMETIC_TEST_FRACTION * len(pairs))
    return {"test": tuple(sorted(pairs[:num_test])), "train": tuple(sorted(pairs[num_test:]))}


def arithmetic_pool_sizes(split: str = "train") -> dict[int, int]:
    """Number of distinct questions per level in `split` (`"train"` or `"test"`)."""
    return {level: len(_arithmetic_pools(level)[split]) for level in ARITHMETIC_LEVELS}


def make_arithmetic_dataset(
    num_per_level: int | Mapping[int, int],
    *,
    levels: Iterable[int] = (1, 2, 3, 4, 5),
    seed: int = 0,
    split: str = "train",
    allow_repeats: bool = False,
) -> Dataset:
    """Generate the synthetic leveled addition task ("What is 23 + 45?"), deterministic for a given seed.

    Each level draws distinct questions from its own pool (see [`ARITHMETIC_LEVELS`]); every question belongs to
    exactly one split, fixed by a hash of its text, so `train` and `test` never share a question whatever the seed
    or sizes. Rows come out shuffled (seeded), levels interleaved.

    The easy levels are small (55, 45 and 90 questions in all, see [`arithmetic_pool_sizes`]): asking for more
    questions than a pool holds is an error unless `allow_repeats=True`.

    Args:
        num_per_level (`int` or `Mapping[int, int]`):
            Questions per level, or a count for each level (`{1: 14, 5: 40}`; `levels` is then ignored).
        levels (`Iterable[int]`, *optional*, defaults to `(1, 2, 3, 4, 5)`):
            Which levels to include.
        seed (`int`, *optional*, defaults to `0`):
            Seed of the sampling and shuffling.
        split (`str`, *optional*, defaults to `"train"`):
            `"train"`, or `"test"` (`"validation"` is an alias of `"test"`).
        allow_repeats (`bool`, *optional*, defaults to `False`):
            When a level's pool is smaller than `num_per_level`, use the whole pool as many times as needed (each
            pass in a new seeded order) instead of raising.

    Returns:
        `Dataset`: raw rows with columns `question`, `answer` (the sum as a string), `level`, `a`, `b`, `answer_type`
        (`"number"`). [`load_math_dataset`] adds the conversational `prompt`.
    """
    split = {"validation": "test", "eval": "test"}.get(split, split)
    if split not in ("train", "test"):
        raise ValueError(f"The arithmetic dataset has splits 'train' and 'test' (alias 'validation'), got {split!r}.")
    counts = dict(num_per_level) if isinstance(num_per_level, Mapping) else dict.fromkeys(levels, num_per_level)
    unknown = [lvl for lvl in counts if lvl not in ARITHMETIC_LEVELS]
    if unknown:
        raise ValueError(f"Unknown arithmetic level(s) {unknown}; valid levels: {sorted(ARITHMETIC_LEVELS)}.")
    rows: list[dict[str, Any]] = []
    for lvl, count in counts.items():
        if count < 0:
            raise ValueError(f"num_per_level must be >= 0, got {count} for level {lvl}.")
        pool = list(_arithmetic_pools(lvl)[split])
        if count > len(pool) and not allow_repeats:
            raise ValueError(
                f"Arithmetic level {lvl} ({ARITHMETIC_LEVELS[lvl].description}) has only {len(pool)} distinct "
                f"{split} questions; asked for {count}. Ask for fewer or pass allow_repeats=True."
            )
        # One independent stream per (seed, split, level): asking for more levels does not change the others.
        rng = random.Random(f"arithmetic-{seed}-{split}-{lvl}")
        picked: list[tuple[int, int]] = []
        while len(picked) < count:
            picked.extend(rng.sample(pool, min(len(pool), count - len(picked))))
        rows.extend(
            {"question": arithmetic_question(a, b), "answer": str(a + b), "level": lvl, "a": a, "b": b}
            for a, b in picked
        )
    random.Random(f"arithmetic-{seed}-{split}-order").shuffle(rows)
    features = datasets.Features(
        {
            "question": datasets.Value("string"),
            "answer": datasets.Value("string"),
            "level": datasets.Value("int64"),
            "a": datasets.Value("int64"),
            "b": datasets.Value("int64"),
            "answer_type": datasets.Value("string"),
        }
    )
    columns = {name: [row[name] for row in rows] for name in ("question", "answer", "level", "a", "b")}
    columns["answer_type"] = ["number"] * len(rows)
    return Dataset.from_dict(columns, features=features)


def _arithmetic_builder(
    split: str,
    num_per_level: int | None = None,
    levels: Iterable[int] = (1, 2, 3, 4, 5),
    seed: int = 0,
    allow_repeats: bool | None = None,
) -> Dataset:
    """Registry builder. Defaults: `train` has 200 questions per level (the small one-digit pools repeated); `test`
    has 40 distinct questions per level, or the whole pool where it is smaller (14, 12 and 23 for levels 1-3)."""
    if num_per_level is None:
        if split == "train":
            num_per_level = 200
            allow_repeats = True if allow_repeats is None else allow_repeats
        else:
            sizes = arithmetic_pool_sizes(split)
            num_per_level = {lvl: min(40, sizes[lvl]) for lvl in levels}
    return make_arithmetic_dataset(
        num_per_level, levels=levels, seed=seed, split=split, allow_repeats=bool(allow_repeats)
    )


# ---------------------------------------------------------------------------------------------------------------------
# Built-in specs
# ---------------------------------------------------------------------------------------------------------------------

register_dataset(
    DatasetSpec(
        name="math",
        hub_id="DigitalLearningGmbH/MATH-lighteval",
        config="default",
        splits={"train": "train", "test": "test"},
        question_field="problem",
        answer_field="solution",
        answer_parser=last_boxed,
        level_field="level",
        description="MATH (Hendrycks et al.), 7500 train / 5000 test; the paper's training set",
    )
)
register_dataset(
    DatasetSpec(
        name="math500",
        hub_id="HuggingFaceH4/MATH-500",
        splits={"test": "test"},
        question_field="problem",
        answer_field="answer",
        level_field="level",
        description="MATH-500 evaluation subset (Lightman et al.)",
    )
)
register_dataset(
    DatasetSpec(
        name="gsm8k",
        hub_id="openai/gsm8k",
        config="main",
        splits={"train": "train", "test": "test"},
        question_field="question",
        answer_field="answer",
        answer_parser=gsm8k_final_answer,
        answer_type="number",
        raw_answer_column="solution",
        description="GSM8K grade-school word problems; the answer is the number after '####'",
    )
)
register_dataset(
    DatasetSpec(
        name="aime24",
        hub_id="HuggingFaceH4/aime_2024",
        splits={"test": "train"},
        question_field="problem",
        answer_field="answer",
        description="AIME 2024 I and II (30 problems), published as a single 'train' split",
    )
)
register_dataset(
    DatasetSpec(
        name="aime25",
        hub_id="math-ai/aime25",
        splits={"test": "test"},
        question_field="problem",
        answer_field="answer",
        description="AIME 2025 I and II",
    )
)
register_dataset(
    DatasetSpec(
        name="mmlu",
        hub_id="cais/mmlu",
        config="all",
        splits={"test": "test", "validation": "validation", "dev": "dev"},
        question_builder=_mmlu_question,
        answer_builder=_mmlu_answer,
        answer_type="choice",
        description="MMLU, 57 subjects, four lettered choices appended to the question",
    )
)
register_dataset(
    DatasetSpec(
        name="amc23",
        hub_id="math-ai/amc23",
        splits={"test": "test"},
        question_field="question",
        answer_field="answer",
        description="AMC 2023 (40 problems with numeric answers)",
    )
)
register_dataset(
    DatasetSpec(
        name="olympiadbench",
        hub_id="Hothan/OlympiadBench",
        config="OE_TO_maths_en_COMP",
        splits={"test": "train"},
        question_field="question",
        question_builder=_olympiad_question,
        answer_field="final_answer",
        answer_parser=_olympiad_answer,
        description="OlympiadBench, open-ended text-only English maths competition subset (674 problems)",
    )
)
register_dataset(
    DatasetSpec(
        name="minerva",
        hub_id="math-ai/minervamath",
        splits={"test": "test"},
        question_builder=_minerva_question,
        answer_builder=_minerva_answer,
        description="Minerva Math (272 undergraduate STEM problems)",
    )
)
register_dataset(
    DatasetSpec(
        name="gpqa_diamond",
        hub_id="Idavidrein/gpqa",
        config="gpqa_diamond",
        splits={"test": "train"},
        question_builder=_gpqa_question,
        answer_builder=_gpqa_answer,
        answer_type="choice",
        description="GPQA Diamond (198 questions; gated on the hub), options A-D in a fixed per-question order",
    )
)
register_dataset(
    DatasetSpec(
        name="arithmetic",
        hub_id=None,
        splits={"train": "train", "test": "test", "validation": "test"},
        question_field="question",
        answer_field="answer",
        level_field="level",
        answer_type="number",
        builder=_arithmetic_builder,
        description="synthetic 'What is a + b?' in five levels; offline; the embedded default's dataset",
    )
)


# ---------------------------------------------------------------------------------------------------------------------
# Formatting and loading
# ---------------------------------------------------------------------------------------------------------------------


def format_math_dataset(
    dataset: Dataset,
    spec: DatasetSpec | str | None = None,
    *,
    system_prompt: str | None = SYSTEM_PROMPT,
    question_column: str | None = None,
    answer_column: str | None = None,
    level_column: str | None = None,
    answer_parser: str | Callable[[Any], str | None] | None = None,
    answer_type: str | None = None,
    levels: Iterable[int] | None = None,
    limit: int | None = None,
    source: str = "the dataset",
) -> Dataset:
    """Map raw rows onto the common columns (`prompt`, `question`, `answer`, `level`, `answer_type`).

    Args:
        dataset (`Dataset`):
            Raw rows.
        spec (`DatasetSpec`, `str` or `None`, *optional*):
            A spec (or registry name) whose field mapping to use; `None` detects the fields (question from
            `problem`/`question`/`prompt`; answer from `answer`, else the last `\\boxed{}` of `solution`; level from
            `level`/`difficulty` if present).
        system_prompt (`str` or `None`, *optional*, defaults to [`SYSTEM_PROMPT`]):
            System turn of every prompt; `None` or `""` for none.
        question_column, answer_column, level_column (`str`, *optional*):
            Override the detected (or spec) columns. An explicit answer column is parsed with the `"auto"` parser
            unless `answer_parser` says otherwise.
        answer_parser (`str` or `Callable`, *optional*):
            A name from [`ANSWER_PARSERS`] or a callable `value -> str | None`.
        answer_type (`str`, *optional*):
            Force the answer type; default: the spec's, else an `answer_type` column if the data has one, else
            `"math"`.
        levels (`Iterable[int]`, *optional*):
            Keep only rows with these levels.
        limit (`int`, *optional*):
            Keep only the first `limit` rows (before formatting, so it is cheap on big datasets).
        source (`str`, *optional*):
            Name of the data in error messages.

    Returns:
        `Dataset`: the formatted rows. Rows whose answer cannot be extracted are dropped with a warning.
    """
    if isinstance(spec, str):
        spec = _get_spec(spec)
    if answer_type is not None and answer_type not in ANSWER_TYPES:
        raise ValueError(f"answer_type must be one of {ANSWER_TYPES}, got {answer_type!r}")
    if len(dataset) == 0:
        raise ValueError(f"{source} has no rows.")
    if limit is not None:
        if limit < 0:
            raise ValueError(f"limit must be >= 0, got {limit}.")
        dataset = dataset.select(range(min(limit, len(dataset))))
    columns = list(dataset.column_names)

    # Question.
    question_builder = None
    if question_column is not None:
        _require_column(question_column, columns, "question_column", source)
    elif spec is not None and spec.question_builder is not None:
        question_builder = spec.question_builder
    elif spec is not None:
        _require_column(spec.question_field, columns, "question_column", source)
        question_column = spec.question_field
    else:
        question_column = next((c for c in QUESTION_CANDIDATES if c in columns), None)
        if question_column is None:
            raise ValueError(
                f"Could not find a question column in {source}: looked for {list(QUESTION_CANDIDATES)}, found "
                f"columns {columns}. Set question_column= to the column holding the question."
            )

    # Answer.
    if isinstance(answer_parser, str):
        try:
            answer_parser = ANSWER_PARSERS[answer_parser]
        except KeyError:
            raise ValueError(f"Unknown answer_parser {answer_parser!r}; valid: {sorted(ANSWER_PARSERS)}.") from None
    answer_builder = None
    raw_answer_column = None
    if answer_column is not None:
        _require_column(answer_column, columns, "answer_column", source)
        answer_parser = answer_parser or auto_answer
    elif spec is not None and spec.answer_builder is not None and answer_parser is None:
        answer_builder = spec.answer_builder
    elif spec is not None:
        _require_column(spec.answer_field, columns, "answer_column", source)
        answer_column = spec.answer_field
        answer_parser = answer_parser or spec.answer_parser
        raw_answer_column = spec.raw_answer_column
    elif "answer" in columns:
        answer_column, answer_parser = "answer", answer_parser or auto_answer
    elif "solution" in columns:
        answer_column, answer_parser = "solution", answer_parser or last_boxed
    else:
        raise ValueError(
            f"Could not find an answer column in {source}: looked for 'answer' and 'solution' (last \\boxed{{}}), "
            f"found columns {columns}. Set answer_column= (and answer_parser= if the final answer must be extracted)."
        )
    if raw_answer_column is None and answer_column == "answer" and "solution" not in columns:
        # Keep a GSM8K-style worked solution (replaced in `answer` by the bare number) instead of dropping it.
        sample = dataset[answer_column][:20]
        if answer_parser is gsm8k_final_answer or (
            answer_parser is auto_answer and any(isinstance(v, str) and "####" in v for v in sample)
        ):
            raw_answer_column = "solution"
    if raw_answer_column in columns and raw_answer_column != answer_column:
        raw_answer_column = None  # the data already has that column; keep it as it is

    # Level.
    if level_column is not None:
        _require_column(level_column, columns, "level_column", source)
    elif spec is not None:
        level_column = spec.level_field if spec.level_field in columns else None
    else:
        level_column = next((c for c in LEVEL_CANDIDATES if c in columns), None)

    # Answer type.
    type_column = None
    if answer_type is None:
        if spec is not None:
            answer_type = spec.answer_type
        elif "answer_type" in columns:
            type_column = "answer_type"
        else:
            answer_type = "math"

    def convert(row: dict) -> dict:
        question = question_builder(row) if question_builder else _question_text(row[question_column])
        answer = answer_builder(row) if answer_builder else answer_parser(row[answer_column])
        row_type = answer_type if type_column is None else (row.get(type_column) or "math")
        out = {
            "prompt": make_conversation(question, system_prompt),
            "question": question,
            "answer": answer,
            "level": parse_level(row[level_column]) if level_column else None,
            "answer_type": row_type,
        }
        if raw_answer_column is not None:
            out[raw_answer_column] = row[answer_column]
        return out

    kept = [c for c in columns if c not in CORE_COLUMNS and c != raw_answer_column]
    features = datasets.Features(
        {
            **{c: dataset.features[c] for c in kept},
            "prompt": [{"role": datasets.Value("string"), "content": datasets.Value("string")}],
            "question": datasets.Value("string"),
            "answer": datasets.Value("string"),
            "level": datasets.Value("int64"),
            "answer_type": datasets.Value("string"),
            **({raw_answer_column: datasets.Value("string")} if raw_answer_column else {}),
        }
    )
    if raw_answer_column is not None and dataset.features[answer_column] != datasets.Value("string"):
        features[raw_answer_column] = dataset.features[answer_column]
    formatted = dataset.map(
        convert,
        remove_columns=[c for c in columns if c in CORE_COLUMNS or c == raw_answer_column],
        features=features,
        desc=f"Formatting {source}",
    )

    bad_types = set(formatted.unique("answer_type")) - set(ANSWER_TYPES)
    if bad_types:
        raise ValueError(f"{source} has answer_type values {sorted(bad_types)}; valid: {ANSWER_TYPES}.")
    missing = sum(a is None or a == "" for a in formatted["answer"])
    if missing:
        logger.warning("Dropped %d of %d rows of %s with no extractable answer.", missing, len(formatted), source)
        formatted = formatted.filter(lambda row: row["answer"] not in (None, ""), desc="Dropping rows without answer")
    if levels is not None:
        wanted = set(levels)
        formatted = formatted.filter(lambda row: row["level"] in wanted, desc="Selecting levels")
    if len(formatted) == 0:
        raise ValueError(f"No rows of {source} are left after extracting answers and selecting levels.")
    return formatted


def load_math_dataset(
    name_or_path: str | os.PathLike,
    split: str = "train",
    *,
    system_prompt: str | None = SYSTEM_PROMPT,
    question_column: str | None = None,
    answer_column: str | None = None,
    level_column: str | None = None,
    answer_parser: str | Callable[[Any], str | None] | None = None,
    answer_type: str | None = None,
    spec: str | None = None,
    config: str | None = None,
    levels: Iterable[int] | None = None,
    limit: int | None = None,
    **load_kwargs,
) -> Dataset:
    """Load a dataset by registry name or local file, formatted for CoDaPO / GRPO training and evaluation.

    Args:
        name_or_path (`str` or `os.PathLike`):
            A name from [`list_datasets`] (e.g. `"math"`, `"math500"`, `"gsm8k"`, `"arithmetic"`), a local
            `.jsonl`, `.json` or `.parquet` file, or any other hub dataset id (`"owner/name"`, fields detected).
        split (`str`, *optional*, defaults to `"train"`):
            Split of a registry dataset. A local file is one split; `split` is then ignored.
        system_prompt (`str` or `None`, *optional*, defaults to [`SYSTEM_PROMPT`]):
            System turn of every prompt; `None` or `""` for none.
        question_column, answer_column, level_column (`str`, *optional*):
            Override the detected or registered columns.
        answer_parser (`str` or `Callable`, *optional*):
            How to turn the answer column into the final answer: `"auto"`, `"plain"`, `"last_boxed"`, `"gsm8k"` or a
            callable.
        answer_type (`str`, *optional*):
            Force `"math"`, `"number"` or `"choice"`.
        spec (`str`, *optional*):
            For a local file or an unregistered hub id: use the field mapping of this registry entry (e.g. a local
            copy of GSM8K with `spec="gsm8k"`).
        config (`str`, *optional*):
            Configuration name of an unregistered hub id.
        levels (`Iterable[int]`, *optional*):
            Keep only these difficulty levels.
        limit (`int`, *optional*):
            Keep only the first `limit` rows.
        load_kwargs:
            For hub datasets: extra `datasets.load_dataset` arguments (`cache_dir`, `revision`, ...). For
            `"arithmetic"`: `num_per_level` (default 200), `seed` (default 0).

    Returns:
        `Dataset`: columns `prompt`, `question`, `answer`, `level`, `answer_type` plus the source's other columns.

    Raises:
        `ValueError`: unknown name, unknown split, missing question/answer column (the message lists the columns
            found), or an empty file.
        `FileNotFoundError`: a local path that does not exist.
    """
    name = os.fspath(name_or_path)
    path = Path(name).expanduser()
    if name in DATASET_REGISTRY and not path.is_file():
        if spec is not None or config is not None:
            raise ValueError(f"spec= and config= do not apply to the registered dataset {name!r}.")
        file_spec = DATASET_REGISTRY[name]
        raw = file_spec.load_raw(split, **load_kwargs)
        source = f"{name} ({file_spec.hub_id or 'generated'}, split {split!r})"
    elif path.suffix.lower() in LOCAL_SUFFIXES or path.is_file():
        raw = _load_local(path, **load_kwargs)
        file_spec = _get_spec(spec) if spec is not None else None
        source = str(path)
    elif _HUB_ID_RE.fullmatch(name) and not path.exists():
        file_spec = _get_spec(spec) if spec is not None else None
        raw = datasets.load_dataset(name, config, split=split, **load_kwargs)
        source = f"{name} (split {split!r})"
    else:
        raise ValueError(
            f"Unknown dataset {name!r}: not a registered name, a local .jsonl/.json/.parquet file or a hub id "
            f"(owner/name). Registered names: {list_datasets()}."
        )
    dataset = format_math_dataset(
        raw,
        file_spec,
        system_prompt=system_prompt,
        question_column=question_column,
        answer_column=answer_column,
        level_column=level_column,
        answer_parser=answer_parser,
        answer_type=answer_type,
        levels=levels,
        limit=limit,
        source=source,
    )
    logger.info("Loaded %d rows from %s.", len(dataset), source)
    return dataset


def _load_local(path: Path, **load_kwargs) -> Dataset:
    builder = LOCAL_SUFFIXES.get(path.suffix.lower())
    if builder is None:
        raise ValueError(f"Unsupported file type {path.suffix!r} for {path}; use one of {sorted(LOCAL_SUFFIXES)}.")
    if not path.is_file():
        raise FileNotFoundError(f"No such dataset file: {path}")
    if path.stat().st_size == 0:
        raise ValueError(f"The dataset file {path} is empty.")
    try:
        dataset = datasets.load_dataset(builder, data_files=str(path), split="train", **load_kwargs)
    except Exception as err:  # datasets raises several types for unreadable or row-less files
        raise ValueError(f"Could not read {path} as {builder}: {err}") from err
    if len(dataset) == 0:
        raise ValueError(f"The dataset file {path} has no rows.")
    return dataset


def _get_spec(name: str) -> DatasetSpec:
    try:
        return DATASET_REGISTRY[name]
    except KeyError:
        raise ValueError(f"Unknown dataset spec {name!r}; registered names: {list_datasets()}.") from None


def _require_column(column: str, columns: Sequence[str], argument: str, source: str) -> None:
    if column not in columns:
        raise ValueError(f"Column {column!r} not found in {source}; found columns {list(columns)}. Set {argument}=.")
