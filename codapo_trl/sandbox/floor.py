"""The isolation floor: the protections below which no untrusted program runs (unless explicitly opted out)."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

from codapo_trl.sandbox.config import IsolationReport, SandboxConfig
from codapo_trl.sandbox.host import _kernel_at_least
from codapo_trl.sandbox.limits import nproc_binds


logger = logging.getLogger(__name__)

BELOW_FLOOR_ENV = "CODAPO_SANDBOX_ALLOW_BELOW_FLOOR"


class SandboxFloorError(RuntimeError):
    """The active isolation layers do not reach the floor below which no untrusted program runs."""


def floor_gaps(
    active: Sequence[str],
    allow_fork: bool = False,
    kernel_counts_nproc_per_userns: bool = True,
    allow_native_modules: bool = False,
    trainer_is_root: bool | None = None,
) -> list[str]:
    """The protections of the isolation floor that the layers in `active` do not give, each with the layers that
    would give it. Empty when the floor is reached.

    The floor: no capabilities (always: the bounding set is dropped and `no_new_privs` set whatever the layers),
    no network (`netns` or `seccomp`), no writes outside the working directory and no view of the project
    checkout or user directories (`mountns` or `landlock`), bounded CPU time (`rlimits`, always), a bounded number
    of tasks, threads included (`uid`, `userns`, `cgroup`, or a non-root trainer's shared `RLIMIT_NPROC`), and (issue 61) every kind of
    memory bounded: the whole tree's (`cgroup`, or `seccomp` without `allow_fork`: one process under
    `RLIMIT_AS`), memfd files (`seccomp` refuses `memfd_create`), the files it writes (`mountns`: size-limited
    tmpfs), SysV shared memory (`seccomp` refuses it; the private IPC namespace of `netns` frees it with the run
    and, as root, bounds it); no code the program writes runs (`mountns`: every writable mount `noexec`;
    `seccomp`: no memfd, which `dlopen` would map from `/proc/self/fd`; `landlock` or `audit`: no
    `/proc/self/mem`); no new executable memory (`seccomp`: no anonymous or writable executable mapping, no
    `mprotect` to executable, so machine code written through a memory bug never runs); no native module outside the
    standard library (`mountns` hides them, unless `allow_native_modules`); no host-wide kernel resource taken (`seccomp` refuses aio, inotify, message queues,
    semaphores and keyrings). docs/isolation.md has the table: resource, bound, layer, test. `trainer_is_root`
    defaults to whether this process runs as root (root's own uid is exempt from `RLIMIT_NPROC`).
    """
    have = set(active)
    gaps = []
    if not have & {"netns", "seccomp"}:
        gaps.append("no network (needs the netns or seccomp layer)")
    if not have & {"mountns", "landlock"}:
        gaps.append("no writes outside the working directory, host data hidden (needs the mountns or landlock layer)")
    one_process = "seccomp" in have and not allow_fork
    # seccomp without allow_fork leaves one process, but its threads are tasks too (issue 61): they need
    # RLIMIT_NPROC to bind (see `nproc_binds`) or the pids cgroup.
    if not nproc_binds(have, kernel_counts_nproc_per_userns, trainer_is_root) and "cgroup" not in have:
        gaps.append(
            "bounded number of tasks, processes and threads (needs the uid, userns or cgroup layer: a root "
            "trainer's own uid is exempt from RLIMIT_NPROC)"
        )
    if "cgroup" not in have and not one_process:
        gaps.append(
            "the memory of the whole process tree bounded (needs the cgroup layer, or seccomp without allow_fork: "
            "one process under RLIMIT_AS; otherwise each process has its own)"
        )
    if "seccomp" not in have:
        gaps.append(
            "memfd and SysV shared memory bounded, memfd not loadable as native code (needs the seccomp layer, which "
            "refuses memfd_create and shmget: RLIMIT_AS counts neither, dlopen maps a memfd from /proc/self/fd)"
        )
        gaps.append(
            "host-wide kernel resources not exhausted: aio contexts, inotify, message queues, semaphores, keyrings "
            "(needs the seccomp layer)"
        )
        gaps.append(
            "no new executable memory: no anonymous or writable executable mapping, no mprotect to executable "
            "(needs the seccomp layer)"
        )
    if "mountns" not in have:
        gaps.append(
            "the files a program writes bounded in total, and never executable (needs the mountns layer: "
            "size-limited noexec tmpfs; without it the working directory is the host's, bounded per file only)"
        )
        if not allow_native_modules:
            gaps.append(
                "no native module outside the standard library, such as site-packages' _cffi_backend (needs the "
                "mountns layer, or SandboxConfig(allow_native_modules=True))"
            )
    if not have & {"landlock", "audit"}:
        gaps.append("no writes into the program's own code through /proc/self/mem (needs the landlock or audit layer)")
    return gaps


def check_floor(report: IsolationReport, config: SandboxConfig) -> None:
    """Refuse (with [`SandboxFloorError`]) to run untrusted code below the isolation floor, unless opted out."""
    gaps = floor_gaps(report.active, config.allow_fork, _kernel_at_least(5, 14), config.allow_native_modules)
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
