"""Facts about the host and its shared resources: capabilities, kernel version, the interpreter that runs programs
and its directories, the cross-process pool of sandbox uids, and killing processes left behind by a run."""

from __future__ import annotations

import contextlib
import fcntl
import os
import platform
import signal
import sys
import tempfile
import time
from collections.abc import Iterator


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


def _kernel_at_least(major: int, minor: int) -> bool:
    try:
        parts = platform.release().split(".")
        return (int(parts[0]), int(parts[1].split("-")[0])) >= (major, minor)
    except (ValueError, IndexError):
        return False


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
