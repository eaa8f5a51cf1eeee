"""Run untrusted, model-written Python programs in isolation (Linux only).

Every execution gets its own short-lived process tree:

```
trainer (executor.py) --Popen--> bootstrap.py (python -I -S, by path)  --fork--> runner.py (python -I -S, by path)
                                 joins cgroups, unshares namespaces,             mounts, rlimits, uid drop,
                                 subreaper: waits, reports exit status +         no_new_privs, Landlock, seccomp,
                                 rusage, kills and reaps what is left            exec; audit hook; the program
                      --Popen--> judge.py (call/check runs; python -S, never runs the program's code) <--pipes-->
                                 runs the test, asks the runner for the candidate's results, writes the verdict
```

The verdict of a `call` or `check` run is made in the judge, from plain data ([`wire`]) the runner sends back;
a script's standard output is compared by the caller. No verdict is computed in a process that ran the program.

Where things are (one job per module):

- `config.py`: [`SandboxConfig`], [`Harness`], [`ExecutionResult`], [`Status`], [`IsolationReport`], `ALL_LAYERS`.
- `floor.py`: the isolation floor ([`floor_gaps`], [`check_floor`], [`SandboxFloorError`]) and its opt-out.
- `detection.py`: which layers work here ([`detect_isolation`]) and the start-up log of every layer.
- `api.py`: [`Sandbox`] (detected layers + floor) and the process-wide [`get_sandbox`] / [`run_python`].
- `executor.py`: runs one program (configuration, status pipe, the judge and its channel to the program, limits,
  clean-up, classification); `pacing.py`: how often the program's output pipes may wake the executor's thread.
- `bootstrap.py`, `runner.py`: the trusted code of the child processes, run by path (never imported; standard
  library only): namespaces, mounts, capabilities, rlimits, uid, Landlock, seccomp; then the program.
- `judge.py` (the judge process and the comparison rules) and `wire.py` (the plain-data format between the runner
  and the judge): standard library only, imported by the trainer and run (or copied) by path.
- `seccomp.py` (the syscall filter and its deny list), `limits.py` (rlimits, cgroups), `mounts.py` (hidden, private
  and masked paths, read roots), `host.py` (capabilities, kernel, interpreter, uid pool, process sweep).

A new isolation layer: its name in `ALL_LAYERS` (config.py), its candidacy and set-up stage in detection.py, its
host-side parameters in the child configuration built by executor.py, its set-up (with a `STAGE`) in bootstrap.py,
and what it gives in `floor_gaps` (floor.py) if it counts towards the floor.

The isolation layers are detected once per process (see [`detect_isolation`]) and everything that works is used;
what is active is logged once at start-up, with a warning for each missing kind of protection. The layers:

- `uid`: when the trainer is root, the program runs as a dedicated unprivileged uid leased from a `flock`-protected
  pool (`uid_base`...), so it cannot signal, ptrace or write to anything the trainer owns, and `RLIMIT_NPROC`
  (counted per uid) is really enforced.
- `userns`: when not root, an unprivileged user namespace is used to get the namespaces below.
- `netns`: a fresh network namespace (a downed loopback device only): no connection to anything, even localhost;
  with it a private IPC namespace whose SysV objects and message queues die with the run (as root, with small
  limits set by the bootstrap).
- `pidns`: a fresh PID namespace; the program is its PID 1, so when it exits or is killed the kernel kills every
  process it left behind, including double-forked and `setsid` daemons.
- `mountns`: a private mount namespace in which every mount is remounted read-only, `/root`, `/home` and the
  trainer's `$HOME` are hidden behind empty tmpfs, `/tmp`, `/var/tmp` and `/dev/shm` are private size-limited
  tmpfs, and the working directory is a private size-limited tmpfs (it vanishes with the namespace); every writable
  mount is `noexec`, and the `site-packages` of the interpreter and of every other Python installation are hidden
  (unless `allow_native_modules`).
- `cgroup`: (cgroup v1, used when the program may fork) a memory cgroup limiting the whole tree's memory plus its
  tmpfs files and detecting OOM kills, and a pids cgroup.
- `landlock`: writes only in the working directory and `/dev/null`, reads only the interpreter's prefix, the
  loader's libraries, `/dev` and `/proc/self`; no TCP bind/connect; no signals to processes outside the sandbox.
- `seccomp`: a classic-BPF syscall filter (x86_64 / aarch64): no sockets, no new processes unless
  `allow_fork=True` (threads are fine), signals only to itself, no ptrace, mount, namespace, keyring, bpf, perf,
  io_uring, kexec or module syscalls; no memfd or SysV shared memory (memory no rlimit counts), no aio, inotify,
  message queues or semaphores (host-wide or per-user kernel objects).
- `rlimits` (always): CPU time, address space, file size, open files, stack, core dumps, processes.
- `audit` (defence in depth only): a `sys.addaudithook` hook installed before the program's first line that
  refuses sockets, subprocesses/exec, signals to other processes, ctypes, writes outside the working directory,
  reads outside the standard library, and tampering with the hook.
"""

from codapo_trl.sandbox.api import Sandbox, get_sandbox, run_python
from codapo_trl.sandbox.config import (
    ALL_LAYERS,
    SCRIPT,
    ExecutionResult,
    Harness,
    IsolationReport,
    SandboxConfig,
    Status,
)
from codapo_trl.sandbox.detection import _DETECTED, detect_isolation
from codapo_trl.sandbox.executor import Executor
from codapo_trl.sandbox.floor import BELOW_FLOOR_ENV, SandboxFloorError, check_floor, floor_gaps
from codapo_trl.sandbox.host import _default_python
from codapo_trl.sandbox.seccomp import _SYSCALLS, _build_seccomp_filter


__all__ = [
    "ALL_LAYERS",
    "BELOW_FLOOR_ENV",
    "SCRIPT",
    "ExecutionResult",
    "Executor",
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
    # private, used by the tests: the detection cache, the default interpreter, the seccomp filter and its table
    "_DETECTED",
    "_SYSCALLS",
    "_build_seccomp_filter",
    "_default_python",
]
