"""The benchmark registry of the evaluation command, and loading a benchmark into a list of gradable items.

Each [`BenchmarkSpec`] names where a benchmark lives and how it is graded:

- maths and science benchmarks (`kind="math"`) point at an entry of the dataset registry of
  [`codapo_trl.data`] (hub id, configuration, split, question and answer fields, answer normaliser, answer type:
  `"choice"` letters for MMLU and GPQA) and are graded by [`codapo_trl.rewards.grade_answers`];
- code benchmarks (`kind="code"`) have a loader that produces normalised test cases (see
  [`codapo_trl.rewards.code.parse_tests`]) and are graded by running the completion's code in
  [`codapo_trl.sandbox`].

A benchmark argument is one of:

- a registered name or alias (`"math500"`, `"aime24"`, `"humaneval"`, `"arithmetic"`, ...; see [`list_benchmarks`]);
- `NAME=PATH`: a registered benchmark read from a local `.jsonl`/`.json`/`.parquet` file in the hub's format (its
  field mapping and normaliser apply), e.g. `gpqa=./gpqa_diamond.parquet`;
- a local file: maths fields are detected (`problem`/`question`/`prompt`; `answer`, else the last `\\boxed{}` of
  `solution`; `level`/`difficulty`; an optional `answer_type` column), and code files are recognised by their
  columns (`tests`: normalised; `test` + `entry_point`: HumanEval; `input_output`: TACO; `public_test_cases`:
  LiveCodeBench). The benchmark is named after the file's stem;
- any other hub dataset id (`owner/name`, maths fields detected, split `test`).
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codapo_trl.answers import row_question_id
from codapo_trl.data import DATASET_REGISTRY, LOCAL_SUFFIXES, SYSTEM_PROMPT, load_math_dataset
from codapo_trl.data.code import CODE_SYSTEM_PROMPT, HUMANEVAL_HUB_ID, TACO_HUB_ID, build_code_prompt


logger = logging.getLogger(__name__)

__all__ = [
    "BENCHMARKS",
    "BENCHMARK_GROUPS",
    "Benchmark",
    "BenchmarkItem",
    "BenchmarkSpec",
    "describe_benchmarks",
    "expand_benchmarks",
    "get_benchmark_spec",
    "list_benchmarks",
    "load_benchmark",
    "register_benchmark",
]

KINDS = ("math", "code")
_HUB_ID_RE = re.compile(r"[\w.-]+/[\w.-]+")


@dataclass(frozen=True)
class BenchmarkSpec:
    """One benchmark of the registry.

    Args:
        name (`str`): registry name, e.g. `"math500"`.
        display_name (`str`): column header in result tables, e.g. `"MATH500"`.
        kind (`str`): `"math"` (graded by `grade_answers`) or `"code"` (graded in the sandbox).
        dataset (`str`, *optional*): for maths: the [`codapo_trl.data.DATASET_REGISTRY`] entry with the hub id,
            fields and answer normaliser.
        split (`str`, *optional*, defaults to `"test"`): for maths: the split of that entry to evaluate on.
        code_loader (`Callable`, *optional*): for code: `loader(path=None, limit=None, **kwargs) -> Dataset` with
            columns `prompt`, `tests`, `question`, `difficulty` (and optionally an id column).
        hub_id (`str`, *optional*): for code: the hub dataset the loader reads (for listings and summaries).
        hub_split (`str`, *optional*): for code: the hub split read.
        fields (`str`, *optional*): for code: the hub fields the loader maps (for listings).
        code_prelude (`str`, *optional*): for code: source prepended to every extracted program before it runs (the
            standard-library imports LiveCodeBench's own harness provides).
        aliases (`tuple[str, ...]`, *optional*): other accepted names.
        description (`str`, *optional*): one line for listings.
    """

    name: str
    display_name: str
    kind: str = "math"
    dataset: str | None = None
    split: str = "test"
    code_loader: Callable[..., Any] | None = None
    hub_id: str | None = None
    hub_split: str | None = None
    fields: str = ""
    code_prelude: str = ""
    aliases: tuple[str, ...] = ()
    description: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
        if self.kind == "math" and self.dataset is None:
            raise ValueError(f"Maths benchmark {self.name!r} needs a dataset registry entry.")
        if self.kind == "code" and self.code_loader is None:
            raise ValueError(f"Code benchmark {self.name!r} needs a code_loader.")


@dataclass(frozen=True)
class BenchmarkItem:
    """One question of a benchmark, ready to generate for and grade.

    Args:
        index (`int`): position in the benchmark (after `limit`).
        item_id (`str`): the source's id (`task_id`, `unique_id`, ...) or the index.
        prompt (`list[dict[str, str]]`): the conversation given to the model.
        question (`str`): the question text.
        gold (`str`): the gold answer (maths) or the normalised tests as JSON (code).
        answer_type (`str`): `"math"`, `"number"`, `"choice"` or `"code"`.
        level (`int`, `str` or `None`): difficulty level (MATH levels 1-5, TACO/LiveCodeBench difficulty labels).
    """

    index: int
    item_id: str
    prompt: list[dict[str, str]]
    question: str
    gold: str
    answer_type: str
    level: int | str | None = None


@dataclass
class Benchmark:
    """A loaded benchmark: its name, how it is graded, where it came from and its items."""

    name: str
    display_name: str
    kind: str
    source: str
    items: list[BenchmarkItem] = field(default_factory=list)
    code_prelude: str = ""

    def __len__(self) -> int:
        return len(self.items)

    @property
    def has_levels(self) -> bool:
        """Whether any item has a difficulty level."""
        return any(item.level is not None for item in self.items)


# ---------------------------------------------------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------------------------------------------------

BENCHMARKS: dict[str, BenchmarkSpec] = {}
"""Benchmark specs by name, in the order of the paper's tables; add one with [`register_benchmark`]."""

_ALIASES: dict[str, str] = {}

BENCHMARK_GROUPS: dict[str, tuple[str, ...]] = {
    "paper-math": ("math500", "aime24", "aime25", "amc23", "olympiadbench", "minerva", "gsm8k"),
    "paper-cross": ("mmlu", "gpqa", "humaneval"),
    "paper-code": ("taco", "humaneval", "livecodebench"),
    "paper": (
        *("math500", "aime24", "aime25", "amc23", "olympiadbench", "minerva", "gsm8k"),
        *("mmlu", "gpqa", "humaneval", "taco", "livecodebench"),
    ),
}
"""Names that expand to several benchmarks: the paper's main table (`paper-math`), its cross-domain table
(`paper-cross`), its coding table (`paper-code`) and all twelve (`paper`)."""


def expand_benchmarks(names: Sequence[str]) -> list[str]:
    """Replace group names (see [`BENCHMARK_GROUPS`]) by their benchmarks, keeping order and dropping repeats."""
    expanded: list[str] = []
    for name in names:
        for item in BENCHMARK_GROUPS.get(str(name).lower(), (name,)):
            if item not in expanded:
                expanded.append(item)
    return expanded


def register_benchmark(spec: BenchmarkSpec, *, overwrite: bool = False) -> BenchmarkSpec:
    """Add a [`BenchmarkSpec`] (and its aliases) to [`BENCHMARKS`] and return it."""
    names = (spec.name, *spec.aliases)
    taken = [n for n in names if (n in BENCHMARKS or n in _ALIASES) and not overwrite]
    if taken:
        raise ValueError(f"Benchmark name(s) {taken} already registered; pass overwrite=True to replace.")
    BENCHMARKS[spec.name] = spec
    for alias in spec.aliases:
        _ALIASES[alias] = spec.name
    return spec


def list_benchmarks() -> list[str]:
    """Names of the registered benchmarks, in table order."""
    return list(BENCHMARKS)


def get_benchmark_spec(name: str) -> BenchmarkSpec:
    """The spec registered under `name` or one of its aliases (case-insensitive)."""
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    try:
        return BENCHMARKS[key]
    except KeyError:
        raise ValueError(
            f"Unknown benchmark {name!r}. Registered benchmarks: {', '.join(list_benchmarks())}."
        ) from None


def _is_registered(name: str) -> bool:
    key = name.strip().lower()
    return key in BENCHMARKS or key in _ALIASES


def describe_benchmarks() -> list[dict[str, str]]:
    """One row per registered benchmark: name, display name, kind, hub id, split, fields, answer type."""
    rows = []
    for spec in BENCHMARKS.values():
        if spec.kind == "math":
            data_spec = DATASET_REGISTRY[spec.dataset]  # type: ignore[index]
            hub = data_spec.hub_id or "generated offline"
            if data_spec.config:
                hub += f" ({data_spec.config})"
            split = data_spec.splits.get(spec.split, spec.split)
            question = getattr(data_spec.question_builder, "__name__", None) or data_spec.question_field
            if data_spec.answer_builder is not None:
                answer = data_spec.answer_builder.__name__
            else:
                answer = f"{data_spec.answer_field} ({data_spec.answer_parser.__name__})"
            fields = f"{question} -> {answer}"
            answer_type = data_spec.answer_type
        else:
            hub, split, fields, answer_type = spec.hub_id or "-", spec.hub_split or "-", spec.fields, "code"
        rows.append(
            {
                "name": spec.name,
                "display_name": spec.display_name,
                "kind": spec.kind,
                "hub_id": hub,
                "split": split,
                "fields": fields,
                "answer_type": answer_type,
                "aliases": ", ".join(spec.aliases),
                "description": spec.description,
            }
        )
    return rows


def _humaneval_loader(path: str | None = None, limit: int | None = None, **kwargs: Any):
    from codapo_trl.data.code import load_humaneval

    return load_humaneval(path=path, limit=limit, **kwargs)


def _taco_loader(path: str | None = None, limit: int | None = None, **kwargs: Any):
    from codapo_trl.data.code import load_taco

    return load_taco(split="test", path=path, limit=limit, **kwargs)


def _livecodebench_loader(path: str | None = None, limit: int | None = None, **kwargs: Any):
    from codapo_trl.evaluation.code import load_livecodebench

    return load_livecodebench(path=path, limit=limit, **kwargs)


def _register_builtin() -> None:
    from codapo_trl.evaluation.code import LCB_DEFAULT_VERSION, LCB_HUB_ID, LCB_PRELUDE

    math_benchmarks = [
        ("math500", "MATH500", "math500", ("math-500",), "MATH-500, levels 1-5"),
        ("aime24", "AIME 2024", "aime24", ("aime2024", "aime_2024"), "AIME 2024 I and II"),
        ("aime25", "AIME 2025", "aime25", ("aime2025", "aime_2025"), "AIME 2025 I and II"),
        ("amc23", "AMC 2023", "amc23", ("amc2023", "amc"), "AMC 2023"),
        ("olympiadbench", "OlympiadBench", "olympiadbench", ("olympiad",), "OlympiadBench, English text-only maths"),
        ("minerva", "Minerva", "minerva", ("minerva_math", "minervamath"), "Minerva Math"),
        ("gsm8k", "GSM8K", "gsm8k", (), "GSM8K test set"),
        ("mmlu", "MMLU", "mmlu", (), "MMLU, 57 subjects, letters A-D"),
        ("gpqa", "GPQA", "gpqa_diamond", ("gpqa_diamond",), "GPQA Diamond, letters A-D"),
    ]
    for name, display, dataset, aliases, description in math_benchmarks:
        register_benchmark(
            BenchmarkSpec(name=name, display_name=display, dataset=dataset, aliases=aliases, description=description)
        )
    register_benchmark(
        BenchmarkSpec(
            name="humaneval",
            display_name="HumanEval",
            kind="code",
            code_loader=_humaneval_loader,
            hub_id=HUMANEVAL_HUB_ID,
            hub_split="test",
            fields="prompt (function header) + test + entry_point -> check(entry_point) must pass",
            description="HumanEval, 164 Python functions; a sample is correct when check() passes",
        )
    )
    register_benchmark(
        BenchmarkSpec(
            name="taco",
            display_name="TACO",
            kind="code",
            code_loader=_taco_loader,
            hub_id=TACO_HUB_ID,
            hub_split="test",
            fields="question (+ starter_code) -> input_output (stdin/stdout or fn_name calls); difficulty",
            description="TACO test split; a sample is correct when every test case passes",
        )
    )
    register_benchmark(
        BenchmarkSpec(
            name="livecodebench",
            display_name="LiveCodeBench",
            kind="code",
            code_loader=_livecodebench_loader,
            hub_id=LCB_HUB_ID,
            hub_split=f"test ({LCB_DEFAULT_VERSION} jsonl files)",
            fields="question_content (+ starter_code) -> public + private test cases (stdin or functional); difficulty",
            code_prelude=LCB_PRELUDE,
            aliases=("lcb",),
            description="LiveCodeBench code generation; a sample is correct when every test case passes",
        )
    )
    register_benchmark(
        BenchmarkSpec(
            name="arithmetic",
            display_name="Arithmetic",
            dataset="arithmetic",
            description="synthetic leveled addition, held-out test split (offline; the CPU demo's benchmark)",
        )
    )


# ---------------------------------------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------------------------------------


def _with_system_prompt(messages: Sequence[Mapping[str, str]], system_prompt: str | None) -> list[dict[str, str]]:
    turns = [dict(m) for m in messages if m.get("role") != "system"]
    return ([{"role": "system", "content": system_prompt}] if system_prompt else []) + turns


def _item_id(row: Mapping[str, Any], index: int) -> str:
    """The row's id column (`codapo_trl.answers.QUESTION_ID_COLUMNS`, the order training and analysis use), else
    its index."""
    question_id = row_question_id(row)
    return str(index) if question_id is None else question_id


def _check_local_file(path: Path) -> None:
    if path.suffix.lower() not in LOCAL_SUFFIXES:
        raise ValueError(f"Unsupported benchmark file type {path.suffix!r} ({path}); use {sorted(LOCAL_SUFFIXES)}.")
    if not path.is_file():
        raise FileNotFoundError(f"No such benchmark file: {path}")
    if path.stat().st_size == 0 or (path.suffix.lower() == ".jsonl" and not path.read_text(encoding="utf-8").strip()):
        raise ValueError(f"The benchmark file {path} is empty.")


def _local_columns(path: Path) -> list[str]:
    """Column names of a local file, read cheaply (first object of a jsonl, the schema of a parquet file)."""
    suffix = path.suffix.lower()
    try:
        if suffix == ".jsonl":
            with path.open(encoding="utf-8") as f:
                first = next(line for line in f if line.strip())
            return list(json.loads(first))
        if suffix == ".parquet":
            import pyarrow.parquet as pq

            return list(pq.read_schema(path).names)
        rows = json.loads(path.read_text(encoding="utf-8"))
        rows = rows.get("data", rows) if isinstance(rows, dict) else rows
        return list(rows[0]) if isinstance(rows, list) and rows and isinstance(rows[0], dict) else []
    except (json.JSONDecodeError, StopIteration, OSError, ValueError) as err:
        raise ValueError(f"Could not read {path}: {err}") from err


def _detect_code_loader(columns: Sequence[str]) -> tuple[Callable[..., Any] | None, str]:
    cols = set(columns)
    if "tests" in cols and "question" in cols:
        return _normalised_code_loader, ""
    if {"prompt", "test", "entry_point"} <= cols:
        return _humaneval_loader, ""
    if {"question", "input_output"} <= cols:
        return _taco_loader, ""
    if {"question_content", "public_test_cases"} <= cols:
        from codapo_trl.evaluation.code import LCB_PRELUDE

        return _livecodebench_loader, LCB_PRELUDE
    return None, ""


def _normalised_code_loader(path: str | None = None, limit: int | None = None, **kwargs: Any):
    """A local file of code problems already in the normalised form: `question`, `tests`, optional `difficulty`,
    `starter_code` and an id column."""
    import datasets

    from codapo_trl.rewards.code import parse_tests

    raw = datasets.load_dataset(LOCAL_SUFFIXES[Path(path).suffix.lower()], data_files=str(path), split="train")
    if limit is not None:
        raw = raw.select(range(min(limit, len(raw))))
    rows: dict[str, list] = {"prompt": [], "tests": [], "question": [], "difficulty": [], "id": []}
    for index, row in enumerate(raw):
        tests = parse_tests(row["tests"])
        rows["prompt"].append(build_code_prompt(row["question"], tests, row.get("starter_code") or ""))
        rows["tests"].append(tests.to_json())
        rows["question"].append(row["question"])
        rows["difficulty"].append(row.get("difficulty"))
        rows["id"].append(_item_id(row, index))
    return datasets.Dataset.from_dict(rows)


def _code_items(dataset: Any, system_prompt: str | None) -> list[BenchmarkItem]:
    items = []
    for index, row in enumerate(dataset):
        items.append(
            BenchmarkItem(
                index=index,
                item_id=_item_id(row, index),
                prompt=_with_system_prompt(row["prompt"], system_prompt),
                question=str(row["question"]),
                gold=row["tests"],
                answer_type="code",
                level=row.get("difficulty"),
            )
        )
    return items


def _math_items(dataset: Any) -> list[BenchmarkItem]:
    return [
        BenchmarkItem(
            index=index,
            item_id=_item_id(row, index),
            prompt=row["prompt"],
            question=row["question"],
            gold=row["answer"],
            answer_type=row["answer_type"],
            level=row["level"],
        )
        for index, row in enumerate(dataset)
    ]


def load_benchmark(
    benchmark: str | os.PathLike,
    *,
    system_prompt: str | None = SYSTEM_PROMPT,
    code_system_prompt: str | None = CODE_SYSTEM_PROMPT,
    limit: int | None = None,
    split: str | None = None,
    **kwargs: Any,
) -> Benchmark:
    """Load one benchmark (registered name, `NAME=PATH`, local file or hub id) into a [`Benchmark`].

    Args:
        benchmark (`str` or `os.PathLike`): see the module docstring for the accepted forms.
        system_prompt (`str` or `None`, *optional*, defaults to the paper's prompt): system turn of maths and science
            prompts; `None` or `""` for none.
        code_system_prompt (`str` or `None`, *optional*, defaults to `CODE_SYSTEM_PROMPT`): system turn of code
            prompts; `None` or `""` for none.
        limit (`int`, *optional*): keep only the first `limit` questions.
        split (`str`, *optional*): override the registered split of a maths benchmark (e.g. `"train"`).
        kwargs: passed to the loader: for `arithmetic`, `num_per_level`, `levels` and `seed`; for `livecodebench`,
            `version`, `start_date` and `end_date`; for hub datasets, `datasets.load_dataset` arguments.

    Returns:
        [`Benchmark`]: named after the registry entry (or the file's stem), with its items.

    Raises:
        `ValueError`: unknown name, unsupported or empty file, missing question/answer/test fields, no rows left.
        `FileNotFoundError`: a local path that does not exist.
    """
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit}")
    text = os.fspath(benchmark)
    name, _, path_text = (
        text.partition("=") if "=" in text and _is_registered(text.split("=", 1)[0]) else ("", "", text)
    )
    spec: BenchmarkSpec | None = None
    path: Path | None = None
    if name:
        spec, path = get_benchmark_spec(name), Path(path_text).expanduser()
    elif _is_registered(text) and not Path(text).expanduser().is_file():
        spec = get_benchmark_spec(text)
    elif Path(text).suffix.lower() in LOCAL_SUFFIXES or Path(text).expanduser().exists():
        path = Path(text).expanduser()
    elif not (_HUB_ID_RE.fullmatch(text) and not Path(text).exists()):
        raise ValueError(
            f"Unknown benchmark {text!r}: not a registered benchmark, NAME=PATH, a local .jsonl/.json/.parquet file "
            f"or a hub dataset id (owner/name). Registered benchmarks: {', '.join(list_benchmarks())}."
        )
    if path is not None:
        _check_local_file(path)

    try:
        if spec is not None and spec.kind == "code":
            dataset = spec.code_loader(path=str(path) if path else None, limit=limit, **kwargs)  # type: ignore[misc]
            source = str(path) if path else f"{spec.hub_id} ({spec.hub_split})"
            return Benchmark(
                spec.name,
                spec.display_name,
                "code",
                source,
                _code_items(dataset, code_system_prompt),
                spec.code_prelude,
            )
        if spec is not None:
            data_name = spec.dataset or spec.name
            if path is None:
                dataset = load_math_dataset(
                    data_name, split or spec.split, system_prompt=system_prompt, limit=limit, **kwargs
                )
                data_spec = DATASET_REGISTRY[data_name]
                source = f"{data_spec.hub_id or 'generated'} ({data_spec.splits.get(split or spec.split)})"
            else:
                dataset = load_math_dataset(path, spec=data_name, system_prompt=system_prompt, limit=limit, **kwargs)
                source = str(path)
            return Benchmark(spec.name, spec.display_name, "math", source, _math_items(dataset))
        if path is not None:
            loader, prelude = _detect_code_loader(_local_columns(path))
            if loader is not None:
                dataset = loader(path=str(path), limit=limit, **kwargs)
                return Benchmark(
                    path.stem, path.stem, "code", str(path), _code_items(dataset, code_system_prompt), prelude
                )
            dataset = load_math_dataset(path, system_prompt=system_prompt, limit=limit, **kwargs)
            return Benchmark(path.stem, path.stem, "math", str(path), _math_items(dataset))
        dataset = load_math_dataset(text, split or "test", system_prompt=system_prompt, limit=limit, **kwargs)
        return Benchmark(text, text, "math", f"{text} ({split or 'test'})", _math_items(dataset))
    except KeyError as err:  # the code loaders report missing fields as KeyError
        raise ValueError(f"Benchmark {text!r}: {err.args[0] if err.args else err}") from err


_register_builtin()
