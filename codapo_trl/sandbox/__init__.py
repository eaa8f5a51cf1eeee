"""Run untrusted, model-written Python programs in isolation (Linux only).

Every execution gets its own short-lived process tree:

```
trainer (this module) --Popen--> bootstrap (python -I -S, trusted code below) --fork--> runner (python -I -S)
                                 joins cgroups, unshares namespaces,                    mounts, rlimits, uid drop,
                                 subreaper: waits, reports exit status +                no_new_privs, Landlock,
                                 rusage, kills and reaps what is left                   seccomp, exec, audit hook
```

The isolation layers are detected once per process (see [`detect_isolation`]) and everything that works is used;
what is active is logged once at start-up, with a warning for each missing kind of protection. The layers:

- `uid`: when the trainer is root, the program runs as a dedicated unprivileged uid leased from a `flock`-protected
  pool (`uid_base`...), so it cannot signal, ptrace or write to anything the trainer owns, and `RLIMIT_NPROC`
  (counted per uid) is really enforced.
- `userns`: when not root, an unprivileged user namespace is used to get the namespaces below.
- `netns`: a fresh network namespace (a downed loopback device only): no connection to anything, even localhost.
- `pidns`: a fresh PID namespace; the program is its PID 1, so when it exits or is killed the kernel kills every
  process it left behind, including double-forked and `setsid` daemons.
- `mountns`: a private mount namespace in which every mount is remounted read-only, `/root`, `/home` and the
  trainer's `$HOME` are hidden behind empty tmpfs, `/tmp`, `/var/tmp` and `/dev/shm` are private size-limited
  tmpfs, and the working directory is a private size-limited tmpfs (it vanishes with the namespace).
- `cgroup`: (cgroup v1, used when the program may fork) a memory cgroup limiting the whole tree's memory plus its
  tmpfs files and detecting OOM kills, and a pids cgroup.
- `landlock`: writes only in the working directory and `/dev/null`, reads only the interpreter's prefix, the
  loader's libraries, `/dev` and `/proc/self`; no TCP bind/connect; no signals to processes outside the sandbox.
- `seccomp`: a classic-BPF syscall filter (x86_64 / aarch64): no sockets, no new processes unless
  `allow_fork=True` (threads are fine), signals only to itself, no ptrace, mount, namespace, keyring, bpf, perf,
  io_uring, kexec or module syscalls.
- `rlimits` (always): CPU time, address space, file size, open files, stack, core dumps, processes.
- `audit` (defence in depth only): a `sys.addaudithook` hook installed before the program's first line that
  refuses sockets, subprocesses/exec, signals to other processes, ctypes, writes outside the working directory,
  reads outside the standard library, and tampering with the hook.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import functools
import glob
import json
import logging
import math
import os
import platform
import secrets
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from enum import StrEnum


logger = logging.getLogger(__name__)

__all__ = [
    "ExecutionResult",
    "Harness",
    "IsolationReport",
    "Sandbox",
    "SandboxConfig",
    "SandboxFloorError",
    "Status",
    "check_floor",
    "detect_isolation",
    "floor_gaps",
    "get_sandbox",
    "run_python",
]

ALL_LAYERS = ("uid", "userns", "netns", "pidns", "mountns", "cgroup", "landlock", "seccomp", "audit")

_MiB = 1024 * 1024


class Status(StrEnum):
    """Outcome of one execution (or, for `WRONG`, of one checked test case)."""

    OK = "ok"
    WRONG = "wrong"
    TIMEOUT = "timeout"
    MEMORY = "memory"
    OUTPUT_LIMIT = "output_limit"
    RUNTIME_ERROR = "runtime_error"
    SANDBOX_ERROR = "sandbox_error"


@dataclass(frozen=True)
class SandboxConfig:
    """Limits and options of one execution.

    Args:
        timeout (`float`): wall-clock limit in seconds for the whole run (interpreter start-up included).
        cpu_time (`float`, *optional*): CPU-time limit in seconds per process (`RLIMIT_CPU`, rounded up to whole
            seconds); defaults to `timeout`.
        memory_mb (`int`): address-space limit per process (`RLIMIT_AS`); with the `cgroup` layer the whole tree's
            resident memory plus its tmpfs files is limited to `memory_mb + 128` MiB as well.
        max_output_bytes (`int`): cap on captured stdout, and on total stderr; exceeding either kills the run.
        stderr_tail_bytes (`int`): how much of the end of stderr is kept in the result.
        max_file_mb (`int`): largest file the program may write (`RLIMIT_FSIZE`).
        tmpfs_mb (`int`): size of the private working-directory tmpfs (`mountns` layer).
        max_processes (`int`): processes + threads the program may have (`RLIMIT_NPROC` / `pids.max`).
        max_open_files (`int`): `RLIMIT_NOFILE`.
        stack_mb (`int`): `RLIMIT_STACK` (also glibc's default thread stack size).
        allow_fork (`bool`): let the program create processes (the `seccomp` layer refuses them by default;
            threads are always allowed).
        nice (`int`): niceness added to the program.
        python_executable (`str`, *optional*): interpreter that runs the program; defaults to the base
            interpreter of the running Python (the program cannot see a virtualenv's packages).
        python_flags (`tuple[str, ...]`): interpreter flags; by default isolated mode without `site`.
        disable (`frozenset[str]`): isolation layers not to use even if available (see `ALL_LAYERS`).
        uid_base (`int`): first uid of the pool used when the trainer is root.
        uid_count (`int`): size of that pool (one uid per concurrent execution on the machine).
        base_dir (`str`, *optional*): where per-run directories are created; defaults to the temp dir.
        allow_below_floor (`bool`): run untrusted programs even when the active layers do not reach the isolation
            floor (see [`floor_gaps`]); also switched on by the environment variable
            `CODAPO_SANDBOX_ALLOW_BELOW_FLOOR=1`. For debugging on machines without namespaces only.
    """

    timeout: float = 4.0
    cpu_time: float | None = None
    memory_mb: int = 512
    max_output_bytes: int = 4 * _MiB
    stderr_tail_bytes: int = 4096
    max_file_mb: int = 16
    tmpfs_mb: int = 64
    max_processes: int = 16
    max_open_files: int = 64
    stack_mb: int = 16
    allow_fork: bool = False
    nice: int = 0
    python_executable: str | None = None
    python_flags: tuple[str, ...] = ("-I", "-S", "-B", "-X", "utf8")
    disable: frozenset[str] = frozenset()
    uid_base: int = 61000
    uid_count: int = 512
    base_dir: str | None = None
    allow_below_floor: bool = False

    def __post_init__(self) -> None:
        unknown = set(self.disable) - set(ALL_LAYERS)
        if unknown:
            raise ValueError(f"unknown isolation layers in `disable`: {sorted(unknown)}; known: {ALL_LAYERS}")
        if self.timeout <= 0 or self.memory_mb <= 0 or self.max_output_bytes <= 0:
            raise ValueError("timeout, memory_mb and max_output_bytes must be positive")


@dataclass
class ExecutionResult:
    """What one execution produced.

    Attributes:
        status (`Status`): `ok` (exit code 0 and confirmed by the harness), `timeout`, `memory`, `output_limit`, `runtime_error` or
            `sandbox_error` (the sandbox itself failed: not the program's fault).
        stdout (`str`): captured standard output (at most `max_output_bytes`, decoded as UTF-8 with replacement).
        stderr (`str`): the last `stderr_tail_bytes` of standard error.
        exit_code (`int`, *optional*): the program's exit code, if it exited.
        signal (`int`, *optional*): the signal that killed it, if any.
        wall_time (`float`): seconds from launch to the end of the run.
        cpu_time (`float`, *optional*): user + system CPU seconds of the program (and its waited-for children).
        max_rss_mb (`float`, *optional*): peak resident memory of the program.
        reason (`str`): one-line human-readable explanation for anything but `ok`.
        stage (`str`, *optional*): for `sandbox_error`, the set-up stage that failed.
        confirmed (`bool`): the harness confirmed, on its own channel with the run's nonce, that the program (and
            its tests) ran to the end (see [`Harness`]); `status` is `ok` only then.
        harness_value (`str`, *optional*): what the harness confirmed with (the JSON return value in `"call"`
            mode), or its failure message.
    """

    status: Status
    stdout: str = ""
    stderr: str = ""
    exit_code: int | None = None
    signal: int | None = None
    wall_time: float = 0.0
    cpu_time: float | None = None
    max_rss_mb: float | None = None
    reason: str = ""
    stage: str | None = None
    confirmed: bool = False
    harness_value: str | None = None

    @property
    def ok(self) -> bool:
        return self.status is Status.OK


@dataclass(frozen=True)
class Harness:
    """What the trusted harness inside the sandbox does with the program, and what it confirms.

    The harness (trusted code that runs the program in its own interpreter) reports on a channel of its own, with
    a per-run random nonce the program never sees, and only from its own stack frame once the program (and its
    tests) returned; [`ExecutionResult.confirmed`] is true only then. Modes:

    - `"script"` (default): run the program as `__main__` (its standard output is judged by the caller); confirmed
      when the program's code returned (or raised `SystemExit` with status 0), its non-daemon threads finished and
      its output was flushed.
    - `"call"`: run the program as a module, call `fn_name(*json.loads(args))` (a function, or a method of a class
      `Solution`) and confirm with the JSON text of the return value, which must be made of plain built-in types.
    - `"check"`: run `prelude`, the program and `test` (HumanEval style), then call `check(entry_point)`; confirmed
      when `check` returned, the candidate only returned plain built-in values, no built-in or module attribute the
      test uses was replaced, and no thread is left.

    Args:
        mode (`str`): `"script"`, `"call"` or `"check"`.
        fn_name (`str`, *optional*): the function called in `"call"` mode.
        args (`str`, *optional*): JSON list of the arguments in `"call"` mode.
        test (`str`, *optional*): test code defining `check(candidate)` in `"check"` mode.
        entry_point (`str`, *optional*): name of the candidate function in `"check"` mode.
        prelude (`str`): code run before the program in `"check"` mode (the prompt's imports).
    """

    mode: str = "script"
    fn_name: str | None = None
    args: str | None = None
    test: str | None = None
    entry_point: str | None = None
    prelude: str = ""

    def __post_init__(self) -> None:
        if self.mode not in ("script", "call", "check"):
            raise ValueError(f"unknown harness mode {self.mode!r}; use 'script', 'call' or 'check'")
        if self.mode == "call" and (not self.fn_name or self.args is None):
            raise ValueError("a 'call' harness needs `fn_name` and `args`")
        if self.mode == "check" and (not self.test or not self.entry_point):
            raise ValueError("a 'check' harness needs `test` and `entry_point`")

    def spec(self, nonce: str) -> dict:
        return {
            "nonce": nonce,
            "mode": self.mode,
            "fn_name": self.fn_name,
            "args": self.args,
            "test": self.test,
            "entry_point": self.entry_point,
            "prelude": self.prelude,
        }


SCRIPT = Harness()


@dataclass(frozen=True)
class IsolationReport:
    """Which isolation layers are active, and why the others are not."""

    active: tuple[str, ...]
    missing: dict[str, str] = field(default_factory=dict)
    python_executable: str = ""
    privileged: bool = False

    def summary(self) -> str:
        """Every layer, and whether it is active (with the reason when it is not)."""
        parts = ["caps: on", "rlimits: on"]
        for layer in ALL_LAYERS:
            if layer in self.active:
                parts.append(f"{layer}: on")
            else:
                parts.append(f"{layer}: OFF ({self.missing.get(layer, 'not available')})")
        return "; ".join(parts)


BELOW_FLOOR_ENV = "CODAPO_SANDBOX_ALLOW_BELOW_FLOOR"


class SandboxFloorError(RuntimeError):
    """The active isolation layers do not reach the floor below which no untrusted program runs."""


def floor_gaps(
    active: Sequence[str], allow_fork: bool = False, kernel_counts_nproc_per_userns: bool = True
) -> list[str]:
    """The protections of the isolation floor that the layers in `active` do not give, each with the layers that
    would give it. Empty when the floor is reached.

    The floor: no capabilities (always: the bounding set is dropped and `no_new_privs` set whatever the layers),
    no network (`netns` or `seccomp`), no writes outside the working directory and no view of the project
    checkout or user directories (`mountns` or `landlock`), bounded CPU time and memory (`rlimits`, always) and a
    bounded number of processes (`uid`, `userns`, `cgroup`, or `seccomp` without `allow_fork`).
    """
    have = set(active)
    gaps = []
    if not have & {"netns", "seccomp"}:
        gaps.append("no network (needs the netns or seccomp layer)")
    if not have & {"mountns", "landlock"}:
        gaps.append("no writes outside the working directory, host data hidden (needs the mountns or landlock layer)")
    nproc = "uid" in have or ("userns" in have and kernel_counts_nproc_per_userns) or "cgroup" in have
    if not nproc and not ("seccomp" in have and not allow_fork):
        gaps.append("bounded number of processes (needs the uid, userns, cgroup or seccomp layer)")
    return gaps


def check_floor(report: IsolationReport, config: SandboxConfig) -> None:
    """Refuse (with [`SandboxFloorError`]) to run untrusted code below the isolation floor, unless opted out."""
    gaps = floor_gaps(report.active, config.allow_fork, _kernel_at_least(5, 14))
    if not gaps:
        return
    opted_out = config.allow_below_floor or os.environ.get(BELOW_FLOOR_ENV, "") not in ("", "0")
    message = (
        "the sandbox's active layers are below the isolation floor; missing: "
        + "; ".join(gaps)
        + f". Layers: {report.summary()}. Fix the machine (namespaces, seccomp or Landlock), or opt out explicitly "
        f"with SandboxConfig(allow_below_floor=True) or {BELOW_FLOOR_ENV}=1 (untrusted code then runs with these "
        "protections missing)."
    )
    if not opted_out:
        raise SandboxFloorError(message)
    logger.warning("codapo sandbox: running below the isolation floor (opted out): %s", message)


# --------------------------------------------------------------------------------------------------------------
# Code that runs in the child processes. Kept in strings because the children start with `python -I -S`, which
# cannot import this package; both only use the standard library.
# --------------------------------------------------------------------------------------------------------------

_BOOTSTRAP = r"""
import ctypes, json, os, resource, signal, sys, time

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC, MS_PRIVATE, MS_RELATIME = 1024, 2048, 4096, 16384, 1 << 18, 1 << 21
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 1, 38, 22, 2
PR_SET_CHILD_SUBREAPER = 36
PR_CAPBSET_DROP, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, PR_SET_SECUREBITS = 24, 47, 4, 28

with open(sys.argv[1], "rb") as _f:
    CFG = json.loads(_f.read())
os.unlink(sys.argv[1])  # it holds the run's nonce: gone before any untrusted code runs
STATUS_FD = CFG["status_fd"]
REPORT_FD = CFG["report_fd"]
STAGE = ["bootstrap"]
libc = ctypes.CDLL(None, use_errno=True)
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
libc.unshare.argtypes = [ctypes.c_int]
libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]


def report(**kw):
    try:
        os.write(STATUS_FD, (json.dumps(kw) + "\n").encode())
    except OSError:
        pass


def check(rc, what):
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, what + ": " + os.strerror(err))


def b(s):
    return None if s is None else s.encode()


def mount(src, tgt, fstype, flags, data=None):
    check(libc.mount(b(src), b(tgt), b(fstype), flags, b(data)), "mount " + tgt)


def write_file(path, text):
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def mount_points():
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            mp = line.split()[4]
            out.append(mp.encode().decode("unicode_escape"))
    return out


def remount_readonly(mp):
    st = os.statvfs(mp)
    keep = 0
    for st_bit, ms_bit in ((2, MS_NOSUID), (4, MS_NODEV), (8, MS_NOEXEC), (1024, MS_NOATIME),
                           (2048, MS_NODIRATIME), (4096, MS_RELATIME)):
        if st.f_flag & st_bit:
            keep |= ms_bit
    mount(None, mp, None, MS_REMOUNT | MS_BIND | MS_RDONLY | keep)


def setup_mounts(cfg):
    STAGE[0] = "mountns"
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    keep_fds = []
    for path in cfg["expose"]:
        keep_fds.append((path, os.open(path, os.O_PATH | os.O_DIRECTORY)))
    failed = 0
    for mp in mount_points():
        try:
            remount_readonly(mp)
        except OSError:
            failed += 1
    if failed and cfg["strict_readonly"]:
        raise OSError("could not remount %d mount(s) read-only" % failed)
    # A minimal /dev: no GPU, tty, kvm, fuse or disk device nodes, only these (bound from the real ones).
    dev_fds = [(name, os.open("/dev/" + name, os.O_PATH)) for name in ("null", "zero", "full", "random", "urandom")
               if os.path.exists("/dev/" + name)]
    mount("tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,nr_inodes=64,mode=0755")
    for name, fd in dev_fds:
        os.close(os.open("/dev/" + name, os.O_WRONLY | os.O_CREAT, 0o666))
        mount("/proc/self/fd/%d" % fd, "/dev/" + name, None, MS_BIND)
        os.close(fd)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        os.symlink(target, "/dev/" + name)
    os.mkdir("/dev/shm", 0o1777)
    remount_readonly("/dev")
    for path in cfg["mask_files"]:  # native modules that give Python code raw memory access
        mount("/dev/null", path, None, MS_BIND)
    for path in cfg["hide"]:
        mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,nr_inodes=256,mode=0755")
    for path in cfg["private_tmp"]:
        mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, "size=%dk,nr_inodes=1024,mode=1777" % cfg["tmp_kb"])
    for path, fd in keep_fds:  # the interpreter, if it lived below a directory hidden above
        os.makedirs(path, mode=0o755, exist_ok=True)
        mount("/proc/self/fd/%d" % fd, path, None, MS_BIND | MS_REC)
        remount_readonly(path)
        os.close(fd)
    work = cfg["workdir"]
    os.makedirs(work, exist_ok=True)
    opts = "size=%dk,nr_inodes=4096,mode=0700" % cfg["tmpfs_kb"]
    if cfg["uid"] is not None:
        opts += ",uid=%d,gid=%d" % (cfg["uid"], cfg["uid"])
    mount("tmpfs", work, "tmpfs", MS_NOSUID | MS_NODEV, opts)
    if cfg["pidns"]:
        try:
            mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        except OSError:
            pass


def install_seccomp(spec):
    STAGE[0] = "seccomp"
    import struct
    prog = bytearray.fromhex(spec["prog"])
    for idx in spec["self_insns"]:
        struct.pack_into("=I", prog, idx * 8 + 4, os.getpid())

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    buf = ctypes.create_string_buffer(bytes(prog), len(prog))
    fprog = SockFprog(len(prog) // 8, ctypes.cast(buf, ctypes.c_void_p))
    check(libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0), "seccomp")


def install_landlock(spec):
    # Landlock: writes only in the working directory (and /dev/null), reads only below spec["read"], no TCP
    # bind/connect (ABI >= 4), no signals or abstract unix sockets beyond the program's own processes (ABI >= 6).
    STAGE[0] = "landlock"
    import struct
    sys_create, sys_add, sys_restrict = 444, 445, 446  # the same on every architecture
    abi = libc.syscall(sys_create, None, 0, 1)  # LANDLOCK_CREATE_RULESET_VERSION
    if abi < 1:
        raise OSError(ctypes.get_errno(), "landlock unavailable")
    fs_all = (1 << 13) - 1
    if abi >= 2:
        fs_all |= 1 << 13  # REFER
    if abi >= 3:
        fs_all |= 1 << 14  # TRUNCATE
    if abi >= 5:
        fs_all |= 1 << 15  # IOCTL_DEV
    read = (1 << 0) | (1 << 2) | (1 << 3)  # EXECUTE, READ_FILE, READ_DIR
    file_rw = ((1 << 1) | (1 << 2) | (1 << 14) | (1 << 15)) & fs_all  # WRITE_FILE, READ_FILE, TRUNCATE, IOCTL_DEV
    net = 3 if abi >= 4 else 0  # BIND_TCP, CONNECT_TCP: handled, never allowed
    scoped = 3 if abi >= 6 else 0  # ABSTRACT_UNIX_SOCKET, SIGNAL
    attr = struct.pack("=QQQ", fs_all, net, scoped)
    size = 8 if abi < 4 else (16 if abi < 6 else 24)
    buf = ctypes.create_string_buffer(attr, len(attr))
    ruleset = libc.syscall(sys_create, buf, ctypes.c_size_t(size), 0)
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset")
    try:
        rules = [(p, read) for p in spec["read"]] + [(spec["write"], fs_all)] + [("/dev/null", file_rw)]
        for path, access in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                if not os.path.isdir(path):
                    access &= (1 << 0) | (1 << 1) | (1 << 2) | (1 << 14) | (1 << 15)  # rights that apply to files
                rule = ctypes.create_string_buffer(struct.pack("=Qi", access & fs_all, fd), 12)
                check(0 if libc.syscall(sys_add, ruleset, 1, rule, 0) == 0 else -1, "landlock_add_rule " + path)
            finally:
                os.close(fd)
        check(0 if libc.syscall(sys_restrict, ruleset, 0) == 0 else -1, "landlock_restrict_self")
    finally:
        os.close(ruleset)


def drop_capabilities():
    # Whatever uid the program runs as: an empty bounding set (an exec as root gains nothing), no ambient
    # capabilities, and root's special treatment locked off.
    STAGE[0] = "caps"
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    if os.geteuid() != 0:
        with open("/proc/self/status") as f:
            permitted = next((int(ln.split()[1], 16) for ln in f if ln.startswith("CapPrm:")), 1)
        if not permitted:
            return  # holds no capability, and no_new_privs (set below) stops an exec from granting any
    prctl = libc.prctl
    for cap in range(64):
        if prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            if ctypes.get_errno() == 22:  # EINVAL: past the kernel's last capability
                break
            check(-1, "dropping capability %d from the bounding set" % cap)
    # SECBIT_NOROOT (+ locked), SECBIT_KEEP_CAPS_LOCKED, SECBIT_NO_CAP_AMBIENT_RAISE (+ locked)
    check(libc.prctl(PR_SET_SECUREBITS, 0x01 | 0x02 | 0x20 | 0x40 | 0x80, 0, 0, 0), "securebits")


def init_process(pid):
    # PID 1 of the program's PID namespace (the program itself is PID 2, so that a signal it sends itself is not
    # ignored the way the kernel ignores it for a namespace's init): wait for it, report how it ended, and exit,
    # which makes the kernel kill whatever it left behind.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    os.close(REPORT_FD)  # only the program holds the harness's channel
    while True:
        try:
            done, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(0)
        except InterruptedError:
            continue
        if done == pid:
            break
    if os.WIFSIGNALED(status):
        report(event="program", signal=os.WTERMSIG(status))
        os._exit(128)
    os._exit(os.WEXITSTATUS(status))


def child(cfg):
    check(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "pdeathsig")
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    if cfg["mountns"]:
        setup_mounts(cfg)
    if cfg["pidns"]:
        STAGE[0] = "pidns"
        pid = os.fork()
        if pid != 0:
            init_process(pid)
        check(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "pdeathsig")
    STAGE[0] = "workdir"
    work = cfg["workdir"]
    with open(os.path.join(work, "solution.py"), "wb") as f:
        f.write(CFG["source"].encode("utf-8", "surrogateescape"))
    harness = dict(CFG["harness"])
    text = harness.pop("nonce") + "\n" + harness.pop("mode") + "\n" + json.dumps(harness)
    fd = os.open(os.path.join(work, ".codapo_harness"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)
    if cfg["uid"] is not None and not cfg["mountns"]:
        os.chown(work, cfg["uid"], cfg["uid"])
    if cfg["uid"] is not None:
        for fd in (0, 1, 2):  # the pipes belong to the trainer's uid: give them to the program (/dev/stdin etc.)
            try:
                os.fchown(fd, cfg["uid"], cfg["uid"])
            except OSError:
                pass
    if cfg["nice"]:
        os.nice(cfg["nice"])
    drop_capabilities()
    STAGE[0] = "rlimits"
    for name, soft, hard in cfg["rlimits"]:
        res = getattr(resource, name)
        cur_soft, cur_hard = resource.getrlimit(res)
        if cur_hard != resource.RLIM_INFINITY:
            hard = min(hard, cur_hard)
            soft = min(soft, hard)
        resource.setrlimit(res, (soft, hard))
    if cfg["uid"] is not None:
        STAGE[0] = "uid"
        os.setgroups([])
        os.setresgid(cfg["uid"], cfg["uid"], cfg["uid"])
        os.setresuid(cfg["uid"], cfg["uid"], cfg["uid"])
        check(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "pdeathsig")
    os.setsid()  # own session and process group: kill(0, ...) cannot reach the bootstrap
    STAGE[0] = "no_new_privs"
    check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    if cfg["landlock"]:
        install_landlock(cfg["landlock"])
    if cfg["seccomp"]:
        install_seccomp(cfg["seccomp"])
    STAGE[0] = "exec"
    os.chdir(work)
    os.set_inheritable(STATUS_FD, False)
    os.set_inheritable(REPORT_FD, True)
    argv = [a.replace("{report_fd}", str(REPORT_FD)) for a in cfg["argv"]]
    os.execve(argv[0], argv, cfg["env"])


def main():
    cfg = CFG
    try:
        if cfg["cgroup_procs"]:
            STAGE[0] = "cgroup"
            for path in cfg["cgroup_procs"]:
                write_file(path, str(os.getpid()))
        if cfg["userns"]:
            STAGE[0] = "userns"
            outer_uid, outer_gid = os.geteuid(), os.getegid()
            check(libc.unshare(CLONE_NEWUSER), "unshare(CLONE_NEWUSER)")
            write_file("/proc/self/setgroups", "deny")
            write_file("/proc/self/uid_map", "%d %d 1\n" % (cfg["inner_id"], outer_uid))
            write_file("/proc/self/gid_map", "%d %d 1\n" % (cfg["inner_id"], outer_gid))
        for layer, flag in (("netns", CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS), ("mountns", CLONE_NEWNS),
                            ("pidns", CLONE_NEWPID)):
            if cfg[layer]:
                STAGE[0] = layer
                check(libc.unshare(flag), "unshare(" + layer + ")")
    except Exception as exc:
        report(event="setup_error", stage=STAGE[0], error="%s: %s" % (type(exc).__name__, exc))
        return 0
    # Orphans of the program (daemons, double forks) become our children, so that we can reap them.
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    pid = os.fork()
    if pid == 0:
        try:
            child(cfg)
        except BaseException as exc:
            report(event="setup_error", stage=STAGE[0], error="%s: %s" % (type(exc).__name__, exc))
        os._exit(127)
    os.close(REPORT_FD)  # only the program holds the harness's channel now

    def stop(signum, frame):
        # Sent by the trainer on a time or output limit (SIGUSR1), or our own alarm if the trainer is gone.
        try:
            os.kill(pid, signal.SIGKILL)  # safe: only we reap it
        except OSError:
            pass

    signal.signal(signal.SIGUSR1, stop)
    signal.signal(signal.SIGALRM, stop)
    signal.alarm(cfg["alarm"])
    _, status, ru = os.wait4(pid, 0)
    report(event="exit", exit_code=os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
           signal=os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
           cpu_time=ru.ru_utime + ru.ru_stime, max_rss_kb=ru.ru_maxrss)
    # With a PID namespace the kernel has killed and reaped everything already. Without one, kill what the
    # program left behind (identified by its uid, or else by the token in its environment) and reap it.
    if not cfg["pidns"]:
        sweep(cfg)
    while True:
        try:
            os.wait()
        except ChildProcessError:
            break
        except InterruptedError:
            continue
    return 0


def sweep(cfg):
    me = os.getpid()
    token = ("CODAPO_SANDBOX_RUN=" + cfg["env"]["CODAPO_SANDBOX_RUN"]).encode()
    for _ in range(200):
        found = 0
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) == me:
                continue
            try:
                if cfg["uid"] is not None:
                    if os.stat("/proc/" + name).st_uid != cfg["uid"]:
                        continue
                else:
                    with open("/proc/%s/environ" % name, "rb") as f:
                        if token not in f.read():
                            continue
                with open("/proc/%s/stat" % name, "rb") as f:
                    if f.read().rpartition(b")")[2].split()[0] == b"Z":
                        continue  # already dead, waiting to be reaped
                os.kill(int(name), signal.SIGKILL)
                found += 1
            except (OSError, IndexError):
                continue
        if not found:
            return
        time.sleep(0.002)
        # reap what died meanwhile so that zombies do not count as found again
        while True:
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break


sys.exit(main())
"""

_RUNNER = r"""
import sys


def _codapo_install_guard(nonce, report_fd):
    # The harness's integrity guard, always installed (whatever the isolation layers): the only way to write the
    # confirmation is an audit event raised from the harness's own frame, once, in the original process. The
    # nonce lives only in this closure; the ways to reach closures, frames' state or raw memory are refused.
    import os
    _write, _getpid, _getframe, _pid, _realpath = os.write, os.getpid, sys._getframe, os.getpid(), os.path.realpath
    # the registered harness frame, confirmation sent, tampering seen, frames protected, inside own_frame()
    state = [None, False, "", False, False]

    def own_frame():  # the frame that raised the event being handled (not refused by the protection below)
        state[4] = True
        try:
            return _getframe(2)
        finally:
            state[4] = False

    def guard(event, args, _Err=PermissionError, _isinstance=isinstance, _str=str, _bytes=bytes,
              _ValueError=ValueError, _frames=frozenset(("tb_frame", "gi_frame", "cr_frame", "ag_frame")),
              _denied=frozenset(("sys.settrace", "sys.setprofile", "sys._current_frames", "gc.get_objects",
                                 "gc.get_referrers", "gc.get_referents", "code.__new__")),
              _modules=frozenset(("ctypes", "_ctypes", "_ctypes_test", "_testcapi", "_testinternalcapi",
                                  "_testbuffer", "_testmultiphase", "_xxsubinterpreters", "_xxtestfuzz"))):
        if state[3] and not state[4]:
            # While a check-format test runs, no frame is handed out: the test's own frame holds the expected
            # values (ValueError is what the standard library expects when no frame is available).
            if event == "sys._getframe":
                raise _ValueError("sandbox: frames are not available during the tests")
            if event == "object.__getattr__" and args[1] in _frames:
                raise _Err("sandbox: frames are not available during the tests")
        if event == "codapo.confirm":
            if own_frame() is not state[0] or state[1] or _getpid() != _pid:
                state[2] = state[2] or "a confirmation was forged"
                raise _Err("sandbox: only the harness confirms")
            state[1] = True
            verdict = args[0]
            if state[2]:
                verdict = "fail " + state[2]
            _write(report_fd, (nonce + " " + verdict + "\n").encode("utf-8", "replace"))
            return
        if event == "codapo.register":
            if state[0] is None:
                state[0] = own_frame()
            return
        if event == "codapo.protect":
            if own_frame() is not state[0]:
                raise _Err("sandbox: only the harness protects frames")
            state[3] = args[0]
            return
        if event in _denied or event.startswith("ctypes."):
            raise _Err("sandbox: " + event + " is not allowed")
        if event == "import" and args[0] in _modules:
            raise _Err("sandbox: import " + args[0] + " is not allowed")
        if event == "marshal.loads" and own_frame().f_code.co_filename != "<frozen importlib._bootstrap_external>":
            raise _Err("sandbox: marshal.loads is not allowed")
        if event == "open" and (_isinstance(args[0], _str) or _isinstance(args[0], _bytes)):
            path = args[0] if _isinstance(args[0], _str) else args[0].decode("utf-8", "replace")
            if "proc" in path or not path.startswith("/"):
                parts = _realpath(path).split("/")
                if len(parts) > 3 and parts[1] == "proc" and ("mem" in parts or "map_files" in parts
                                                             or "pagemap" in parts):
                    raise _Err("sandbox: reading process memory is not allowed")

    sys.addaudithook(guard)


def _codapo_install_audit_hook():
    import os
    work = sys.argv[1]
    read_roots = tuple(r for r in sys.argv[2].split("\x01") if r)

    def hook(event, args, _work=work, _read_roots=read_roots, _getpid=os.getpid, _getcwd=os.getcwd,
             _fspath=os.fspath, _fsdecode=os.fsdecode, _isinstance=isinstance, _int=int, _str=str,
             _tuple=tuple, _Err=PermissionError, _WRITE=os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC |
             os.O_APPEND, _self=None):
        def deny(what):
            raise _Err("sandbox: " + what + " is not allowed")

        def norm(p):
            if _isinstance(p, _int):
                return None
            try:
                p = _fsdecode(_fspath(p))
            except Exception:
                deny("unusual path")
            if not p.startswith("/"):
                p = _getcwd() + "/" + p
            parts = []
            for part in p.split("/"):
                if part in ("", "."):
                    continue
                if part == "..":
                    if parts:
                        parts.pop()
                    continue
                parts.append(part)
            return "/" + "/".join(parts)

        def inside(p, roots):
            for r in roots:
                if p == r or p.startswith(r.rstrip("/") + "/"):
                    return True
            return False

        if event == "open":
            path = norm(args[0])
            if path is None:
                return
            mode, flags = args[1], args[2]
            writing = (_isinstance(flags, _int) and flags & _WRITE) or (
                _isinstance(mode, _str) and ("w" in mode or "a" in mode or "x" in mode or "+" in mode))
            if writing:
                if not (
                    inside(path, (_work, "/dev/fd", "/proc/self/fd"))
                    or path in ("/dev/null", "/dev/stdout", "/dev/stderr")
                ):
                    deny("writing " + path)
            elif not inside(path, _read_roots):
                deny("reading " + path)
            return
        if event.startswith(("socket.", "ctypes.", "os.exec", "os.posix_spawn", "os.spawn", "os.system",
                             "subprocess.", "os.startfile", "pty.", "gc.get_", "sys.settrace", "sys.setprofile",
                             "sys._current_frames", "os.symlink", "os.link", "os.chroot", "os.mknod",
                             "os.mkfifo", "os.setxattr", "os.removexattr", "webbrowser.", "sys.unraisablehook")):
            deny(event)
        if event in ("os.kill", "os.killpg"):
            if event == "os.kill" and args[0] == _getpid():
                return
            deny(event)
        if event == "import" and args[0] in ("ctypes", "_ctypes", "_xxsubinterpreters"):
            deny("import " + args[0])
        if event == "object.__setattr__" and args[0] is _self:
            deny("setting " + args[1])
        if event in ("os.remove", "os.rmdir", "os.mkdir", "os.rename", "os.truncate", "os.chmod", "os.chown",
                     "os.utime", "os.chdir", "shutil.rmtree", "shutil.copyfile", "shutil.copymode",
                     "shutil.copystat", "shutil.move", "shutil.chown", "shutil.make_archive",
                     "shutil.unpack_archive"):
            for a in args:
                if _isinstance(a, (_str, bytes)) or hasattr(a, "__fspath__"):
                    p = norm(a)
                    if p is not None and not inside(p, (_work,)):
                        deny(event + " on " + p)

    hook.__defaults__ = hook.__defaults__[:-1] + (hook,)  # so that it can refuse changes to itself
    sys.addaudithook(hook)


def _codapo_read_spec():
    # "<nonce>\n<mode>\n<JSON of the rest, for call and check only>": no json import for scripts.
    import os
    path = sys.argv[1] + "/.codapo_harness"
    with open(path, "rb") as f:
        nonce, mode, rest = f.read().decode().split("\n", 2)
    os.unlink(path)
    spec = {"nonce": nonce, "mode": mode}
    if mode != "script":
        import json
        spec.update(json.loads(rest))
    return spec


_spec = _codapo_read_spec()
_codapo_install_guard(_spec.pop("nonce"), int(sys.argv[4]))
_codapo_install_audit_hook() if sys.argv[3] == "1" else None
del _codapo_install_guard, _codapo_install_audit_hook, _codapo_read_spec


def _codapo_harness(spec, _audit=sys.audit, _exit=__import__("os")._exit, _count=__import__("_thread")._count,
                    _type=type, _isinstance=isinstance, _len=len, _str=str, _int=int, _float=float, _bool=bool,
                    _list=list, _tuple=tuple, _dict=dict, _none=type(None), _repr_f=float.__repr__,
                    _repr_i=int.__repr__, _BaseException=BaseException, _SystemExit=SystemExit,
                    _builtins=__import__("builtins"), _sys=sys, _compile=compile, _exec=exec, _callable=callable,
                    _set=set, _frozenset=frozenset, _PLAIN=(int, float, complex, bool, str, bytes, type(None))):
    # Runs the program (and, for "call" and "check", its tests) and confirms, through the guard, only after the
    # last test returned: every way of ending early (exit calls, exit handlers, signals, BaseException, a closed
    # channel, threads still running) leaves the run unconfirmed or confirmed as failed.
    _audit("codapo.register")
    mode = spec["mode"]
    stdout = _sys.stdout
    if mode == "call":  # before the program runs: it could replace them
        from _json import encode_basestring_ascii as _enc
        from json import loads as _loads

    def plain(value, depth=0):
        # JSON text of a value made of plain built-in types only (no subclass can override equality).
        t = _type(value)
        if depth > 100:
            raise ValueError("return value nested too deeply")
        if value is None or t is _bool:
            return "null" if value is None else ("true" if value else "false")
        if t is _int:
            return _repr_i(value)
        if t is _float:
            if value != value:
                return "NaN"
            if value == 1e400 or value == -1e400:
                return "Infinity" if value > 0 else "-Infinity"
            return _repr_f(value)
        if t is _str:
            return _enc(value)
        if t is _list or t is _tuple:
            return "[" + ",".join([plain(v, depth + 1) for v in value]) + "]"
        if t is _dict:
            items = []
            for k, v in _list(value.items()):
                tk = _type(k)
                if tk is _str:
                    key = _enc(k)
                elif tk is _int or tk is _float or tk is _bool or k is None:
                    key = _enc(plain(k, depth + 1))
                else:
                    raise TypeError("dict key of type %s" % tk.__name__)
                items.append(key + ":" + plain(v, depth + 1))
            return "{" + ",".join(items) + "}"
        raise TypeError("return value of type %s is not plain data" % t.__name__)

    def check_plain(value, depth=0):
        # Only built-in types whose equality no program can redefine (a subclass could make == always true).
        t = _type(value)
        if depth > 100:
            raise ValueError("return value nested too deeply")
        if t in _PLAIN:
            return
        if t is _list or t is _tuple or t is _set or t is _frozenset or t in containers[0]:
            for v in value:
                check_plain(v, depth + 1)
            return
        if t is _dict or t in containers[1] or (t is containers[2] and counter_intact()):
            for k, v in _list(_dict.items(value)):
                check_plain(k, depth + 1)
                check_plain(v, depth + 1)
            return
        raise TypeError("the candidate returned a %s, not plain data" % t.__name__)

    containers = [(), (), None, None]  # C-implemented sequence types, C mapping types, Counter, its class dict

    def counter_intact():  # Counter is pure Python: accepted only while no method of it was replaced
        d = containers[2].__dict__
        return _len(d) == _len(containers[3]) and all(d.get(k) is v for k, v in containers[3].items())

    def guarded(fn):
        def candidate(*args, **kwargs):
            result = fn(*args, **kwargs)
            check_plain(result)
            return result
        return candidate

    try:
        import types
        main = types.ModuleType("__main__")
        main.__file__ = "solution.py"
        main.__builtins__ = _builtins
        if mode == "script":
            _sys.modules["__main__"] = main
        with open("solution.py", "rb") as f:
            code = _compile(f.read(), "solution.py", "exec")
        del types, f
        if mode == "script":
            try:
                _exec(code, main.__dict__)
            except _SystemExit as exc:
                if exc.code is not None and not (_type(exc.code) is _int and exc.code == 0):
                    status = exc.code & 255 if _type(exc.code) is _int else 1
                    if _type(exc.code) is not _int:
                        print(exc.code, file=_sys.stderr)
                    _sys.stdout.flush()
                    stdout.flush()
                    _audit("codapo.confirm", "fail exit code %d" % status)
                    _exit(status)
            threading = _sys.modules.get("threading")
            if threading is not None:
                threading._shutdown()  # non-daemon threads finish, as at a normal interpreter exit
            _sys.stdout.flush()
            stdout.flush()
            verdict = "ok"  # daemon threads may be left: they end with the process, as usual
        elif mode == "call":
            args = _loads(spec["args"])
            main.__name__ = "solution"
            _exec(code, main.__dict__)
            name = spec["fn_name"]
            fn = main.__dict__.get(name)
            if fn is None and _isinstance(main.__dict__.get("Solution"), _type):
                fn = getattr(main.__dict__["Solution"](), name, None)
            if not _callable(fn):
                verdict = "fail function " + name + " is not defined"
            else:
                verdict = "ok " + plain(fn(*args))
        else:  # check
            _audit("codapo.protect", True)
            import collections as _collections  # before the program: its C types cannot be patched, Counter can

            containers[:] = [(_collections.deque,), (_collections.OrderedDict, _collections.defaultdict),
                             _collections.Counter, _dict(_collections.Counter.__dict__)]
            snapshot = _dict(_builtins.__dict__)
            if spec.get("prelude"):
                _exec(_compile(spec["prelude"], "prelude.py", "exec"), main.__dict__)
            _exec(code, main.__dict__)
            candidate = main.__dict__.get(spec["entry_point"])
            test_ns = _dict(main.__dict__)  # the program holds no reference to it: nothing can swap `check`
            _exec(_compile(spec["test"], "test.py", "exec"), test_ns)
            check = test_ns.get("check")
            if _count():
                verdict = "fail a thread was running when the tests started"
            elif not _callable(candidate) or not _callable(check):
                verdict = "fail " + spec["entry_point"] + " or check is not defined"
            else:
                modules = [v for k, v in _list(test_ns.items())
                           if _type(v) is _type(_sys) and k in check.__code__.co_names and v is not _sys]
                before = [(m, _dict(m.__dict__)) for m in modules]
                check(guarded(candidate))
                verdict = "ok"
                for k, v in snapshot.items():
                    if _builtins.__dict__.get(k) is not v:
                        verdict = "fail the program replaced the built-in " + k
                for m, d in before:
                    for k, v in d.items():
                        if m.__dict__.get(k) is not v:
                            verdict = "fail the program replaced " + m.__name__ + "." + k
        if mode != "script" and _count():
            verdict = "fail a thread was still running after the tests"
    except _BaseException as exc:
        try:
            _audit("codapo.protect", False)  # the traceback below needs the frames
        except _BaseException:
            pass
        try:
            name = _type(exc).__name__
            detail = _str(exc)[:200] if _type(exc) in (_SystemExit, AssertionError) else ""
        except _BaseException:
            name, detail = "exception", ""
        try:
            import traceback
            traceback.print_exception(exc)
        except _BaseException:
            pass
        try:
            _sys.stdout.flush()
            stdout.flush()
        except _BaseException:
            pass
        try:
            _audit("codapo.confirm", "fail " + name + (": " + detail if detail else ""))
        except _BaseException:
            pass
        _exit(1)
    try:
        _audit("codapo.confirm", verdict)
    except _BaseException:
        _exit(1)
    _exit(0 if verdict == "ok" or verdict.startswith("ok ") else 1)


_codapo_harness(_spec)
"""


# --------------------------------------------------------------------------------------------------------------
# seccomp: a tiny classic-BPF deny-list. Syscall numbers for the two architectures we support.
# --------------------------------------------------------------------------------------------------------------

_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_SYSCALLS = {
    # name: (x86_64, aarch64); -1 where the syscall does not exist
    "socket": (41, 198),
    "socketpair": (53, 199),
    "ptrace": (101, 117),
    "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271),
    "process_madvise": (440, 440),
    "pidfd_open": (434, 434),
    "pidfd_getfd": (438, 438),
    "pidfd_send_signal": (424, 424),
    "tkill": (200, 130),
    "mount": (165, 40),
    "umount2": (166, 39),
    "pivot_root": (155, 41),
    "chroot": (161, 51),
    "unshare": (272, 97),
    "setns": (308, 268),
    "keyctl": (250, 219),
    "add_key": (248, 217),
    "request_key": (249, 218),
    "bpf": (321, 280),
    "perf_event_open": (298, 241),
    "userfaultfd": (323, 282),
    "kexec_load": (246, 104),
    "kexec_file_load": (320, 294),
    "init_module": (175, 105),
    "finit_module": (313, 273),
    "delete_module": (176, 106),
    "reboot": (169, 142),
    "swapon": (167, 224),
    "swapoff": (168, 225),
    "acct": (163, 89),
    "settimeofday": (164, 170),
    "open_by_handle_at": (304, 265),
    "io_uring_setup": (425, 425),
    "fsopen": (430, 430),
    "fsconfig": (431, 431),
    "fsmount": (432, 432),
    "fspick": (433, 433),
    "move_mount": (429, 429),
    "open_tree": (428, 428),
    "mount_setattr": (442, 442),
    "open_tree_attr": (467, 467),
    "clock_settime": (227, 112),
    "clock_adjtime": (305, 266),
    "adjtimex": (159, 171),
    "syslog": (103, 116),
    "sethostname": (170, 161),
    "setdomainname": (171, 162),
    "quotactl": (179, 60),
    "quotactl_fd": (443, 443),
    "name_to_handle_at": (303, 264),
    "lookup_dcookie": (212, 18),
    "vhangup": (153, 58),
    "fanotify_init": (300, 262),
    "kcmp": (312, 272),
    "iopl": (172, -1),
    "ioperm": (173, -1),
    "modify_ldt": (154, -1),
    "uselib": (134, -1),
    "_sysctl": (156, -1),
    "nfsservctl": (180, 42),
    "process_mrelease": (448, 448),
    "fork": (57, -1),
    "vfork": (58, -1),
}
# Signal-sending syscalls whose first argument (a pid / tgid) must be the program itself.
_SELF_ONLY = {"kill": (62, 129), "tgkill": (234, 131), "rt_sigqueueinfo": (129, 138), "rt_tgsigqueueinfo": (297, 240)}
_CLONE = {"clone": (56, 220), "clone3": (435, 435)}
_CLONE_THREAD = 0x00010000
# CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET
_CLONE_NEW_ANY = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
SECCOMP_SELF_PLACEHOLDER = 0x7FFFFFF7


def _build_seccomp_filter(arch: str, allow_fork: bool) -> tuple[bytes, list[int]]:
    """Assemble the classic-BPF deny-list (a `sock_filter[]`) for `arch`.

    Returns the program and the indices of the instructions whose constant must be replaced by the program's own
    pid (known only in the child, after the PID namespace is entered). Denied syscalls fail with `EPERM` (so
    programs see an ordinary error); a foreign architecture is killed.
    """
    import struct

    col = 0 if arch == "x86_64" else 1
    ld_w_abs, jeq_k, jset_k, ret_k = 0x20, 0x15, 0x45, 0x06
    allow, eperm, kill = 0x7FFF0000, 0x00050000 | 1, 0x80000000
    enosys = 0x00050000 | 38
    off_nr, off_arch, off_arg0 = 0, 4, 16  # struct seccomp_data; arg0's low 32 bits on little endian

    insns: list[list[int]] = [
        [ld_w_abs, 0, 0, off_arch],
        [jeq_k, 1, 0, _AUDIT_ARCH[arch]],
        [ret_k, 0, 0, kill],
        [ld_w_abs, 0, 0, off_nr],
    ]
    if arch == "x86_64":  # refuse the x32 ABI (syscall numbers with bit 30 set)
        insns += [[jset_k, 0, 1, 0x40000000], [ret_k, 0, 0, eperm]]
    patch: list[int] = []
    for name, nrs in _SELF_ONLY.items():
        # if nr == X: A = arg0; if A == self (or 0 = own process group, for kill) allow else EPERM
        body: list[list[int]] = [[ld_w_abs, 0, 0, off_arg0]]
        checks = [SECCOMP_SELF_PLACEHOLDER] + ([0] if name == "kill" else [])
        for i, value in enumerate(checks):
            body.append([jeq_k, len(checks) - i, 0, value])  # jump over the remaining checks and RET EPERM
        body += [[ret_k, 0, 0, eperm], [ret_k, 0, 0, allow]]
        insns.append([jeq_k, 0, len(body), nrs[col]])
        base = len(insns)
        for j, ins in enumerate(body):
            if ins[3] == SECCOMP_SELF_PLACEHOLDER:
                patch.append(base + j)
        insns += body
    # clone(): never into new namespaces; without allow_fork, threads only (CLONE_THREAD in the flags).
    # clone3() -> ENOSYS (its flags are in memory, out of a filter's reach) so that libc falls back to clone().
    insns += [
        [jeq_k, 0, 5 if not allow_fork else 4, _CLONE["clone"][col]],
        [ld_w_abs, 0, 0, off_arg0],
        [jset_k, 1, 0, _CLONE_NEW_ANY] if not allow_fork else [jset_k, 0, 1, _CLONE_NEW_ANY],
    ]
    if not allow_fork:
        insns += [[jset_k, 1, 0, _CLONE_THREAD]]
    insns += [
        [ret_k, 0, 0, eperm],
        [ret_k, 0, 0, allow],
        [jeq_k, 0, 1, _CLONE["clone3"][col]],
        [ret_k, 0, 0, enosys],
    ]
    for name, nrs in _SYSCALLS.items():
        if nrs[col] < 0 or (allow_fork and name in ("fork", "vfork")):
            continue
        insns += [[jeq_k, 0, 1, nrs[col]], [ret_k, 0, 0, eperm]]
    insns.append([ret_k, 0, 0, allow])
    return b"".join(struct.pack("=HBBI", *ins) for ins in insns), patch


# --------------------------------------------------------------------------------------------------------------
# Host helpers
# --------------------------------------------------------------------------------------------------------------


def _capabilities() -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return int(line.split()[1], 16)
    except OSError:
        pass
    return 0


_CAP_SETGID, _CAP_SETUID, _CAP_SYS_ADMIN = 6, 7, 21


def _default_python() -> str:
    exe = getattr(sys, "_base_executable", None) or sys.executable
    return os.path.realpath(exe)


def _python_roots(python: str) -> list[str]:
    """Directories the runner interpreter must be able to read (its prefix and standard library)."""
    prefix = os.path.dirname(os.path.dirname(python))
    roots = {prefix, os.path.realpath(sys.base_prefix), os.path.realpath(sys.base_exec_prefix)}
    return sorted(r for r in roots if r and r != "/")


def _v1_cgroup_dirs() -> dict[str, str] | None:
    """Our own cgroup directory in the v1 `memory` and `pids` hierarchies, if both exist and are writable."""
    mounts: dict[str, str] = {}
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                fstype, _, options = right.split()[:3]
                if fstype != "cgroup":
                    continue
                for ctrl in ("memory", "pids"):
                    if ctrl in options.split(","):
                        mounts[ctrl] = left.split()[4]
        paths: dict[str, str] = {}
        with open("/proc/self/cgroup") as f:
            for line in f:
                _, ctrls, path = line.rstrip("\n").split(":", 2)
                for ctrl in ctrls.split(","):
                    if ctrl in mounts:
                        paths[ctrl] = os.path.join(mounts[ctrl], path.lstrip("/"))
    except (OSError, ValueError):
        return None
    if set(paths) != {"memory", "pids"}:
        return None
    if not all(os.access(p, os.W_OK) for p in paths.values()):
        return None
    return paths


def _write(path: str, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


class _Cgroups:
    """A v1 memory + pids cgroup pair, reused by consecutive executions of one slot (creating and removing a
    memory cgroup per run costs tens of milliseconds). Only one execution uses a slot at a time."""

    def __init__(self, parents: dict[str, str], name: str) -> None:
        self.dirs = {ctrl: os.path.join(parent, name) for ctrl, parent in parents.items()}
        for d in self.dirs.values():
            with contextlib.suppress(FileExistsError):
                os.mkdir(d)
        self._oom_before = 0

    def prepare(self, memory_bytes: int, max_pids: int) -> None:
        """Empty the cgroups, set the limits for the next run and remember the OOM-kill counter."""
        for d in self.dirs.values():  # (re)create: an administrator may have removed them meanwhile
            with contextlib.suppress(FileExistsError):
                os.mkdir(d)
        self.kill_all()
        mem = self.dirs["memory"]
        memsw = os.path.join(mem, "memory.memsw.limit_in_bytes")
        # memsw must stay >= the memory limit: order the two writes accordingly.
        order = ["memory.limit_in_bytes", "memory.memsw.limit_in_bytes"]
        current = _read(os.path.join(mem, "memory.limit_in_bytes")).strip()
        if current.isdigit() and int(current) < memory_bytes:
            order.reverse()
        for name in order:
            path = os.path.join(mem, name)
            if name == "memory.limit_in_bytes" or os.path.exists(memsw):
                _write(path, str(memory_bytes))
        with contextlib.suppress(OSError):
            _write(os.path.join(mem, "memory.max_usage_in_bytes"), "0")
        _write(os.path.join(self.dirs["pids"], "pids.max"), str(max_pids))
        self._oom_before = self._oom_kills()

    @property
    def procs_files(self) -> list[str]:
        return [os.path.join(d, "cgroup.procs") for d in self.dirs.values()]

    def _oom_kills(self) -> int:
        for line in _read(os.path.join(self.dirs["memory"], "memory.oom_control")).splitlines():
            if line.startswith("oom_kill "):
                return int(line.split()[1])
        return 0

    def oom_killed(self) -> bool:
        return self._oom_kills() > self._oom_before

    def kill_all(self) -> None:
        for _ in range(200):
            pids = [int(p) for p in _read(self.procs_files[0]).split() + _read(self.procs_files[1]).split()]
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.005)
        logger.warning("sandbox: could not empty cgroup %s", self.dirs)

    def remove(self) -> None:
        for d in self.dirs.values():
            with contextlib.suppress(OSError):
                os.rmdir(d)


_CGROUPS: dict[str, _Cgroups] = {}
_CGROUPS_LOCK = threading.Lock()


def _cgroup_slot(parents: dict[str, str], name: str) -> _Cgroups:
    with _CGROUPS_LOCK:
        if name not in _CGROUPS:
            _CGROUPS[name] = _Cgroups(parents, name)
        return _CGROUPS[name]


@atexit.register
def _remove_cgroups() -> None:
    # Cgroups named after a pool uid are shared with other processes using the same pool (and reused by them), so
    # they are left in place: at most one empty pair per uid ever leased. Per-process ones are removed.
    with _CGROUPS_LOCK:
        for name, cg in _CGROUPS.items():
            if not name.startswith("codapo-sbx-uid"):
                cg.remove()
        _CGROUPS.clear()


def _kernel_at_least(major: int, minor: int) -> bool:
    try:
        parts = platform.release().split(".")
        return (int(parts[0]), int(parts[1].split("-")[0])) >= (major, minor)
    except (ValueError, IndexError):
        return False


def _count_user_tasks(uid: int) -> int:
    """Processes + threads whose real uid is `uid` (what `RLIMIT_NPROC` counts)."""
    total = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
        except (OSError, ValueError):
            continue
        try:
            if int(fields["Uid"].split()[0]) == uid:
                total += int(fields.get("Threads", "1").strip() or 1)
        except (KeyError, ValueError, IndexError):
            continue
    return total


def _sweep_by_token(token: bytes) -> int:
    """Kill every process whose initial environment carries `token` (used when there is no PID namespace)."""
    killed_total = 0
    me = os.getpid()
    for _ in range(50):
        killed = 0
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) == me:
                continue
            try:
                with open(f"/proc/{name}/environ", "rb") as f:
                    env = f.read()
            except OSError:
                continue
            if token in env:
                with contextlib.suppress(OSError):
                    os.kill(int(name), signal.SIGKILL)
                killed += 1
        killed_total += killed
        if not killed:
            break
        time.sleep(0.005)
    return killed_total


class _UidPool:
    """Cross-process pool of sandbox uids, one per concurrent execution, guarded by `flock`."""

    def __init__(self, base: int, count: int) -> None:
        self.base, self.count = base, count
        self.lock_dir = os.path.join(tempfile.gettempdir(), f"codapo-sandbox-uids-{os.geteuid()}")
        os.makedirs(self.lock_dir, mode=0o700, exist_ok=True)
        st = os.lstat(self.lock_dir)
        if st.st_uid != os.geteuid() or not os.path.isdir(self.lock_dir) or st.st_mode & 0o022:
            raise RuntimeError(f"unsafe uid lock directory {self.lock_dir}")

    @contextlib.contextmanager
    def lease(self) -> Iterator[int]:
        for i in range(self.count):  # lowest free uid first, so that few cgroups / lock files are ever used
            uid = self.base + i
            fd = os.open(os.path.join(self.lock_dir, f"{uid}.lock"), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            try:
                yield uid
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
            return
        raise RuntimeError(f"all {self.count} sandbox uids from {self.base} are busy")


# --------------------------------------------------------------------------------------------------------------
# Detection
# --------------------------------------------------------------------------------------------------------------

_DETECT_LOCK = threading.Lock()
_DETECTED: dict[tuple, IsolationReport] = {}

_STAGE_TO_LAYER = {
    "cgroup": "cgroup",
    "userns": "userns",
    "netns": "netns",
    "mountns": "mountns",
    "pidns": "pidns",
    "seccomp": "seccomp",
    "landlock": "landlock",
    "uid": "uid",
}


def detect_isolation(config: SandboxConfig | None = None) -> IsolationReport:
    """Find out, once per process and set of disabled layers, which isolation layers work on this machine.

    Candidate layers are chosen from privileges (root / `CAP_SYS_ADMIN` / `CAP_SETUID`), then a trivial program is
    run with all of them; a layer whose set-up fails is dropped and the run is retried. The result is logged once.
    """
    config = config or SandboxConfig()
    python = config.python_executable or _default_python()
    key = (config.disable, python, config.uid_base)
    with _DETECT_LOCK:
        if key in _DETECTED:
            return _DETECTED[key]
        report = _detect(config, python)
        _DETECTED[key] = report
        logger.info("codapo sandbox isolation: %s", report.summary())
        gaps = floor_gaps(report.active, config.allow_fork, _kernel_at_least(5, 14))
        if gaps:
            logger.error("codapo sandbox: below the isolation floor (untrusted code is refused): %s", "; ".join(gaps))
        else:
            logger.info("codapo sandbox: isolation floor reached")
        for layer, why in report.missing.items():
            if why.startswith("set-up failed"):
                logger.warning("codapo sandbox: layer %s could not be set up and is OFF: %s", layer, why)
        for weakness in _weaknesses(report):
            logger.warning("codapo sandbox: %s", weakness)
        return report


def _weaknesses(report: IsolationReport) -> list[str]:
    """What untrusted programs can do with the layers in `report` (beyond what the audit hook refuses)."""
    active = set(report.active)
    out = []
    if not active & {"netns", "seccomp", "landlock"}:
        out.append("no network isolation: only the Python audit hook refuses sockets")
    if not active & {"mountns", "landlock", "uid"}:
        out.append("no filesystem isolation: programs can write wherever the trainer's user can (audit hook aside)")
    if not active & {"pidns", "uid", "seccomp", "landlock"}:
        out.append("programs can signal the trainer's processes (audit hook aside)")
    if not active & {"pidns", "cgroup", "seccomp"}:
        out.append("processes a program leaves behind are found only by the token in their environment")
    return out


def _detect(config: SandboxConfig, python: str) -> IsolationReport:
    if sys.platform != "linux":
        raise RuntimeError("the codapo_trl sandbox needs Linux")
    missing: dict[str, str] = {}
    caps = _capabilities()
    root = os.geteuid() == 0
    can_setuid = root and caps >> _CAP_SETUID & 1 and caps >> _CAP_SETGID & 1
    admin = bool(caps >> _CAP_SYS_ADMIN & 1)
    candidates = ["audit"]
    if can_setuid:
        candidates.append("uid")
    else:
        missing["uid"] = "trainer is not root (runs as the trainer's uid)"
    if admin:
        missing["userns"] = "not needed (CAP_SYS_ADMIN)"
    else:
        candidates.append("userns")
    candidates += ["netns", "pidns", "mountns"]
    if _v1_cgroup_dirs() is not None:
        candidates.append("cgroup")
    else:
        missing["cgroup"] = "no writable cgroup v1 memory+pids hierarchy"
    candidates.append("landlock")
    if platform.machine() in _AUDIT_ARCH:
        candidates.append("seccomp")
    else:
        missing["seccomp"] = f"no syscall table for {platform.machine()}"
    for layer in config.disable:
        if layer in candidates:
            candidates.remove(layer)
            missing[layer] = "disabled by configuration"

    for _ in range(len(ALL_LAYERS) + 1):
        active = tuple(candidates)
        trial = IsolationReport(active=active, missing=dict(missing), python_executable=python, privileged=root)
        # allow_fork=True so that the cgroup layer is exercised too (see `Sandbox.uses_cgroups`).
        sandbox = Sandbox(
            replace(config, timeout=max(config.timeout, 10.0), allow_fork=True), isolation=trial, _probe=True
        )
        result = sandbox.run("print(6 * 7)")
        if result.status is Status.OK and result.stdout.strip() == "42":
            return trial
        stage = result.stage
        layer = _STAGE_TO_LAYER.get(stage or "")
        if layer is None and stage == "exec" and "uid" in candidates:
            layer = "uid"  # typically: interpreter not readable by the sandbox uid
        if layer is None or layer not in candidates:
            raise RuntimeError(f"sandbox does not work on this machine: {result.reason}\n{result.stderr}")
        candidates.remove(layer)
        missing[layer] = f"set-up failed: {result.reason}"
        if layer == "userns":
            for dependent in ("netns", "pidns", "mountns"):
                if dependent in candidates:
                    candidates.remove(dependent)
                    missing[dependent] = "needs CAP_SYS_ADMIN or a user namespace"
    raise RuntimeError("sandbox isolation detection did not converge")


# --------------------------------------------------------------------------------------------------------------
# The sandbox
# --------------------------------------------------------------------------------------------------------------

_HIDE_CANDIDATES = ("/root", "/home", "/run/secrets", "/var/run/secrets", "/mnt", "/media", "/srv", "/opt", "/work")
# Top-level directories that hold the system itself: never hidden whole (a project below them is hidden itself).
_SYSTEM_TOPS = frozenset(
    (
        "",
        "usr",
        "lib",
        "lib32",
        "lib64",
        "libx32",
        "bin",
        "sbin",
        "etc",
        "proc",
        "sys",
        "dev",
        "run",
        "var",
        "tmp",
        "boot",
        "snap",
        "nix",
    )
)
_PRIVATE_TMP_CANDIDATES = ("/tmp", "/var/tmp", "/dev/shm")
_READ_ROOTS = (
    "/dev",
    "/proc/self/fd",
    "/proc/self/status",
    "/proc/self/stat",
    "/proc/self/statm",
    "/proc/self/net",
    "/proc/cpuinfo",
    "/proc/meminfo",
    "/usr/share/zoneinfo",
    "/etc/localtime",
    "/usr/lib/locale",
)
# What the dynamic loader needs besides the interpreter's own prefix (Landlock also governs ld.so's reads).
_LANDLOCK_EXTRA_READ = (
    "/usr/lib",
    "/usr/lib64",
    "/usr/lib32",
    "/lib",
    "/lib64",
    "/lib32",
    "/usr/local/lib",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
)


class Sandbox:
    """Runs Python programs in isolation, up to `max_workers` at a time.

    Args:
        config (`SandboxConfig`, *optional*): limits and options.
        max_workers (`int`): executions run concurrently by [`Sandbox.map`] (and at most this many by concurrent
            [`Sandbox.run`] calls on this instance).
        isolation (`IsolationReport`, *optional*): layers to use; detected with [`detect_isolation`] by default.

    Example:

    ```python
    >>> sb = Sandbox(SandboxConfig(timeout=2))
    >>> sb.run("print(int(input()) * 2)", stdin="21\\n").stdout
    '42\\n'
    ```
    """

    def __init__(
        self,
        config: SandboxConfig | None = None,
        max_workers: int = 2,
        isolation: IsolationReport | None = None,
        _probe: bool = False,
    ) -> None:
        if sys.platform != "linux":
            raise RuntimeError("the codapo_trl sandbox needs Linux")
        self.config = config or SandboxConfig()
        self.max_workers = max(1, int(max_workers))
        self.isolation = isolation or detect_isolation(self.config)
        if not _probe:
            check_floor(self.isolation, self.config)
        self._python = self.config.python_executable or _default_python()
        self._slots = threading.BoundedSemaphore(self.max_workers)
        self._free_slots = list(range(self.max_workers))  # list.pop/append are atomic; guarded by _slots
        self._executor: ThreadPoolExecutor | None = None
        self._executor_lock = threading.Lock()
        self._uid_pool = _UidPool(self.config.uid_base, self.config.uid_count) if self._has("uid") else None
        # Moving a process into a v1 cgroup costs ~10-30 ms (an RCU grace period). The cgroups only add protection
        # when the program can create processes: a single process (and its threads) is already bounded by
        # RLIMIT_AS, RLIMIT_CPU and the tmpfs sizes. So they are used when `allow_fork=True` or without seccomp.
        self.uses_cgroups = self._has("cgroup") and (self.config.allow_fork or not self._has("seccomp"))
        self._cgroup_parents = _v1_cgroup_dirs() if self.uses_cgroups else None
        self._seccomp: dict | None = None
        if self._has("seccomp"):
            prog, patch = _build_seccomp_filter(platform.machine(), self.config.allow_fork)
            self._seccomp = {"prog": prog.hex(), "self_insns": patch}

    def _has(self, layer: str) -> bool:
        return layer in self.isolation.active

    # ---------------------------------------------------------------------------------------------- public API

    def run(self, source: str, stdin: str | bytes = "", harness: Harness = SCRIPT) -> ExecutionResult:
        """Run `source` as a Python program with `stdin` as its standard input, within the configured limits, under
        `harness` (by default: as a script, confirmed when it ends normally)."""
        with self._slots:
            slot = self._free_slots.pop()
            try:
                if self._uid_pool is not None:
                    with self._uid_pool.lease() as uid:
                        return self._run(source, stdin, harness, uid, f"codapo-sbx-uid{uid}")
                return self._run(source, stdin, harness, None, f"codapo-sbx-{os.getpid()}-{id(self):x}-{slot}")
            except Exception as exc:  # never let a sandbox failure take training down
                logger.exception("sandbox: execution failed")
                return ExecutionResult(Status.SANDBOX_ERROR, reason=f"sandbox failure: {type(exc).__name__}: {exc}")
            finally:
                self._free_slots.append(slot)

    def map(self, jobs: Sequence[tuple]) -> list[ExecutionResult]:
        """Run many `(source, stdin)` or `(source, stdin, harness)` jobs, `max_workers` at a time; results are in
        input order."""
        if not jobs:
            return []
        if len(jobs) == 1 or self.max_workers == 1:
            return [self.run(*job) for job in jobs]
        return list(self._pool().map(lambda job: self.run(*job), jobs))

    def close(self) -> None:
        """Shut the worker threads down (running executions finish first)."""
        with self._executor_lock:
            if self._executor is not None:
                self._executor.shutdown(wait=True)
                self._executor = None

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _pool(self) -> ThreadPoolExecutor:
        with self._executor_lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(self.max_workers, thread_name_prefix="codapo-sandbox")
            return self._executor

    # ---------------------------------------------------------------------------------------------- internals

    def _rlimits(self) -> list[tuple[str, int, int]]:
        cfg = self.config
        cpu = max(1, math.ceil(cfg.cpu_time if cfg.cpu_time is not None else cfg.timeout))
        mem = cfg.memory_mb * _MiB
        limits = [
            ("RLIMIT_CPU", cpu, cpu + 1),
            ("RLIMIT_AS", mem, mem),
            ("RLIMIT_FSIZE", cfg.max_file_mb * _MiB, cfg.max_file_mb * _MiB),
            ("RLIMIT_NOFILE", cfg.max_open_files, cfg.max_open_files),
            ("RLIMIT_CORE", 0, 0),
            ("RLIMIT_STACK", cfg.stack_mb * _MiB, cfg.stack_mb * _MiB),
            ("RLIMIT_MEMLOCK", 0, 0),
            ("RLIMIT_MSGQUEUE", 0, 0),
        ]
        # RLIMIT_NPROC counts the tasks (processes and threads) of the real uid: exact with a dedicated uid, or in a
        # user namespace on Linux >= 5.14 (counted per namespace). Sharing the trainer's uid, the best we can do is
        # to cap the uid's total at what it has now plus this sandbox's share. Root is exempt from it anyway.
        if self._has("uid") or (self._has("userns") and _kernel_at_least(5, 14)):
            limits.append(("RLIMIT_NPROC", cfg.max_processes, cfg.max_processes))
        elif os.geteuid() != 0:
            total = _count_user_tasks(os.getuid()) + cfg.max_processes * self.max_workers + 64
            limits.append(("RLIMIT_NPROC", total, total))
        return limits

    def _run(
        self, source: str, stdin: str | bytes, harness: Harness, uid: int | None, slot_name: str
    ) -> ExecutionResult:
        cfg = self.config
        start = time.monotonic()
        base = cfg.base_dir or tempfile.gettempdir()
        rundir = tempfile.mkdtemp(prefix="codapo-sbx-", dir=base)
        cgroups: _Cgroups | None = None
        proc: subprocess.Popen | None = None
        status_r = status_w = report_r = report_w = -1
        token = secrets.token_hex(16)
        nonce = secrets.token_hex(16)
        try:
            os.chmod(rundir, 0o711)
            workdir = os.path.join(rundir, "work")
            os.mkdir(workdir, 0o700)
            mountns = self._has("mountns")
            if self._cgroup_parents is not None:
                cgroups = _cgroup_slot(self._cgroup_parents, slot_name)
                cgroups.prepare((cfg.memory_mb + 128) * _MiB, cfg.max_processes + 4)
            env = {
                "PATH": "/usr/local/bin:/usr/bin:/bin",
                "HOME": workdir,
                "TMPDIR": workdir,
                "LANG": "C.UTF-8",
                "LC_ALL": "C.UTF-8",
                "CODAPO_SANDBOX_RUN": token,
            }
            read_roots = sorted({*_python_roots(self._python), *_READ_ROOTS, workdir})
            argv = [
                self._python,
                *cfg.python_flags,
                "-c",
                _RUNNER,
                workdir,
                "\x01".join(read_roots),
                "1" if self._has("audit") else "0",
                "{report_fd}",
            ]
            status_r, status_w = os.pipe()
            report_r, report_w = os.pipe()
            child_cfg = {
                "status_fd": status_w,
                "report_fd": report_w,
                "harness": harness.spec(nonce),
                "mask_files": _masked_modules(self._python) if mountns else [],
                "source": source,
                "workdir": workdir,
                "uid": uid,
                "userns": self._has("userns"),
                "inner_id": os.geteuid() or 1000,
                "netns": self._has("netns"),
                "pidns": self._has("pidns"),
                "mountns": mountns,
                "strict_readonly": False,
                "expose": self._exposed_dirs() if mountns else [],
                "hide": self._hidden_dirs() if mountns else [],
                "private_tmp": [p for p in _PRIVATE_TMP_CANDIDATES if os.path.isdir(p) and not os.path.islink(p)],
                "tmp_kb": 16 * 1024,
                "tmpfs_kb": cfg.tmpfs_mb * 1024,
                "cgroup_procs": cgroups.procs_files if cgroups else [],
                "seccomp": self._seccomp,
                "landlock": {"read": [*read_roots, *_LANDLOCK_EXTRA_READ], "write": workdir}
                if self._has("landlock")
                else None,
                "rlimits": self._rlimits(),
                "nice": cfg.nice,
                "alarm": int(math.ceil(cfg.timeout)) + 5,
                "argv": argv,
                "env": env,
            }
            config_path = os.path.join(rundir, "config.json")
            fd = os.open(config_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                json.dump(child_cfg, f)
            stdin_bytes = stdin.encode() if isinstance(stdin, str) else bytes(stdin)
            # stdin is a pipe fed by `_supervise` (a file would have to be readable by the sandbox uid and inside
            # Landlock's read hierarchy for `open("/dev/stdin")` to work).
            proc = subprocess.Popen(
                [self._python, "-I", "-S", "-B", "-c", _BOOTSTRAP, config_path],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=(status_w, report_w),
                env=env,
                cwd=rundir,
                start_new_session=True,
                close_fds=True,
            )
            os.close(status_w)
            os.close(report_w)
            status_w = report_w = -1
            return self._supervise(proc, status_r, report_r, nonce, start, token, cgroups, stdin_bytes)
        finally:
            if proc is not None:
                self._kill(proc, token, cgroups, sweep=False)
                for stream in (proc.stdin, proc.stdout, proc.stderr):
                    if stream is not None:
                        with contextlib.suppress(OSError):
                            stream.close()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    logger.error("sandbox: bootstrap process %d did not exit after SIGKILL", proc.pid)
            for fd in (status_r, status_w, report_r, report_w):
                if fd >= 0:
                    with contextlib.suppress(OSError):
                        os.close(fd)
            if cgroups is not None:
                cgroups.kill_all()
            shutil.rmtree(rundir, ignore_errors=True)

    def _exposed_dirs(self) -> list[str]:
        """Interpreter directories below a hidden or private-tmp directory: they are bind-mounted back."""
        covered = self._hidden_dirs() + [os.path.realpath(p) for p in _PRIVATE_TMP_CANDIDATES]
        return [r for r in _python_roots(self._python) if any(r == h or r.startswith(h + "/") for h in covered)]

    def _hidden_dirs(self) -> list[str]:
        home = os.path.realpath(os.path.expanduser("~"))
        candidates = [*_HIDE_CANDIDATES, home, *_host_data_dirs(self._python)]
        out = []
        for path in candidates:
            if path in ("/", "/tmp", "/usr", "/etc") or not os.path.isdir(path) or os.path.islink(path):
                continue
            workdir_parent = os.path.realpath(self.config.base_dir or tempfile.gettempdir())
            if workdir_parent == path or workdir_parent.startswith(path + "/"):
                continue  # hiding it would hide the working directory's mount point
            if path not in out:
                out.append(path)
        # A directory inside another hidden one is hidden already (and its mount point would be gone).
        return [p for p in out if not any(p != q and p.startswith(q + "/") for q in out)]

    def _kill(self, proc: subprocess.Popen, token: str, cgroups: _Cgroups | None, sweep: bool) -> None:
        """Fallback when the bootstrap did not clean up after itself: kill its process group, whatever carries the
        run's token (without a PID namespace) and whatever is left in the run's cgroups."""
        # The bootstrap has not been reaped yet (nothing polls it before this point), so its process-group id
        # cannot have been recycled.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        if sweep and not self._has("pidns"):
            _sweep_by_token(token.encode())
        if cgroups is not None:
            cgroups.kill_all()

    @staticmethod
    def _stop(proc: subprocess.Popen) -> None:
        """Ask the bootstrap to kill the program (it then reports, cleans up and exits)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(proc.pid, signal.SIGUSR1)

    def _supervise(
        self,
        proc: subprocess.Popen,
        status_r: int,
        report_r: int,
        nonce: str,
        start: float,
        token: str,
        cgroups: _Cgroups | None,
        stdin: bytes,
    ) -> ExecutionResult:
        cfg = self.config
        cap, tail_cap = cfg.max_output_bytes, cfg.stderr_tail_bytes
        out = bytearray()
        err_tail = bytearray()
        err_total = 0
        status_buf = bytearray()
        report_buf = bytearray()
        limit_hit: str | None = None
        timed_out = False
        clean_exit = False  # the bootstrap reported and exited by itself
        deadline = start + cfg.timeout  # the program's wall-clock limit
        stop_deadline: float | None = None  # after asking the bootstrap to stop
        drain_deadline: float | None = None  # after the bootstrap exited
        sel = selectors.DefaultSelector()
        assert proc.stdout is not None and proc.stderr is not None
        sel.register(proc.stdout.fileno(), selectors.EVENT_READ, "out")
        sel.register(proc.stderr.fileno(), selectors.EVENT_READ, "err")
        sel.register(status_r, selectors.EVENT_READ, "status")
        sel.register(report_r, selectors.EVENT_READ, "report")
        assert proc.stdin is not None
        stdin_fd, stdin_pos = proc.stdin.fileno(), 0
        if stdin:
            os.set_blocking(stdin_fd, False)
            sel.register(stdin_fd, selectors.EVENT_WRITE, "stdin")
        else:
            proc.stdin.close()

        def stop(now: float) -> None:
            nonlocal stop_deadline
            if stop_deadline is None:
                self._stop(proc)
                stop_deadline = now + 2.0

        try:
            while sel.get_map():
                now = time.monotonic()
                exited = b'"event": "exit"' in status_buf  # the program is gone; the bootstrap is cleaning up
                if drain_deadline is None and stop_deadline is None and not exited and now >= deadline:
                    timed_out = True
                    stop(now)
                elif exited and drain_deadline is None and stop_deadline is None and now >= deadline:
                    stop_deadline = now + 2.0  # give the clean-up a bounded time
                limits = [t for t in (deadline, stop_deadline, drain_deadline) if t is not None]
                if (stop_deadline is not None and now >= stop_deadline) or (
                    drain_deadline is not None and now >= drain_deadline
                ):
                    break
                wait = max(0.0, min(t for t in limits if t > now) - now) if any(t > now for t in limits) else 0.0
                for key, _ in sel.select(wait):
                    if key.data == "stdin":
                        try:
                            stdin_pos += os.write(stdin_fd, stdin[stdin_pos : stdin_pos + 65536])
                        except BlockingIOError:
                            continue
                        except OSError:  # the program closed its stdin or exited: it does not want the rest
                            stdin_pos = len(stdin)
                        if stdin_pos >= len(stdin):
                            sel.unregister(stdin_fd)
                            proc.stdin.close()
                        continue
                    try:
                        data = os.read(key.fd, 65536)
                    except BlockingIOError:
                        continue
                    if not data:
                        sel.unregister(key.fd)
                        if key.data == "status":
                            # The bootstrap is gone; it cleaned up after the program if it reported the exit.
                            clean_exit = b'"event": "exit"' in status_buf
                            drain_deadline = time.monotonic() + 0.5
                        continue
                    if key.data == "status":
                        status_buf += data
                    elif key.data == "report":
                        if len(report_buf) + len(data) > cap:
                            limit_hit = "the harness channel"
                            stop(time.monotonic())
                        report_buf += data
                    elif limit_hit is not None:
                        continue  # discard output while the program is being stopped
                    elif key.data == "out":
                        if len(out) + len(data) > cap:
                            out += data[: cap - len(out)]
                            limit_hit = "stdout"
                            stop(time.monotonic())
                        else:
                            out += data
                    else:
                        err_total += len(data)
                        err_tail += data
                        if len(err_tail) > tail_cap:
                            del err_tail[: len(err_tail) - tail_cap]
                        if err_total > cap:
                            limit_hit = "stderr"
                            stop(time.monotonic())
        finally:
            sel.close()
        if not clean_exit:
            logger.debug("sandbox: bootstrap %d did not finish by itself; killing its tree", proc.pid)
        self._kill(proc, token, cgroups, sweep=not clean_exit)
        wall = time.monotonic() - start
        result = ExecutionResult(
            Status.OK,
            stdout=out.decode("utf-8", "replace"),
            stderr=err_tail.decode("utf-8", "replace"),
            wall_time=wall,
        )
        events = [json.loads(line) for line in status_buf.decode("utf-8", "replace").splitlines() if line.strip()]
        exit_event = next((e for e in events if e.get("event") == "exit"), None)
        setup_error = next((e for e in events if e.get("event") == "setup_error"), None)
        program_event = next((e for e in events if e.get("event") == "program"), None)
        if exit_event:
            result.exit_code = exit_event.get("exit_code")
            result.signal = exit_event.get("signal")
            result.cpu_time = exit_event.get("cpu_time")
            result.max_rss_mb = (exit_event.get("max_rss_kb") or 0) / 1024
            if program_event is not None and result.signal is None:  # the program (PID 2) was killed by a signal
                result.exit_code, result.signal = None, program_event.get("signal")
        unconfirmed = _read_confirmation(result, bytes(report_buf), nonce)
        oom = cgroups.oom_killed() if cgroups is not None else False
        self._classify(result, limit_hit, timed_out, setup_error, exit_event, oom, unconfirmed)
        return result

    def _classify(
        self,
        result: ExecutionResult,
        limit_hit: str | None,
        timed_out: bool,
        setup_error: dict | None,
        exit_event: dict | None,
        oom: bool,
        unconfirmed: str | None = None,
    ) -> None:
        cfg = self.config
        cpu_limit = max(1, math.ceil(cfg.cpu_time if cfg.cpu_time is not None else cfg.timeout))
        last_err = next((ln.strip() for ln in reversed(result.stderr.splitlines()) if ln.strip()), "")
        if limit_hit:
            result.status = Status.OUTPUT_LIMIT
            result.reason = f"{limit_hit} exceeded {cfg.max_output_bytes} bytes"
        elif setup_error:
            result.status = Status.SANDBOX_ERROR
            result.reason = f"sandbox set-up failed at {setup_error.get('stage')}: {setup_error.get('error')}"
            result.stage = setup_error.get("stage")
        elif timed_out:
            result.status = Status.TIMEOUT
            result.reason = f"wall-clock limit of {cfg.timeout:g}s exceeded"
        elif exit_event is None:
            result.status = Status.SANDBOX_ERROR
            result.reason = "the sandbox bootstrap exited without a report" + (f": {last_err}" if last_err else "")
        elif result.signal in (signal.SIGXCPU,) or (
            result.signal == signal.SIGKILL and (result.cpu_time or 0) >= cpu_limit - 0.05
        ):
            result.status = Status.TIMEOUT
            result.reason = f"CPU-time limit of {cpu_limit}s exceeded"
        elif oom or "MemoryError" in last_err or (result.exit_code and "Cannot allocate memory" in result.stderr):
            result.status = Status.MEMORY
            result.reason = f"memory limit of {cfg.memory_mb} MiB exceeded" + (" (OOM kill)" if oom else "")
        elif result.signal == signal.SIGXFSZ:
            result.status = Status.RUNTIME_ERROR
            result.reason = f"file-size limit of {cfg.max_file_mb} MiB exceeded"
        elif result.signal is not None:
            result.status = Status.RUNTIME_ERROR
            result.reason = f"killed by {signal.Signals(result.signal).name}"
        elif result.exit_code != 0:
            result.status = Status.RUNTIME_ERROR
            result.reason = f"exit code {result.exit_code}" + (f": {last_err[:200]}" if last_err else "")
            if result.harness_value and not result.confirmed:
                result.reason += f" (harness: {result.harness_value[:200]})"
        elif unconfirmed is not None:
            result.status = Status.RUNTIME_ERROR
            result.reason = unconfirmed
        else:
            result.status = Status.OK


@functools.cache
def _host_data_dirs(python: str) -> tuple[str, ...]:
    """Where the project checkout, its environment and its data may live (the working directory, this package,
    the trainer's `sys.prefix` and import path): hidden from programs by the `mountns` layer. A directory below a
    top-level directory that is not part of the system (`/work/proj`) hides that whole top-level directory."""
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the checkout
    roots = _python_roots(python)
    out: list[str] = []
    for path in (os.getcwd(), here, sys.prefix, *sys.path):
        if not path or not os.path.isabs(path):
            continue
        path = os.path.realpath(path)
        if any(path == r or path.startswith(r + "/") for r in roots):
            continue  # the runner's own interpreter
        top = path.split("/")[1]
        target = path if top in _SYSTEM_TOPS else "/" + top
        if target not in ("/",) and os.path.isdir(target) and target not in out:
            out.append(target)
    return tuple(out)


def _read_confirmation(result: ExecutionResult, report: bytes, nonce: str) -> str | None:
    """Read the harness's channel into `result`; return why the run is not confirmed, or `None` if it is.

    The channel must hold exactly one line, `<nonce> ok[ <value>]` or `<nonce> fail <message>`, written by the
    harness after the program returned; anything else means the program ended early or wrote to the channel."""
    text = report.decode("utf-8", "replace")
    if not text:
        return "the program ended without the harness's confirmation (it exited, was killed or closed the channel)"
    lines = text.split("\n")
    if len(lines) != 2 or lines[1] != "" or not secrets.compare_digest(lines[0][: len(nonce) + 1], nonce + " "):
        return "the harness's channel was tampered with (unexpected content); not confirmed"
    verdict = lines[0][len(nonce) + 1 :]
    if verdict == "ok" or verdict.startswith("ok "):
        result.confirmed = True
        result.harness_value = verdict[3:] if verdict.startswith("ok ") else None
        return None
    result.harness_value = verdict[5:] if verdict.startswith("fail ") else verdict
    return f"the harness reports: {result.harness_value[:300]}"


# The harness's guard refuses importing these, and every `ctypes.*` audit event, in any case: masking is a second line.
_MASKED_MODULE_PREFIXES = ("_ctypes", "_testcapi", "_testinternalcapi")


@functools.cache
def _masked_modules(python: str) -> list[str]:
    """Native modules of the runner interpreter that give Python code raw memory access (hidden by `mountns`)."""
    out = []
    for root in _python_roots(python):
        for dynload in glob.glob(os.path.join(root, "lib", "python3*", "lib-dynload")):
            for name in sorted(os.listdir(dynload)):
                if name.split(".")[0] in _MASKED_MODULE_PREFIXES:
                    out.append(os.path.realpath(os.path.join(dynload, name)))
    return sorted(set(out))


_SHARED: dict[tuple, Sandbox] = {}
_SHARED_LOCK = threading.Lock()


def get_sandbox(config: SandboxConfig | None = None, max_workers: int = 2) -> Sandbox:
    """A process-wide [`Sandbox`] for `(config, max_workers)`, created on first use."""
    config = config or SandboxConfig()
    key = (config, max_workers)
    with _SHARED_LOCK:
        if key not in _SHARED:
            _SHARED[key] = Sandbox(config, max_workers=max_workers)
        return _SHARED[key]


def run_python(source: str, stdin: str | bytes = "", **config_kwargs) -> ExecutionResult:
    """Run one program in the shared sandbox; `config_kwargs` are [`SandboxConfig`] fields."""
    return get_sandbox(SandboxConfig(**config_kwargs)).run(source, stdin)
