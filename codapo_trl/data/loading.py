"""`load_math_dataset`: a dataset by registry name, local file (`.jsonl`, `.json`, `.parquet`) or hub id, formatted
for CoDaPO / GRPO training and evaluation."""

from __future__ import annotations

import inspect
import logging
import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import datasets
from datasets import Dataset

from codapo_trl.data.formatting import SYSTEM_PROMPT, format_math_dataset
from codapo_trl.data.registry import DATASET_REGISTRY, get_spec, list_datasets


logger = logging.getLogger(__name__)

__all__ = ["LOCAL_SUFFIXES", "load_math_dataset"]

LOCAL_SUFFIXES = {".jsonl": "json", ".json": "json", ".parquet": "parquet"}
"""Local file suffixes and the `datasets` builder that reads them."""

_HUB_ID_RE = re.compile(r"[\w.-]+/[\w.-]+")


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
            Keep only the first `limit` rows, counted after the `levels` filter (see [`format_math_dataset`]).
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
        levels = None if levels is None else list(levels)
        raw = file_spec.load_raw(split, **_builder_levels(file_spec.builder, levels, load_kwargs))
        source = f"{name} ({file_spec.hub_id or 'generated'}, split {split!r})"
    elif path.suffix.lower() in LOCAL_SUFFIXES or path.is_file():
        raw = _load_local(path, **load_kwargs)
        file_spec = get_spec(spec) if spec is not None else None
        source = str(path)
    elif _HUB_ID_RE.fullmatch(name) and not path.exists():
        file_spec = get_spec(spec) if spec is not None else None
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


def _builder_levels(builder: Callable | None, levels: list[int] | None, load_kwargs: dict) -> dict:
    """A generated dataset builds its default levels and the rows are then filtered by level. Asked for a level
    outside those defaults (arithmetic level 6), the builder is asked for its defaults plus the new levels, so that
    the filter has rows to keep; a request within the defaults builds exactly what it always did (same rows, same
    order: runs made before a level was added reproduce)."""
    if builder is None or levels is None or "levels" in load_kwargs:
        return load_kwargs
    parameter = inspect.signature(builder).parameters.get("levels")
    if parameter is None or parameter.default is inspect.Parameter.empty:
        return load_kwargs
    defaults = list(parameter.default)
    extra = sorted(set(levels) - set(defaults))
    return {**load_kwargs, "levels": [*defaults, *extra]} if extra else load_kwargs


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
