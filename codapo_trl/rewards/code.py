"""Code-execution reward for TRL: run the completion's last Python code block against the problem's test cases.

The reward is the pass rate (fraction of test cases passed, in [0, 1]); CoDaPO uses it as the correctness signal
on code problems. Programs run in [`codapo_trl.sandbox.Sandbox`], one process per test case.

Test cases live in a dataset column `tests` (a JSON string; one per problem) in one of three normalised formats:

- `{"format": "stdio", "inputs": [str, ...], "outputs": [str, ...]}`: the program reads `inputs[i]` on standard
  input and must print `outputs[i]` and exit with status 0. Outputs are compared token by token (whitespace and
  line ends do not matter), as text, exactly (`00000011` is not `11`, `+5` is not `5`), except that an expected
  number with a fractional part or an exponent (`0.333333`, `1.5e-3`) is matched by any decimal number within a
  relative/absolute tolerance of `1e-6` ([`outputs_match`]; docs/code.md compares this with each dataset's own
  checker).
- `{"format": "call", "fn_name": str, "inputs": [[arg, ...], ...], "outputs": [value, ...]}`: the program must
  define `fn_name` (a function, or a method of a class `Solution`), which is called with each argument list; the
  return value is compared with the expected one (integers and strings exactly, a tolerance only for an expected
  float, tuples as lists, and a result equal to the only element of a one-element expected list also counts, as
  TACO/APPS often wrap expected values; [`values_match`]).
- `{"format": "check", "test": str, "entry_point": str, "prelude": str, "prompt": str}`: HumanEval style;
  `check(candidate)` (defined by `test`, run after `prompt`, the dataset's own code) must return; where the test
  names the entry point itself (HumanEval/33's `sort_third`), the name is the program's function, as `candidate`
  is. A single test case.

Where the verdict is made: the stdin/stdout comparison here, on the program's standard output (text); the `call`
and `check` verdicts in the sandbox's judge ([`codapo_trl.sandbox.judge`]), a process that never runs the
program's code: the program's process only runs its module and answers the judge's calls with plain data
(`None`, `bool`, `int`, `float`, `str` and lists, tuples, dicts and sets of them, [`codapo_trl.sandbox.wire`]),
which the judge decodes into built-in objects before comparing or handing them to `check`. No object of the
program reaches a comparison, and `check`, its globals, built-ins and modules live in the judge.

TACO's raw `input_output` JSON (`inputs`/`outputs` and an optional `fn_name`) and HumanEval's `test`/
`entry_point` dicts are accepted too and normalised on the fly (see [`parse_tests`]).
"""

from __future__ import annotations

import ast
import builtins
import json
import logging
import os
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from codapo_trl.answers import completion_text
from codapo_trl.sandbox import SCRIPT, ExecutionResult, Harness, Sandbox, SandboxConfig, Status, get_sandbox
from codapo_trl.sandbox.judge import outputs_match, values_match


logger = logging.getLogger(__name__)

__all__ = [
    "CodeEvaluation",
    "InvalidTestsError",
    "ProblemTests",
    "TestOutcome",
    "code_execution_reward",
    "evaluate_code",
    "extract_code",
    "make_code_execution_reward",
    "outputs_match",
    "parse_tests",
    "values_match",
]

_PY_LANGS = {"", "python", "py", "python3", "py3"}
_FENCE = "```"


class InvalidTestsError(ValueError):
    """The problem's test cases cannot be used (bad JSON, missing fields, no test case)."""


# ------------------------------------------------------------------------------------------------- code blocks


def _fenced_blocks(text: str) -> Iterator[tuple[str, str]]:
    """The fenced blocks of `text` as `(info string, body)` pairs, in order, in time linear in `len(text)`.

    A block opens with three backticks followed by an info string without a backtick up to the end of the line, and
    ends at the next three backticks (possibly on the same line as the last line of code); an opening fence without
    such a closing one is no block. The text is scanned with `str.find` and `str.rfind` only, once per line that holds
    a fence, so each character is looked at a bounded number of times (a regular expression here backtracked
    quadratically on a fence followed by blanks; a loop over every fence of a line of a million backticks cost
    0.2 s).
    """
    pos = 0
    while True:
        start = text.find(_FENCE, pos)
        if start < 0:
            return
        newline = text.find("\n", start + len(_FENCE))
        if newline < 0:  # no line ends after this fence, so no later fence can open a block either
            return
        # An opening fence's info string holds no backtick, so a line has one candidate at most: the three backticks
        # that end its last run of backticks (one `rfind`, however many fences the line holds).
        last = text.rfind("`", start, newline)
        opening = last - len(_FENCE) + 1
        if opening < start or text[opening : last + 1] != _FENCE:
            pos = newline + 1
            continue
        end = text.find(_FENCE, newline + 1)
        if end < 0:  # unterminated: nothing after it can be closed either
            return
        yield text[opening + len(_FENCE) : newline], text[newline + 1 : end]
        pos = end + len(_FENCE)


def extract_code(completion: Any) -> str | None:
    """The last fenced code block labelled as Python (```` ```python ````, ```` ```py ````) or unlabelled, in the
    completion's text (`codapo_trl.answers.completion_text`: a string, or the last assistant message).

    Blocks in other languages (```` ```text ````, ```` ```cpp ````) are ignored; an unterminated block (a truncated
    completion) does not count. Returns `None` if there is no such block or it is empty. The completion is untrusted
    text read in the trainer's process: the cost is linear in its length ([`_fenced_blocks`]).
    """
    text = completion_text(completion)
    code = None
    for info, body in _fenced_blocks(text):
        words = info.split(None, 1)
        if (words[0].lower() if words else "") in _PY_LANGS:
            code = body
    if code is None or not code.strip():
        return None
    return code


# ------------------------------------------------------------------------------------------------- test formats


@dataclass(frozen=True)
class ProblemTests:
    """A problem's test cases in the normalised form (see the module docstring)."""

    format: str
    inputs: tuple = ()
    outputs: tuple = ()
    fn_name: str | None = None
    test: str | None = None
    entry_point: str | None = None
    prelude: str = ""
    prompt: str = ""

    def __len__(self) -> int:
        return 1 if self.format == "check" else len(self.inputs)

    def to_json(self) -> str:
        """The normalised JSON string stored in a dataset's `tests` column."""
        if self.format == "check":
            obj = {"format": "check", "test": self.test, "entry_point": self.entry_point, "prelude": self.prelude}
            if self.prompt:
                obj["prompt"] = self.prompt
        elif self.format == "call":
            obj = {
                "format": "call",
                "fn_name": self.fn_name,
                "inputs": list(self.inputs),
                "outputs": list(self.outputs),
            }
        else:
            obj = {"format": "stdio", "inputs": list(self.inputs), "outputs": list(self.outputs)}
        return json.dumps(obj)


def _as_text(value: Any) -> str:
    # APPS/TACO store some stdin/stdout cases as lists of lines.
    if isinstance(value, list):
        return "\n".join(str(v) for v in value) + ("\n" if value else "")
    return value if isinstance(value, str) else str(value)


def parse_tests(tests: Any) -> ProblemTests:
    """Normalise a problem's tests: a JSON string or a dict, in the normalised format, TACO's `input_output` format
    (`inputs`, `outputs`, optional `fn_name`) or HumanEval's (`test`, `entry_point`, optional `prompt`).

    Raises:
        InvalidTestsError: unparseable JSON, missing or inconsistent fields, or no test case.
    """
    if isinstance(tests, ProblemTests):
        return tests
    if isinstance(tests, (bytes, str)):
        try:
            tests = json.loads(tests)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise InvalidTestsError(f"tests are not valid JSON: {exc}") from None
    if not isinstance(tests, dict):
        raise InvalidTestsError(f"tests must be a JSON object, got {type(tests).__name__}")
    fmt = tests.get("format")
    if fmt == "check" or (fmt is None and "test" in tests and "entry_point" in tests):
        test, entry_point = tests.get("test"), tests.get("entry_point")
        if not isinstance(test, str) or not test.strip() or not isinstance(entry_point, str) or not entry_point:
            raise InvalidTestsError("check-format tests need non-empty `test` and `entry_point` strings")
        prompt = tests.get("prompt") or ""
        if not isinstance(prompt, str):
            raise InvalidTestsError("check-format tests need a string `prompt` (or none)")
        prelude = tests.get("prelude")
        if prelude is None:
            prelude = _import_lines(prompt)
        # The entry point is always defined for the test: the judge binds it to the program's function.
        missing = _names_left_undefined(test, prelude + "\n" + prompt) - {entry_point}
        if missing:
            raise InvalidTestsError(
                f"check-format tests read {', '.join(sorted(missing))}, which neither the test nor its prompt "
                "defines (the judge runs the test with the problem's prompt, never with the program's names): "
                "store the problem's `prompt` with its tests (`load_humaneval` does; rebuild tests normalised "
                "before the judge)"
            )
        return ProblemTests("check", test=test, entry_point=entry_point, prelude=prelude, prompt=prompt)
    if fmt not in (None, "stdio", "call"):
        raise InvalidTestsError(f"unknown tests format {fmt!r}")
    inputs, outputs = tests.get("inputs"), tests.get("outputs")
    if not isinstance(inputs, list) or not isinstance(outputs, list):
        raise InvalidTestsError("tests need `inputs` and `outputs` lists")
    if len(inputs) != len(outputs):
        raise InvalidTestsError(f"{len(inputs)} inputs but {len(outputs)} outputs")
    if not inputs:
        raise InvalidTestsError("no test case")
    fn_name = tests.get("fn_name")
    if fmt == "call" or (fmt is None and fn_name):
        if not isinstance(fn_name, str) or not fn_name.isidentifier():
            raise InvalidTestsError(f"call-format tests need a valid `fn_name`, got {fn_name!r}")
        args = tuple(a if isinstance(a, list) else [a] for a in inputs)
        return ProblemTests("call", inputs=args, outputs=tuple(outputs), fn_name=fn_name)
    return ProblemTests(
        "stdio", inputs=tuple(_as_text(i) for i in inputs), outputs=tuple(_as_text(o) for o in outputs)
    )


def _defined_and_read(source: str, what: str) -> tuple[set[str], set[str]]:
    """The names `source` binds anywhere (assignments, definitions, imports, parameters) and the names it reads."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise InvalidTestsError(f"check-format {what} is not valid Python: {exc}") from None
    defined: set[str] = set()
    read: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else defined).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, ast.alias):
            defined.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.arg):
            defined.add(node.arg)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            defined.update(node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            defined.add(node.name)
    return defined, read


def _names_left_undefined(test: str, context: str) -> set[str]:
    """Names the test reads that neither it, its prompt/prelude (`context`) nor Python's built-ins define: the judge
    would raise `NameError` in every run, failing right programs."""
    test_defined, test_read = _defined_and_read(test, "test")
    try:
        context_defined, _ = _defined_and_read(context, "prompt")
    except InvalidTestsError:  # a prompt that is only a signature: what it defines cannot be read, so do not refuse
        return set()
    return test_read - test_defined - context_defined - set(dir(builtins))


def _import_lines(prompt: str) -> str:
    return "\n".join(
        ln for ln in prompt.splitlines() if re.match(r"\s*(import|from)\s+\w", ln) and not ln[:1].isspace()
    )


# ------------------------------------------------------------------------------------------------- programs


def _harness(tests: ProblemTests, index: int) -> Harness:
    """How the sandbox runs test case `index` and who judges it (see [`Harness`])."""
    if tests.format == "check":
        return Harness(
            "check", test=tests.test, entry_point=tests.entry_point, prelude=tests.prelude, context=tests.prompt
        )
    if tests.format == "call":
        return Harness(
            "call",
            fn_name=tests.fn_name,
            args=json.dumps(list(tests.inputs[index])),
            expected=json.dumps(tests.outputs[index]),
        )
    return SCRIPT


# ------------------------------------------------------------------------------------------------- evaluation


@dataclass
class TestOutcome:
    """The verdict on one test case."""

    status: Status
    reason: str = ""
    wall_time: float = 0.0

    @property
    def passed(self) -> bool:
        return self.status is Status.OK


@dataclass
class CodeEvaluation:
    """The verdict on one completion: `reward` is the pass rate, or `None` when the sample should be skipped."""

    reward: float | None
    reason: str
    outcomes: list[TestOutcome] = field(default_factory=list)

    @property
    def n_passed(self) -> int:
        return sum(o.passed for o in self.outcomes)


def _judge(result: ExecutionResult, expected: str | None) -> TestOutcome:
    """The verdict on one execution: the judge's for `call` and `check` runs (in `result.status`), the comparison
    of the standard output with `expected` for a script that exited with status 0. Only the verdict is kept: the
    output (up to `max_output_bytes` per run) is dropped as soon as the run is judged."""
    if result.status is not Status.OK:
        return TestOutcome(result.status, result.reason, result.wall_time)
    if expected is not None and not outputs_match(result.stdout, expected):
        return TestOutcome(Status.WRONG, "wrong answer", result.wall_time)
    return TestOutcome(Status.OK, "", result.wall_time)


# One run: (program, stdin, harness, the expected output of a `stdio` run, `None` for a judged one).
_Job = tuple[str, str, Harness, str | None]


def _jobs(code: str, tests: ProblemTests, max_tests: int | None) -> list[_Job]:
    n = len(tests) if max_tests is None else min(len(tests), max_tests)
    if tests.format == "check":
        return [(code, "", _harness(tests, 0), None)]
    if tests.format == "stdio":
        return [(code, tests.inputs[i], SCRIPT, tests.outputs[i]) for i in range(n)]
    return [(code, "", _harness(tests, i), None) for i in range(n)]


def _summarise(outcomes: list[TestOutcome]) -> str:
    n_passed = sum(o.passed for o in outcomes)
    first_failures = [f"test {i}: {o.status.value} ({o.reason})" for i, o in enumerate(outcomes) if not o.passed]
    text = f"{n_passed}/{len(outcomes)} passed"
    if first_failures:
        text += "; " + "; ".join(first_failures[:3]) + ("; ..." if len(first_failures) > 3 else "")
    return text


def evaluate_code(
    code: str | None,
    tests: Any,
    sandbox: Sandbox | None = None,
    max_tests: int | None = 16,
    max_timeouts: int | None = 3,
) -> CodeEvaluation:
    """Run `code` against `tests` and return the pass rate with per-test outcomes.

    Args:
        code (`str`, *optional*): the program (e.g. from [`extract_code`]); `None` gives reward 0.
        tests: the problem's tests (see [`parse_tests`]); malformed tests give reward `None`.
        sandbox (`Sandbox`, *optional*): where to run; a shared default sandbox otherwise.
        max_tests (`int`, *optional*): use only the first `max_tests` test cases.
        max_timeouts (`int`, *optional*): after this many timed-out test cases the remaining ones are counted as
            failed without running them (bounds the cost of a program that hangs).
    """
    return _Evaluator(sandbox or get_sandbox(), max_tests, max_timeouts).evaluate([code], [tests])[0]


class _Evaluator:
    def __init__(self, sandbox: Sandbox, max_tests: int | None, max_timeouts: int | None) -> None:
        self.sandbox, self.max_tests, self.max_timeouts = sandbox, max_tests, max_timeouts

    def evaluate(self, codes: Sequence[str | None], tests_list: Sequence[Any]) -> list[CodeEvaluation]:
        results: list[CodeEvaluation | None] = [None] * len(codes)
        parsed: dict[int, ProblemTests] = {}
        for i, (code, tests) in enumerate(zip(codes, tests_list)):
            try:
                parsed[i] = parse_tests(tests)
            except InvalidTestsError as exc:
                results[i] = CodeEvaluation(None, f"invalid tests: {exc}")
                continue
            if code is None:
                results[i] = CodeEvaluation(0.0, "no code block")

        # One job per (program, stdin, expected output); identical jobs (duplicate completions) run once.
        unique: dict[_Job, int] = {}
        per_sample: dict[int, list[int]] = {}
        job_owner: list[int] = []
        for i, tests in parsed.items():
            if results[i] is not None:
                continue
            ids = []
            for job in _jobs(codes[i] or "", tests, self.max_tests):
                if job not in unique:
                    unique[job] = len(unique)
                    job_owner.append(i)
                ids.append(unique[job])
            per_sample[i] = ids
        jobs = list(unique)
        timeouts: Counter[int] = Counter()
        lock = threading.Lock()
        skipped = TestOutcome(Status.TIMEOUT, reason=f"not run after {self.max_timeouts} timeouts")

        def run(job_id: int) -> TestOutcome:
            """Run one job and judge it at once: a run's output is never kept past its verdict."""
            owner = job_owner[job_id]
            with lock:
                if self.max_timeouts is not None and timeouts[owner] >= self.max_timeouts:
                    return skipped
            code, stdin, harness, expected = jobs[job_id]
            outcome = _judge(self.sandbox.run(code, stdin, harness), expected)
            if outcome.status is Status.TIMEOUT:
                with lock:
                    timeouts[owner] += 1
            return outcome

        if len(jobs) > 1 and self.sandbox.max_workers > 1:
            with ThreadPoolExecutor(self.sandbox.max_workers, thread_name_prefix="codapo-reward") as pool:
                verdicts = list(pool.map(run, range(len(jobs))))
        else:
            verdicts = [run(j) for j in range(len(jobs))]

        for i, ids in per_sample.items():
            outcomes = [replace(verdicts[j]) for j in ids]  # a sample's own copies
            if any(o.status is Status.SANDBOX_ERROR for o in outcomes):
                # Not the model's fault: skip the sample rather than punish it.
                bad = next(o for o in outcomes if o.status is Status.SANDBOX_ERROR)
                results[i] = CodeEvaluation(None, f"sandbox error: {bad.reason}", outcomes)
                continue
            n_passed = sum(o.passed for o in outcomes)
            results[i] = CodeEvaluation(n_passed / len(outcomes), _summarise(outcomes), outcomes)
        return [r if r is not None else CodeEvaluation(None, "not evaluated") for r in results]


# ------------------------------------------------------------------------------------------------- TRL reward


def make_code_execution_reward(
    timeout: float = 4.0,
    memory_mb: int = 512,
    max_workers: int = 2,
    max_tests: int | None = 16,
    max_timeouts: int | None = 3,
    sandbox: Sandbox | None = None,
    log_reasons: bool = True,
    **sandbox_kwargs: Any,
) -> Callable[..., list[float | None]]:
    """Build a TRL reward function that scores completions by the pass rate of their last Python code block.

    Args:
        timeout (`float`): wall-clock (and CPU) limit per test case, in seconds.
        memory_mb (`int`): memory limit per test case.
        max_workers (`int`): test cases run concurrently.
        max_tests (`int`, *optional*): use at most this many test cases per problem (the first ones).
        max_timeouts (`int`, *optional*): stop running a completion's test cases after this many timeouts (the rest
            count as failed).
        sandbox (`Sandbox`, *optional*): use this sandbox instead of building one from the limits above.
        log_reasons (`bool`): add a `code_reward_reason` column to TRL's completions table via `log_extra`.
        **sandbox_kwargs: further [`SandboxConfig`] fields (e.g. `disable`, `max_output_bytes`).

    Returns:
        A function `(completions, tests, **kwargs) -> list[float | None]` named `code_execution_reward`: one pass
        rate per completion; `None` (TRL skips the sample) for malformed tests or a sandbox failure; 0.0 without a
        code block. Per-sample reasons are logged at DEBUG level; counts per outcome are reported through the
        `log_metric` kwarg TRL passes (`code_reward/<outcome>`).
    """
    if sandbox is None:
        sandbox = get_sandbox(SandboxConfig(timeout=timeout, memory_mb=memory_mb, **sandbox_kwargs), max_workers)
    evaluator = _Evaluator(sandbox, max_tests, max_timeouts)

    def code_execution_reward(completions: list, tests: list, **kwargs: Any) -> list[float | None]:
        if len(tests) != len(completions):
            raise ValueError(f"{len(completions)} completions but {len(tests)} `tests` entries")
        codes = [extract_code(c) for c in completions]
        evaluations = evaluator.evaluate(codes, tests)
        counts: Counter[str] = Counter()
        for i, ev in enumerate(evaluations):
            if ev.reward is None:
                counts["skipped_" + ev.reason.split(":")[0].replace(" ", "_")] += 1
            elif not ev.outcomes:
                counts["no_code_block"] += 1
            for outcome in ev.outcomes:
                counts["test_" + outcome.status.value] += 1
            logger.debug("code_execution_reward sample %d: reward=%s (%s)", i, ev.reward, ev.reason)
        log_metric = kwargs.get("log_metric")
        if callable(log_metric):
            for name in ("no_code_block", "skipped_invalid_tests", "skipped_sandbox_error") + tuple(
                "test_" + s.value for s in Status
            ):
                log_metric(f"code_reward/{name}", float(counts.get(name, 0)))
        log_extra = kwargs.get("log_extra")
        if log_reasons and callable(log_extra):
            log_extra("code_reward_reason", [ev.reason for ev in evaluations])
        if counts.get("skipped_invalid_tests") or counts.get("skipped_sandbox_error"):
            logger.warning(
                "code_execution_reward: %d sample(s) skipped (reward None): %s",
                sum(v for k, v in counts.items() if k.startswith("skipped_")),
                next(ev.reason for ev in evaluations if ev.reward is None),
            )
        return [ev.reward for ev in evaluations]

    code_execution_reward.sandbox = sandbox  # type: ignore[attr-defined]
    code_execution_reward.required_columns = ("tests",)  # type: ignore[attr-defined]
    code_execution_reward.correctness_kind = "pass_rate"  # type: ignore[attr-defined]  # codapo_trl.correctness
    return code_execution_reward


_DEFAULT_REWARD: Callable[..., list[float | None]] | None = None
_DEFAULT_LOCK = threading.Lock()


def code_execution_reward(completions: list, tests: list, **kwargs: Any) -> list[float | None]:
    """TRL reward with the default limits (see [`make_code_execution_reward`]; environment variables
    `CODAPO_CODE_TIMEOUT`, seconds per test, default 4, and `CODAPO_CODE_WORKERS`, test runs at a time, default 2):
    the pass rate of each completion's last Python code block on its problem's `tests`."""
    global _DEFAULT_REWARD
    with _DEFAULT_LOCK:
        if _DEFAULT_REWARD is None:
            # Recipes size these for their machine through the YAML `env:` block (TrlParser exports it).
            _DEFAULT_REWARD = make_code_execution_reward(
                timeout=float(os.environ.get("CODAPO_CODE_TIMEOUT", 4.0)),
                max_workers=int(os.environ.get("CODAPO_CODE_WORKERS", 2)),
            )
    return _DEFAULT_REWARD(completions, tests, **kwargs)


code_execution_reward.required_columns = ("tests",)  # type: ignore[attr-defined]
code_execution_reward.correctness_kind = "pass_rate"  # type: ignore[attr-defined]  # codapo_trl.correctness
