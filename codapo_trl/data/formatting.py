"""Formatting raw rows onto the common columns (`prompt`, `question`, `answer`, `level`, `answer_type`):
the paper's system prompt, conversational prompts, level parsing and `format_math_dataset`.

`format_math_dataset` resolves, in this order, where the question, the answer, the level and the answer type come
from (`_FieldMap`: an explicit column, else the spec's field or builder, else a detected column), then maps every
row with it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import datasets
from datasets import Dataset

from codapo_trl.answers import ANSWER_PARSERS, ANSWER_TYPES, auto_answer, gsm8k_final_answer, solution_last_boxed
from codapo_trl.data.registry import DatasetSpec, get_spec


logger = logging.getLogger(__name__)

__all__ = [
    "CORE_COLUMNS",
    "LEVEL_CANDIDATES",
    "QUESTION_CANDIDATES",
    "SYSTEM_PROMPT",
    "format_math_dataset",
    "make_conversation",
    "parse_level",
    "question_text",
]

SYSTEM_PROMPT = "Please reason step by step, and put your final answer within \\boxed{}."
"""The paper's prompt, used as the system message."""

QUESTION_CANDIDATES = ("problem", "question", "prompt")
LEVEL_CANDIDATES = ("level", "difficulty")
CORE_COLUMNS = ("prompt", "question", "answer", "level", "answer_type")


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


def question_text(value: Any) -> str:
    """The question as text; a conversational `prompt` value gives the content of its last user turn."""
    if isinstance(value, list):
        user_turns = [m.get("content") for m in value if isinstance(m, Mapping) and m.get("role") == "user"]
        if user_turns:
            return str(user_turns[-1])
        raise ValueError(f"The question column holds a list without a user message: {value!r:.200}")
    return "" if value is None else str(value)


# ---------------------------------------------------------------------------------------------------------------------
# Field resolution
# ---------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _FieldMap:
    """Where each common column of a formatted row comes from (resolved once per dataset)."""

    question_column: str | None
    question_builder: Callable[[dict], str] | None
    answer_column: str | None
    answer_parser: Callable[[Any], str | None] | None
    answer_builder: Callable[[dict], str | None] | None
    raw_answer_column: str | None
    level_column: str | None
    answer_type: str | None
    type_column: str | None

    def convert(self, row: dict, system_prompt: str | None) -> dict:
        """One raw row as the common columns (plus the kept raw answer, if any)."""
        builder, parser = self.question_builder, self.answer_parser
        question = builder(row) if builder else question_text(row[self.question_column])
        answer = self.answer_builder(row) if self.answer_builder else parser(row[self.answer_column])
        row_type = self.answer_type if self.type_column is None else (row.get(self.type_column) or "math")
        out = {
            "prompt": make_conversation(question, system_prompt),
            "question": question,
            "answer": answer,
            "level": parse_level(row[self.level_column]) if self.level_column else None,
            "answer_type": row_type,
        }
        if self.raw_answer_column is not None:
            out[self.raw_answer_column] = row[self.answer_column]
        return out


def _require_column(column: str, columns: Sequence[str], argument: str, source: str) -> None:
    if column not in columns:
        raise ValueError(f"Column {column!r} not found in {source}; found columns {list(columns)}. Set {argument}=.")


def _question_field(
    columns: list[str], spec: DatasetSpec | None, question_column: str | None, source: str
) -> tuple[str | None, Callable[[dict], str] | None]:
    """`(question column, question builder)`: the explicit column, else the spec's builder or field, else the first
    of `QUESTION_CANDIDATES` present."""
    if question_column is not None:
        _require_column(question_column, columns, "question_column", source)
        return question_column, None
    if spec is not None and spec.question_builder is not None:
        return None, spec.question_builder
    if spec is not None:
        _require_column(spec.question_field, columns, "question_column", source)
        return spec.question_field, None
    detected = next((c for c in QUESTION_CANDIDATES if c in columns), None)
    if detected is None:
        raise ValueError(
            f"Could not find a question column in {source}: looked for {list(QUESTION_CANDIDATES)}, found "
            f"columns {columns}. Set question_column= to the column holding the question."
        )
    return detected, None


def _named_parser(
    answer_parser: str | Callable[[Any], str | None] | None,
) -> Callable[[Any], str | None] | None:
    if not isinstance(answer_parser, str):
        return answer_parser
    try:
        return ANSWER_PARSERS[answer_parser]
    except KeyError:
        raise ValueError(f"Unknown answer_parser {answer_parser!r}; valid: {sorted(ANSWER_PARSERS)}.") from None


def _answer_field(
    columns: list[str],
    spec: DatasetSpec | None,
    answer_column: str | None,
    answer_parser: Callable[[Any], str | None] | None,
    source: str,
) -> tuple[str | None, Callable[[Any], str | None] | None, Callable[[dict], str | None] | None, str | None]:
    """`(answer column, parser, builder, column keeping the raw answer)`: the explicit column (parsed `"auto"` unless
    told otherwise), else the spec's builder or field, else `answer` (`"auto"`), else the last box of `solution`."""
    if answer_column is not None:
        _require_column(answer_column, columns, "answer_column", source)
        return answer_column, answer_parser or auto_answer, None, None
    if spec is not None and spec.answer_builder is not None and answer_parser is None:
        return None, None, spec.answer_builder, None
    if spec is not None:
        _require_column(spec.answer_field, columns, "answer_column", source)
        return spec.answer_field, answer_parser or spec.answer_parser, None, spec.raw_answer_column
    if "answer" in columns:
        return "answer", answer_parser or auto_answer, None, None
    if "solution" in columns:
        return "solution", answer_parser or solution_last_boxed, None, None
    raise ValueError(
        f"Could not find an answer column in {source}: looked for 'answer' and 'solution' (last \\boxed{{}}), "
        f"found columns {columns}. Set answer_column= (and answer_parser= if the final answer must be extracted)."
    )


def _raw_answer_column(
    dataset: Dataset,
    columns: list[str],
    answer_column: str | None,
    answer_parser: Callable[[Any], str | None] | None,
    raw_answer_column: str | None,
) -> str | None:
    """The column that keeps the unparsed answer: the spec's, or `solution` for a GSM8K-style worked solution in
    `answer` (replaced there by the bare number); `None` when the data already has that column."""
    if raw_answer_column is None and answer_column == "answer" and "solution" not in columns:
        sample = dataset[answer_column][:20]
        if answer_parser is gsm8k_final_answer or (
            answer_parser is auto_answer and any(isinstance(v, str) and "####" in v for v in sample)
        ):
            raw_answer_column = "solution"
    if raw_answer_column in columns and raw_answer_column != answer_column:
        return None  # the data already has that column; keep it as it is
    return raw_answer_column


def _level_field(columns: list[str], spec: DatasetSpec | None, level_column: str | None, source: str) -> str | None:
    if level_column is not None:
        _require_column(level_column, columns, "level_column", source)
        return level_column
    if spec is not None:
        return spec.level_field if spec.level_field in columns else None
    return next((c for c in LEVEL_CANDIDATES if c in columns), None)


def _answer_type_field(
    columns: list[str], spec: DatasetSpec | None, answer_type: str | None
) -> tuple[str | None, str | None]:
    """`(answer type for every row, per-row type column)`: the forced type, else the spec's, else an `answer_type`
    column, else `"math"`."""
    if answer_type is not None:
        return answer_type, None
    if spec is not None:
        return spec.answer_type, None
    if "answer_type" in columns:
        return None, "answer_type"
    return "math", None


def _resolve_fields(
    dataset: Dataset,
    spec: DatasetSpec | None,
    question_column: str | None,
    answer_column: str | None,
    level_column: str | None,
    answer_parser: str | Callable[[Any], str | None] | None,
    answer_type: str | None,
    source: str,
) -> _FieldMap:
    columns = list(dataset.column_names)
    question_column, question_builder = _question_field(columns, spec, question_column, source)
    answer_column, parser, answer_builder, raw_column = _answer_field(
        columns, spec, answer_column, _named_parser(answer_parser), source
    )
    raw_column = _raw_answer_column(dataset, columns, answer_column, parser, raw_column)
    level_column = _level_field(columns, spec, level_column, source)
    answer_type, type_column = _answer_type_field(columns, spec, answer_type)
    return _FieldMap(
        question_column, question_builder, answer_column, parser, answer_builder, raw_column, level_column,
        answer_type, type_column,
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------------------------------
# Formatting
# ---------------------------------------------------------------------------------------------------------------------


def _features(dataset: Dataset, fields: _FieldMap) -> datasets.Features:
    """The formatted dataset's features: the kept source columns, then the common columns."""
    raw_column = fields.raw_answer_column
    kept = [c for c in dataset.column_names if c not in CORE_COLUMNS and c != raw_column]
    features = datasets.Features(
        {
            **{c: dataset.features[c] for c in kept},
            "prompt": [{"role": datasets.Value("string"), "content": datasets.Value("string")}],
            "question": datasets.Value("string"),
            "answer": datasets.Value("string"),
            "level": datasets.Value("int64"),
            "answer_type": datasets.Value("string"),
            **({raw_column: datasets.Value("string")} if raw_column else {}),
        }
    )
    if raw_column is not None and dataset.features[fields.answer_column] != datasets.Value("string"):
        features[raw_column] = dataset.features[fields.answer_column]
    return features


def _checked(formatted: Dataset, levels: Iterable[int] | None, source: str) -> Dataset:
    """Valid answer types; rows without an answer dropped (with a warning); the wanted levels; not empty."""
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
            Keep only the first `limit` rows, counted after the level filter (and after dropping rows without an
            answer): `levels=[4, 5, 7], limit=64` gives 64 rows of those levels, in the source's order (not a
            stratified draw). Without `levels` the rows are cut before formatting, so it stays cheap on big data.
        source (`str`, *optional*):
            Name of the data in error messages.

    Returns:
        `Dataset`: the formatted rows. Rows whose answer cannot be extracted are dropped with a warning.
    """
    if isinstance(spec, str):
        spec = get_spec(spec)
    if answer_type is not None and answer_type not in ANSWER_TYPES:
        raise ValueError(f"answer_type must be one of {ANSWER_TYPES}, got {answer_type!r}")
    if len(dataset) == 0:
        raise ValueError(f"{source} has no rows.")
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}.")
    cut_early = limit is not None and levels is None  # with levels, the cut must follow the level filter
    if cut_early:
        dataset = dataset.select(range(min(limit, len(dataset))))
    fields = _resolve_fields(
        dataset, spec, question_column, answer_column, level_column, answer_parser, answer_type, source
    )
    formatted = dataset.map(
        fields.convert,
        fn_kwargs={"system_prompt": system_prompt},
        remove_columns=[c for c in dataset.column_names if c in CORE_COLUMNS or c == fields.raw_answer_column],
        features=_features(dataset, fields),
        desc=f"Formatting {source}",
    )
    formatted = _checked(formatted, levels, source)
    if limit is not None and not cut_early:
        formatted = formatted.select(range(min(limit, len(formatted))))
    return formatted
