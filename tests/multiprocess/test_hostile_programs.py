"""Hostile programs against the code reward and the sandbox, in every isolation configuration the detector can pick.

Each case is a program written to be paid without solving the problem, or to get out of the sandbox. Every case is
bounded even if the defence it tests failed: a fork attempt forks at most 200 times, a network attempt only targets a
listener this test starts on 127.0.0.1, a kill attempt only a process this test started, and file writes use
names unique to the test run.

Configurations: every layer the detector finds ("all"), and each single layer switched off (`SandboxConfig.disable`,
what the detector falls back to when a layer's set-up fails) that the floor accepts: since issue 61 the floor refuses
to run without `mountns` (written files unbounded in total and executable, site-packages' native modules reachable)
or without `seccomp` (memfd and SysV shared memory unbounded, aio and inotify host-wide), which
`test_single_missing_layer_is_accepted_or_refused` checks. The whole matrix runs in the default suite (about a
minute on 2 cores). Below-floor configurations must be refused (`test_below_floor_is_refused`).
docs/isolation.md counts these cases.
"""

from __future__ import annotations

import ast
import json
import os
import resource
import secrets
import signal
import socket
import struct
import subprocess
import sys

import pytest
from helpers_seccomp import bpf_verdict

from codapo_trl.rewards.code import make_code_execution_reward
from codapo_trl.sandbox import (
    _SYSCALLS,
    ALL_LAYERS,
    Harness,
    Sandbox,
    SandboxConfig,
    SandboxFloorError,
    Status,
    _build_seccomp_filter,
    detect_isolation,
    floor_gaps,
)


REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FAST = {"timeout": 3.0, "memory_mb": 256, "max_output_bytes": 1 << 20}
_ALL = detect_isolation(SandboxConfig(**FAST))
# What the detector can choose: everything it found, and each of those layers missing.
CANDIDATE_NAMES = ["all"] + [f"no-{layer}" for layer in _ALL.active]
# Layers whose absence the floor refuses since issue 61 (see `floor_gaps`).
REQUIRED_LAYERS = ("mountns", "seccomp")


def _config(name: str, **extra) -> SandboxConfig:
    disable = frozenset() if name == "all" else frozenset({name[3:]})
    return SandboxConfig(**FAST, disable=disable, **extra)


def _floor_accepts(name: str, allow_fork: bool = False) -> bool:
    return not floor_gaps(detect_isolation(_config(name)).active, allow_fork)


CONFIG_NAMES = [name for name in CANDIDATE_NAMES if _floor_accepts(name)]


CONFIGS = [pytest.param(name, id=name) for name in CONFIG_NAMES]

_SANDBOXES: dict[tuple[str, bool], Sandbox] = {}


def _sandbox(name: str, allow_fork: bool = False) -> Sandbox:
    key = (name, allow_fork)
    if key not in _SANDBOXES:
        _SANDBOXES[key] = Sandbox(_config(name, allow_fork=allow_fork), max_workers=2)
    return _SANDBOXES[key]


@pytest.fixture(scope="module", autouse=True)
def _close_sandboxes():
    yield
    for sb in _SANDBOXES.values():
        sb.close()
    _SANDBOXES.clear()


def block(code: str) -> str:
    return f"Here is my solution.\n```python\n{code}\n```\n"


# ---------------------------------------------------------------------------------------------------- the reward

CHECK_TESTS = json.dumps(
    {
        "format": "check",
        "entry_point": "add",
        "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(5, 5) == 10\n"
        "    assert abs(candidate(0.5, 0.25) - 0.75) < 1e-9\n",
        "prelude": "",
    }
)
CALL_TESTS = json.dumps({"format": "call", "fn_name": "add", "inputs": [[1, 2], [5, 5]], "outputs": [3, 10]})
COUNT_TESTS = json.dumps(
    {
        "format": "check",
        "entry_point": "count",
        "test": "def check(candidate):\n    assert candidate('abb') == {'a': 1, 'b': 2}\n    assert candidate('') == {}\n",
    }
)
STDIO_TESTS = json.dumps({"format": "stdio", "inputs": ["1 2\n", "5 5\n"], "outputs": ["3\n", "10\n"]})

WRONG_ADD = "def add(a, b):\n    return a - b\n"
FORGE_LINES = "\n".join(
    [
        "import os",
        "def _forge():",
        "    for fd in range(3, 64):",
        "        for text in ('ok\\n', 'x ok\\n', 'ok 3\\n'):",
        "            try:",
        "                os.write(fd, text.encode())",
        "            except OSError:",
        "                pass",
    ]
)

# name -> (program, tests). Every program here must score 0.0: none of them adds correctly through the harness.
HOSTILE_REWARD = {
    # --- ending early
    "check_systemexit0_module": ("import sys\nsys.exit(0)\n" + WRONG_ADD, CHECK_TESTS),
    "check_systemexit0_in_candidate": ("def add(a, b):\n    raise SystemExit(0)\n", CHECK_TESTS),
    "check_os_exit0_in_candidate": ("import os\ndef add(a, b):\n    os._exit(0)\n", CHECK_TESTS),
    "check_atexit_exit0": (
        "import atexit, os\natexit.register(lambda: os._exit(0))\n" + WRONG_ADD,
        CHECK_TESTS,
    ),
    "check_sigkill_self": (
        "import os, signal\ndef add(a, b):\n    os.kill(os.getpid(), signal.SIGKILL)\n    return a + b\n",
        CHECK_TESTS,
    ),
    "check_raise_signal_self": (
        "import signal\ndef add(a, b):\n    signal.raise_signal(signal.SIGKILL)\n    return a + b\n",
        CHECK_TESTS,
    ),
    "check_base_exception": ("class Stop(BaseException):\n    pass\ndef add(a, b):\n    raise Stop()\n", CHECK_TESTS),
    "check_keyboard_interrupt": ("def add(a, b):\n    raise KeyboardInterrupt\n", CHECK_TESTS),
    "check_generator_exit": ("def add(a, b):\n    raise GeneratorExit\n", CHECK_TESTS),
    "check_sys_exit_in_excepthook": (
        "import sys\nsys.excepthook = lambda *a: None\n" + WRONG_ADD,
        CHECK_TESTS,
    ),
    # --- the channel
    "check_close_channel": (
        "import os\nfor fd in range(3, 64):\n    try:\n        os.close(fd)\n    except OSError:\n        pass\n"
        "def add(a, b):\n    return a + b\n",
        CHECK_TESTS,
    ),
    "check_redirect_channel": (
        "import os\nnull = os.open('/dev/null', os.O_WRONLY)\nfor fd in range(3, 64):\n    if fd != null:\n"
        "        try:\n            os.dup2(null, fd)\n        except OSError:\n            pass\n"
        "def add(a, b):\n    return a + b\n",
        CHECK_TESTS,
    ),
    "check_forge_channel_then_exit": (FORGE_LINES + "\n_forge()\nimport os\nos._exit(0)\n", CHECK_TESTS),
    "check_forge_channel_then_fail": (FORGE_LINES + "\n_forge()\n" + WRONG_ADD, CHECK_TESTS),
    "check_forge_audit_event": (
        "import sys, os\ntry:\n    sys.audit('codapo.confirm', 'ok')\nexcept Exception:\n    pass\nos._exit(0)\n",
        CHECK_TESTS,
    ),
    "check_reenter_harness": (
        "import sys\ndef add(a, b):\n    f = sys._getframe()\n    while f is not None:\n"
        "        h = f.f_globals.get('_codapo_harness')\n        if h is not None:\n"
        "            h({'mode': 'script'})\n        f = f.f_back\n    return 0\n",
        CHECK_TESTS,
    ),
    "check_read_spec_file": (
        "import glob\nfor p in glob.glob('.codapo*') + glob.glob('/tmp/**/config.json', recursive=True):\n"
        "    print(open(p).read())\nimport os\nos._exit(0)\n",
        CHECK_TESTS,
    ),
    "check_gc_scan_for_nonce": (
        "import gc, os\ntry:\n    objs = gc.get_objects()\nexcept Exception:\n    objs = []\n"
        "for o in objs:\n    if type(o).__name__ == 'cell':\n        pass\nos._exit(0)\n",
        CHECK_TESTS,
    ),
    "check_proc_self_mem": (
        "import os\ntry:\n    open('/proc/self/mem', 'rb').read(1)\nexcept Exception as e:\n    print(e)\n"
        "os._exit(0)\n",
        CHECK_TESTS,
    ),
    "check_ctypes": ("import ctypes\nctypes.CDLL(None)._exit(0)\n", CHECK_TESTS),
    "check_settrace_skip_asserts": (
        "import sys\ndef tracer(frame, event, arg):\n    if frame.f_code.co_name == 'check' and event == 'line':\n"
        "        frame.f_lineno = frame.f_code.co_firstlineno + 4\n    return tracer\n"
        "try:\n    sys.settrace(tracer)\nexcept Exception:\n    pass\n" + WRONG_ADD,
        CHECK_TESTS,
    ),
    "check_thread_outlives": (
        "import threading, time, os\ndef add(a, b):\n"
        "    threading.Thread(target=lambda: (time.sleep(0.3), os._exit(0)), daemon=True).start()\n    return a - b\n",
        CHECK_TESTS,
    ),
    "check_always_equal": (
        "class Any:\n    def __eq__(self, other):\n        return True\n    def __sub__(self, other):\n"
        "        return 0\n    __rsub__ = __sub__\ndef add(a, b):\n    return Any()\n",
        CHECK_TESTS,
    ),
    "check_int_subclass_equal": (
        "class Int(int):\n    def __eq__(self, other):\n        return True\n    __hash__ = int.__hash__\n"
        "def add(a, b):\n    return Int(0)\n",
        CHECK_TESTS,
    ),
    "check_realtime_signal_self": (  # a signal without a name in `signal.Signals` (was a sandbox error: None)
        "import os\ndef add(a, b):\n    os.kill(os.getpid(), 40)\n    return a + b\n",
        CHECK_TESTS,
    ),
    "check_patch_builtins": (
        "import builtins\ndef add(a, b):\n    builtins.abs = lambda x: 0\n    return 3 if (a, b) == (1, 2) else 10\n",
        CHECK_TESTS,
    ),
    "check_read_the_test_from_the_frame": (
        "import sys\ndef add(a, b):\n    try:\n        f = sys._getframe(2)\n    except Exception:\n"
        "        f = None\n    if f is None:\n        try:\n            raise RuntimeError\n"
        "        except RuntimeError as e:\n            f = e.__traceback__.tb_frame.f_back.f_back\n"
        "    consts = [c for c in f.f_code.co_consts if isinstance(c, int)]\n"
        "    return {(1, 2): 3, (5, 5): 10}.get((a, b), 0.75) if 10 in consts else -1\n",
        CHECK_TESTS,
    ),
    "check_read_the_test_via_generator_frame": (
        "def add(a, b):\n    def gen():\n        yield g.gi_frame.f_back.f_back.f_back\n    g = gen()\n"
        "    f = next(g)\n    consts = f.f_code.co_consts\n"
        "    return {(1, 2): 3, (5, 5): 10}.get((a, b), 0.75) if 10 in consts else -1\n",
        CHECK_TESTS,
    ),
    "check_patched_counter": (
        "import collections\ncollections.Counter.__eq__ = lambda self, other: True\n"
        "def add(a, b):\n    return collections.Counter()\n",
        CHECK_TESTS,
    ),
    "check_own_check": ("def check(candidate):\n    pass\n" + WRONG_ADD, CHECK_TESTS),
    "check_swap_check_from_thread": (
        "import threading\nns = globals()\ndef swap():\n    for _ in range(200000):\n"
        "        if ns.get('check') is not None:\n            ns['check'] = lambda c: None\n"
        "threading.Thread(target=swap, daemon=True).start()\n" + WRONG_ADD,
        CHECK_TESTS,
    ),
    # --- call format
    "call_print_fake_result": (
        "import sys, os\nprint('<<codapo-result-0000>>3')\nsys.stdout.flush()\nos._exit(0)\n",
        CALL_TESTS,
    ),
    "call_os_exit_in_function": ("import os\ndef add(a, b):\n    os._exit(0)\n", CALL_TESTS),
    "call_systemexit_in_function": ("def add(a, b):\n    raise SystemExit(0)\n", CALL_TESTS),
    "call_realtime_signal_self": ("import os\ndef add(a, b):\n    os.kill(os.getpid(), 40)\n", CALL_TESTS),
    "call_always_equal": (
        "class Any:\n    def __eq__(self, other):\n        return True\ndef add(a, b):\n    return Any()\n",
        CALL_TESTS,
    ),
    "call_forge_channel": (FORGE_LINES + "\ndef add(a, b):\n    _forge()\n    return a - b\n", CALL_TESTS),
    # --- stdin/stdout format: the right output, then an abnormal end
    "stdio_right_then_sigkill_self": (
        "import os, signal\na, b = map(int, input().split())\nprint(a + b, flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n",
        STDIO_TESTS,
    ),
    "stdio_right_then_sigterm_self": (
        "import os, signal\na, b = map(int, input().split())\nprint(a + b, flush=True)\n"
        "signal.raise_signal(signal.SIGTERM)\n",
        STDIO_TESTS,
    ),
    "stdio_right_then_base_exception": (
        "class Stop(BaseException):\n    pass\na, b = map(int, input().split())\nprint(a + b, flush=True)\n"
        "raise Stop()\n",
        STDIO_TESTS,
    ),
    "stdio_right_then_realtime_signal": (
        "import os\na, b = map(int, input().split())\nprint(a + b, flush=True)\nos.kill(os.getpid(), 40)\n",
        STDIO_TESTS,
    ),
    "stdio_lone_surrogate_in_the_source": ("print(3)\nx = '\ud800'\n", STDIO_TESTS),  # was a set-up failure: None
    "stdio_right_then_exit_code_1": (
        "import sys\na, b = map(int, input().split())\nprint(a + b, flush=True)\nsys.exit(1)\n",
        STDIO_TESTS,
    ),
    "stdio_wrong_then_forge": (FORGE_LINES + "\n_forge()\nprint(0)\n", STDIO_TESTS),
}

# What an honest solution of the same problems gets (the harness must not fail ordinary programs).
HONEST_REWARD = {
    "check_correct": ("def add(a, b):\n    return a + b\n", CHECK_TESTS),
    "check_correct_with_main_guard": (
        "def add(a, b):\n    return a + b\nif __name__ == '__main__':\n    pass\n",
        CHECK_TESTS,
    ),
    # HumanEval's harness exec's the program: its main block does not run (issue 33)
    "check_correct_with_doctest_main": (
        "def add(a, b):\n    return a + b\nif __name__ == '__main__':\n    import doctest\n    doctest.testmod()\n",
        CHECK_TESTS,
    ),
    "check_correct_with_input_main": (
        "def add(a, b):\n    return a + b\nif __name__ == '__main__':\n    print(add(*map(int, input().split())))\n",
        CHECK_TESTS,
    ),
    "check_correct_counter": ("import collections\ndef count(s):\n    return collections.Counter(s)\n", COUNT_TESTS),
    "check_correct_defaultdict": (
        "import collections\ndef count(s):\n    d = collections.defaultdict(int)\n    for c in s:\n"
        "        d[c] += 1\n    return d\n",
        COUNT_TESTS,
    ),
    "call_correct": ("def add(a, b):\n    return a + b\n", CALL_TESTS),
    "call_correct_method": ("class Solution:\n    def add(self, a, b):\n        return a + b\n", CALL_TESTS),
    "stdio_correct": ("a, b = map(int, input().split())\nprint(a + b)\n", STDIO_TESTS),
    "stdio_correct_sys_exit": (
        "import sys\na, b = map(int, input().split())\nprint(a + b)\nsys.exit()\n",
        STDIO_TESTS,
    ),
    # Hostile under the old in-process harness, which judged how the process ended; the judge looks only at what
    # the program computed (issue 25): a right answer that leaves a thread running or ends with os._exit(0) after
    # flushing is a right answer.
    "check_correct_thread_left_running": (
        "import threading, time\nthreading.Thread(target=time.sleep, args=(0.5,), daemon=True).start()\n"
        "def add(a, b):\n    return a + b\n",
        CHECK_TESTS,
    ),
    "check_correct_after_raising_the_old_confirmation_event": (
        "import sys\ntry:\n    sys.audit('codapo.confirm', 'ok')\nexcept Exception:\n    pass\n"
        "def add(a, b):\n    return a + b\n",
        CHECK_TESTS,
    ),
    "stdio_correct_then_os_exit": (
        "import os\na, b = map(int, input().split())\nprint(a + b, flush=True)\nos._exit(0)\n",
        STDIO_TESTS,
    ),
    "stdio_correct_then_close_fds": (
        "import os\na, b = map(int, input().split())\nprint(a + b, flush=True)\n"
        "for fd in range(3, 64):\n    try:\n        os.close(fd)\n    except OSError:\n        pass\n",
        STDIO_TESTS,
    ),
    "stdio_correct_in_thread": (
        "import threading\ndef main():\n    a, b = map(int, input().split())\n    print(a + b)\n"
        "threading.Thread(target=main).start()\n",
        STDIO_TESTS,
    ),
}


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("case", sorted(HOSTILE_REWARD))
def test_hostile_program_is_not_paid(config, case):
    source, tests = HOSTILE_REWARD[case]
    reward = make_code_execution_reward(sandbox=_sandbox(config), log_reasons=False)
    reasons = []
    before = resource.getrusage(resource.RUSAGE_SELF)
    value = reward([block(source)], [tests], log_extra=lambda name, values: reasons.extend(values))
    after = resource.getrusage(resource.RUSAGE_SELF)
    assert value == [0.0], (case, config, value, reasons)  # 0.0: a failure, never a skip (None)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    assert cpu < 0.5, (case, config, cpu)  # the caller's own process: pipes and a verdict line


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("case", sorted(HONEST_REWARD))
def test_honest_program_is_paid(config, case):
    source, tests = HONEST_REWARD[case]
    reward = make_code_execution_reward(sandbox=_sandbox(config))
    assert reward([block(source)], [tests]) == [1.0], (case, config)


def test_failed_runs_say_why():
    sb = _sandbox("all")
    killed = sb.run("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")
    assert killed.status is Status.RUNTIME_ERROR and killed.signal == signal.SIGKILL and "SIGKILL" in killed.reason
    ended = sb.run("import os\nos._exit(0)", harness=Harness("call", fn_name="add", args="[1, 2]", expected="3"))
    assert ended.status is Status.RUNTIME_ERROR and "ended before answering" in ended.reason, ended
    forged = sb.run(
        FORGE_LINES + "\n_forge()\n" + WRONG_ADD, harness=Harness("call", fn_name="add", args="[1, 2]", expected="3")
    )
    assert forged.status is Status.RUNTIME_ERROR and "channel" in forged.reason, forged


# ---------------------------------------------------------------------------------------------------- the sandbox


@pytest.fixture(scope="module")
def listener():
    """A TCP listener on 127.0.0.1 that records whether anybody connected."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.setblocking(False)
    yield server
    server.close()


def _accepted(server: socket.socket) -> bool:
    try:
        conn, _ = server.accept()
    except BlockingIOError:
        return False
    conn.close()
    return True


@pytest.fixture(scope="module")
def victim():
    """A process this test started (as the sandbox uid's neighbour: nobody), which programs try to kill."""
    proc = subprocess.Popen(["sleep", "120"])
    yield proc
    proc.kill()
    proc.wait()


def _status_field(text: str, name: str) -> str:
    return next(line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith(name + ":"))


CAPS_PROBE = "print(open('/proc/self/status').read())"


@pytest.mark.parametrize("config", CONFIGS)
def test_no_capabilities_whatever_the_uid(config):
    result = _sandbox(config).run(CAPS_PROBE)
    assert result.ok, result
    for name in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(_status_field(result.stdout, name), 16) == 0, (name, result.stdout)
    assert _status_field(result.stdout, "NoNewPrivs") == "1"


@pytest.mark.parametrize("config", CONFIGS)
def test_no_network_even_to_a_local_listener(config, listener):
    port = listener.getsockname()[1]
    src = (
        "import socket\ntry:\n    s = socket.create_connection(('127.0.0.1', PORT), timeout=1)\n    print('connected')\n"
        "except Exception as e:\n    print('refused', type(e).__name__)\n"
    ).replace("PORT", str(port))
    result = _sandbox(config).run(src)
    assert "connected" not in result.stdout and not _accepted(listener), result


@pytest.mark.parametrize("config", CONFIGS)
def test_cannot_kill_a_process_outside(config, victim):
    src = f"import os, signal\ntry:\n    os.kill({victim.pid}, signal.SIGKILL)\nexcept Exception as e:\n    print(e)\n"
    _sandbox(config).run(src)
    assert victim.poll() is None, "a sandboxed program killed a process outside the sandbox"


@pytest.mark.parametrize("config", CONFIGS)
def test_project_checkout_and_home_are_hidden(config):
    targets = [
        os.path.join(REPO, "recipes", "data", "code_demo.jsonl"),
        os.path.join(REPO, "README.md"),
        os.path.join(REPO, "codapo_trl", "sandbox", "runner.py"),
        os.path.expanduser("~/.bashrc"),
        "/etc/shadow",
    ]
    src = (
        f"import os\nseen = []\nfor p in {targets!r}:\n    try:\n        with open(p, 'rb') as f:\n"
        "            seen.append((p, len(f.read())))\n    except Exception:\n        pass\n"
        f"for d in {[REPO, os.path.dirname(REPO)]!r}:\n    try:\n        seen.append((d, os.listdir(d)))\n"
        "    except Exception:\n        pass\nprint(seen)\n"
    )
    result = _sandbox(config).run(src)
    assert result.ok, result
    seen = ast.literal_eval(result.stdout.strip())
    # Nothing of the checkout, the home directory or /etc/shadow. The checkout's parent may be listable (empty), or,
    # when the checkout lives in /tmp (a CI clone), show the run's own working directory and nothing else.
    assert all(path == os.path.dirname(REPO) for path, _ in seen), result.stdout[:500]
    assert all(name.startswith("codapo-sbx-") for _, names in seen for name in names), result.stdout[:500]


@pytest.mark.parametrize("config", CONFIGS)
def test_no_writes_outside_the_working_directory(config, tmp_path_factory):
    tag = secrets.token_hex(6)
    targets = [f"/tmp/codapo_escape_{tag}", f"/var/tmp/codapo_escape_{tag}", os.path.join(REPO, f"escape_{tag}")]
    src = (
        f"for p in {targets!r}:\n    try:\n        open(p, 'w').write('x')\n        print('wrote', p)\n"
        "    except Exception:\n        pass\nopen('inside.txt', 'w').write('fine')\nprint(open('inside.txt').read())\n"
    )
    result = _sandbox(config).run(src)
    try:
        assert result.stdout.strip().splitlines()[-1] == "fine", result
        assert not any(os.path.exists(p) for p in targets)
    finally:
        for p in targets:
            if os.path.exists(p):
                os.unlink(p)


@pytest.mark.parametrize("config", CONFIGS)
def test_fork_attempts_are_bounded(config):
    if not _floor_accepts(config, allow_fork=True):  # issue 61: no cgroup, so each process would have its own memory
        with pytest.raises(SandboxFloorError, match="cgroup"):
            _sandbox(config, allow_fork=True)
        pytest.skip(f"{config}: allow_fork=True is refused by the floor (tested above)")
    src = (
        "import os, time\nn = 0\nfor _ in range(200):\n    try:\n        pid = os.fork()\n    except OSError:\n"
        "        break\n    if pid == 0:\n        time.sleep(2)\n        os._exit(0)\n    n += 1\nprint(n)\n"
    )
    sb = _sandbox(config, allow_fork=True)
    result = sb.run(src)
    assert result.status in (Status.OK, Status.RUNTIME_ERROR, Status.TIMEOUT), result
    bound = sb.config.max_processes + 4  # RLIMIT_NPROC, or the pids cgroup's allowance
    if result.stdout.strip().isdigit():
        assert int(result.stdout) <= bound, result
    # without allow_fork: no process at all where seccomp is active, the same bound otherwise
    plain = _sandbox(config).run(src).stdout.strip()
    if "seccomp" in _sandbox(config).isolation.active:
        assert plain in ("0", ""), config
    else:
        assert not plain or int(plain) <= bound, config


@pytest.mark.parametrize("config", CONFIGS)
def test_environment_secrets_are_not_passed(config, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_fake_secret_for_tests")
    result = _sandbox(config).run("import os\nprint(sorted(os.environ))")
    assert "HF_TOKEN" not in result.stdout and result.ok


@pytest.mark.parametrize("config", CONFIGS)
def test_device_nodes_cannot_be_made(config):
    src = (
        "import os, stat\ntry:\n    os.mknod('mem', stat.S_IFCHR | 0o600, os.makedev(1, 1))\n"
        "    print(len(open('mem', 'rb').read(16)))\nexcept Exception as e:\n    print('refused')\n"
    )
    assert _sandbox(config).run(src).stdout.strip() == "refused"


NATIVE_PROBE = """
import glob, sys, importlib.machinery, importlib.util
out = []
for name in ("ctypes", "_ctypes", "_testcapi", "_testinternalcapi", "_xxsubinterpreters"):
    try:
        __import__(name)
        out.append(name + " imported")
    except BaseException:
        pass
for name in ("_ctypes", "_testcapi"):  # around the import statement: the extension loader itself
    for path in glob.glob(sys.base_prefix + "/lib/python3*/lib-dynload/" + name + ".*so"):
        try:
            spec = importlib.util.spec_from_file_location(name, path,
                                                          loader=importlib.machinery.ExtensionFileLoader(name, path))
            mod = importlib.util.module_from_spec(spec)
            out.append(name + " loaded")
            if name == "_ctypes":
                mod.dlopen(None, 2)
                out.append("dlopen worked")
        except BaseException:
            pass
print(out)
"""


@pytest.mark.parametrize("config", CONFIGS)
def test_native_memory_access_is_refused(config):
    """ctypes and CPython's test modules read and write raw memory, and a subinterpreter has no audit hook: ways to
    switch the audit hook off. The native modules are masked by mountns and refused by the hook; the built-in
    `_xxsubinterpreters` only by the hook, so without it (no-audit) there is no hook for it to get around."""
    result = _sandbox(config).run(NATIVE_PROBE)
    allowed = "['_xxsubinterpreters imported']" if config == "no-audit" else "[]"
    assert result.ok and result.stdout.strip() in ("[]", allowed), result


# Administrator-only system calls, called through ctypes where ctypes can be loaded (the audit hook and the
# masked native module stop that first; the "no-audit + no-mountns" kernel configuration below reaches seccomp).
ADMIN_SYSCALLS = {
    "mount_setattr": 442,
    "fsopen": 430,
    "fspick": 433,
    "fsconfig": 431,
    "fsmount": 432,
    "move_mount": 429,
    "open_tree": 428,
    "clock_settime": 227,
    "clock_adjtime": 305,
    "adjtimex": 159,
    "settimeofday": 164,
    "syslog": 103,
    "add_key": 248,
    "request_key": 249,
    "keyctl": 250,
    "init_module": 175,
    "finit_module": 313,
    "delete_module": 176,
    "reboot": 169,
    "kexec_load": 246,
    "swapon": 167,
    "mount": 165,
    "unshare": 272,
    "setns": 308,
    "sethostname": 170,
    "bpf": 321,
    "ptrace": 101,
}


@pytest.mark.parametrize("allow_fork", [False, True])
def test_seccomp_filter_denies_admin_calls(allow_fork):
    if not sys.platform.startswith("linux"):
        pytest.skip("linux only")
    for arch_name, arch, col in (("x86_64", 0xC000003E, 0), ("aarch64", 0xC00000B7, 1)):
        prog, _ = _build_seccomp_filter(arch_name, allow_fork)
        for name in ADMIN_SYSCALLS:
            nr = _SYSCALLS[name][col]
            assert bpf_verdict(prog, nr, arch) == 0x00050001, (arch_name, name)  # EPERM
        for name, nrs in _SYSCALLS.items():
            if nrs[col] >= 0 and not (allow_fork and name in ("fork", "vfork")):
                assert bpf_verdict(prog, nrs[col], arch) == 0x00050001, (arch_name, name)
        clone = 56 if col == 0 else 220
        # a thread is fine; a new namespace never; a process only with allow_fork
        assert bpf_verdict(prog, clone, arch, (0x00010000 | 0x00000F00,)) == 0x7FFF0000
        assert bpf_verdict(prog, clone, arch, (0x10000000 | 17,)) == 0x00050001
        assert bpf_verdict(prog, clone, arch, (17,)) == (0x7FFF0000 if allow_fork else 0x00050001)
        assert bpf_verdict(prog, 0 if col == 0 else 63, arch) == 0x7FFF0000  # read


_LIVE_PROBE = r"""
import ctypes, json, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
libc.syscall.argtypes = [ctypes.c_long] + [ctypes.c_ulong] * 6
prog = bytes.fromhex(sys.argv[1])
calls = json.loads(sys.argv[2])


class Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


buf = ctypes.create_string_buffer(prog, len(prog))
fprog = Fprog(len(prog) // 8, ctypes.cast(buf, ctypes.c_void_p))
assert libc.prctl(38, 1, 0, 0, 0) == 0  # no_new_privs
assert libc.prctl(22, 2, ctypes.addressof(fprog), 0, 0) == 0, ctypes.get_errno()
out = {}
for name, nr in calls.items():
    ctypes.set_errno(0)
    rc = libc.syscall(nr, 0, 0, 0, 0, 0, 0)  # null arguments: harmless even if the filter let it through
    out[name] = [rc, ctypes.get_errno()]
print(json.dumps(out))
"""


def test_admin_syscalls_are_refused_live():
    """Install the sandbox's filter in a child process (as the trainer's user: root here) and call each admin-only
    system call for real, with null arguments (so that nothing happens should the filter let one through)."""
    if os.uname().machine != "x86_64":
        pytest.skip("syscall numbers below are x86_64's")
    prog, patch = _build_seccomp_filter("x86_64", False)
    prog = bytearray(prog)
    for idx in patch:
        struct.pack_into("=I", prog, idx * 8 + 4, 0x7FFFFFF0)  # nobody's pid: no signal to anybody
    # sethostname / kexec_load / swapon with null arguments are not harmless as root: checked by the BPF test only.
    live = {k: v for k, v in ADMIN_SYSCALLS.items() if k not in ("sethostname", "kexec_load", "swapon", "ptrace")}
    proc = subprocess.run(
        [sys.executable, "-I", "-c", _LIVE_PROBE, bytes(prog).hex(), json.dumps(live)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    for name, (rc, errno) in json.loads(proc.stdout).items():
        assert rc == -1 and errno == 1, (name, rc, errno)  # EPERM from the filter


# ---------------------------------------------------------------------------------------------------- the floor


@pytest.mark.parametrize(
    "disable",
    [
        ("netns", "seccomp"),  # no network isolation
        ("mountns", "landlock"),  # no filesystem isolation
        ("uid", "cgroup", "seccomp", "netns"),  # no process bound (as root)
    ],
)
def test_below_floor_is_refused(disable, monkeypatch):
    monkeypatch.delenv("CODAPO_SANDBOX_ALLOW_BELOW_FLOOR", raising=False)
    config = SandboxConfig(**FAST, disable=frozenset(disable))
    report = detect_isolation(config)
    gaps = floor_gaps(report.active)
    if not gaps:
        pytest.skip("this machine's layers reach the floor anyway")
    with pytest.raises(SandboxFloorError, match="CODAPO_SANDBOX_ALLOW_BELOW_FLOOR") as err:
        Sandbox(config)
    assert "missing:" in str(err.value)
    with pytest.raises(SandboxFloorError):
        make_code_execution_reward(disable=frozenset(disable), timeout=FAST["timeout"])
    # the explicit opt-outs
    with Sandbox(SandboxConfig(**FAST, disable=frozenset(disable), allow_below_floor=True)) as sb:
        assert sb.run("print(6 * 7)").stdout == "42\n"
    monkeypatch.setenv("CODAPO_SANDBOX_ALLOW_BELOW_FLOOR", "1")
    with Sandbox(config) as sb:
        assert sb.run("print(6 * 7)").stdout == "42\n"


@pytest.mark.parametrize("config", CANDIDATE_NAMES)
def test_single_missing_layer_is_accepted_or_refused(config, monkeypatch):
    """The fallbacks the detector can take on its own (one layer failing) keep the floor on this machine, except
    without mountns or seccomp (issue 61): then building the sandbox fails and names the missing layer."""
    monkeypatch.delenv("CODAPO_SANDBOX_ALLOW_BELOW_FLOOR", raising=False)
    report = detect_isolation(_config(config))
    gaps = floor_gaps(report.active)
    if config[3:] in REQUIRED_LAYERS:
        assert gaps and all(config[3:] in gap for gap in gaps), (config, gaps)
        with pytest.raises(SandboxFloorError, match=config[3:]):
            Sandbox(_config(config))
    else:
        assert gaps == [], (config, report.summary())


def test_startup_log_names_every_layer(caplog):
    import logging

    from codapo_trl import sandbox as sandbox_module

    caplog.set_level(logging.INFO, logger="codapo_trl.sandbox")
    config = SandboxConfig(**FAST, disable=frozenset({"landlock"}), uid_base=62000)
    sandbox_module._DETECTED.pop((config.disable, sandbox_module._default_python(), config.uid_base), None)
    detect_isolation(config)
    text = "\n".join(r.getMessage() for r in caplog.records)
    for layer in ALL_LAYERS:
        assert f"{layer}: " in text, layer
    assert "landlock: OFF (disabled by configuration)" in text and "floor reached" in text
