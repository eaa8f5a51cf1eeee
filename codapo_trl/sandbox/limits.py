"""Resource limits: the rlimits of every execution, the limits of its private IPC namespace, and the cgroup v1
memory + pids pair (when the program may fork)."""

from __future__ import annotations

import atexit
import contextlib
import logging
import math
import os
import signal
import threading
import time
from collections.abc import Collection

from codapo_trl.sandbox.config import SandboxConfig, _MiB
from codapo_trl.sandbox.host import _kernel_at_least


logger = logging.getLogger(__name__)

SIGPENDING = 256  # signals a program may have queued at once (RLIMIT_SIGPENDING)


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


def nproc_binds(
    active: Collection[str], kernel_counts_nproc_per_userns: bool | None = None, trainer_is_root: bool | None = None
) -> bool:
    """Whether `RLIMIT_NPROC` bounds the tasks (processes and threads) of a program run with the layers `active`:
    with a dedicated uid, in a user namespace on Linux >= 5.14, or shared with a non-root trainer's uid. Root's own
    uid is exempt from it, so a root trainer without the `uid` layer needs the pids cgroup (issue 61: 772 threads
    against `max_processes=16`)."""
    per_userns = _kernel_at_least(5, 14) if kernel_counts_nproc_per_userns is None else kernel_counts_nproc_per_userns
    root = os.geteuid() == 0 if trainer_is_root is None else trainer_is_root
    return "uid" in active or ("userns" in active and per_userns) or not root


def rlimits(config: SandboxConfig, active: Collection[str], max_workers: int) -> list[tuple[str, int, int]]:
    """The `(name, soft, hard)` rlimits the bootstrap sets for a program run with the isolation layers `active` by a
    sandbox running up to `max_workers` programs at a time."""
    cfg = config
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
        # Queued signals are counted per user, up to the trainer's uid in a user namespace (issue 61: a program
        # that blocks a real-time signal and sends it to itself would queue one kernel object per call).
        ("RLIMIT_SIGPENDING", SIGPENDING, SIGPENDING),
        ("RLIMIT_RTPRIO", 0, 0),  # no real-time scheduling (a SCHED_FIFO loop would starve the trainer's core)
    ]
    # RLIMIT_NPROC counts the tasks (processes and threads) of the real uid: exact with a dedicated uid, or in a
    # user namespace on Linux >= 5.14 (counted per namespace). Sharing the trainer's uid, the best we can do is
    # to cap the uid's total at what it has now plus this sandbox's share. Root is exempt from it anyway.
    if "uid" in active or ("userns" in active and _kernel_at_least(5, 14)):
        limits.append(("RLIMIT_NPROC", cfg.max_processes, cfg.max_processes))
    elif os.geteuid() != 0:
        total = _count_user_tasks(os.getuid()) + cfg.max_processes * max_workers + 64
        limits.append(("RLIMIT_NPROC", total, total))
    return limits


# The IPC namespace's own limits (`/proc/sys/kernel/shm*`, `msg*`, `sem` and `/proc/sys/fs/mqueue/*` are per IPC
# namespace): SysV shared memory at most SHM_MIB in all, few message queues and semaphores, no POSIX message
# queue. Written by the bootstrap right after it enters the namespace (the `netns` layer), as its owner.
SHM_MIB = 16


def ipc_namespace_limits(page_size: int | None = None) -> dict[str, str]:
    """The sysctl files (below `/proc/sys`) and values the bootstrap writes in the program's new IPC namespace, so
    that SysV shared memory, message queues and semaphores are bounded there even without `seccomp` (which refuses
    them), and freed with the namespace when the program ends."""
    page = page_size or os.sysconf("SC_PAGE_SIZE")
    return {
        "kernel/shmmax": str(SHM_MIB * _MiB),
        "kernel/shmall": str(SHM_MIB * _MiB // page),  # in pages
        "kernel/shmmni": "16",
        "kernel/shm_rmid_forced": "1",  # a segment goes when its last user detaches or exits
        "kernel/msgmni": "4",
        "kernel/msgmnb": "65536",
        "kernel/sem": "32 128 32 4",  # semmsl semmns semopm semmni
        "fs/mqueue/queues_max": "0",
    }
