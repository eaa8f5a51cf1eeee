"""Code benchmarks: the LiveCodeBench loader and grading of code completions in the sandbox.

Model-written code never runs in this process: every program goes through [`codapo_trl.sandbox.Sandbox`] (separate
processes, namespaces, seccomp, resource limits), via the code reward of [`codapo_trl.rewards.code`]. A sample is
correct when its last Python code block passes every test case of the problem (the pass rate is kept as `score`).

LiveCodeBench (`livecodebench/code_generation_lite`) is published as cumulative jsonl files (`test.jsonl`,
`test2.jsonl`, ... one per release); its hub loading script no longer runs with `datasets` >= 4, so the files are
read directly. Public test cases are JSON; private ones are JSON compressed with zlib, pickled and base64-encoded.
The pickle holds a plain string, so it is read with an unpickler that refuses every global (no code can run while
decoding).
"""

from __future__ import annotations

import base64
import io
import json
import logging
import pickle
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from codapo_trl.data.code import build_code_prompt
from codapo_trl.rewards.code import InvalidTestsError, ProblemTests, extract_code


logger = logging.getLogger(__name__)

__all__ = [
    "LCB_DEFAULT_VERSION",
    "LCB_HUB_ID",
    "LCB_PRELUDE",
    "LCB_RELEASE_FILES",
    "CodeGradingConfig",
    "CodeVerdict",
    "decode_lcb_test_cases",
    "grade_code",
    "lcb_tests",
    "load_livecodebench",
]

LCB_HUB_ID = "livecodebench/code_generation_lite"
LCB_DEFAULT_VERSION = "release_v5"
LCB_RELEASE_FILES: dict[str, tuple[str, ...]] = {
    f"release_v{v}": tuple("test.jsonl" if i == 1 else f"test{i}.jsonl" for i in range(1, v + 1)) for v in range(1, 7)
}
LCB_RELEASE_FILES["release_latest"] = LCB_RELEASE_FILES["release_v6"]
LCB_RELEASE_FILES.update({f"v{v}": ("test.jsonl" if v == 1 else f"test{v}.jsonl",) for v in range(1, 7)})
"""LiveCodeBench release tags and the jsonl files each covers (`release_vN`: cumulative; `vN`: that release only)."""

LCB_PRELUDE = (
    "import sys, os, math, re, string, random, bisect, heapq, itertools, functools, operator, collections\n"
    "from typing import *\n"
    "from collections import *\n"
    "from itertools import *\n"
    "from functools import *\n"
    "from heapq import *\n"
    "from bisect import *\n"
)
"""Standard-library imports prepended to LiveCodeBench programs (LeetCode-style starters use `List`, `Optional`,
... without importing them; LiveCodeBench's own harness provides such imports too). No `from math import *`: it
would replace the built-in three-argument `pow`."""


# ---------------------------------------------------------------------------------------------------------------------
# LiveCodeBench
# ---------------------------------------------------------------------------------------------------------------------


class _NoGlobalsUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} from LiveCodeBench test data")


def decode_lcb_test_cases(value: Any) -> list[dict[str, Any]]:
    """LiveCodeBench test cases (`public_test_cases` or `private_test_cases`) as a list of dicts with `input`,
    `output` and `testtype` (`"stdin"` or `"functional"`).

    Accepts plain JSON (a string or an already decoded list) or the compressed form of the private cases.
    """
    if value is None or value == "":
        return []
    if isinstance(value, list):
        return value
    text = str(value)
    try:
        decoded = json.loads(text)
    except json.JSONDecodeError:
        try:
            raw = zlib.decompress(base64.b64decode(text, validate=False))
            decoded = _NoGlobalsUnpickler(io.BytesIO(raw)).load()
        except (ValueError, zlib.error, pickle.UnpicklingError, EOFError) as err:
            raise InvalidTestsError(f"undecodable LiveCodeBench test cases: {err}") from None
        if isinstance(decoded, (bytes, str)):
            decoded = json.loads(decoded)
    if not isinstance(decoded, list):
        raise InvalidTestsError(f"LiveCodeBench test cases must be a list, got {type(decoded).__name__}")
    return decoded


def lcb_tests(row: Mapping[str, Any]) -> ProblemTests:
    """The normalised tests of one LiveCodeBench problem: public then private cases.

    `stdin` cases become `stdio` tests. `functional` (LeetCode) cases become `call` tests of `metadata.func_name`
    (a method of `class Solution`): each input line is one JSON-encoded argument, the output one JSON value.
    """
    cases = decode_lcb_test_cases(row.get("public_test_cases")) + decode_lcb_test_cases(row.get("private_test_cases"))
    if not cases:
        raise InvalidTestsError("no test case")
    kinds = {case.get("testtype", "stdin") for case in cases}
    if kinds == {"stdin"}:
        return ProblemTests(
            "stdio", inputs=tuple(str(c["input"]) for c in cases), outputs=tuple(str(c["output"]) for c in cases)
        )
    if kinds != {"functional"}:
        raise InvalidTestsError(f"mixed test types {sorted(kinds)}")
    metadata = row.get("metadata") or {}
    if isinstance(metadata, str):
        metadata = json.loads(metadata) if metadata.strip() else {}
    fn_name = metadata.get("func_name")
    if not isinstance(fn_name, str) or not fn_name.isidentifier():
        raise InvalidTestsError(f"functional tests without a valid metadata.func_name ({fn_name!r})")
    try:
        inputs = tuple([json.loads(line) for line in str(c["input"]).split("\n") if line.strip()] for c in cases)
        outputs = tuple(json.loads(str(c["output"])) for c in cases)
    except json.JSONDecodeError as err:
        raise InvalidTestsError(f"functional test case is not JSON: {err}") from None
    return ProblemTests("call", inputs=inputs, outputs=outputs, fn_name=fn_name)


def load_livecodebench(
    path: str | None = None,
    *,
    version: str = LCB_DEFAULT_VERSION,
    limit: int | None = None,
    start_date: str | None = None,
    end_date: str | None = None,
    skip_invalid: bool = True,
):
    """Load LiveCodeBench code-generation problems with conversational prompts and normalised `tests`.

    Args:
        path (`str`, *optional*): a local `.jsonl`/`.json`/`.parquet` file with LiveCodeBench's fields instead of
            the hub (`question_content`, `public_test_cases`, optional `private_test_cases`, `starter_code`,
            `metadata`, `difficulty`, `question_id`, `contest_date`).
        version (`str`, *optional*, defaults to `"release_v5"`): release tag selecting the hub files (see
            [`LCB_RELEASE_FILES`]).
        limit (`int`, *optional*): keep the first `limit` usable problems.
        start_date, end_date (`str`, *optional*): keep problems whose `contest_date` (ISO format) lies in
            `[start_date, end_date]`.
        skip_invalid (`bool`, *optional*, defaults to `True`): drop problems whose tests cannot be used (logged).

    Returns:
        `Dataset`: columns `prompt`, `tests`, `question`, `difficulty`, `question_id`, `platform`, `contest_date`.
    """
    import datasets

    if path is not None:
        suffix = path.rsplit(".", 1)[-1].lower()
        builder = {"jsonl": "json", "json": "json", "parquet": "parquet"}.get(suffix)
        if builder is None:
            raise ValueError(f"unsupported file type {path!r}: use .jsonl, .json or .parquet")
        raw = datasets.load_dataset(builder, data_files=path, split="train")
    else:
        if version not in LCB_RELEASE_FILES:
            raise ValueError(f"Unknown LiveCodeBench version {version!r}; valid: {sorted(LCB_RELEASE_FILES)}.")
        files = [f"hf://datasets/{LCB_HUB_ID}/{name}" for name in LCB_RELEASE_FILES[version]]
        try:
            raw = datasets.load_dataset("json", data_files=files, split="train")
        except Exception as exc:
            raise RuntimeError(
                f"could not read {LCB_HUB_ID} ({version}) from the hub: {exc}. Download its jsonl files and pass "
                "`livecodebench=PATH`."
            ) from exc
    if len(raw) == 0:
        raise ValueError("LiveCodeBench: the dataset is empty")
    missing = [f for f in ("question_content", "public_test_cases") if f not in raw.column_names]
    if missing:
        raise KeyError(f"LiveCodeBench: missing field(s) {missing}; found {sorted(raw.column_names)}")

    rows: dict[str, list] = {
        key: [] for key in ("prompt", "tests", "question", "difficulty", "question_id", "platform", "contest_date")
    }
    invalid = 0
    for index, row in enumerate(raw):
        date = str(row.get("contest_date") or "")
        if (start_date and date[: len(start_date)] < start_date) or (end_date and date[: len(end_date)] > end_date):
            continue
        try:
            tests = lcb_tests(row)
        except (InvalidTestsError, KeyError, TypeError, ValueError) as exc:
            if not skip_invalid:
                raise InvalidTestsError(f"LiveCodeBench row {index}: {exc}") from None
            invalid += 1
            logger.debug("LiveCodeBench row %d skipped: %s", index, exc)
            continue
        question = str(row["question_content"])
        rows["prompt"].append(build_code_prompt(question, tests, row.get("starter_code") or ""))
        rows["tests"].append(tests.to_json())
        rows["question"].append(question)
        rows["difficulty"].append(str(row["difficulty"]).upper() if row.get("difficulty") else None)
        rows["question_id"].append(str(row.get("question_id") or index))
        rows["platform"].append(row.get("platform"))
        rows["contest_date"].append(date or None)
        if limit is not None and len(rows["tests"]) >= limit:
            break
    if invalid:
        logger.warning("LiveCodeBench: skipped %d problem(s) without usable test cases", invalid)
    if not rows["tests"]:
        raise ValueError("LiveCodeBench: no usable problem left after filtering")
    return datasets.Dataset.from_dict(rows)


# ---------------------------------------------------------------------------------------------------------------------
# Grading
# ---------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CodeGradingConfig:
    """Limits of the sandboxed runs that grade code completions.

    Args:
        timeout (`float`, *optional*, defaults to 6.0): wall-clock (and CPU) seconds per test case.
        memory_mb (`int`, *optional*, defaults to 1024): memory limit per test case.
        workers (`int`, *optional*, defaults to 2): test cases run at the same time.
        max_tests (`int`, *optional*): run only the first `max_tests` test cases of each problem (default: all).
        max_timeouts (`int`, *optional*, defaults to 3): after this many timed-out cases of one completion, the rest
            count as failed without running.
    """

    timeout: float = 6.0
    memory_mb: int = 1024
    workers: int = 2
    max_tests: int | None = None
    max_timeouts: int | None = 3


@dataclass(frozen=True)
class CodeVerdict:
    """The verdict on one code completion.

    Args:
        code (`str` or `None`): the program that ran (prelude excluded); `None` without a Python code block.
        score (`float` or `None`): fraction of test cases passed; `None` when ungraded (bad tests, sandbox failure).
        correct (`bool` or `None`): every test case passed.
        reason (`str`): e.g. `"3/3 passed"`, `"no code block"`, `"sandbox error: ..."`.
    """

    code: str | None
    score: float | None
    correct: bool | None
    reason: str


def grade_code(
    completions: Sequence[str],
    tests: Sequence[str],
    *,
    prelude: str = "",
    config: CodeGradingConfig | None = None,
    sandbox: Any = None,
) -> list[CodeVerdict]:
    """Grade code completions by running their last Python code block against the problems' tests in the sandbox.

    Args:
        completions (`Sequence[str]`): model outputs.
        tests (`Sequence[str]`): the normalised tests (JSON) of each completion's problem.
        prelude (`str`, *optional*): source prepended to every program (e.g. [`LCB_PRELUDE`]).
        config ([`CodeGradingConfig`], *optional*): sandbox limits.
        sandbox ([`codapo_trl.sandbox.Sandbox`], *optional*): run there instead of a shared sandbox built from
            `config`.

    Returns:
        `list[CodeVerdict]`: one verdict per completion, in order.
    """
    from codapo_trl.rewards.code import evaluate_code, make_code_execution_reward

    if len(completions) != len(tests):
        raise ValueError(f"{len(completions)} completions but {len(tests)} tests")
    config = config or CodeGradingConfig()
    reward = make_code_execution_reward(
        timeout=config.timeout,
        memory_mb=config.memory_mb,
        max_workers=config.workers,
        max_tests=config.max_tests,
        max_timeouts=config.max_timeouts,
        sandbox=sandbox,
    )
    codes = [extract_code(c) for c in completions]
    # Each program is handed to the reward as one fenced block, so the prelude goes in front of exactly the code
    # that was extracted. A program that itself contains a fence cannot be re-fenced and is run on its own.
    batch = [i for i, code in enumerate(codes) if code is None or "```" not in code]
    fenced = [f"```python\n{prelude}{codes[i]}\n```" if codes[i] is not None else "" for i in batch]
    reasons: dict[str, list[str]] = {}
    scores = reward(fenced, [tests[i] for i in batch], log_extra=lambda key, values: reasons.setdefault(key, values))
    verdicts: dict[int, CodeVerdict] = {}
    for j, i in enumerate(batch):
        reason = reasons.get("code_reward_reason", [""] * len(batch))[j]
        verdicts[i] = _verdict(codes[i], scores[j], reason)
    for i in set(range(len(codes))) - set(batch):
        evaluation = evaluate_code(
            prelude + codes[i],  # type: ignore[operator]
            tests[i],
            sandbox=reward.sandbox,  # type: ignore[attr-defined]
            max_tests=config.max_tests,
            max_timeouts=config.max_timeouts,
        )
        verdicts[i] = _verdict(codes[i], evaluation.reward, evaluation.reason)
    return [verdicts[i] for i in range(len(codes))]


def _verdict(code: str | None, score: float | None, reason: str) -> CodeVerdict:
    if code is None:
        return CodeVerdict(None, 0.0 if score is not None else None, False if score is not None else None, reason)
    return CodeVerdict(code, score, None if score is None else score >= 1.0, reason)
