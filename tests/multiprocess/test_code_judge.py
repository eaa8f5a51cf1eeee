"""The judge of `call` and `check` runs (issue 25): the wire format, the comparison rules, and programs that attack
the judge itself rather than the sandbox.

Each hostile program is bounded even if the defence fails (2 s wall clock per run, answers capped at 64 KiB) and
has an honest counterpart that must be paid. The red team's cases are in `tests/multiprocess/test_code_judge_redteam.py`.
"""

from __future__ import annotations

import collections
import json
import math
import resource
import time

import pytest

from codapo_trl.rewards.code import evaluate_code, parse_tests
from codapo_trl.sandbox import Sandbox, SandboxConfig, Status
from codapo_trl.sandbox.judge import _sync, call_result_matches, outputs_match, values_match
from codapo_trl.sandbox.wire import MAX_COLLISION_COST, MAX_DEPTH, MAX_INT_HEX_DIGITS, WireError, decode, encode, frame


# ---------------------------------------------------------------------------------------------- the wire format

PLAIN = [
    None,
    True,
    False,
    0,
    -(3**200),
    1.5,
    -0.0,
    float("inf"),
    "",
    "héllo\ud800 wörld",  # a lone surrogate survives
    [1, [2, (3, "x")]],
    (),
    {"a": 1, 2: [3], (4, 5): None, None: frozenset({6})},
    {1, 2, 3},
]


@pytest.mark.parametrize("value", PLAIN, ids=[repr(v)[:30] for v in PLAIN])
def test_wire_round_trip(value):
    back = decode(encode(value))
    assert back == value and type(back) is type(value)


def test_wire_nan_and_exact_types():
    assert math.isnan(decode(encode(float("nan"))))
    assert [type(x) for x in decode(encode([True, 1, 1.0, "1"]))] == [bool, int, float, str]


def test_wire_sends_subclasses_as_their_plain_value():
    class Liar(int):
        def __eq__(self, other):
            return True

        __hash__ = int.__hash__

    class LyingDict(dict):
        def items(self):
            return iter([("a", 1)])

    assert type(decode(encode(Liar(-5)))) is int and decode(encode(Liar(-5))) == -5
    assert decode(encode(LyingDict(z=9))) == {"z": 9}
    assert decode(encode(collections.Counter("aab"))) == {"a": 2, "b": 1}
    assert decode(encode(collections.namedtuple("P", "x y")(1, 2))) == (1, 2)
    for bad in (object(), len, type, b"bytes", 1j, iter([1])):
        with pytest.raises(WireError):
            encode(bad)


@pytest.mark.parametrize(
    "text",
    [
        b"i0x1;",  # not canonical
        b"i 1;",
        b"i01;",
        b"i1_0;",
        b"r1.5;",  # floats only in float.hex form
        b"s3:ab",  # string past the end
        b"s03:abc",
        b"L2:n",  # count past the end
        b"L99999999999999:n",
        b"nn",  # trailing data
        b"x",  # unknown tag
        b"",
        b"D1:L0:n",  # unhashable key
        b"\xff",  # not UTF-8
    ],
)
def test_wire_refuses_anything_but_canonical_plain_data(text):
    with pytest.raises(WireError):
        decode(text)


def test_wire_bounds_depth_and_size():
    deep = []
    for _ in range(MAX_DEPTH + 5):
        deep = [deep]
    with pytest.raises(WireError):
        encode(deep)
    with pytest.raises(WireError):
        decode(b"L1:" * (MAX_DEPTH + 5) + b"L0:")
    looped: list = []
    looped.append(looped)
    with pytest.raises(WireError):
        encode(looped)
    with pytest.raises(WireError):
        encode("x" * 100, max_chars=50)
    assert frame(b"abc") == b"3\nabc"


def test_wire_json_like():
    assert decode(encode({1: (2, 3), False: None, None: 1.5, 2.5: "x"}), json_like=True) == {
        "1": [2, 3],
        "false": None,
        "null": 1.5,
        "2.5": "x",
    }
    for value in ({1, 2}, {(1, 2): 3}, {frozenset(): 1}):
        with pytest.raises(WireError):
            decode(encode(value), json_like=True)


# ---------------------------------------------------------------------------------------------- comparisons


def test_comparison_rules():
    assert outputs_match("1 2\n3\n", "1 2 3") and not outputs_match("1 2", "1 2 3")
    assert outputs_match("0.3333333333333333", "0.333333333333") and outputs_match("2.500000000", "2.5")
    assert not outputs_match("3.0000001", "3") and not outputs_match("1e+21", "1000000000000000000001")
    # Issue 61 changed this: `007` was paid for `7` (integers compared by value); leading zeros are part of an
    # answer, so an expected integer token is matched only by the same text.
    assert not outputs_match("007", "7") and outputs_match("7", "7")
    assert not outputs_match("nan", "nan0") and not outputs_match("inf", "1e400")
    assert values_match(0.5 + 1e-9, 0.5) and values_match(10**300, 1e300) and not values_match(float("inf"), 1e300)
    assert not values_match(3 + 1e-7, 3) and not values_match("3", 3) and not values_match(3, "3")
    assert not values_match(True, 1) and not values_match([6], 6) and values_match(None, None)
    assert call_result_matches(2, [2]) and not call_result_matches([2, 3], [2])
    assert not values_match({"a": 1}, {"a": 1, "b": 2}) and values_match([[1, 2.0]], [[1, 2.0]])


def test_sync_keeps_identities():
    inner = [3, 1]
    old = [inner, {"k": [1]}, {1, 2}]
    keep_dict = old[1]
    assert _sync(old, [[1, 3], {"k": [], "n": 1}, {5}])
    assert old == [[1, 3], {"k": [], "n": 1}, {5}] and old[0] is inner and old[1] is keep_dict
    pair = ([1], 2)
    assert _sync(pair, ([9, 9], 2)) and pair == ([9, 9], 2)


# ---------------------------------------------------------------------------------------------- programs


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(SandboxConfig(timeout=2.0, memory_mb=256, max_output_bytes=1 << 16), max_workers=2) as sb:
        yield sb


def check_tests(test: str, entry_point: str, prompt: str = "") -> dict:
    return {"test": test, "entry_point": entry_point, "prompt": prompt}


INPLACE = check_tests(
    "def check(candidate):\n    x = [3, 1, 2]\n    assert candidate(x) is None\n    assert x == [1, 2, 3]\n"
    "    grid = [[2, 1], [4, 3]]\n    row = grid[0]\n    candidate(grid[1])\n    assert grid == [[2, 1], [3, 4]] and grid[0] is row\n"
    "    d = {'b': [2, 1]}\n    candidate(d['b'])\n    assert d == {'b': [1, 2]}\n",
    "sort_in_place",
)
KWARGS = check_tests(
    "def check(candidate):\n    acc = []\n    assert candidate(1, into=acc) == 1\n    assert candidate(2, into=acc) == 2\n"
    "    assert acc == [1, 2]\n",
    "push",
)
# HumanEval/32's shape: the test calls `poly`, a helper the prompt defines.
POLY_PROMPT = (
    "import math\n\n\ndef poly(xs: list, x: float):\n    return sum(coeff * math.pow(x, i) for i, coeff in enumerate(xs))\n"
    '\n\ndef find_zero(xs: list):\n    """A zero of the polynomial xs."""\n'
)
POLY = check_tests(
    "import copy\n\ndef check(candidate):\n    for coeffs in ([-6, 11, -6, 1], [1, 2], [-1, 0, 1]):\n"
    "        solution = candidate(copy.deepcopy(coeffs))\n        assert math.fabs(poly(coeffs, solution)) < 1e-4\n",
    "find_zero",
    POLY_PROMPT,
)
FIND_ZERO = (
    "def find_zero(xs):\n    lo, hi = -100.0, 100.0\n    if poly(xs, lo) > 0:\n        lo, hi = hi, lo\n"
    "    for _ in range(200):\n        mid = (lo + hi) / 2\n        if poly(xs, mid) > 0:\n            hi = mid\n"
    "        else:\n            lo = mid\n    return lo\n"
)
RAISES = check_tests(
    "def check(candidate):\n    assert candidate(4) == 2\n    try:\n        candidate(-1)\n    except ValueError:\n"
    "        pass\n    else:\n        raise AssertionError('no ValueError')\n",
    "root",
)
LOOP_OVER_MAP = check_tests(
    "def check(candidate):\n    for got, want in zip(map(candidate, [1, 2, 3]), [2, 4, 6]):\n        assert got == want\n"
    "    assert len(list(map(candidate, [1, 2, 3]))) == 3\n",
    "double",
)
ADD_CALL = {"format": "call", "fn_name": "add", "inputs": [[1, 2]], "outputs": [3]}
ADD_CHECK = check_tests(
    "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(5, 5) == 10\n", "add"
)
WRONG_ADD = "def add(a, b):\n    return a - b\n"
SPRAY = (  # writes `data` on every descriptor but 0-2
    "import os\ndef _spray(data):\n    for fd in range(3, 64):\n        try:\n            os.write(fd, data)\n"
    "        except OSError:\n            pass\n"
)

HONEST = {
    "mutated_arguments_reach_the_test": (
        "def sort_in_place(xs):\n    xs.sort()\n",
        INPLACE,
    ),
    "mutated_keyword_argument": ("def push(x, into):\n    into.append(x)\n    return x\n", KWARGS),
    "test_calls_the_prompts_helper": (POLY_PROMPT + FIND_ZERO, POLY),
    "expected_exception_reaches_the_test": (
        "def root(x):\n    if x < 0:\n        raise ValueError('negative')\n    return int(x ** 0.5)\n",
        RAISES,
    ),
    "candidate_calls_itself": ("def double(x):\n    return x if x == 0 else 2 + double(x - 1)\n", LOOP_OVER_MAP),
    "honest_add": ("def add(a, b):\n    return a + b\n", ADD_CHECK),
}

HOSTILE = {
    # the arguments: not mutating where the test looks at the mutation
    "copy_instead_of_in_place": ("def sort_in_place(xs):\n    xs = sorted(xs)\n", INPLACE),
    # the prompt's helper: the judge calls the dataset's, not the program's
    "redefines_the_prompts_helper": (
        "def poly(xs, x):\n    return 0.0\ndef find_zero(xs):\n    return 12345.0\n",
        POLY,
    ),
    # the exception mapping: StopIteration would end the test's loop over map(candidate, ...) early
    "stop_iteration_ends_the_tests_loop": ("def double(x):\n    raise StopIteration\n", LOOP_OVER_MAP),
    # the channel: forged, malformed, oversized or withheld answers
    "forged_ok_frames_on_every_fd": (
        SPRAY + "_spray(b'ok 3\\n')\n_spray(b'pass\\n')\n" + WRONG_ADD,
        ADD_CALL,
    ),
    "framed_right_answer_written_by_the_program": (
        # a well-formed `ok 3` answer written before the runner's own `ready`: the judge reads it as `ready`
        SPRAY + "_spray(b'13\\nT4:s2:oki3;nn')\n" + WRONG_ADD,
        ADD_CALL,
    ),
    # answers written by the program itself are only values it chose, as a function returning them would be (a
    # blind forger answers 3 to every call)
    "answers_the_judge_itself_then_exits": (
        "import os, sys\n"
        "def _answer(message):\n    data = message.encode()\n"
        "    for fd in range(3, 64):\n        try:\n            os.write(fd, str(len(data)).encode() + b'\\n' + data)\n"
        "        except OSError:\n            pass\n"
        "_answer('T2:s5:readyt')\n_answer('T4:s2:oki3;nn')\n_answer('T4:s2:oki3;nn')\nos._exit(0)\n",
        ADD_CHECK,
    ),
    "huge_frame_header": (SPRAY + "_spray(b'99999999999\\n')\n" + WRONG_ADD, ADD_CALL),
    "answer_past_the_size_cap": ("def add(a, b):\n    return 'x' * (1 << 20)\n", ADD_CALL),
    "deeply_nested_frame": (SPRAY + "_spray(b'30003\\n' + b'L1:' * 10000 + b'n')\n" + WRONG_ADD, ADD_CALL),
    "closes_its_channel": (
        "import os\nfor fd in range(3, 64):\n    try:\n        os.close(fd)\n    except OSError:\n        pass\n"
        "def add(a, b):\n    return a + b\n",
        ADD_CHECK,
    ),
    "never_answers": ("import time\ndef add(a, b):\n    time.sleep(60)\n", ADD_CHECK),
    "reads_the_requests_itself": (
        "import os\nfor fd in range(3, 64):\n    try:\n        os.read(fd, 0)\n        os.set_blocking(fd, False)\n"
        "        os.read(fd, 1 << 16)\n    except OSError:\n        pass\n" + WRONG_ADD,
        ADD_CHECK,
    ),
    "returns_unsendable_objects": ("def add(a, b):\n    return lambda: 3\n", ADD_CHECK),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", sorted(HONEST))
def test_honest_program_is_paid(case, sandbox):
    source, tests = HONEST[case]
    evaluation = evaluate_code(source, tests, sandbox=sandbox)
    assert evaluation.reward == 1.0, evaluation.reason


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_program_is_not_paid(case, sandbox):
    source, tests = HOSTILE[case]
    start = time.monotonic()
    evaluation = evaluate_code(source, tests, sandbox=sandbox)
    assert evaluation.reward == 0.0, evaluation.reason
    assert evaluation.outcomes and all(o.status is not Status.SANDBOX_ERROR for o in evaluation.outcomes)
    assert time.monotonic() - start < 10.0


def test_a_broken_test_is_not_the_programs_fault(sandbox):
    broken = check_tests("def check(candidate):\n    assert candidate(1) == undefined_name\n", "f")
    evaluation = evaluate_code("def f(x):\n    return x\n", broken, sandbox=sandbox)
    # A name nothing defines would fail every program: the tests are refused when parsed (skipped, not paid 0.0).
    assert evaluation.reward is None and "undefined_name" in evaluation.reason
    no_check = check_tests("def test(candidate):\n    pass\n", "f")
    skipped = evaluate_code("def f(x):\n    return x\n", no_check, sandbox=sandbox)
    assert skipped.reward is None and "check" in skipped.reason
    unsendable = check_tests("def check(candidate):\n    assert candidate(object()) is None\n", "f")
    skipped = evaluate_code("def f(x):\n    return None\n", unsendable, sandbox=sandbox)
    assert skipped.reward is None and "plain data" in skipped.reason


def test_prompt_round_trips_in_the_tests_column():
    tests = parse_tests(POLY)
    assert tests.prompt == POLY_PROMPT and tests.prelude == "import math"
    assert parse_tests(json.loads(tests.to_json())) == tests


# ---------------------------------------------------------------------------------------------- a failure is never a skip
# Issue 33: whatever the program sends, or fails to send, is the program's result (0), never a sandbox error (None,
# which would drop the sample out of the group's correctness). Each program below writes its own frame on its answer
# channel in place of one of the runner's messages (the judge reads it as that message), with a value the judge
# must not format, hash or build at unbounded cost; or breaks the protocol; or exits before a verdict. Each is
# bounded even if the defence fails (pytest timeout, 3 s per run), must score 0, and may cost the caller's own
# process little CPU (the judge is a separate, limited process).

P61 = 2**61 - 1  # k * P61 hashes to 0 for every int k
FORGE = (
    "import os\n"
    "def _frame(text):\n"
    "    data = text.encode('utf-8', 'surrogatepass')\n"
    "    return str(len(data)).encode() + b'\\n' + data\n"
    "def _send(text):\n"
    "    frame = _frame(text)\n"
    "    for fd in range(3, 64):\n"
    "        try:\n"
    "            os.write(fd, frame)\n"
    "        except OSError:\n"
    "            pass\n"
    "    os._exit(0)\n"
    f"P = {P61}\n"
    "PAYLOADS = {\n"
    "    'huge_int': lambda: 'i' + format(10 ** 5000, 'x') + ';',\n"  # within the bound: never formatted
    "    'too_big_int': lambda: 'i' + 'f' * 70000 + ';',\n"  # past the bound: refused before it is converted
    "    'colliding_set': lambda: 'S40000:' + ''.join('i%x;' % (k * P) for k in range(1, 40001)),\n"
    "    'colliding_dict': lambda: 'D40000:' + ''.join('i%x;n' % (k * P) for k in range(1, 40001)),\n"
    "    'colliding_tuples': lambda: 'Z40000:' + ''.join('T2:ni%x;' % (k * P) for k in range(1, 40001)),\n"
    "    'deep': lambda: 'L1:' * 150 + 'n',\n"
    "}\n"
)
# Where the forged value goes, as the text of the runner's message around it (`{}`); a forged result is a wrong one
# (0), so that only the forged value is on trial.
MESSAGE_KINDS = {
    "ready": ("module", "T2:s5:ready{}"),
    "init_error": ("module", "T2:s5:error{}"),
    "ok_result": ("call", "T4:s2:ok{}nn"),
    "ok_args_state": ("call", "T4:s2:oki0;L2:{}nn"),
    "ok_kwargs_state": ("call", "T4:s2:oki0;nD1:s4:into{}"),
    "raise_name": ("call", "T3:s5:raise{}s1:x"),
    "raise_message": ("call", "T3:s5:raises10:ValueError{}"),
    "bad": ("call", "T2:s3:bad{}"),
}
PAYLOAD_NAMES = ["huge_int", "too_big_int", "colliding_set", "colliding_dict", "colliding_tuples", "deep"]
# `push(x, into)` with a keyword argument, so that every message kind of a `check` run is read
PUSH_CHECK = check_tests(
    "def check(candidate):\n    acc = []\n    assert candidate(1, into=acc) == 1\n    assert acc == [1]\n", "push"
)
PUSH_CALL = {"format": "call", "fn_name": "push", "inputs": [[1, []]], "outputs": [1]}
HONEST_PUSH = "def push(x, into):\n    into.append(x)\n    return x\n"


def forged(kind: str, payload: str) -> str:
    where, message = MESSAGE_KINDS[kind]
    send = f"_send({message!r}.format(PAYLOADS[{payload!r}]()))"
    if where == "module":
        return FORGE + send + "\n" + HONEST_PUSH
    return FORGE + f"def push(x, into):\n    {send}\n"


@pytest.fixture(scope="module")
def roomy_sandbox():
    """Frames up to 4 MiB (the default), so that the colliding containers reach the decoder."""
    with Sandbox(SandboxConfig(timeout=3.0, memory_mb=256), max_workers=1) as sb:
        yield sb


def _scored(source: str, tests: dict, sandbox: Sandbox) -> tuple:
    """(evaluation, the caller's own CPU seconds, wall seconds) of one evaluation."""
    before, start = _self_cpu(), time.monotonic()
    evaluation = evaluate_code(source, tests, sandbox=sandbox)
    return evaluation, _self_cpu() - before, time.monotonic() - start


def _self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def assert_failure_not_skip(evaluation, cpu: float, wall: float) -> None:
    assert evaluation.reward == 0.0, evaluation.reason
    assert all(o.status is not Status.SANDBOX_ERROR for o in evaluation.outcomes), evaluation.reason
    # The caller's process reads pipes and a verdict line; the judge is its own process, killed by the deadline.
    assert cpu < 0.5, (cpu, evaluation.reason)
    assert wall < 3.0 + 3.0, (wall, evaluation.reason)


FORGED_CASES = [(k, p, "check") for k in MESSAGE_KINDS for p in PAYLOAD_NAMES] + [
    (k, p, "call")
    for k in MESSAGE_KINDS
    if k != "ok_kwargs_state"
    for p in ("huge_int", "too_big_int", "colliding_dict", "deep")
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind, payload, mode", FORGED_CASES, ids=["-".join(c) for c in FORGED_CASES])
def test_forged_message_with_an_unbounded_value_is_the_programs_failure(kind, payload, mode, roomy_sandbox):
    tests = PUSH_CHECK if mode == "check" else PUSH_CALL
    assert_failure_not_skip(*_scored(forged(kind, payload), tests, roomy_sandbox))


PROTOCOL_BREAKERS = {
    # the two attacks as a policy would write them: a 5,000-digit int, and a set of ints sharing one hash,
    # each in the program's own `ok` frame
    "issue_huge_int_answer": FORGE + "def push(x, into):\n    _send('T4:s2:ok' + PAYLOADS['huge_int']() + 'nn')\n",
    "issue_colliding_set_answer": FORGE
    + "def push(x, into):\n    _send('T4:s2:ok' + PAYLOADS['colliding_set']() + 'nn')\n",
    # through the runner itself: the values are refused when encoded ("bad") or decoded
    "returns_a_huge_int": "def push(x, into):\n    return 10 ** 5000\n",
    "returns_a_too_big_int": "def push(x, into):\n    return 10 ** 100000\n",
    "returns_colliding_ints": f"def push(x, into):\n    return {{k * {P61} for k in range(1, 3000)}}\n",
    "returns_too_deep": "def push(x, into):\n    v = None\n    for _ in range(150):\n        v = [v]\n    return v\n",
    "raises_with_a_huge_int": "def push(x, into):\n    raise ValueError(10 ** 5000)\n",
    "mutates_the_argument_into_a_too_big_int": "def push(x, into):\n    into.append(10 ** 100000)\n    return x\n",
    # protocol breakers
    "garbage_bytes": "import os\nfor fd in range(3, 64):\n    try:\n        os.write(fd, os.urandom(4096))\n"
    "    except OSError:\n        pass\nos._exit(0)\n",
    "not_utf8": FORGE.replace("text.encode('utf-8', 'surrogatepass')", "b'\\xff' * 8") + "_send('')\n",
    "non_canonical_text": FORGE + "_send('T2:s5:readyi01;')\n",
    "not_a_message": FORGE + "_send('i3;')\n",
    "half_a_frame_then_exit": "import os\nfor fd in range(3, 64):\n    try:\n        os.write(fd, b'100\\nT2:s5:re')\n"
    "    except OSError:\n        pass\nos._exit(0)\n",
    "header_only_then_exit": "import os\nfor fd in range(3, 64):\n    try:\n        os.write(fd, b'4000000\\n')\n"
    "    except OSError:\n        pass\nos._exit(0)\n",
    "exits_in_the_call": "import os\ndef push(x, into):\n    os._exit(0)\n",
    "exits_before_ready": "import os\nos._exit(0)\n",
    # a right result with a state that does not fit the call (a `call` run ignores the state, and is paid)
    "malformed_state_caught_by_the_test": FORGE + "def push(x, into):\n    _send('T4:s2:oki1;i7;n')\n",
    "state_for_another_argument": FORGE + "def push(x, into):\n    _send('T4:s2:oki1;nD1:s5:otheri1;')\n",
    "realtime_signal_to_itself": "import os\ndef push(x, into):\n    os.kill(os.getpid(), 40)\n",
    # a lone surrogate in the source (was a set-up failure writing solution.py: None)
    "lone_surrogate_in_the_source": "def push(x, into):\n    return '\ud800'\n",
}
# A test that swallows every `Exception` the candidate's answer could cause: only a verdict the program cannot
# reach (a broken channel is not an `Exception`) keeps a malformed answer from passing.
LENIENT_CHECK = check_tests(
    "def check(candidate):\n    acc = []\n    try:\n        assert candidate(1, into=acc) == 1\n    except Exception:\n"
    "        pass\n    assert acc == [1] or acc == []\n",
    "push",
)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", sorted(PROTOCOL_BREAKERS))
def test_data_that_breaks_the_protocol_is_the_programs_failure(case, roomy_sandbox):
    source = PROTOCOL_BREAKERS[case]
    state_only = case.startswith(("malformed", "state_for", "mutates"))  # the state a `call` run does not use
    for tests in (PUSH_CHECK,) if state_only else (PUSH_CHECK, PUSH_CALL):
        assert_failure_not_skip(*_scored(source, tests, roomy_sandbox))
    if state_only:
        assert_failure_not_skip(*_scored(source, LENIENT_CHECK, roomy_sandbox))


# The honest counterparts: values near every bound, and programs that end the way HumanEval's own solutions do.
BIG = 10**4000
HONEST_BOUNDS = {
    # what every forged message above replaces, and the lenient test
    "push": (HONEST_PUSH, PUSH_CHECK, PUSH_CALL),
    "push_through_a_lenient_test": (HONEST_PUSH, LENIENT_CHECK, None),
    "int_of_4000_digits": (  # the most a JSON expected value holds
        "def big(n):\n    return 10 ** n\n",
        check_tests("def check(candidate):\n    assert candidate(4000) == 10 ** 4000\n", "big"),
        {"format": "call", "fn_name": "big", "inputs": [[4000]], "outputs": [BIG]},
    ),
    "factorial_of_4750_digits": (  # past str()'s limit: a HumanEval-style test computes it, and HumanEval pays it
        "def fact(n):\n    r = 1\n    for i in range(2, n + 1):\n        r *= i\n    return r\n",
        check_tests(
            "import math\n\ndef check(candidate):\n    assert candidate(1700) == math.factorial(1700)\n", "fact"
        ),
        None,
    ),
    "hundreds_of_keys_sharing_a_hash": (  # a right answer, however contrived (a dozen: the red team's case)
        f"def keys(n):\n    return {{k * {P61} for k in range(n)}} | {{-1, -2}}\n",
        check_tests(
            f"def check(candidate):\n    assert candidate(300) == {{k * {P61} for k in range(300)}} | {{-1, -2}}\n"
            f"    assert candidate(12) == {{k * {P61} for k in range(12)}} | {{-1, -2}}\n",
            "keys",
        ),
        None,
    ),
    "a_dict_with_hundreds_of_keys_sharing_a_hash": (
        f"def table(n):\n    return {{k * {P61}: k for k in range(n)}}\n",
        check_tests(f"def check(candidate):\n    assert candidate(300)[299 * {P61}] == 299\n", "table"),
        None,
    ),
    "twenty_thousand_distinct_items": (
        "def many(n):\n    return set(range(n)), {i: str(i) for i in range(n)}\n",
        check_tests(
            "def check(candidate):\n    s, d = candidate(20000)\n    assert s == set(range(20000)) and d[19999] == '19999'\n",
            "many",
        ),
        None,
    ),
    "nested_90_deep": (
        "def nest(n):\n    v = []\n    for _ in range(n):\n        v = [v]\n    return v\n",
        check_tests(
            "def check(candidate):\n    v = candidate(90)\n    for _ in range(90):\n        v = v[0]\n    assert v == []\n",
            "nest",
        ),
        None,
    ),
    "raises_with_a_long_message": (
        "def root(x):\n    raise ValueError('negative ' * 10000)\n",
        check_tests(
            "def check(candidate):\n    try:\n        candidate(-1)\n    except ValueError as e:\n"
            "        assert str(e).startswith('negative')\n    else:\n        raise AssertionError\n",
            "root",
        ),
        None,
    ),
    # issue 33, part 2: HumanEval's harness exec's the program, so its main block never runs there
    "doctest_main_block": (
        'def add(a, b):\n    """\n    >>> add(1, 2)\n    3\n    """\n    return a + b\n\n\n'
        'if __name__ == "__main__":\n    import doctest\n    doctest.testmod()\n',
        ADD_CHECK,
        ADD_CALL,
    ),
    "input_main_block": (
        'def add(a, b):\n    return a + b\n\n\nif __name__ == "__main__":\n    a, b = map(int, input().split())\n'
        "    print(add(a, b))\n",
        ADD_CHECK,
        ADD_CALL,
    ),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", sorted(HONEST_BOUNDS))
def test_honest_values_near_the_bounds_are_paid(case, roomy_sandbox):
    source, check, call = HONEST_BOUNDS[case]
    for tests in (check, call):
        if tests is not None:
            evaluation = evaluate_code(source, tests, sandbox=roomy_sandbox)
            assert evaluation.reward == 1.0, (tests.get("format", "check"), evaluation.reason)


def test_stdio_programs_still_run_as_main(roomy_sandbox):
    source = HONEST_BOUNDS["input_main_block"][0]
    tests = {"format": "stdio", "inputs": ["1 2\n"], "outputs": ["3\n"]}
    assert evaluate_code(source, tests, sandbox=roomy_sandbox).reward == 1.0
    assert (
        evaluate_code("print(__name__)", {"inputs": [""], "outputs": ["__main__"]}, sandbox=roomy_sandbox).reward
        == 1.0
    )
    check = check_tests("def check(candidate):\n    assert candidate() == 'solution'\n", "name")
    assert evaluate_code("def name():\n    return __name__\n", check, sandbox=roomy_sandbox).reward == 1.0


def test_a_judge_that_cannot_start_is_the_sandboxs_fault(roomy_sandbox, monkeypatch):
    """`None` stays for what is nobody's answer: here the judge's interpreter cannot find the judge."""
    from codapo_trl.sandbox import executor

    monkeypatch.setattr(executor, "_JUDGE_ARGS", ("-E", "-s", "-S", "-m", "no_such_judge_module"))
    evaluation = evaluate_code(HONEST_PUSH, PUSH_CHECK, sandbox=roomy_sandbox)
    assert evaluation.reward is None and "sandbox error" in evaluation.reason, evaluation.reason


def test_wire_bounds_on_ints_and_hashes():
    largest = 16**MAX_INT_HEX_DIGITS - 1
    for value in (BIG, -BIG, 10**5000, largest, -largest):
        assert decode(encode(value)) == value
    for value in (largest + 1, -largest - 1, 10**100000):
        with pytest.raises(WireError, match="digits"):
            encode(value)
        text = b"i" + format(value, "x").encode() + b";"
        with pytest.raises(WireError, match="digits"):
            decode(text)
    start = time.process_time()
    with pytest.raises(WireError, match="digits"):
        decode(b"i" + b"f" * 10**7 + b";")  # refused before it is converted
    assert time.process_time() - start < 0.5
    # keys sharing one hash: a hundred cost ~10**5 character comparisons to put in a set, 5,000 about 2.5 * 10**8
    few, many = [k * P61 for k in range(1, 101)], [k * P61 for k in range(1, 5001)]
    cost = len(few) * (len(few) - 1) // 2 * len(encode(few[-1]))
    assert 20 * cost < MAX_COLLISION_COST < 60 * cost
    for value in (set(few), frozenset(few), dict.fromkeys(few), {(x,) for x in few}, [set(few)] * 20):
        assert decode(encode(value)) == value
    for value in (set(many), frozenset(many), dict.fromkeys(many), {(x,) for x in many}, [set(few)] * 60):
        start = time.process_time()
        with pytest.raises(WireError, match="hash"):  # the cost is summed over the whole message
            decode(encode(value))
        assert time.process_time() - start < 0.5
    # dict keys in a call's JSON form are strings (randomised hashes): decoded, not refused
    assert len(decode(encode(dict.fromkeys(many)), json_like=True)) == len(many)
    assert decode(encode(set(range(10000)))) == set(range(10000))  # many keys, distinct hashes


def test_reasons_never_format_a_programs_value():
    from codapo_trl.sandbox.judge import _failure, _text

    assert _text("x" * 1000) == "x" * 200 and _text(BIG) == "<int>" and _text([1] * 10**6) == "<list>"
    assert _failure(ValueError(10**5000)) == "error ValueError"
    assert _failure(KeyError("k")) == "error KeyError: k"


# ---------------------------------------------------------------------------------------------- the judge's work outlasts the program
# (from the red team of issue 33) The program answers and exits at once (or as soon as it is idle) while the judge
# still has work on its answer: decoding a large valid answer, or the test's own set(), range() or repetition of
# it. The executor used to stop waiting 0.5 s after the program exited and call the missing verdict a sandbox error
# (None); it now waits for the verdict until the deadline, and a verdict that does not come is the program's 0.

EXIT_SOON = "import os, threading\ndef _bye():\n    threading.Timer(0.2, os._exit, (0,)).start()\n"
EXIT_WHEN_IDLE = (
    "import os, threading, time\ndef _bye():\n    def watch():\n        while True:\n"
    "            c = time.process_time()\n            time.sleep(0.03)\n"
    "            if time.process_time() - c < 0.003:\n                os._exit(0)\n"
    "    threading.Thread(target=watch, daemon=True).start()\n"
)
UNIQ = check_tests("def check(candidate):\n    assert sorted(set(candidate([1, 2, 2]))) == [1, 2]\n", "uniq")
RANGE = check_tests("def check(candidate):\n    assert sum(1 for _ in range(candidate(3))) == 3\n", "ident")
REPEAT = check_tests("def check(candidate):\n    assert 'ab' * candidate(3) == 'ababab'\n", "ident")
BIG_ANSWER_CHECK = check_tests("def check(candidate):\n    assert candidate(3) == 3\n", "ident")
BIG_ANSWER_CALL = {"format": "call", "fn_name": "ident", "inputs": [[3]], "outputs": [3]}

OUTLASTING = {
    "tests_own_set_of_colliding_ints": (
        EXIT_SOON + f"def uniq(xs):\n    _bye()\n    return [k * {P61} for k in range(1, 40001)]\n",
        [UNIQ],
    ),
    "tests_own_set_then_idle_exit": (
        EXIT_WHEN_IDLE + f"def uniq(xs):\n    _bye()\n    return [k * {P61} for k in range(1, 40001)]\n",
        [UNIQ],
    ),
    "tests_own_range_loop": (EXIT_SOON + "def ident(x):\n    _bye()\n    return 10 ** 12\n", [RANGE]),
    "tests_own_repetition_of_a_gigabyte": (
        EXIT_SOON + "def ident(x):\n    _bye()\n    return 5 * 10 ** 8\n",
        [REPEAT],
    ),
    "large_valid_answer_then_idle_exit": (
        EXIT_WHEN_IDLE + "def ident(x):\n    _bye()\n    return [[0]] * 300000\n",
        [BIG_ANSWER_CHECK, BIG_ANSWER_CALL],
    ),
    "large_valid_forged_answer_then_exit": (
        FORGE + "def ident(x):\n    _send('T4:s2:okL550000:' + 'L1:i0;' * 550000 + 'nn')\n",
        [BIG_ANSWER_CHECK, BIG_ANSWER_CALL],
    ),
}
OUTLASTING_HONEST = {
    "right_answer_then_exit": (EXIT_SOON + "def uniq(xs):\n    _bye()\n    return sorted(set(xs))\n", [UNIQ]),
    "right_answer_then_idle_exit": (
        EXIT_WHEN_IDLE + "def uniq(xs):\n    _bye()\n    return sorted(set(xs))\n",
        [UNIQ],
    ),
    "large_right_answer_then_idle_exit": (
        EXIT_WHEN_IDLE + "def ident(x):\n    _bye()\n    return [[0]] * (300000 if x == 3 else 50000)\n",
        [
            check_tests("def check(candidate):\n    assert candidate(3) == [[0]] * 300000\n", "ident"),
            {"format": "call", "fn_name": "ident", "inputs": [[4]], "outputs": [[[0]] * 50000]},
        ],
    ),
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", sorted(OUTLASTING))
def test_judge_work_that_outlasts_the_program_is_the_programs_failure(case, roomy_sandbox):
    source, tests_list = OUTLASTING[case]
    for tests in tests_list:
        assert_failure_not_skip(*_scored(source, tests, roomy_sandbox))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", sorted(OUTLASTING_HONEST))
def test_right_answer_then_an_early_exit_is_paid(case, roomy_sandbox):
    source, tests_list = OUTLASTING_HONEST[case]
    for tests in tests_list:
        evaluation = evaluate_code(source, tests, sandbox=roomy_sandbox)
        assert evaluation.reward == 1.0, evaluation.reason


def test_the_judge_has_its_own_memory_limit(roomy_sandbox):
    """The test's `'ab' * answer` asks the judge for 1 GB: its address-space limit (the program's 256 MiB + 256 MiB
    here) makes it a MemoryError at once, the program's failure, instead of a gigabyte of the trainer's machine."""
    source, (tests,) = OUTLASTING["tests_own_repetition_of_a_gigabyte"]
    evaluation, cpu, wall = _scored(source, tests, roomy_sandbox)
    assert evaluation.reward == 0.0 and evaluation.outcomes[0].status is Status.MEMORY, evaluation.reason
    assert wall < 2.0, wall
