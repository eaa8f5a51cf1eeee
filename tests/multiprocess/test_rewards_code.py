"""The code-execution reward, its test-case formats and the code-problem loaders."""

import contextlib
import json
import logging
import os
import random
import re
import secrets
import signal
import socket
import time
from pathlib import Path

import pytest

from codapo_trl.data.code import CODE_SYSTEM_PROMPT, load_code_jsonl, load_humaneval, load_taco
from codapo_trl.rewards.code import (
    InvalidTestsError,
    code_execution_reward,
    evaluate_code,
    extract_code,
    make_code_execution_reward,
    outputs_match,
    parse_tests,
    values_match,
)
from codapo_trl.sandbox import Sandbox, SandboxConfig, Status


FIXTURES = Path(__file__).parents[1] / "fixtures"
DEMO = Path(__file__).parents[2] / "recipes" / "data" / "code_demo.jsonl"

ADD_TESTS = json.dumps({"inputs": ["1 2\n", "10 -4\n", "7 7\n"], "outputs": ["3\n", "6\n", "14\n"]})


@pytest.fixture(scope="module")
def reward():
    return make_code_execution_reward(timeout=2.0, memory_mb=256, max_workers=2, max_tests=8, max_output_bytes=1 << 20)


def block(code: str, lang: str = "python") -> str:
    return f"Here is my solution.\n```{lang}\n{code}\n```\n"


def run_reward(reward, completions, tests):
    metrics, extra = {}, {}
    rewards = reward(
        completions,
        tests,
        prompts=[None] * len(completions),
        log_metric=lambda name, value: metrics.__setitem__(name, value),
        log_extra=lambda column, values: extra.__setitem__(column, values),
    )
    return rewards, metrics, extra.get("code_reward_reason")


# ---------------------------------------------------------------------------------------------- code blocks


def test_extract_last_python_block():
    text = "```python\nprint(1)\n```\nthen better:\n```py\nprint(2)\n```\nOutput:\n```text\n2\n```"
    assert extract_code(text).strip() == "print(2)"
    assert extract_code("```\nprint(3)\n```").strip() == "print(3)"
    assert extract_code([{"role": "assistant", "content": block("print(4)")}]).strip() == "print(4)"
    assert extract_code("no code here") is None
    assert extract_code("```cpp\nint main() {}\n```") is None
    assert extract_code("```python\nprint('truncated')") is None
    assert extract_code("```python\n\n```") is None


@contextlib.contextmanager
def wall_clock_bound(seconds: float):
    """Fail (rather than hang) when the block runs past `seconds` of wall-clock time: `SIGALRM` raises in the main
    thread, and Python's regular-expression engine checks for signals while it backtracks."""

    def expired(signum, frame):
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def trainer_cpu_of_extraction(text: str) -> tuple[str | None, float]:
    """`extract_code(text)` and the CPU time it cost this process, under a hard wall-clock bound of 10 s."""
    with wall_clock_bound(10.0):
        start = time.process_time()
        code = extract_code(text)
        return code, time.process_time() - start


MB = 1_000_000
# (name, completion, the code it holds): hostile shapes, each about 0.1 to 1 MB, that a backtracking fence pattern
# pays quadratically for (a fence then blanks without a line end cost 38 s of trainer CPU at 60,000 blanks), and
# honest completions of the same shapes and sizes.
EXTRACTION_CASES = [
    ("stray fence, 100,000 spaces", "```" + " " * 100_000, None),
    ("stray fence, 100,000 tabs", "text ``` " + "\t" * 100_000 + "python", None),
    ("stray fences, each followed by blanks", ("``` " + " \t" * 2_000) * 100, None),
    ("1 MB of backticks", "`" * MB, None),
    ("1 MB of fence openers on one line", "``` `" * (MB // 5) + "\n", None),
    ("unclosed fence, 1 MB of code", "```python\n" + "x = 1\n" * (MB // 6), None),
    ("many unclosed fences", "```python\nx = 1\n" * (MB // 16) + "```python\n", "x = 1\n"),
    ("nested backticks, 1 MB", "```python\n" + "`` " * (MB // 3) + "\n```", "`` " * (MB // 3) + "\n"),
    ("1 MB of prose", "lorem ipsum dolor " * (MB // 18), None),
    # honest counterparts
    ("fence, 100,000 blanks, then code", "```python" + " " * 100_000 + "\nprint(1)\n```", "print(1)\n"),
    ("1 MB of prose, then a block", "lorem ipsum " * (MB // 12) + "\n```python\nprint(2)\n```", "print(2)\n"),
    ("30,000 blocks", "".join(f"```python\nprint({i})\n```\n" for i in range(30_000)), "print(29999)\n"),
    ("a block, then an unclosed one", "```py\nprint(3)\n```\n```python\n" + "y = 2\n" * (MB // 6), "print(3)\n"),
    ("a long info string", "```python " + "x" * MB + "\nprint(4)\n```", "print(4)\n"),
    ("a string of backticks in code", "```python\ns = '``'\nprint(s + '`')\n```", "s = '``'\nprint(s + '`')\n"),
]


@pytest.mark.parametrize("name, text, code", EXTRACTION_CASES, ids=[c[0] for c in EXTRACTION_CASES])
def test_extraction_is_linear_in_the_completion(name, text, code):
    """Extraction runs in the trainer's process on untrusted text: every shape costs it under 0.2 s of CPU for up to
    1 MB, and extracts what an honest reader would (design.md, "Judging what a policy wrote", rule 5)."""
    got, cpu = trainer_cpu_of_extraction(text)
    assert got == code
    assert cpu < 0.2, f"{name}: {cpu:.3f} s of trainer CPU for {len(text):,} characters"


def test_extraction_agrees_with_the_fence_grammar_on_short_text():
    """On short text (where backtracking costs nothing) the scanner finds exactly the blocks the fence grammar
    ("```", blanks, an info string without a backtick, a line end, the body up to the next "```") describes."""
    grammar = re.compile(r"```[ \t]*([^\n`]*)\n(.*?)```", re.DOTALL)
    rng = random.Random(61)
    pieces = ["`", "```", "\n", " ", "\t", "py", "x", "python ", "text", "\r"]
    python = {"", "python", "py", "python3", "py3"}
    for _ in range(20_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 24)))
        blocks = [m.group(2) for m in grammar.finditer(text) if (m.group(1).split() or [""])[0].lower() in python]
        assert extract_code(text) == (blocks[-1] if blocks and blocks[-1].strip() else None), repr(text)


# ---------------------------------------------------------------------------------------------- comparison


def test_outputs_match():
    assert outputs_match("3\n", "3")
    assert outputs_match("1 2 \r\n3\n\n", "1 2\n3")
    assert outputs_match("1\n2\n3\n", "1 2 3")  # token-wise
    assert outputs_match("0.3333333333\n", "0.333333333")
    assert outputs_match("3", "3.0")
    # Issue 61 changed this: `+3 -0` was paid for `3 0` (integers compared by value); a sign is part of the answer,
    # so an expected integer token is matched only by the same text.
    assert not outputs_match("+3 -0", "3 0")
    # an expected integer is matched exactly, by an integer (issue 25)
    assert not outputs_match("3.0", "3") and not outputs_match("3e0", "3")
    assert not outputs_match("12157665459056928768", "12157665459056928801")
    assert not outputs_match("1881686960568003", "1881686019724993")  # round(n**3 * (1 + 5e-7))
    assert not outputs_match("\uff13", "3")  # full-width digit: int() would accept it
    assert not outputs_match("0.34", "0.33")
    assert not outputs_match("1 2", "1 2 3")
    assert not outputs_match("YES", "yes")
    assert not outputs_match("nan", "1.0")


@pytest.mark.parametrize(
    "got, expected, paid",
    [
        ("11", "00000011", False),  # leading zeros are part of the answer
        ("00000011", "11", False),
        ("7", "0007", False),
        ("+5", "5", False),  # and so is a sign
        ("5", "+5", False),
        ("-0", "0", False),
        ("5", "5", True),
        ("0007\n", "0007", True),
        ("0.3333333", "0.333333", True),  # an expected decimal: within 1e-6
        ("0.34", "0.333333", False),
        ("3.33333e-1", "0.333333", True),  # any decimal number close to it
        ("1.5e-3", "0.0015", True),
        ("0.0015", "1.5e-3", True),
        ("nan", "0.5", False),
        ("0x1p-1", "0.5", False),
        ("1e400", "1e400", True),  # the same text; no number is read from an infinite expected value
        ("1e401", "1e400", False),
        ("5 6 \n", "5 6", True),  # trailing blanks and line ends only separate tokens
        ("5\n6\n\n", "5 6\n", True),
        ("5\r\n6", "5\n6\n", True),
        ("5 6 7", "5 6", False),
        ("5", "5 6", False),
    ],
)
def test_stdio_tokens_compare_as_text_except_expected_decimals(got, expected, paid):
    assert outputs_match(got, expected) is paid


def test_stdio_comparison_is_linear_and_lazy():
    """The comparison runs in the trainer on a program's output (up to `max_output_bytes`): linear in its size, and
    a wrong first token ends it, however long the rest."""
    with wall_clock_bound(10.0):
        start = time.process_time()
        assert not outputs_match("0 " * 2_000_000, "1")
        assert not outputs_match("1 " * 2_000_000, "1")  # too many tokens
        assert not outputs_match("7" * 4_000_000, "0.5")  # one 4 MB token
        assert outputs_match("1 " * 2_000_000, "1\n" * 2_000_000)  # honest: 4 MB of right tokens
        assert time.process_time() - start < 2.0
    # the usual honest case, the expected text itself (perhaps without its last line end), is compared in C
    text = "".join(f"{i:07d}\n" for i in range(500_000))
    start = time.process_time()
    assert outputs_match(text, text) and outputs_match(text, text.rstrip()) and outputs_match(text + "  \n", text)
    assert time.process_time() - start < 0.05
    assert not outputs_match(text.replace("0499999", "499999"), text)  # then token by token, as above
    assert not outputs_match(text, text + "0") and not outputs_match(text.rstrip(), text + "x")


def test_values_match():
    assert values_match([1, 2.0000000001], [1, 2.0])
    assert not values_match([1, 2.0000000001], [1, 2])  # an expected int only by a number exactly equal to it
    assert values_match(5.0, 5) and not values_match(float(3**40), 3**40)
    assert not values_match(10**400, 1.5) and not values_match(float("nan"), float("nan"))
    assert values_match({"a": [1]}, {"a": [1]})
    assert not values_match(True, 1)
    assert not values_match(1, True)
    assert not values_match([1, 2], [2, 1])
    assert values_match("abc", "abc") and not values_match("abc", "abd")


def test_parse_tests_formats():
    stdio = parse_tests(ADD_TESTS)
    assert stdio.format == "stdio" and len(stdio) == 3
    lines = parse_tests({"inputs": [["2", "1 2"]], "outputs": [["3"]]})
    assert lines.inputs == ("2\n1 2\n",) and lines.outputs == ("3\n",)
    call = parse_tests({"fn_name": "f", "inputs": [[1, 2], [3, 4]], "outputs": [3, 7]})
    assert call.format == "call" and call.inputs == ([1, 2], [3, 4])
    check = parse_tests(
        {"test": "def check(c):\n    assert c(1) == 1\n", "entry_point": "f", "prompt": "import math\n"}
    )
    assert check.format == "check" and check.prelude == "import math" and len(check) == 1
    assert parse_tests(stdio.to_json()) == stdio and parse_tests(call.to_json()) == call
    assert parse_tests(check.to_json()) == check


@pytest.mark.parametrize(
    "bad",
    [
        "{not json",
        "",
        "[1, 2]",
        json.dumps({"inputs": ["1"], "outputs": []}),
        json.dumps({"inputs": [], "outputs": []}),
        json.dumps({"inputs": "1", "outputs": "1"}),
        json.dumps({"fn_name": "not an identifier", "inputs": [[1]], "outputs": [1]}),
        json.dumps({"format": "mystery", "inputs": ["1"], "outputs": ["1"]}),
        json.dumps({"test": "", "entry_point": "f"}),
    ],
)
def test_malformed_tests_are_rejected(bad):
    with pytest.raises(InvalidTestsError):
        parse_tests(bad)


def test_check_tests_that_read_a_name_nothing_defines_are_rejected_when_parsed():
    """The judge runs HumanEval's test beside the problem's prompt, never beside the program: a test that reads a
    prompt helper (`poly`, as HumanEval/32) with no prompt stored would fail every right program, so it is refused
    when the tests are parsed, naming the helper; with the prompt, or a name the test or a built-in defines, it parses.
    """
    test = "import math\n\ndef check(candidate):\n    x = candidate([1, 2])\n    assert abs(poly([1, 2], x)) < 1e-6\n"
    with pytest.raises(InvalidTestsError, match=r"poly.*prompt"):
        parse_tests({"format": "check", "test": test, "entry_point": "find_zero", "prelude": ""})
    prompt = "def poly(xs, x):\n    return sum(c * x**i for i, c in enumerate(xs))\n\ndef find_zero(xs):\n    '''A zero.'''\n"
    assert parse_tests({"test": test, "entry_point": "find_zero", "prompt": prompt}).prompt == prompt
    own = (
        "def check(candidate):\n    helper = sorted\n    for k, v in {1: 2}.items():\n        assert helper([v, k])\n"
    )
    assert parse_tests({"test": own, "entry_point": "f"}).format == "check"
    # the entry point is always defined: the judge binds it to the program's function (HumanEval/33 reads it)
    by_name = "def check(candidate):\n    assert candidate([3, 1]) == sort_third([3, 1])\n"
    assert parse_tests({"test": by_name, "entry_point": "sort_third", "prelude": ""}).entry_point == "sort_third"
    with pytest.raises(InvalidTestsError, match="sort_third"):
        parse_tests({"test": by_name, "entry_point": "sort_first", "prelude": ""})
    with pytest.raises(InvalidTestsError, match="not valid Python"):
        parse_tests({"test": "def check(candidate):\n    assert (\n", "entry_point": "f"})


# ---------------------------------------------------------------------------------------------- rewards


def test_correct_partial_and_wrong_stdio(reward):
    completions = [
        block("a, b = map(int, input().split())\nprint(a + b)"),
        block("a, b = map(int, input().split())\nprint(a + b if a < 5 else 0)"),  # passes test 0 only
        block("print(0)"),
    ]
    rewards, metrics, reasons = run_reward(reward, completions, [ADD_TESTS] * 3)
    assert rewards == [1.0, pytest.approx(1 / 3), 0.0]
    assert reasons[0] == "3/3 passed" and "wrong" in reasons[1]
    assert metrics["code_reward/test_ok"] == 4 and metrics["code_reward/test_wrong"] == 5


def test_call_based_function_and_solution_class(reward):
    tests = json.dumps({"fn_name": "add_digits", "inputs": [[38], [0], [9999]], "outputs": [[2], [0], [9]]})
    good = "def add_digits(n):\n    while n >= 10:\n        n = sum(map(int, str(n)))\n    return n"
    half = "def add_digits(n):\n    return n % 10"  # right for 0 and 9999 only
    cls = "class Solution:\n    def add_digits(self, n):\n        return 0 if n == 0 else 1 + (n - 1) % 9"
    noisy = "print('debug output')\n" + good + "\nif __name__ == '__main__':\n    print(add_digits(int(input())))"
    rewards, _, reasons = run_reward(reward, [block(good), block(half), block(cls), block(noisy)], [tests] * 4)
    assert rewards == [1.0, pytest.approx(2 / 3), 1.0, 1.0], reasons


def test_call_based_wrong_types_and_missing_function(reward):
    tests = json.dumps({"fn_name": "f", "inputs": [[1], [2]], "outputs": [True, False]})
    rewards, _, reasons = run_reward(
        reward,
        [block("def f(x):\n    return 1 if x == 1 else 0"), block("def g(x):\n    return True")],
        [tests] * 2,
    )
    assert rewards == [0.0, 0.0], reasons


def test_humaneval_check_format(reward):
    tests = parse_tests(
        {
            "test": "def check(candidate):\n    assert candidate([1, 3, 2]) == [1, 3, 3]\n",
            "entry_point": "running_max",
            "prompt": "from typing import List\n\ndef running_max(xs: List[int]) -> List[int]:\n",
        }
    ).to_json()
    good = (
        "def running_max(xs: List[int]) -> List[int]:\n"
        "    out = []\n"
        "    for x in xs:\n"
        "        out.append(max(out[-1], x) if out else x)\n"
        "    return out"
    )
    rewards, _, reasons = run_reward(reward, [block(good), block("def running_max(xs):\n    return xs")], [tests] * 2)
    assert rewards == [1.0, 0.0]
    assert "assertion failed" in reasons[1]


def test_no_code_block_and_malformed_tests(reward, caplog):
    with caplog.at_level(logging.DEBUG, logger="codapo_trl.rewards.code"):
        rewards, metrics, reasons = run_reward(
            reward, ["I think the answer is 42.", block("print(3)")], [ADD_TESTS, "{broken json"]
        )
    assert rewards == [0.0, None]
    assert reasons[0] == "no code block" and reasons[1].startswith("invalid tests")
    assert metrics["code_reward/no_code_block"] == 1 and metrics["code_reward/skipped_invalid_tests"] == 1
    assert "no code block" in caplog.text and "invalid tests" in caplog.text


def test_conversational_completions_and_stable_name(reward):
    assert reward.__name__ == "code_execution_reward"
    assert code_execution_reward.__name__ == "code_execution_reward"
    completion = [{"role": "assistant", "content": block("a, b = map(int, input().split())\nprint(a + b)")}]
    assert reward([completion], [ADD_TESTS]) == [1.0]


def test_max_tests_and_max_timeouts():
    sb = Sandbox(SandboxConfig(timeout=1.0, memory_mb=256), max_workers=1)
    many = json.dumps({"inputs": [f"{i}\n" for i in range(20)], "outputs": [f"{i}\n" for i in range(20)]})
    ev = evaluate_code("print(input())", many, sandbox=sb, max_tests=5)
    assert ev.reward == 1.0 and len(ev.outcomes) == 5
    start = time.monotonic()
    ev = evaluate_code("import time\ntime.sleep(30)", many, sandbox=sb, max_tests=6, max_timeouts=1)
    assert ev.reward == 0.0 and len(ev.outcomes) == 6
    assert all(o.status is Status.TIMEOUT for o in ev.outcomes)
    assert time.monotonic() - start < 4.0  # one real timeout, the rest skipped


def test_duplicate_completions_run_once(reward):
    sb = reward.sandbox
    calls = []
    original = sb.run

    def counting_run(source, stdin="", *rest):
        calls.append(stdin)
        return original(source, stdin, *rest)

    sb.run = counting_run
    try:
        rewards = reward([block("a, b = map(int, input().split())\nprint(a + b)")] * 4, [ADD_TESTS] * 4)
    finally:
        del sb.run
    assert rewards == [1.0] * 4 and len(calls) == 3


@pytest.mark.timeout(180)
def test_trainer_memory_does_not_grow_with_the_outputs_it_judged():
    """Every run's output (up to `max_output_bytes`, 4 MiB by default) is judged as soon as the run ends and then
    dropped: a completion whose 16 test cases each print 4 MB costs the trainer's process about what 4 such test
    cases cost, not 16 x 4 MB (which it held until the sample was judged before issue 61)."""
    import tracemalloc

    reward = make_code_execution_reward(timeout=10.0, memory_mb=256, max_workers=2, max_tests=16)
    output = "7 " * 2_000_000  # 4 MB
    program = block("import sys\nsys.stdin.read()\nsys.stdout.write('7 ' * 2_000_000)")

    def peak_of(n: int) -> tuple[list, float]:
        tests = json.dumps({"inputs": [f"{i}\n" for i in range(n)], "outputs": ["7 7 7"] * n})  # distinct runs
        tracemalloc.start()
        try:
            rewards = reward([program], [tests])
            return rewards, tracemalloc.get_traced_memory()[1] / 1e6
        finally:
            tracemalloc.stop()

    reward([program], [json.dumps({"inputs": ["0\n"], "outputs": ["7"]})])  # the sandbox's own start-up
    (rewards_4, peak_4), (rewards_16, peak_16) = peak_of(4), peak_of(16)
    assert rewards_4 == rewards_16 == [0.0]  # 2,000,000 tokens for 3
    assert peak_16 < peak_4 + 4.0, (peak_4, peak_16)
    assert peak_16 < 2 * 2 * 4.0 + 8.0, (peak_4, peak_16)  # two runs at a time, each its bytes and its text
    # honest counterpart: 4 MB of right output is paid
    assert reward([program], [json.dumps({"inputs": ["0\n"], "outputs": [output]})]) == [1.0]


# ---------------------------------------------------------------------------------------------- hostile programs


def _hostile_programs(tmp_tag: str, port: int, repo_dir: str) -> dict[str, str]:
    return {
        "infinite_loop": "while True:\n    pass",
        "fork_bomb": "import os\nwhile True:\n    os.fork()",
        "ten_gigabytes": "x = bytearray(10 * 1024 ** 3)\nprint('escaped')",
        "write_outside": (
            f"open('/tmp/escape_{tmp_tag}', 'w').write('x')\nopen({repo_dir!r} + '/escape_{tmp_tag}', 'w').write('x')\n"
            "print('escaped')"
        ),
        "socket": (
            f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=1)\ns.sendall(b'hi')\n"
            "print('escaped')"
        ),
        "print_a_gigabyte": "import sys\nb = 'x' * (1 << 20)\nfor _ in range(1024):\n    sys.stdout.write(b)",
        "kill_parent": "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nprint('escaped')",
        "read_secrets": "import os\nprint(os.environ.get('HF_TOKEN', 'nothing'))",
        "double_fork": (
            "import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        time.sleep(60)\n"
            "    os._exit(0)\nprint('escaped')"
        ),
    }


def test_hostile_programs_get_zero_with_a_reason(reward, monkeypatch, caplog, tmp_path):
    secret = "hf_" + secrets.token_hex(8)
    monkeypatch.setenv("HF_TOKEN", secret)
    tag = secrets.token_hex(6)
    repo_dir = str(Path(__file__).parents[1])
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    server.settimeout(0.2)
    try:
        programs = _hostile_programs(tag, server.getsockname()[1], repo_dir)
        # Each escape would print "escaped" (or the secret): that is the "expected" output.
        tests = [
            json.dumps({"inputs": [""], "outputs": [secret if name == "read_secrets" else "escaped"]})
            for name in programs
        ]
        start = time.monotonic()
        with caplog.at_level(logging.DEBUG, logger="codapo_trl.rewards.code"):
            rewards, metrics, reasons = run_reward(reward, [block(src) for src in programs.values()], tests)
        elapsed = time.monotonic() - start
        with pytest.raises(socket.timeout):
            server.accept()
    finally:
        server.close()
    by_name = dict(zip(programs, zip(rewards, reasons)))
    assert all(r == 0.0 for r, _ in by_name.values()), by_name
    assert all(reason and "0/1 passed" in reason for _, reason in by_name.values()), by_name
    assert "timeout" in by_name["infinite_loop"][1]
    assert "memory" in by_name["ten_gigabytes"][1]
    assert "output_limit" in by_name["print_a_gigabyte"][1]
    assert not os.path.exists(f"/tmp/escape_{tag}") and not os.path.exists(f"{repo_dir}/escape_{tag}")
    assert elapsed < 20.0
    assert sum(v for k, v in metrics.items() if k.startswith("code_reward/test_")) == len(programs)
    assert "sample 0: reward=0.0" in caplog.text


# ---------------------------------------------------------------------------------------------- loaders


def test_load_taco_local_jsonl():
    ds = load_taco(path=str(FIXTURES / "taco_sample.jsonl"))
    assert len(ds) == 5  # the problem without test data is skipped
    assert set(ds.column_names) >= {"prompt", "tests", "question", "difficulty", "starter_code"}
    prompt = ds[0]["prompt"]
    assert prompt[0] == {"role": "system", "content": CODE_SYSTEM_PROMPT}
    assert prompt[1]["role"] == "user" and "standard input" in prompt[1]["content"]
    call_row = ds[2]
    assert json.loads(call_row["tests"])["format"] == "call" and "count_vowels" in call_row["prompt"][1]["content"]
    assert "starter code" in call_row["prompt"][1]["content"]
    assert load_taco(path=str(FIXTURES / "taco_sample.jsonl"), difficulties=["easy"])["difficulty"] == ["EASY"] * 2
    assert len(load_taco(path=str(FIXTURES / "taco_sample.jsonl"), limit=2)) == 2
    capped = load_taco(path=str(FIXTURES / "taco_sample.jsonl"), max_tests=1)
    assert all(len(json.loads(t)["inputs"]) == 1 for t in capped["tests"])
    with pytest.raises(InvalidTestsError):
        load_taco(path=str(FIXTURES / "taco_sample.jsonl"), skip_invalid=False)


def test_load_taco_parquet_and_missing_fields(tmp_path):
    import datasets

    rows = [json.loads(line) for line in (FIXTURES / "taco_sample.jsonl").read_text().splitlines()]
    parquet = tmp_path / "taco.parquet"
    datasets.Dataset.from_list(rows).to_parquet(str(parquet))
    assert len(load_taco(path=str(parquet))) == 5
    broken = tmp_path / "broken.jsonl"
    broken.write_text(json.dumps({"question": "q", "difficulty": "EASY"}) + "\n")
    with pytest.raises(KeyError, match="input_output"):
        load_taco(path=str(broken))
    with pytest.raises(FileNotFoundError):
        load_taco(path=str(tmp_path / "missing.jsonl"))


def test_fixture_reference_solutions_pass(reward):
    rows = [json.loads(line) for line in (FIXTURES / "taco_sample.jsonl").read_text().splitlines()]
    ds = load_taco(path=str(FIXTURES / "taco_sample.jsonl"))
    solutions = [json.loads(r["solutions"])[0] for r in rows if r["input_output"]]
    assert reward([block(s) for s in solutions], ds["tests"]) == [1.0] * len(ds)

    he = load_humaneval(path=str(FIXTURES / "humaneval_sample.jsonl"))
    he_rows = [json.loads(line) for line in (FIXTURES / "humaneval_sample.jsonl").read_text().splitlines()]
    assert set(he.column_names) >= {"prompt", "tests", "task_id", "entry_point"}
    completions = [block(r["prompt"] + r["canonical_solution"]) for r in he_rows]
    assert reward(completions, he["tests"]) == [1.0] * len(he)
    # without the body, the functions return None and fail
    assert reward([block(r["prompt"] + "    pass\n") for r in he_rows], he["tests"]) == [0.0] * len(he)


def test_demo_data_is_solvable(reward):
    ds = load_code_jsonl(str(DEMO))
    assert 8 <= len(ds) <= 16
    solutions = [json.loads(line)["solution"] for line in DEMO.read_text().splitlines()]
    assert reward([block(s) for s in solutions], ds["tests"]) == [1.0] * len(ds)
    assert reward([block("print('?')")] * len(ds), ds["tests"]) == [0.0] * len(ds)


def test_load_humaneval_missing_fields(tmp_path):
    bad = tmp_path / "he.jsonl"
    bad.write_text(json.dumps({"task_id": "x", "prompt": "def f():\n"}) + "\n")
    with pytest.raises(KeyError, match="entry_point"):
        load_humaneval(path=str(bad))
