"""The executor: runs one program at a time per slot under a given set of isolation layers.

For each execution it writes the bootstrap's configuration, starts the bootstrap ([`codapo_trl.sandbox.bootstrap`],
run by path), feeds stdin, collects stdout/stderr within their caps, reads the bootstrap's status pipe (set-up
errors, exit status, resource usage), enforces the wall-clock limit, kills and sweeps what is left, and classifies
the outcome into an [`ExecutionResult`]. For `call` and `check` runs it also starts the judge
([`codapo_trl.sandbox.judge`]), a process of its own that never runs the program's code, joined to the program's
process by two pipes, and takes its verdict from the judge's standard output, which the program cannot reach.
Detecting the layers and refusing to run below the floor is the job of [`codapo_trl.sandbox.Sandbox`].

Length: about 600 lines: one execution's set-up, supervision and classification share the run's state (its pipes,
its cgroups, the judge), and the output pacing they use is its own module (`codapo_trl.sandbox.pacing`).
"""

from __future__ import annotations

import contextlib
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
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Self

from codapo_trl.sandbox import judge as _judge_module
from codapo_trl.sandbox import wire
from codapo_trl.sandbox.config import SCRIPT, ExecutionResult, Harness, IsolationReport, SandboxConfig, Status, _MiB
from codapo_trl.sandbox.host import _default_python, _python_roots, _sweep_by_token, _UidPool
from codapo_trl.sandbox.limits import (
    _cgroup_slot,
    _Cgroups,
    _v1_cgroup_dirs,
    ipc_namespace_limits,
    nproc_binds,
    rlimits,
)
from codapo_trl.sandbox.mounts import (
    _LANDLOCK_EXTRA_READ,
    _PRIVATE_TMP_CANDIDATES,
    _READ_ROOTS,
    exposed_dirs,
    hidden_dirs,
    module_dirs_to_hide,
    native_module_masks,
)
from codapo_trl.sandbox.pacing import PacedSelector
from codapo_trl.sandbox.seccomp import _build_seccomp_filter


logger = logging.getLogger(__name__)

_HERE = os.path.dirname(os.path.abspath(__file__))
BOOTSTRAP_PATH = os.path.join(_HERE, "bootstrap.py")
RUNNER_PATH = os.path.join(_HERE, "runner.py")
RUNNER_COPY_NAME = ".codapo_runner.py"  # in the run's working directory, where the bootstrap copies the runner
WIRE_PATH = wire.__file__
WIRE_COPY_NAME = ".codapo_wire.py"  # next to it, for `call` and `check` runs
# The judge: `python -E -s -S -m judge` in this directory (the package is not importable without site-packages; this
# directory is, as the current one), so that its bytecode is cached.
_JUDGE_ARGS = ("-E", "-s", "-S", "-m", "judge")
assert os.path.dirname(_judge_module.__file__) == _HERE  # the judge is imported here once, which caches its bytecode
# The judge's address-space limit is the program's plus this (its interpreter, and the answers it decodes).
_JUDGE_EXTRA_MB = 256
# Pacing of the program's output pipes (pacing.py): after _PACE_BURST reads shorter than _READ_BYTES, one such read
# per _PACE_INTERVAL seconds; a pipe that had to wait is grown to _PACED_PIPE_BYTES (what the program can write
# meanwhile without blocking: 25 MB/s at least).
_READ_BYTES = 65536
_PACE_INTERVAL = 0.02
_PACE_BURST = 32
_PACED_PIPE_BYTES = 512 * 1024


class Executor:
    """Runs Python programs under the isolation layers of `isolation`, up to `max_workers` at a time.

    It neither detects the layers nor checks the isolation floor: use [`codapo_trl.sandbox.Sandbox`], which does
    both (the detector itself runs its probes here).

    Args:
        config (`SandboxConfig`, *optional*): limits and options.
        max_workers (`int`): executions run concurrently by [`Executor.map`] (and at most this many by concurrent
            [`Executor.run`] calls on this instance).
        isolation (`IsolationReport`): layers to use.
    """

    def __init__(self, config: SandboxConfig | None, max_workers: int, isolation: IsolationReport) -> None:
        if sys.platform != "linux":
            raise RuntimeError("the codapo_trl sandbox needs Linux")
        self.config = config or SandboxConfig()
        self.max_workers = max(1, int(max_workers))
        self.isolation = isolation
        self._python = self.config.python_executable or _default_python()
        self._slots = threading.BoundedSemaphore(self.max_workers)
        self._free_slots = list(range(self.max_workers))  # list.pop/append are atomic; guarded by _slots
        self._executor: ThreadPoolExecutor | None = None
        self._executor_lock = threading.Lock()
        self._uid_pool = _UidPool(self.config.uid_base, self.config.uid_count) if self._has("uid") else None
        # Moving a process into a v1 cgroup costs ~10-30 ms (an RCU grace period). The cgroups only add protection
        # when the program can create processes: a single process is already bounded by RLIMIT_AS, RLIMIT_CPU and
        # the tmpfs sizes, and its threads by RLIMIT_NPROC. So they are used when `allow_fork=True`, without
        # seccomp, or where RLIMIT_NPROC does not bind (a root trainer without the uid layer: pids.max then bounds
        # the threads).
        self.uses_cgroups = self._has("cgroup") and (
            self.config.allow_fork or not self._has("seccomp") or not nproc_binds(self.isolation.active)
        )
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
        `harness` (by default: as a script; for `call` and `check`, judged by the judge process)."""
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

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _pool(self) -> ThreadPoolExecutor:
        with self._executor_lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(self.max_workers, thread_name_prefix="codapo-sandbox")
            return self._executor

    # ---------------------------------------------------------------------------------------------- internals

    def _run(
        self, source: str, stdin: str | bytes, harness: Harness, uid: int | None, slot_name: str
    ) -> ExecutionResult:
        cfg = self.config
        start = time.monotonic()
        base = cfg.base_dir or tempfile.gettempdir()
        rundir = tempfile.mkdtemp(prefix="codapo-sbx-", dir=base)
        cgroups: _Cgroups | None = None
        proc: subprocess.Popen | None = None
        judge: subprocess.Popen | None = None
        status_r = status_w = -1
        channel: list[int] = []  # request read, answer write (the program's); request write, answer read (judge's)
        token = secrets.token_hex(16)
        serve = harness.mode != "script"
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
            private_tmp = [p for p in _PRIVATE_TMP_CANDIDATES if os.path.isdir(p) and not os.path.islink(p)]
            status_r, status_w = os.pipe()
            if serve:
                req_r, req_w = os.pipe()
                resp_r, resp_w = os.pipe()
                channel = [req_r, resp_w, req_w, resp_r]
            argv = [
                self._python,
                *cfg.python_flags,
                os.path.join(workdir, RUNNER_COPY_NAME),
                workdir,
                "\x01".join(read_roots),
                "1" if self._has("audit") else "0",
                f"{channel[0]},{channel[1]}" if serve else "-",
            ]
            sources, copies = [RUNNER_PATH], [os.path.join(workdir, RUNNER_COPY_NAME)]
            if serve:
                sources.append(WIRE_PATH)
                copies.append(os.path.join(workdir, WIRE_COPY_NAME))
            child_cfg = {
                "status_fd": status_w,
                "channel_fds": channel[:2],
                "mask_files": native_module_masks(self._python, cfg.allow_native_modules) if mountns else [],
                "source": source,
                "runner": {"sources": sources, "copies": copies},
                "workdir": workdir,
                "uid": uid,
                "userns": self._has("userns"),
                "inner_id": os.geteuid() or 1000,
                "netns": self._has("netns"),
                "pidns": self._has("pidns"),
                "mountns": mountns,
                "strict_readonly": False,
                "expose": exposed_dirs(self._python, cfg.base_dir) if mountns else [],
                "hide": hidden_dirs(self._python, cfg.base_dir) if mountns else [],
                "hide_modules": module_dirs_to_hide(self._python, cfg.allow_native_modules) if mountns else [],
                "ipc_limits": ipc_namespace_limits(),
                "private_tmp": private_tmp,
                "tmp_kb": 16 * 1024,
                "tmpfs_kb": cfg.tmpfs_mb * 1024,
                "cgroup_procs": cgroups.procs_files if cgroups else [],
                "seccomp": self._seccomp,
                "landlock": {
                    "read": [*read_roots, *_LANDLOCK_EXTRA_READ],
                    "write": workdir,
                    # multiprocessing's locks (sem_open) live in /dev/shm: writable when the program may fork and
                    # /dev/shm is the run's private, size-limited, noexec tmpfs (issue 61: Pool failed)
                    "extra_write": ["/dev/shm"] if mountns and cfg.allow_fork and "/dev/shm" in private_tmp else [],
                }
                if self._has("landlock")
                else None,
                "rlimits": rlimits(cfg, self.isolation.active, self.max_workers),
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
                [self._python, "-I", "-S", "-B", BOOTSTRAP_PATH, config_path],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=(status_w, *channel[:2]),
                env=env,
                cwd=rundir,
                start_new_session=True,
                close_fds=True,
            )
            os.close(status_w)
            status_w = -1
            judge_spec = b""
            if serve:
                spec = harness.judge_spec()
                spec.update(
                    req_fd=channel[2],
                    resp_fd=channel[3],
                    budget=max(0.0, cfg.timeout - (time.monotonic() - start)),
                    max_bytes=cfg.max_output_bytes,
                    cwd=rundir,
                    # the judge's own limits: it never outlives the run's deadline by more than a second anyway
                    cpu_s=int(math.ceil(cfg.timeout)) + 1,
                    memory_bytes=(cfg.memory_mb + _JUDGE_EXTRA_MB) * _MiB,
                )
                judge_spec = wire.encode(spec, max_chars=1 << 30)
                # The judge: a process of the trainer's that never runs the program's code (see judge.py).
                judge = subprocess.Popen(
                    [self._python, *_JUDGE_ARGS],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    pass_fds=tuple(channel[2:]),
                    env={"PATH": env["PATH"], "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"},
                    cwd=_HERE,
                    start_new_session=True,
                    close_fds=True,
                )
            for fd in channel:  # the program and the judge hold their ends now
                os.close(fd)
            channel = []
            return self._supervise(proc, status_r, start, token, cgroups, stdin_bytes, judge, judge_spec)
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
            if judge is not None:
                with contextlib.suppress(OSError):
                    judge.kill()
                for stream in (judge.stdin, judge.stdout, judge.stderr):
                    if stream is not None:
                        with contextlib.suppress(OSError):
                            stream.close()
                judge.wait()
            for fd in (status_r, status_w, *channel):
                if fd >= 0:
                    with contextlib.suppress(OSError):
                        os.close(fd)
            if cgroups is not None:
                cgroups.kill_all()
            shutil.rmtree(rundir, ignore_errors=True)

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
        start: float,
        token: str,
        cgroups: _Cgroups | None,
        stdin: bytes,
        judge: subprocess.Popen | None = None,
        judge_spec: bytes = b"",
    ) -> ExecutionResult:
        cfg = self.config
        cap, tail_cap = cfg.max_output_bytes, cfg.stderr_tail_bytes
        out = bytearray()
        err_tail = bytearray()
        err_total = 0
        status_buf = bytearray()
        verdict_buf = bytearray()
        judge_err = bytearray()
        limit_hit: str | None = None
        timed_out = False
        clean_exit = False  # the bootstrap reported and exited by itself
        deadline = start + cfg.timeout  # the program's wall-clock limit
        judge_deadline = deadline + 1.0  # the judge's own waits end at `deadline`; this only catches a stuck judge
        judge_done: float | None = None  # when the judge gave its verdict
        stop_deadline: float | None = None  # after asking the bootstrap to stop
        drain_deadline: float | None = None  # after the bootstrap exited
        # The program's output and the judge's stderr are paced (see pacing.py): however the program writes, they
        # wake this thread a bounded number of times; the status pipe and the verdict are read as they come.
        sel = PacedSelector(_PACE_INTERVAL, _PACE_BURST, _READ_BYTES, _PACED_PIPE_BYTES)
        assert proc.stdout is not None and proc.stderr is not None
        sel.register(proc.stdout.fileno(), selectors.EVENT_READ, "out", paced=True)
        sel.register(proc.stderr.fileno(), selectors.EVENT_READ, "err", paced=True)
        sel.register(status_r, selectors.EVENT_READ, "status")
        writers: dict[int, list] = {}  # fd -> [data, position, stream]
        assert proc.stdin is not None
        if stdin:
            writers[proc.stdin.fileno()] = [stdin, 0, proc.stdin]
        else:
            proc.stdin.close()
        if judge is not None:
            assert judge.stdin is not None and judge.stdout is not None and judge.stderr is not None
            sel.register(judge.stdout.fileno(), selectors.EVENT_READ, "verdict")
            sel.register(judge.stderr.fileno(), selectors.EVENT_READ, "judge_err", paced=True)
            writers[judge.stdin.fileno()] = [judge_spec, 0, judge.stdin]
        for fd in writers:
            os.set_blocking(fd, False)
            sel.register(fd, selectors.EVENT_WRITE, "write")

        def stop(now: float) -> None:
            nonlocal stop_deadline
            if stop_deadline is None:
                self._stop(proc)
                stop_deadline = now + 2.0

        try:
            while sel.watching():
                now = time.monotonic()
                exited = b'"event": "exit"' in status_buf  # the program is gone; the bootstrap is cleaning up
                if judge is not None and judge_done is None and now >= judge_deadline:
                    judge.kill()  # its pipes close: the loop goes on with the program's
                    judge_done = now
                    timed_out = True  # no verdict by the deadline
                if judge_done is not None and not exited and now >= judge_done + 0.5:
                    stop(now)  # the verdict is in: a program still running after its channel closed is stopped
                if drain_deadline is None and stop_deadline is None and not exited and now >= deadline:
                    timed_out = judge_done is None
                    stop(now)
                elif exited and drain_deadline is None and stop_deadline is None and now >= deadline:
                    stop_deadline = now + 2.0  # give the clean-up a bounded time
                limits = [deadline, stop_deadline, drain_deadline]
                if judge is not None:
                    limits += [judge_deadline if judge_done is None else judge_done + 0.5]
                limits = [t for t in limits if t is not None]
                judge_waits = judge is not None and judge_done is None  # the verdict may still come: wait for it
                if (stop_deadline is not None and now >= stop_deadline and not judge_waits) or (
                    drain_deadline is not None and now >= drain_deadline and not judge_waits
                ):
                    break
                wait = max(0.0, min(t for t in limits if t > now) - now) if any(t > now for t in limits) else 0.0
                for key, _ in sel.select(wait):
                    if key.data == "write":
                        data, pos, stream = writers[key.fd]
                        try:
                            pos += os.write(key.fd, data[pos : pos + 65536])
                        except BlockingIOError:
                            continue
                        except OSError:  # the reader closed its end or exited: it does not want the rest
                            pos = len(data)
                        writers[key.fd][1] = pos
                        if pos >= len(data):
                            sel.unregister(key.fd)
                            stream.close()
                        continue
                    try:
                        data = os.read(key.fd, _READ_BYTES)
                    except BlockingIOError:
                        continue
                    if not data:
                        sel.unregister(key.fd)
                        if key.data == "status":
                            # The bootstrap is gone; it cleaned up after the program if it reported the exit.
                            clean_exit = b'"event": "exit"' in status_buf
                            drain_deadline = time.monotonic() + 0.5
                            sel.release()  # read what is left of the output now
                        elif key.data == "verdict":
                            judge_done = time.monotonic()
                            sel.release()
                        continue
                    # Past the output cap nothing is counted any more: every read is charged, whatever its size.
                    sel.charge(key.fd, len(data), time.monotonic(), free_if_full=limit_hit is None)
                    if key.data == "status":
                        status_buf += data
                        if b'"event": "exit"' in status_buf:  # the program is gone: read the rest of its output now
                            sel.release()
                    elif key.data == "verdict":
                        verdict_buf += data[: max(0, 4096 - len(verdict_buf))]
                    elif key.data == "judge_err":
                        judge_err = (judge_err + data)[-tail_cap:]
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
        judging = False  # the judge started on the program's answers: whatever follows is the program's result
        if judge is not None:
            lines = verdict_buf.decode("utf-8", "replace").split("\n")
            judging = lines[0] == "judging" and len(lines) > 1
            if judging:
                del lines[0]
            result.verdict = lines[0] if len(lines) == 2 and not lines[1] else None
            if result.verdict is None and not judging:
                tail = judge_err.decode("utf-8", "replace").strip().splitlines()
                logger.warning("sandbox: the judge did not start%s", f": {tail[-1]}" if tail else "")
        oom = cgroups.oom_killed() if cgroups is not None else False
        self._classify(result, limit_hit, timed_out, setup_error, exit_event, oom, judge is not None, judging)
        return result

    def _classify(
        self,
        result: ExecutionResult,
        limit_hit: str | None,
        timed_out: bool,
        setup_error: dict | None,
        exit_event: dict | None,
        oom: bool,
        judged: bool = False,
        judging: bool = False,
    ) -> None:
        """Set `result.status` and `reason`. A judged run (`call`, `check`) is the sandbox's error only when the
        sandbox could not set up, or when the judge did not get to the program's answers (`judging` false: it
        could not start, or the test itself cannot run); from then on, a missing verdict is the program's
        failure, never a skip."""
        cfg = self.config
        cpu_limit = max(1, math.ceil(cfg.cpu_time if cfg.cpu_time is not None else cfg.timeout))
        last_err = next((ln.strip() for ln in reversed(result.stderr.splitlines()) if ln.strip()), "")
        word, _, why = (result.verdict or "").partition(" ")
        if limit_hit:
            result.status = Status.OUTPUT_LIMIT
            result.reason = f"{limit_hit} exceeded {cfg.max_output_bytes} bytes"
        elif setup_error:
            result.status = Status.SANDBOX_ERROR
            result.reason = f"sandbox set-up failed at {setup_error.get('stage')}: {setup_error.get('error')}"
            result.stage = setup_error.get("stage")
        elif judged and (word == "invalid" or not judging):  # the test or the judge failed: not the program's fault
            result.status = Status.SANDBOX_ERROR
            result.reason = why or "the judge did not start"
        elif judged and word in _VERDICTS:
            result.status = _VERDICTS[word]
            result.reason = why
        elif timed_out or (judged and word == "timeout"):
            result.status = Status.TIMEOUT
            result.reason = f"wall-clock limit of {cfg.timeout:g}s exceeded"
        elif exit_event is None and oom:  # the cgroup's OOM killer took a process of the sandbox's own
            result.status = Status.MEMORY
            result.reason = f"memory limit of {cfg.memory_mb} MiB exceeded (OOM kill before the program's report)"
        elif exit_event is None and judged:
            result.status = Status.RUNTIME_ERROR
            result.reason = why or "the judge gave no verdict on the program's answers"
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
            result.reason = f"killed by {_signal_name(result.signal)}"
        elif result.exit_code != 0:
            result.status = Status.RUNTIME_ERROR
            result.reason = f"exit code {result.exit_code}" + (f": {last_err[:200]}" if last_err else "")
        elif judged:  # "ended", or no verdict: the program closed its channel, exited, or sent what stopped the judge
            result.status = Status.RUNTIME_ERROR
            result.reason = why or "the judge gave no verdict on the program's answers (stopped by its limits)"
        else:
            result.status = Status.OK


def _signal_name(number: int) -> str:
    """`SIGKILL`, or `signal 40` for a number without a name (real-time signals): never an error."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


# The judge's verdicts that settle a run whatever became of the program's process afterwards.
_VERDICTS = {"pass": Status.OK, "wrong": Status.WRONG, "error": Status.RUNTIME_ERROR, "memory": Status.MEMORY}
