"""The sandbox against ordinary and hostile programs.

Hostile programs run only inside the sandbox, with short limits. The "kernel" configuration switches the Python audit
hook off, to show that the operating-system layers hold on their own; fork-based tests only run where a process
limit is really enforced.
"""

import json
import os
import resource
import secrets
import socket
import struct
import time

import pytest

from codapo_trl.sandbox import (
    ALL_LAYERS,
    IsolationReport,
    Sandbox,
    SandboxConfig,
    Status,
    _build_seccomp_filter,
    detect_isolation,
)


FAST = {"timeout": 2.0, "memory_mb": 256, "max_output_bytes": 1 << 20}
CONFIGS = {
    "default": SandboxConfig(**FAST),
    "kernel": SandboxConfig(**FAST, disable=frozenset({"audit"})),
}


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def sandbox(request):
    with Sandbox(CONFIGS[request.param], max_workers=2) as sb:
        yield sb


@pytest.fixture(scope="module")
def default_sandbox():
    with Sandbox(CONFIGS["default"], max_workers=2) as sb:
        yield sb


def _process_limit_enforced(sb: Sandbox) -> bool:
    active = sb.isolation.active
    return "uid" in active or "userns" in active or "cgroup" in active or os.geteuid() != 0


def sandbox_processes() -> list[int]:
    """Live processes started by any sandbox run (they carry CODAPO_SANDBOX_RUN in their environment)."""
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                env = f.read()
        except OSError:
            continue
        if b"CODAPO_SANDBOX_RUN=" in env:
            pids.append(int(name))
    return pids


def wait_no_sandbox_processes(timeout: float = 3.0) -> list[int]:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        left = sandbox_processes()
        if not left:
            return []
        time.sleep(0.05)
    return sandbox_processes()


# ---------------------------------------------------------------------------------------------------- basics


def test_detection_reports_layers():
    report = detect_isolation(CONFIGS["default"])
    assert isinstance(report, IsolationReport)
    assert "audit" in report.active
    assert set(report.active) <= set(ALL_LAYERS)
    assert "rlimits" in report.summary()
    # Disabled layers are reported as such.
    kernel = detect_isolation(CONFIGS["kernel"])
    assert "audit" not in kernel.active and "disabled" in kernel.missing["audit"]


def test_stdin_stdout(sandbox):
    result = sandbox.run("a, b = map(int, input().split())\nprint(a + b)", stdin="20 22\n")
    assert result.status is Status.OK, result
    assert result.stdout == "42\n"
    assert result.exit_code == 0 and result.wall_time > 0


def test_runtime_error_and_exit_codes(sandbox):
    result = sandbox.run("1 / 0")
    assert result.status is Status.RUNTIME_ERROR
    assert "ZeroDivisionError" in result.reason and "ZeroDivisionError" in result.stderr
    assert sandbox.run("import sys; sys.exit(3)").exit_code == 3
    message = sandbox.run("import sys; sys.exit('bad input')")  # a non-integer code is written out, status 1
    assert message.exit_code == 1 and message.stderr.strip().endswith("bad input")
    tampered = sandbox.run("import builtins, sys\nbuiltins.print = lambda *a, **k: None\nsys.exit('bad input')")
    assert tampered.exit_code == 1 and tampered.stderr.strip().endswith("bad input")
    assert sandbox.run("def f(:\n  pass").status is Status.RUNTIME_ERROR


def test_isolated_interpreter_and_minimal_environment(sandbox, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_fake_secret_for_tests")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws_fake_secret_for_tests")
    src = (
        "import os, sys\n"
        "print(sys.flags.isolated, sys.flags.no_site)\n"
        "print(sorted(os.environ))\n"
        "print(os.environ['HOME'] == os.getcwd() == os.environ['TMPDIR'])\n"
        "try:\n    import pytest\nexcept ImportError:\n    print('no site-packages')\n"
        "try:\n    print(open('/proc/self/environ', 'rb').read())\nexcept Exception as e:\n    print(type(e).__name__)\n"
        f"try:\n    print(open('/proc/{os.getpid()}/environ', 'rb').read())\n"
        "except Exception as e:\n    print(type(e).__name__)\n"
    )
    result = sandbox.run(src)
    assert result.status is Status.OK, result
    lines = result.stdout.splitlines()
    assert lines[0] == "1 1"
    assert eval(lines[1]) == ["CODAPO_SANDBOX_RUN", "HOME", "LANG", "LC_ALL", "PATH", "TMPDIR"]
    assert lines[2] == "True" and lines[3] == "no site-packages"
    assert "fake_secret" not in result.stdout


def test_fresh_working_directory_is_removed(sandbox):
    result = sandbox.run("import os\nopen('scratch.txt', 'w').write('hi')\nprint(os.getcwd())")
    assert result.status is Status.OK, result
    workdir = result.stdout.strip()
    assert not os.path.exists(workdir) and not os.path.exists(os.path.dirname(workdir))


def test_working_directory_holds_only_the_program(sandbox):
    """The runner's copy (it is run by path from the working directory) and the harness's spec are deleted before
    the program's first line: the program finds only itself there."""
    result = sandbox.run("import os\nprint(sorted(os.listdir('.')))")
    assert result.status is Status.OK and result.stdout == "['solution.py']\n", result


def test_map_runs_in_parallel_and_keeps_order(default_sandbox):
    jobs = [(f"import time; time.sleep(0.3); print({i})", "") for i in range(4)]
    start = time.monotonic()
    results = default_sandbox.map(jobs)
    elapsed = time.monotonic() - start
    assert [r.stdout.strip() for r in results] == ["0", "1", "2", "3"]
    assert elapsed < 4 * 0.3 + 4 * 0.5  # 2 workers: well under the serial time plus start-up costs


def test_sandbox_failure_is_reported_not_raised():
    sb = Sandbox(
        SandboxConfig(python_executable="/nonexistent/python", allow_below_floor=True),
        isolation=IsolationReport(active=("audit",)),
    )
    result = sb.run("print(1)")
    assert result.status is Status.SANDBOX_ERROR and result.reason


@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
@pytest.mark.parametrize("allow_fork", [False, True])
def test_seccomp_filter_is_well_formed(arch, allow_fork):
    prog, patch = _build_seccomp_filter(arch, allow_fork)
    assert len(prog) % 8 == 0 and 0 < len(prog) // 8 < 4096
    insns = [struct.unpack("=HBBI", prog[i : i + 8]) for i in range(0, len(prog), 8)]
    assert insns[-1] == (0x06, 0, 0, 0x7FFF0000)  # default: allow
    for idx, (code, jt, jf, _) in enumerate(insns):
        if code & 0x07 == 0x05:  # jumps stay inside the program
            assert idx + 1 + max(jt, jf) < len(insns)
    assert patch and all(insns[i][3] == 0x7FFFFFF7 for i in patch)


LEGIT = {
    "stdlib": (
        "import bisect, collections, dataclasses, decimal, fractions, functools, heapq, itertools, math, re\n"
        "import statistics, string, typing\nPoint = collections.namedtuple('Point', 'x y', defaults=[0])\n"
        "print(Point(12).x + Point(1).y)"
    ),
    "open0": "print(sum(map(int, open(0).read().split())))",
    "stdin_buffer": "import sys\nprint(sum(map(int, sys.stdin.buffer.read().split())))",
    "deep_recursion_in_thread": (
        "import sys, threading\nsys.setrecursionlimit(10 ** 6)\nthreading.stack_size(1 << 26)\n"
        "f = lambda n: 0 if n == 0 else 1 + f(n - 1)\n"
        "t = threading.Thread(target=lambda: print(f(60000) - 59988))\nt.start()\nt.join()"
    ),
    "tempfile": "import tempfile\nwith tempfile.TemporaryFile() as f:\n    f.write(b'12')\n    f.seek(0)\n    print(f.read().decode())",
    "dunder_main": "def main():\n    print(12)\n\nif __name__ == '__main__':\n    main()",
    "dev_stdin_stdout": "open('/dev/stdout', 'w').write(str(sum(map(int, open('/dev/stdin').read().split()))))",
}


@pytest.mark.parametrize("name", sorted(LEGIT))
def test_ordinary_programs_work(default_sandbox, name):
    result = default_sandbox.run(LEGIT[name], stdin="5 7\n")
    assert result.status is Status.OK and result.stdout.strip() == "12", result


def test_large_stdin_read_or_ignored(default_sandbox):
    data = "1 " * 3_000_000  # 6 MB, far more than a pipe holds
    assert default_sandbox.run("import sys\nprint(len(sys.stdin.read().split()))", stdin=data).stdout == "3000000\n"
    ignored = default_sandbox.run("print('not reading')", stdin=data)
    assert ignored.status is Status.OK and ignored.stdout == "not reading\n"


def test_minimal_dev(default_sandbox):
    if "mountns" not in default_sandbox.isolation.active:
        pytest.skip("no mount namespace on this machine")
    result = default_sandbox.run("import os\nprint(sorted(os.listdir('/dev')))")
    assert eval(result.stdout) == [
        "fd",
        "full",
        "null",
        "random",
        "shm",
        "stderr",
        "stdin",
        "stdout",
        "urandom",
        "zero",
    ]


@pytest.mark.parametrize(
    "src",
    [
        "import ctypes",
        "import subprocess\nsubprocess.run(['true'])",
        "import os\nos.system('true')",
        "import gc\ngc.get_objects()",
        "import sys\nsys.settrace(lambda *a: None)",
        "import os\nos.symlink('/etc', 'etc')",
        "open('/etc/passwd').read()",
    ],
)
def test_audit_hook_refusals(default_sandbox, src):
    if "audit" not in default_sandbox.isolation.active:
        pytest.skip("audit hook disabled")
    result = default_sandbox.run(src)
    assert result.status is Status.RUNTIME_ERROR and "sandbox:" in result.stderr, result


# ---------------------------------------------------------------------------------------------------- limits


def test_infinite_loop_times_out(sandbox):
    result = Sandbox(sandbox.config.__class__(**{**FAST, "timeout": 1.0}), isolation=sandbox.isolation).run(
        "while True:\n    pass"
    )
    assert result.status is Status.TIMEOUT, result
    assert result.wall_time < 3.0


def test_cpu_time_limit(default_sandbox):
    sb = Sandbox(SandboxConfig(**{**FAST, "timeout": 10.0, "cpu_time": 1.0}), isolation=default_sandbox.isolation)
    result = sb.run("while True:\n    pass")
    assert result.status is Status.TIMEOUT, result
    assert "CPU" in result.reason  # killed by RLIMIT_CPU long before the wall-clock limit
    # The kernel sends SIGXCPU on its scheduler's count of CPU time; the rusage it reports samples that count
    # differently on some machines (0.89 s seen for the 1 s limit on a loaded 2-core VM), so the lower bound is loose.
    assert 0.5 <= result.cpu_time < 3.0
    assert result.wall_time < 10.0


def test_ten_gigabyte_allocation(sandbox):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = sandbox.run("x = bytearray(10 * 1024 ** 3)\nprint('allocated')")
    assert result.status is Status.MEMORY, result
    assert "allocated" not in result.stdout
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 100 * 1024  # KiB


def test_gradual_allocation(sandbox):
    result = sandbox.run("xs = []\nwhile True:\n    xs.append(bytearray(8 * 1024 * 1024))")
    assert result.status is Status.MEMORY, result


def test_printing_a_gigabyte_is_cut_off(sandbox):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.monotonic()
    result = sandbox.run("import sys\nblock = 'x' * (1 << 20)\nfor _ in range(1024):\n    sys.stdout.write(block)")
    assert result.status is Status.OUTPUT_LIMIT, result
    assert len(result.stdout) <= sandbox.config.max_output_bytes
    assert time.monotonic() - start < 3.0
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 100 * 1024  # KiB


def test_stderr_flood_is_cut_off_and_tail_kept(sandbox):
    result = sandbox.run("import sys\nwhile True:\n    sys.stderr.write('e' * 65536)")
    assert result.status is Status.OUTPUT_LIMIT
    assert len(result.stderr) <= sandbox.config.stderr_tail_bytes


def test_file_size_limit(sandbox):
    result = sandbox.run("open('big.bin', 'wb').write(b'x' * (100 * 1024 * 1024))")
    assert result.status in (Status.RUNTIME_ERROR, Status.MEMORY), result


def test_hung_programs_cost_at_most_their_limit(default_sandbox):
    sb = Sandbox(SandboxConfig(**{**FAST, "timeout": 1.0}), max_workers=2, isolation=default_sandbox.isolation)
    start = time.monotonic()
    results = sb.map([("import time\ntime.sleep(60)", "")] * 4)
    assert all(r.status is Status.TIMEOUT for r in results)
    assert time.monotonic() - start < 2 * 1.0 + 3.0
    assert not wait_no_sandbox_processes()


# ---------------------------------------------------------------------------------------------------- escapes


def test_writing_outside_the_working_directory(sandbox):
    tag = secrets.token_hex(6)
    targets = [
        f"/tmp/escape_{tag}",
        f"/var/tmp/escape_{tag}",
        f"/dev/shm/escape_{tag}",
        os.path.join(os.path.dirname(os.path.abspath(__file__)), f"escape_{tag}"),
        os.path.join(os.path.expanduser("~"), f"escape_{tag}"),
        os.path.join("..", f"escape_{tag}"),
    ]
    src = "import os\n" + "".join(
        f"try:\n    open({t!r}, 'w').write('x')\n    print('wrote', {t!r})\nexcept Exception as e:\n    print(e)\n"
        for t in targets
    )
    sandbox.run(src)
    for t in targets[:-1]:
        assert not os.path.exists(t), t
    assert not any(name.endswith(tag) for name in os.listdir(os.path.dirname(targets[3])))


def test_no_network(sandbox):
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    server.settimeout(0.2)
    port = server.getsockname()[1]
    try:
        src = (
            "import socket\n"
            "try:\n"
            f"    socket.create_connection(('127.0.0.1', {port}), timeout=1).sendall(b'hello')\n"
            "    print('connected')\n"
            "except Exception as e:\n"
            "    print('failed', type(e).__name__)\n"
            "try:\n"
            "    socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
            "    print('udp socket')\n"
            "except Exception as e:\n"
            "    print('failed', type(e).__name__)\n"
        )
        result = sandbox.run(src)
        assert "connected" not in result.stdout and "udp socket" not in result.stdout, result
        with pytest.raises(socket.timeout):
            server.accept()
    finally:
        server.close()


def test_network_namespace_has_only_loopback(default_sandbox):
    if "netns" not in default_sandbox.isolation.active:
        pytest.skip("no network namespace on this machine")
    result = default_sandbox.run("print(open('/proc/self/net/dev').read())")
    assert result.status is Status.OK, result
    interfaces = [line.split(":")[0].strip() for line in result.stdout.splitlines() if ":" in line]
    assert interfaces == ["lo"]


def test_cannot_kill_the_parent(sandbox):
    me = os.getpid()
    src = (
        "import os, signal\n"
        f"for pid in (os.getppid(), {me}):\n"
        "    try:\n"
        "        os.kill(pid, signal.SIGKILL)\n"
        "    except Exception as e:\n"
        "        print(type(e).__name__)\n"
        "print('done')\n"
    )
    result = sandbox.run(src)
    assert result.status in (Status.OK, Status.RUNTIME_ERROR), result
    # We are still here, and so is the machinery: the next run works.
    assert sandbox.run("print('still fine')").stdout == "still fine\n"


def test_cannot_signal_everything(sandbox):
    if not {"pidns", "uid"} & set(sandbox.isolation.active) and os.geteuid() == 0:
        pytest.skip("as root without a PID namespace or uid switch kill(-1) would reach other processes")
    result = sandbox.run(
        "import os, signal\ntry:\n    os.kill(-1, signal.SIGKILL)\nexcept Exception as e:\n    print(e)"
    )
    assert result.status is not Status.SANDBOX_ERROR
    assert sandbox.run("print('alive')").stdout == "alive\n"


def test_fork_refused_by_default(default_sandbox):
    result = default_sandbox.run("import os\npid = os.fork()\nprint('forked')")
    if "seccomp" in default_sandbox.isolation.active:
        assert result.status is Status.RUNTIME_ERROR and "forked" not in result.stdout
    # threads stay allowed
    threads = default_sandbox.run(
        "import threading\nt = threading.Thread(target=print, args=('t',))\nt.start(); t.join()"
    )
    assert threads.stdout == "t\n", threads


FORKING = {
    "kernel": SandboxConfig(**FAST, allow_fork=True, max_processes=16, disable=frozenset({"audit"})),
    "kernel-no-pidns": SandboxConfig(**FAST, allow_fork=True, max_processes=16, disable=frozenset({"audit", "pidns"})),
}


@pytest.fixture(scope="module", params=sorted(FORKING))
def forking_sandbox(request):
    sb = Sandbox(FORKING[request.param], max_workers=2)
    if not _process_limit_enforced(sb):
        pytest.skip("no enforced process limit here: fork bombs are only tested where they are bounded")
    with sb:
        yield sb


def test_fork_bomb_is_bounded(forking_sandbox):
    start = time.monotonic()
    result = forking_sandbox.run("import os\nwhile True:\n    os.fork()")
    assert result.status is not Status.OK
    result = forking_sandbox.run(
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    )
    assert result.status is Status.TIMEOUT
    assert time.monotonic() - start < 2 * forking_sandbox.config.timeout + 4.0
    assert not wait_no_sandbox_processes(), "fork-bomb processes survived"


def test_double_forked_sleeper_is_killed(forking_sandbox):
    src = (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        time.sleep(60)\n"
        "    os._exit(0)\n"
        "print('parent done')\n"
    )
    result = forking_sandbox.run(src)
    assert result.status is Status.OK and result.stdout == "parent done\n", result
    assert not wait_no_sandbox_processes(), "the double-forked sleeper survived"


def test_sleeper_survives_no_timeout(forking_sandbox):
    # A sleeper that keeps the output pipe open must not keep the run alive past the main process.
    src = "import os, time\nif os.fork() == 0:\n    time.sleep(60)\nprint('bye')"
    start = time.monotonic()
    result = forking_sandbox.run(src)
    assert result.stdout.startswith("bye") and time.monotonic() - start < forking_sandbox.config.timeout + 1.5
    assert not wait_no_sandbox_processes()


# ---------------------------------------------------------------------------------------------------- unprivileged

_UNPRIVILEGED_PROBE = r"""
import glob, json, os, sys
from codapo_trl.sandbox import Sandbox, SandboxConfig, SandboxFloorError
tag, victim, containment = sys.argv[1], int(sys.argv[2]), sys.argv[3]
out = {}
for name, disable in (("default", ()), ("no-userns", ("userns",)), ("no-userns-no-audit", ("userns", "audit"))):
    try:
        sb = Sandbox(SandboxConfig(timeout=2, memory_mb=256, disable=frozenset(disable)))
    except SandboxFloorError as exc:  # issue 61: without a mount namespace, written files are neither bounded nor noexec
        out[name] = {"refused": str(exc)}
        sb = Sandbox(SandboxConfig(timeout=2, memory_mb=256, disable=frozenset(disable), allow_below_floor=True))
    path = "/tmp/escape_%s_%s" % (tag, name)
    out[name] = {
        **out.get(name, {}),
        "active": list(sb.isolation.active),
        "ok": sb.run("print(6 * 7)").stdout,
        "write": sb.run("open(%r, 'w').write('x')" % path).status.value,
        "wrote": os.path.exists(path),
        "kill": sb.run("import os, signal\nos.kill(%d, signal.SIGKILL)" % victim).status.value,
        "env": sb.run("import os\nprint(os.environ.get('HF_TOKEN'))").stdout,
        "memory": sb.run("x = bytearray(10 * 1024 ** 3)").status.value,
        "containment": sb.run(containment).stdout,
    }
print(json.dumps(out))
"""

# The user-namespace configuration (what an unprivileged trainer gets) against the issue-61 resources: memfd, a
# written extension module, a native module of another Python installation's site-packages.
_UNPRIVILEGED_CONTAINMENT = r"""
import glob, importlib.machinery, importlib.util, os, sys
out = []
def load(path, name):
    loader = importlib.machinery.ExtensionFileLoader(name, path)
    importlib.util.module_from_spec(importlib.util.spec_from_file_location(name, path, loader=loader))
try:
    os.memfd_create("x")
    out.append("memfd")
except OSError:
    pass
src = glob.glob(sys.base_prefix + "/lib/python3*/lib-dynload/_json*.so")[0]
with open(src, "rb") as f, open("mod.so", "wb") as g:
    g.write(f.read())
for path, name in [("./mod.so", "_json")] + [(p, "_cffi_backend") for p in glob.glob("/usr/lib/python3/dist-packages/_cffi*.so")]:
    try:
        load(path, name)
        out.append("loaded " + path)
    except Exception:
        pass
print(out)
"""


def test_unprivileged_user_degrades_gracefully(tmp_path):
    """Run the sandbox as `nobody` (what a CI container or a non-root trainer gets) and check the degraded modes."""
    import shutil
    import subprocess

    python = "/usr/bin/python3"
    if os.geteuid() != 0 or not shutil.which("setpriv") or not os.path.exists(python):
        pytest.skip("needs root (to become nobody), setpriv and a system python3")
    version = subprocess.run([python, "-c", "import sys; print(sys.version_info >= (3, 11))"], capture_output=True)
    if version.stdout.strip() != b"True":
        pytest.skip("the system python3 is older than 3.11")
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    # A process of nobody's, like the programs: only the sandbox stops them from killing it.
    victim = subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sleep", "30"])
    tag = secrets.token_hex(6)
    try:
        proc = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", python, "-c", _UNPRIVILEGED_PROBE]
            + [tag, str(victim.pid), _UNPRIVILEGED_CONTAINMENT],
            capture_output=True,
            text=True,
            cwd="/tmp",
            env={
                "PATH": "/usr/bin:/bin",
                "HOME": "/nonexistent",
                "HF_TOKEN": "hf_fake_secret_for_tests",
                "PYTHONPATH": repo,  # the checkout, for the system python3
            },
            timeout=120,
        )
        if proc.returncode != 0 and ("Permission denied" in proc.stderr or "No module named" in proc.stderr):
            pytest.skip(f"the checkout is not readable by nobody: {proc.stderr[-300:]}")
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert victim.poll() is None, "a sandboxed program killed a process outside the sandbox"
    finally:
        victim.kill()
        victim.wait()
        for name in os.listdir("/tmp"):
            if tag in name:
                os.unlink(os.path.join("/tmp", name))
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    for name, r in report.items():
        assert "uid" not in r["active"], name
        assert r["ok"] == "42\n", (name, r)
        assert r["env"] == "None\n", (name, r)
        assert r["memory"] == "memory", (name, r)
        assert r["kill"] == "runtime_error", (name, r)
        if "audit" in r["active"] or {"landlock", "mountns"} & set(r["active"]):
            assert not r["wrote"] and r["write"] == "runtime_error", (name, r)
        if "mountns" in r["active"] and "seccomp" in r["active"]:
            assert "refused" not in r and r["containment"] == "[]\n", (name, r)
        else:  # issue 61: refused by the floor, which names the missing layer
            assert "mountns" in r["refused"], (name, r)
    assert "userns" not in report["no-userns"]["active"]
    assert "mountns" in report["default"]["active"], report["default"]


def test_no_leftover_processes_after_suite():
    assert not wait_no_sandbox_processes()
