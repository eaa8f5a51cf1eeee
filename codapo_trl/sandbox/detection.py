"""Which isolation layers work on this machine: chosen from privileges, then probed with a trivial program, and
logged once at start-up (every layer, on or OFF with the reason, the floor and the weaknesses left)."""

from __future__ import annotations

import logging
import os
import platform
import sys
import threading
from dataclasses import replace

from codapo_trl.sandbox.config import ALL_LAYERS, IsolationReport, SandboxConfig, Status
from codapo_trl.sandbox.executor import Executor
from codapo_trl.sandbox.floor import floor_gaps
from codapo_trl.sandbox.host import (
    _CAP_SETGID,
    _CAP_SETUID,
    _CAP_SYS_ADMIN,
    _capabilities,
    _default_python,
    _kernel_at_least,
)
from codapo_trl.sandbox.limits import _v1_cgroup_dirs
from codapo_trl.sandbox.seccomp import _AUDIT_ARCH


logger = logging.getLogger(__name__)

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
        gaps = floor_gaps(report.active, config.allow_fork, _kernel_at_least(5, 14), config.allow_native_modules)
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
    for disabled in config.disable:
        if disabled in candidates:
            candidates.remove(disabled)
            missing[disabled] = "disabled by configuration"

    for _ in range(len(ALL_LAYERS) + 1):
        active = tuple(candidates)
        trial = IsolationReport(active=active, missing=dict(missing), python_executable=python, privileged=root)
        # allow_fork=True so that the cgroup layer is exercised too (see `Executor.uses_cgroups`).
        probe = Executor(replace(config, timeout=max(config.timeout, 10.0), allow_fork=True), 2, trial)
        result = probe.run("print(6 * 7)")
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
