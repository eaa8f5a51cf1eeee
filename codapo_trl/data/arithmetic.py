"""The synthetic leveled arithmetic task ("What is 23 + 45?"): seven frozen levels (1-5 the default set, 6 and 7
harder ones), seeded, with disjoint train and test questions; offline, the dataset of the embedded SmolLM2-135M
default (registry name `arithmetic`)."""

from __future__ import annotations

import functools
import hashlib
import math
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import datasets
from datasets import Dataset


__all__ = [
    "ARITHMETIC_LEVELS",
    "ARITHMETIC_TEMPLATE",
    "ARITHMETIC_TEST_FRACTION",
    "ArithmeticLevel",
    "arithmetic_pool_sizes",
    "arithmetic_question",
    "carry_count",
    "make_arithmetic_dataset",
    "question_hash",
    "sampled_split",
]


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
        min_carries (`int`, *optional*, defaults to `0`):
            Least number of columns that carry (a column carries when its two digits plus the carry coming into it
            reach 10), e.g. 2 for "at least two carries"; 0 sets no bound.
        description (`str`, *optional*):
            Human-readable summary.
        sampled (`bool`, *optional*, defaults to `False`):
            The level has too many pairs to list (four-digit + four-digit: 81 million). Its questions are drawn at
            random from the operand ranges instead of from a listed pool, and a question's split is fixed by its
            hash alone (`test` when [`question_hash`] is below `ARITHMETIC_TEST_FRACTION * 2**64`), so `train` and
            `test` stay disjoint without listing either. Such a level takes no carry condition, so that its size is
            the product of its ranges.
    """

    level: int
    a_range: tuple[int, int]
    b_range: tuple[int, int]
    carry: bool | None = None
    description: str = ""
    min_carries: int = 0
    sampled: bool = False

    def __post_init__(self) -> None:
        if self.sampled and (self.carry is not None or self.min_carries):
            raise ValueError(
                f"Arithmetic level {self.level} is sampled, so it cannot take a carry condition (its size would have "
                "to be counted by listing its pairs): drop `carry`/`min_carries` or list the level (sampled=False)."
            )

    def accepts(self, a: int, b: int) -> bool:
        """Whether the pair `(a, b)` belongs to this level."""
        if not (self.a_range[0] <= a <= self.a_range[1] and self.b_range[0] <= b <= self.b_range[1]):
            return False
        carries = carry_count(a, b)
        return (self.carry is None or (carries > 0) == self.carry) and carries >= self.min_carries

    def pool_size(self) -> int:
        """Number of distinct `(a, b)` pairs in this level (all splits together)."""
        if self.sampled:
            return (self.a_range[1] - self.a_range[0] + 1) * (self.b_range[1] - self.b_range[0] + 1)
        return sum(
            self.accepts(a, b)
            for a in range(self.a_range[0], self.a_range[1] + 1)
            for b in range(self.b_range[0], self.b_range[1] + 1)
        )


def carry_count(a: int, b: int) -> int:
    """Number of columns of the written addition `a + b` (non-negative integers) that carry, counting the carry
    a column receives from the one before it.

    Example:
        >>> carry_count(23, 45), carry_count(57, 8), carry_count(999, 1), carry_count(158, 261)
        (0, 1, 3, 1)
    """
    carries, incoming = 0, 0
    while a or b:
        incoming = int(a % 10 + b % 10 + incoming >= 10)
        carries += incoming
        a, b = a // 10, b // 10
    return carries


ARITHMETIC_LEVELS: dict[int, ArithmeticLevel] = {
    1: ArithmeticLevel(1, (0, 9), (0, 9), carry=False, description="one-digit + one-digit, no carry (sum <= 9)"),
    2: ArithmeticLevel(2, (1, 9), (1, 9), carry=True, description="one-digit + one-digit with a carry (sum >= 10)"),
    3: ArithmeticLevel(3, (10, 19), (1, 9), description="10-19 + one-digit"),
    4: ArithmeticLevel(4, (20, 99), (1, 9), description="20-99 + one-digit"),
    5: ArithmeticLevel(5, (100, 999), (10, 99), description="three-digit + two-digit"),
    6: ArithmeticLevel(
        6, (100, 999), (100, 999), min_carries=2, description="three-digit + three-digit, at least two carries"
    ),
    7: ArithmeticLevel(7, (1000, 9999), (1000, 9999), sampled=True, description="four-digit + four-digit"),
}
"""The frozen level definitions, calibrated on the embedded SmolLM2-135M-Instruct with
`experiments/calibrate_arithmetic.py` (32 questions x 4 samples per level, 64 new tokens, the paper's system prompt,
answer = boxed number, else the last integer of the completion). Base accuracy per level 1-5 was
0.38 / 0.33 / 0.22 / 0.04 / 0.00 at temperature 0.6 and 0.17 / 0.11 / 0.09 / 0.02 / 0.00 at temperature 1.0. The
base model almost never writes `\\boxed{}` (at most 2% of completions), so a boxed-only reward scores 0 everywhere.
Levels 6 and 7 were added later as candidate hard levels of the second CoDaPO-vs-GRPO campaign; their pass rates under
that campaign's warm start are in `experiments/codapo_vs_grpo_r2/PREREGISTRATION.md`. Level 7 is sampled (see
[`ArithmeticLevel`]). The default level sets stay 1-5."""

ARITHMETIC_TEST_FRACTION = 0.25
"""Share of each level's questions reserved for the held-out `test` split (chosen by a hash of the question)."""

ARITHMETIC_TEMPLATE = "What is {a} + {b}?"


def arithmetic_question(a: int, b: int) -> str:
    """The question text for `a + b`."""
    return ARITHMETIC_TEMPLATE.format(a=a, b=b)


def question_hash(question: str) -> int:
    """A stable 64-bit hash of a question's text (SHA-256), the same on every run and machine."""
    return int.from_bytes(hashlib.sha256(question.encode("utf-8")).digest()[:8], "big")


def sampled_split(a: int, b: int) -> str:
    """The split of the question `a + b` of a sampled level: `"test"` when the hash of its text falls in the lowest
    `ARITHMETIC_TEST_FRACTION` of the 64-bit range, else `"train"`.

    Example:
        >>> sampled_split(1234, 5678), sampled_split(4321, 8765)
        ('test', 'train')
    """
    return "test" if question_hash(arithmetic_question(a, b)) < ARITHMETIC_TEST_FRACTION * 2**64 else "train"


@functools.cache
def _arithmetic_pools(level: int) -> dict[str, tuple[tuple[int, int], ...]]:
    """The `train` and `test` question pools of a listed (not sampled) level.

    The `ceil(ARITHMETIC_TEST_FRACTION * pool size)` questions with the smallest SHA-256 of their text form the test
    pool: a fixed function of the level definition, independent of seed and sizes, and never empty.
    """
    spec = ARITHMETIC_LEVELS[level]
    if spec.sampled:
        raise ValueError(f"Arithmetic level {level} is sampled: it has no listed pool (see `sampled_split`).")
    pairs = [
        (a, b)
        for a in range(spec.a_range[0], spec.a_range[1] + 1)
        for b in range(spec.b_range[0], spec.b_range[1] + 1)
        if spec.accepts(a, b)
    ]
    pairs.sort(key=lambda pair: question_hash(arithmetic_question(*pair)))
    num_test = math.ceil(ARITHMETIC_TEST_FRACTION * len(pairs))
    return {"test": tuple(sorted(pairs[:num_test])), "train": tuple(sorted(pairs[num_test:]))}


def arithmetic_pool_sizes(split: str = "train") -> dict[int, int]:
    """Number of distinct questions per listed level in `split` (`"train"` or `"test"`). Sampled levels are left
    out: their split sizes are not counted (about `ARITHMETIC_TEST_FRACTION` of `ArithmeticLevel.pool_size()` is
    `test`), and no request comes near them."""
    return {
        level: len(_arithmetic_pools(level)[split]) for level, spec in ARITHMETIC_LEVELS.items() if not spec.sampled
    }


def _sample_pairs(spec: ArithmeticLevel, split: str, count: int, rng: random.Random) -> list[tuple[int, int]]:
    """`count` distinct pairs of a sampled level in `split`, drawn uniformly from its ranges by rejection (at most
    1 % of the level's pairs, so that the rejection stays cheap and always ends)."""
    if count > spec.pool_size() // 100:
        raise ValueError(
            f"Arithmetic level {spec.level} is sampled and draws at most {spec.pool_size() // 100} distinct questions "
            f"per request (1 % of its pairs); asked for {count}. Ask for fewer."
        )
    picked: dict[tuple[int, int], None] = {}
    while len(picked) < count:
        pair = (rng.randint(*spec.a_range), rng.randint(*spec.b_range))
        if pair not in picked and sampled_split(*pair) == split:
            picked[pair] = None
    return list(picked)


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
    questions than a pool holds is an error unless `allow_repeats=True`. A sampled level (7) draws its questions
    from its operand ranges and never repeats one within a request.

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
        # One independent stream per (seed, split, level): asking for more levels does not change the others.
        rng = random.Random(f"arithmetic-{seed}-{split}-{lvl}")
        if ARITHMETIC_LEVELS[lvl].sampled:
            picked = _sample_pairs(ARITHMETIC_LEVELS[lvl], split, count, rng)
        else:
            pool = list(_arithmetic_pools(lvl)[split])
            if count > len(pool) and not allow_repeats:
                raise ValueError(
                    f"Arithmetic level {lvl} ({ARITHMETIC_LEVELS[lvl].description}) has only {len(pool)} distinct "
                    f"{split} questions; asked for {count}. Ask for fewer or pass allow_repeats=True."
                )
            picked = []
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


def registry_builder(
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
            num_per_level = {lvl: min(40, sizes.get(lvl, 40)) for lvl in levels}
    return make_arithmetic_dataset(
        num_per_level, levels=levels, seed=seed, split=split, allow_repeats=bool(allow_repeats)
    )
