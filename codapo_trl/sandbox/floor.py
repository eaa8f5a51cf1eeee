"""The isolation floor: the protections below which no untrusted program runs (unless explicitly opted out)."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

from codapo_trl.sandbox.config import IsolationReport, SandboxConfig
from codapo_trl.sandbox.host import _kernel_at_least


logger = logging.getLogger(__name__)

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
