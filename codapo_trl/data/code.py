"""Loaders for code problems (TACO, HumanEval) in the shape the code reward expects.

Every loader returns a `datasets.Dataset` with:

- `prompt`: a conversational prompt (`[{"role": "system", ...}, {"role": "user", ...}]`) asking for a Python program
  in a single ```` ```python ```` block;
- `tests`: the problem's test cases as a JSON string in the normalised format read by
  [`codapo_trl.rewards.code.code_execution_reward`] (see [`codapo_trl.rewards.code.parse_tests`]);
- `question`: the problem statement;
- `difficulty`: TACO's difficulty label (`EASY`, `MEDIUM`, `MEDIUM_HARD`, `HARD`, `VERY_HARD`,
  `UNKNOWN_DIFFICULTY`), `None` where the source has none;
- source-specific columns: `starter_code` (TACO), `task_id` and `entry_point` (HumanEval).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Mapping
from typing import Any

from codapo_trl.rewards.code import InvalidTestsError, ProblemTests, parse_tests


logger = logging.getLogger(__name__)

__all__ = [
    "CODE_SYSTEM_PROMPT",
    "HUMANEVAL_HUB_ID",
    "TACO_DIFFICULTIES",
    "TACO_HUB_ID",
    "build_code_prompt",
    "load_code_jsonl",
    "load_humaneval",
    "load_taco",
]

TACO_HUB_ID = "BAAI/TACO"
HUMANEVAL_HUB_ID = "openai/openai_humaneval"
TACO_DIFFICULTIES = ("EASY", "MEDIUM", "MEDIUM_HARD", "HARD", "VERY_HARD", "UNKNOWN_DIFFICULTY")

CODE_SYSTEM_PROMPT = (
    "You are an expert Python programmer. Think about the problem, then write a Python 3 program that solves it. "
    "Put your final solution in a single ```python code block at the end of your answer."
)

_STDIO_NOTE = "Read the input from standard input and print the answer to standard output."
_CALL_NOTE = "Implement the function `{fn_name}`; it will be called directly with the test arguments and its return value checked."


def build_code_prompt(question: str, tests: ProblemTests, starter_code: str = "") -> list[dict[str, str]]:
    """The conversational prompt for one problem: the system prompt, then the statement with I/O instructions."""
    parts = [question.strip()]
    if starter_code and starter_code.strip():
        parts.append(f"Use this starter code:\n```python\n{starter_code.rstrip()}\n```")
    if tests.format == "call":
        parts.append(_CALL_NOTE.format(fn_name=tests.fn_name))
    elif tests.format == "stdio":
        parts.append(_STDIO_NOTE)
    return [{"role": "system", "content": CODE_SYSTEM_PROMPT}, {"role": "user", "content": "\n\n".join(parts)}]


def _require(row: Mapping[str, Any], fields: Iterable[str], source: str) -> None:
    missing = [f for f in fields if f not in row]
    if missing:
        raise KeyError(f"{source}: missing field(s) {missing}; found {sorted(row)}")


def _load_local(path: str, split: str = "train"):
    """A jsonl / json / parquet / arrow file (or a directory saved with `Dataset.save_to_disk`)."""
    import datasets

    if not os.path.exists(path):
        raise FileNotFoundError(f"no such file or directory: {path}")
    if os.path.isdir(path):
        loaded = datasets.load_from_disk(path)
        return loaded[split] if isinstance(loaded, datasets.DatasetDict) else loaded
    ext = path.rsplit(".", 1)[-1].lower()
    builder = {"jsonl": "json", "json": "json", "parquet": "parquet", "arrow": "arrow"}.get(ext)
    if builder is None:
        raise ValueError(f"unsupported file type {path!r}: use .jsonl, .json, .parquet or .arrow")
    return datasets.load_dataset(builder, data_files=path, split="train")


def _normalise_difficulty(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip().upper().replace(" ", "_")
    return text or None


def load_taco(
    split: str = "train",
    path: str | None = None,
    limit: int | None = None,
    difficulties: Iterable[str] | None = None,
    max_tests: int | None = None,
    skip_invalid: bool = True,
    name: str | None = None,
):
    """Load TACO (`BAAI/TACO`) problems with conversational prompts and normalised `tests`.

    Args:
        split (`str`): `"train"` or `"test"`.
        path (`str`, *optional*): a local jsonl / json / parquet / arrow file (or `save_to_disk` directory) with TACO's
            fields instead of the hub.
        limit (`int`, *optional*): keep the first `limit` usable problems.
        difficulties (`Iterable[str]`, *optional*): keep only these difficulty labels (case-insensitive, e.g.
            `["EASY", "MEDIUM"]`).
        max_tests (`int`, *optional*): store at most this many test cases per problem (TACO has problems with
            hundreds of large cases).
        skip_invalid (`bool`): drop problems whose `input_output` is empty or malformed (logged); otherwise raise.
        name (`str`, *optional*): hub configuration (the hub's only configuration is used by default).

    Required fields: `question`, `input_output` (JSON string with `inputs`, `outputs` and an optional `fn_name`);
    optional: `difficulty`, `starter_code`.
    """
    import datasets

    if path is not None:
        raw = _load_local(path, split)
    else:
        try:
            raw = datasets.load_dataset(TACO_HUB_ID, name=name, split=split)
        except Exception as exc:
            raise RuntimeError(
                f"could not load {TACO_HUB_ID!r} (split {split!r}) from the hub: {exc}. Download its parquet files and "
                "pass `path=`."
            ) from exc
    if len(raw) == 0:
        raise ValueError("TACO: the dataset is empty")
    _require(raw[0], ("question", "input_output"), "TACO")
    wanted = {_normalise_difficulty(d) for d in difficulties} if difficulties is not None else None
    if wanted is not None and not set(raw.column_names) & {"difficulty"}:
        raise KeyError("TACO: `difficulties` given but the data has no `difficulty` field")

    rows: dict[str, list] = {"prompt": [], "tests": [], "question": [], "difficulty": [], "starter_code": []}
    invalid = 0
    for index, row in enumerate(raw):
        difficulty = _normalise_difficulty(row.get("difficulty"))
        if wanted is not None and difficulty not in wanted:
            continue
        try:
            tests = parse_tests(row["input_output"])
            if tests.format == "check":
                raise InvalidTestsError("TACO problems have stdin/stdout or call-based tests")
        except InvalidTestsError as exc:
            if not skip_invalid:
                raise InvalidTestsError(f"TACO row {index}: {exc}") from None
            invalid += 1
            logger.debug("TACO row %d skipped: %s", index, exc)
            continue
        if max_tests is not None and len(tests) > max_tests:
            tests = ProblemTests(
                tests.format, tests.inputs[:max_tests], tests.outputs[:max_tests], fn_name=tests.fn_name
            )
        starter = row.get("starter_code") or ""
        rows["prompt"].append(build_code_prompt(row["question"], tests, starter))
        rows["tests"].append(tests.to_json())
        rows["question"].append(row["question"])
        rows["difficulty"].append(difficulty)
        rows["starter_code"].append(starter)
        if limit is not None and len(rows["tests"]) >= limit:
            break
    if invalid:
        logger.warning("TACO: skipped %d problem(s) without usable test cases", invalid)
    if not rows["tests"]:
        raise ValueError("TACO: no usable problem left after filtering")
    return datasets.Dataset.from_dict(rows)


def load_humaneval(path: str | None = None, limit: int | None = None):
    """Load HumanEval (`openai/openai_humaneval`, split `test`) as check-format code problems.

    Args:
        path (`str`, *optional*): a local jsonl / json / parquet file with HumanEval's fields (`task_id`, `prompt`,
            `test`, `entry_point`; `canonical_solution` is not used) instead of the hub.
        limit (`int`, *optional*): keep the first `limit` problems.
    """
    import datasets

    if path is not None:
        raw = _load_local(path, "test")
    else:
        try:
            raw = datasets.load_dataset(HUMANEVAL_HUB_ID, split="test")
        except Exception as exc:
            raise RuntimeError(f"could not load {HUMANEVAL_HUB_ID!r} from the hub: {exc}. Pass `path=`.") from exc
    if len(raw) == 0:
        raise ValueError("HumanEval: the dataset is empty")
    _require(raw[0], ("task_id", "prompt", "test", "entry_point"), "HumanEval")
    rows: dict[str, list] = {
        "prompt": [],
        "tests": [],
        "question": [],
        "difficulty": [],
        "task_id": [],
        "entry_point": [],
    }
    for row in raw:
        tests = parse_tests({"test": row["test"], "entry_point": row["entry_point"], "prompt": row["prompt"]})
        question = (
            "Complete the following Python function. Write the whole function (with any imports it needs).\n\n"
            f"```python\n{row['prompt'].rstrip()}\n```"
        )
        rows["prompt"].append(build_code_prompt(question, tests))
        rows["tests"].append(tests.to_json())
        rows["question"].append(row["prompt"])
        rows["difficulty"].append(None)
        rows["task_id"].append(row["task_id"])
        rows["entry_point"].append(row["entry_point"])
        if limit is not None and len(rows["tests"]) >= limit:
            break
    return datasets.Dataset.from_dict(rows)


def load_code_jsonl(path: str, limit: int | None = None):
    """Load a small jsonl of code problems written directly in the normalised form: one object per line with
    `question`, `tests` (a normalised tests object or JSON string) and optional `difficulty`/`starter_code`
    (e.g. `recipes/data/code_demo.jsonl`)."""
    import datasets

    rows: dict[str, list] = {"prompt": [], "tests": [], "question": [], "difficulty": [], "starter_code": []}
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            row = json.loads(line)
            _require(row, ("question", "tests"), f"{path}:{lineno}")
            tests = parse_tests(row["tests"])
            starter = row.get("starter_code") or ""
            rows["prompt"].append(build_code_prompt(row["question"], tests, starter))
            rows["tests"].append(tests.to_json())
            rows["question"].append(row["question"])
            rows["difficulty"].append(_normalise_difficulty(row.get("difficulty")))
            rows["starter_code"].append(starter)
            if limit is not None and len(rows["tests"]) >= limit:
                break
    if not rows["tests"]:
        raise ValueError(f"{path}: no problem")
    return datasets.Dataset.from_dict(rows)
