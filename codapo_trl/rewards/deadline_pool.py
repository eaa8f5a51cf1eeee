"""Run a function over many small inputs in worker processes, with a hard time limit per input (the maths grader's
pool; see `codapo_trl.rewards.grading`).

Length: about 630 lines, one class and its worker loop; the parent and worker sides share the frame protocol and are
kept together so that the protocol is read in one place.

Grading model outputs means handing untrusted text to parsers that can hang (SymPy happily starts computing
`9^{9^{9^9}}`) or blow up memory. Signal-based timeouts, as used inside math-verify, only work on the main thread
of the main interpreter, and they cannot interrupt a long computation in C code. This module gives a bound that
holds from any thread and for any kind of hang:

- Each worker is a separate Python interpreter started with `subprocess` (never `fork` of a threaded, CUDA-holding
  training process) that talks to the parent over its stdin/stdout pipes with length-prefixed pickle frames.
- The parent sends a batch of items to an idle worker and the worker streams back one result per item. The parent
  allows each item `item_timeout` seconds from the moment the worker finished the previous one (or from sending the
  batch); past that it kills the worker, records `"timeout"` for the item being worked on, puts the rest of the
  batch back in the queue and starts a replacement. A worker that dies (segfault, OOM kill, abort) is handled the same way with `"crashed"`.
- Inside the worker a softer alarm (`signal.setitimer`, on the worker's own main thread) stops most slow items
  before the hard deadline, so the common slow case costs no respawn.
- Workers can get an address-space limit (`RLIMIT_AS`), ignore SIGINT, exit when their stdin closes or their parent
  goes away, and are shut down at interpreter exit.

The pool starts its workers lazily, reuses them across calls, and can be used from several threads at once: each
call checks out the workers it drives and returns them afterwards.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import json
import logging
import math
import os
import pickle
import selectors
import signal
import struct
import subprocess
import sys
import threading
import time
import traceback
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


logger = logging.getLogger(__name__)

__all__ = ["DeadlineProcessPool", "TaskOutcome", "WorkerStartupError"]

_HEADER = struct.Struct(">I")
_MAX_FRAME_BYTES = 64 * 2**20

# Errors recorded in `TaskOutcome.error`.
TIMEOUT = "timeout"
CRASHED = "crashed"
UNAVAILABLE = "unavailable"


@dataclass(frozen=True)
class TaskOutcome:
    """What happened to one input.

    Args:
        value (`Any`): The handler's return value, when it returned normally.
        error (`str` or `None`): `None` on success; otherwise `"timeout"`, `"crashed"` (the worker died),
            `"unavailable"` (no worker could be started) or `"error: <ExceptionType>: <message>"`.
    """

    value: Any = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class WorkerStartupError(RuntimeError):
    """A worker process could not be started (for example the handler's module fails to import)."""


# --------------------------------------------------------------------------------------------------------------
# Worker side
# --------------------------------------------------------------------------------------------------------------

# Started as `python -c _BOOTSTRAP <json config>`. It gets the parent's import path via PYTHONPATH and registers the
# handler's top-level package as a bare namespace module, so that importing e.g. `codapo_trl.rewards` in a worker does
# not execute `codapo_trl/__init__.py` (which may one day import torch and TRL, seconds and hundreds of MB per worker).
_BOOTSTRAP = """
import importlib, json, sys, types
cfg = json.loads(sys.argv[1])
for name, path in cfg["stub_packages"].items():
    if name not in sys.modules:
        module = types.ModuleType(name)
        module.__path__ = list(path)
        sys.modules[name] = module
importlib.import_module(cfg["pool_module"])._worker_main(cfg)
"""


class _SoftTimeout(BaseException):
    """Raised by the worker's own alarm. A BaseException so that `except Exception` in parsers does not eat it."""


def _resolve(spec: str) -> Callable[..., Any]:
    module_name, _, attr = spec.partition(":")
    return getattr(importlib.import_module(module_name), attr)


def _read_exact(fd: int, n: int) -> bytes | None:
    chunks = []
    while n:
        chunk = os.read(fd, n)
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _frame(obj: Any) -> bytes:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEADER.pack(len(data)) + data


def _worker_main(cfg: dict[str, Any]) -> None:
    """Entry point of a worker process (see `_BOOTSTRAP`)."""
    # Keep private copies of the protocol pipes, then point fds 0/1 elsewhere so that stray prints from libraries
    # cannot corrupt the protocol stream.
    in_fd, out_fd = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's business; it shuts us down at exit.

    memory_limit_mb = cfg.get("memory_limit_mb")
    if memory_limit_mb:
        import resource

        soft, hard = memory_limit_mb * 2**20, resource.getrlimit(resource.RLIMIT_AS)[1]
        if hard != resource.RLIM_INFINITY:
            soft = min(soft, hard)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))

    parent = os.getppid()

    def watch_parent() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watch_parent, name="parent-watch", daemon=True).start()

    try:
        handler = _resolve(cfg["handler"])
        if cfg.get("initializer"):
            _resolve(cfg["initializer"])()
    except BaseException:
        _write_all(out_fd, _frame(("fatal", traceback.format_exc())))
        return
    _write_all(out_fd, _frame(("ready", os.getpid())))

    def on_alarm(signum: int, frame: Any) -> None:
        raise _SoftTimeout

    # The soft alarm counts wall time, or the worker's own CPU time (`cpu_timeout`), so that a loaded machine does
    # not stop an item that would finish within its budget of computation.
    timer, alarm = (
        (signal.ITIMER_PROF, signal.SIGPROF) if cfg.get("soft_on_cpu") else (signal.ITIMER_REAL, signal.SIGALRM)
    )
    signal.signal(alarm, on_alarm)
    soft_timeout = cfg.get("soft_timeout") or 0.0
    while True:
        header = _read_exact(in_fd, _HEADER.size)
        if header is None:
            return
        body = _read_exact(in_fd, _HEADER.unpack(header)[0])
        if body is None:
            return
        message = pickle.loads(body)
        if message[0] != "batch":
            return
        for task_id, payload in message[1]:
            try:
                signal.setitimer(timer, soft_timeout)
                try:
                    value, error = handler(payload), None
                finally:
                    signal.setitimer(timer, 0)
            except _SoftTimeout:
                value, error = None, TIMEOUT
            except Exception as exc:  # noqa: BLE001 - any handler failure is reported, not fatal
                value, error = None, f"error: {type(exc).__name__}: {exc}"[:500]
            # The finish time (CLOCK_MONOTONIC is system-wide) starts the next item's clock in the parent, so a
            # parent that is slow to read (GIL held by training) cannot make the next item look slow.
            try:
                data = _frame(("result", task_id, value, error, time.monotonic()))
            except Exception as exc:  # noqa: BLE001
                data = _frame(("result", task_id, None, f"error: unpicklable result: {exc}"[:500], time.monotonic()))
            try:
                _write_all(out_fd, data)
            except OSError:
                return  # parent is gone


# --------------------------------------------------------------------------------------------------------------
# Parent side
# --------------------------------------------------------------------------------------------------------------


class _Worker:
    """Parent-side handle of one worker process."""

    def __init__(self, command: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, bufsize=0)
        self.in_fd = self.proc.stdin.fileno()
        self.out_fd = self.proc.stdout.fileno()
        os.set_blocking(self.out_fd, False)
        self.buffer = bytearray()
        self.started = time.monotonic()
        self.last_progress = self.started
        self.ready = False
        self.eof = False
        self.fatal: str | None = None
        self.inflight: deque[int] = deque()

    def send_batch(self, items: list[tuple[int, Any]]) -> None:
        _write_all(self.in_fd, _frame(("batch", items)))
        self.inflight.extend(task_id for task_id, _ in items)
        self.last_progress = time.monotonic()

    def read_messages(self) -> list[tuple]:
        """Read what is available without blocking; sets `eof` when the worker closed its end."""
        while True:
            try:
                chunk = os.read(self.out_fd, 1 << 16)
            except BlockingIOError:
                break
            except OSError:
                self.eof = True
                break
            if not chunk:
                self.eof = True
                break
            self.buffer += chunk
        messages = []
        while len(self.buffer) >= _HEADER.size:
            (size,) = _HEADER.unpack_from(self.buffer)
            if size > _MAX_FRAME_BYTES:
                self.eof = True  # protocol corruption: treat like a crash
                break
            if len(self.buffer) < _HEADER.size + size:
                break
            body = bytes(self.buffer[_HEADER.size : _HEADER.size + size])
            del self.buffer[: _HEADER.size + size]
            try:
                messages.append(pickle.loads(body))
            except Exception:  # noqa: BLE001
                self.eof = True
                break
        return messages

    def alive(self) -> bool:
        return not self.eof and self.proc.poll() is None

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            self.proc.kill()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            logger.error("Worker %d did not exit after SIGKILL", self.proc.pid)
        for stream in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                stream.close()

    def close(self, grace: float = 0.5) -> None:
        """Ask the worker to exit (closing its stdin), then kill it if it does not."""
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=grace)
        if self.proc.poll() is None:
            self.kill()
        else:
            with contextlib.suppress(OSError):
                self.proc.stdout.close()


_LIVE_POOLS: weakref.WeakSet[DeadlineProcessPool] = weakref.WeakSet()


@atexit.register
def _shutdown_live_pools() -> None:
    for pool in list(_LIVE_POOLS):
        pool.shutdown()


class DeadlineProcessPool:
    """A small, lazily started pool of worker processes that applies `handler` to inputs under a per-input deadline.

    Args:
        handler (`str`):
            `"module:function"` to call on each input in the workers. Inputs and return values must pickle. The
            module is imported without running the `__init__.py` of its parent packages.
        max_workers (`int`, *optional*, defaults to `2`):
            Most worker processes alive at once (shared by all threads using the pool).
        item_timeout (`float`, *optional*, defaults to `2.0`):
            Hard limit in seconds for one input, enforced by killing the worker.
        soft_timeout (`float`, *optional*):
            Alarm inside the worker that stops a slow input without killing the worker. Defaults to 75% of
            `item_timeout`; `0` disables it.
        cpu_timeout (`float`, *optional*):
            If given, the soft alarm is this many seconds of the worker's own CPU time instead (`soft_timeout` is
            then ignored): an input's verdict no longer depends on the machine's load, and `item_timeout` stays
            the hard wall-clock bound (set it above `cpu_timeout`).
        memory_limit_mb (`int`, *optional*, defaults to `2048`):
            Address-space limit (`RLIMIT_AS`) of each worker; `None` or `0` for none.
        batch_size (`int`, *optional*, defaults to `32`):
            Most inputs sent to a worker in one round trip.
        min_items_per_worker (`int`, *optional*, defaults to `8`):
            A call uses one worker per this many inputs (up to `max_workers`), so small calls stay on one worker.
        initializer (`str`, *optional*):
            `"module:function"` run once in each worker before it reports ready (imports, warm-up).
        startup_timeout (`float`, *optional*, defaults to `120.0`):
            Seconds a new worker may take to import and initialise.

    Example:
        ```python
        >>> pool = DeadlineProcessPool("math:factorial", item_timeout=1.0)
        >>> [outcome.value for outcome in pool.map([3, 4])]
        [6, 24]
        >>> pool.shutdown()
        ```
    """

    def __init__(
        self,
        handler: str,
        *,
        max_workers: int = 2,
        item_timeout: float = 2.0,
        soft_timeout: float | None = None,
        cpu_timeout: float | None = None,
        memory_limit_mb: int | None = 2048,
        batch_size: int = 32,
        min_items_per_worker: int = 8,
        initializer: str | None = None,
        startup_timeout: float = 120.0,
    ) -> None:
        if max_workers < 1:
            raise ValueError(f"max_workers must be >= 1, got {max_workers}")
        if item_timeout <= 0:
            raise ValueError(f"item_timeout must be > 0, got {item_timeout}")
        self.handler = handler
        self.max_workers = max_workers
        self.item_timeout = float(item_timeout)
        self.soft_timeout = 0.75 * self.item_timeout if soft_timeout is None else float(soft_timeout)
        self.soft_on_cpu = cpu_timeout is not None
        if cpu_timeout is not None:
            if not 0 < cpu_timeout <= item_timeout:
                raise ValueError(f"cpu_timeout must be in (0, item_timeout], got {cpu_timeout}")
            self.soft_timeout = float(cpu_timeout)
        self.memory_limit_mb = memory_limit_mb or None
        self.batch_size = max(1, batch_size)
        self.min_items_per_worker = max(1, min_items_per_worker)
        self.initializer = initializer
        self.startup_timeout = startup_timeout
        self._cond = threading.Condition()
        self._idle: list[_Worker] = []
        self._all: set[_Worker] = set()
        self._owner_pid = os.getpid()
        self._ever_ready = False
        self._stats = {"tasks": 0, "timeouts": 0, "crashes": 0, "started": 0}
        _LIVE_POOLS.add(self)

    # -- public API --------------------------------------------------------------------------------------------

    def map(self, payloads: Sequence[Any]) -> list[TaskOutcome]:
        """Apply the handler to every payload; one `TaskOutcome` per payload, in order.

        Never raises for a bad input (timeouts, crashes and handler exceptions become outcomes). Raises
        `WorkerStartupError` only if no worker of this pool has ever started, which means a configuration problem.
        """
        n = len(payloads)
        if n == 0:
            return []
        self._check_owner()
        results: list[TaskOutcome | None] = [None] * n
        pending: deque[int] = deque(range(n))
        wanted = min(self.max_workers, math.ceil(n / self.min_items_per_worker))
        try:
            workers = self._acquire(wanted)
        except WorkerStartupError:
            if not self._ever_ready:
                raise
            logger.exception("Could not start a worker; %d items left undone", n)
            return [TaskOutcome(error=UNAVAILABLE)] * n
        selector = selectors.DefaultSelector()
        for worker in workers:
            selector.register(worker.out_fd, selectors.EVENT_READ, worker)
        try:
            while workers and (pending or any(w.inflight for w in workers)):
                self._dispatch(workers, pending, payloads, selector)
                waiting = [w for w in workers if w.inflight or not w.ready]
                if not waiting:
                    continue
                deadline = min(self._deadline(w) for w in waiting)
                for key, _ in selector.select(timeout=max(0.0, deadline - time.monotonic())):
                    self._receive(key.data, results)
                now = time.monotonic()
                for worker in list(workers):
                    if not worker.ready and (
                        worker.fatal is not None or not worker.alive() or now >= self._deadline(worker)
                    ):
                        self._startup_failed(worker, workers, selector)
                    elif not worker.alive():
                        self._lose_worker(worker, CRASHED, results, pending, workers, selector)
                    elif worker.inflight and now >= self._deadline(worker):
                        self._lose_worker(worker, TIMEOUT, results, pending, workers, selector)
        except WorkerStartupError:
            if not self._ever_ready:
                raise
            logger.exception("Could not start a worker; the remaining items are left undone")
        finally:
            selector.close()
            self._release(workers)
        unfinished = sum(outcome is None for outcome in results)
        if unfinished:
            logger.error("No worker available: %d of %d items left undone", unfinished, n)
        with self._cond:
            self._stats["tasks"] += n
        return [outcome if outcome is not None else TaskOutcome(error=UNAVAILABLE) for outcome in results]

    def shutdown(self) -> None:
        """Stop all workers. The pool stays usable: a later `map` starts new ones."""
        if os.getpid() != self._owner_pid:
            return
        with self._cond:
            workers = list(self._all)
            self._all.clear()
            self._idle.clear()
            self._cond.notify_all()
        for worker in workers:  # closing stdin asks each worker to exit; give them a moment together
            with contextlib.suppress(OSError):
                worker.proc.stdin.close()
        for worker in workers:
            worker.close(grace=0.5)

    def stats(self) -> dict[str, int]:
        """Counters: inputs handled, timeouts, crashes and workers started, plus workers alive now."""
        with self._cond:
            return {**self._stats, "alive": len(self._all)}

    # -- internals ---------------------------------------------------------------------------------------------

    def _check_owner(self) -> None:
        # After os.fork the child must not talk to the parent's workers: forget them (without killing them).
        if os.getpid() != self._owner_pid:
            self._cond = threading.Condition()
            self._idle, self._all = [], set()
            self._owner_pid = os.getpid()

    def _command(self) -> tuple[list[str], dict[str, str]]:
        handler_module = self.handler.partition(":")[0]
        modules = [handler_module] + ([self.initializer.partition(":")[0]] if self.initializer else [])
        stub_packages: dict[str, list[str]] = {}
        for module in [*modules, __name__]:
            top, dot, _ = module.partition(".")
            # Only the top-level package is stubbed: its `__init__` is the heavy one. Subpackages (`codapo_trl.rewards`)
            # import normally, so that a handler module can use their re-exports.
            package = sys.modules.get(top) if dot else None
            if package is not None and getattr(package, "__path__", None) is not None:
                stub_packages[top] = [str(p) for p in package.__path__]
        config = {
            "stub_packages": stub_packages,
            "pool_module": __name__,
            "handler": self.handler,
            "initializer": self.initializer,
            "soft_timeout": self.soft_timeout,
            "soft_on_cpu": self.soft_on_cpu,
            "memory_limit_mb": self.memory_limit_mb,
        }
        env = dict(os.environ)
        # Pure-Python parsing needs no thread pools and no accelerator.
        env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="")
        # The parent's import path, so the worker imports the same modules (e.g. a checkout not installed).
        env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) if p else os.getcwd() for p in sys.path)
        return [sys.executable, "-c", _BOOTSTRAP, json.dumps(config)], env

    def _spawn_locked(self) -> _Worker:
        """Start a worker; the caller holds `self._cond`, so the `max_workers` count cannot be overshot."""
        command, env = self._command()
        try:
            worker = _Worker(command, env)
        except OSError as exc:
            raise WorkerStartupError(f"Could not start a worker for {self.handler!r}: {exc}") from exc
        self._all.add(worker)
        self._stats["started"] += 1
        return worker

    def _acquire(self, wanted: int) -> list[_Worker]:
        with self._cond:
            while True:
                taken: list[_Worker] = []
                while self._idle and len(taken) < wanted:
                    worker = self._idle.pop()
                    if worker.alive():
                        taken.append(worker)
                    else:  # died while idle
                        self._all.discard(worker)
                        worker.kill()
                to_start = min(wanted - len(taken), self.max_workers - len(self._all))
                if taken or to_start > 0:
                    try:
                        for _ in range(to_start):
                            taken.append(self._spawn_locked())
                    except WorkerStartupError:
                        if not taken:
                            raise
                    return taken
                self._cond.wait()

    def _release(self, workers: list[_Worker]) -> None:
        broken = []
        with self._cond:
            for worker in workers:
                if worker in self._all and worker.alive() and not worker.inflight:
                    self._idle.append(worker)
                else:  # e.g. the call was interrupted with items in flight: its replies would confuse the next user
                    self._all.discard(worker)
                    broken.append(worker)
            self._cond.notify_all()
        for worker in broken:
            worker.kill()

    def _deadline(self, worker: _Worker) -> float:
        if not worker.ready:
            return worker.started + self.startup_timeout
        return worker.last_progress + self.item_timeout

    def _dispatch(self, workers: list[_Worker], pending: deque[int], payloads: Sequence[Any], selector) -> None:
        for worker in list(workers):
            if not pending:
                return
            if not worker.ready or worker.inflight:
                continue
            size = min(self.batch_size, max(1, math.ceil(len(pending) / len(workers))))
            batch = [pending.popleft() for _ in range(min(size, len(pending)))]
            try:
                worker.send_batch([(index, payloads[index]) for index in batch])
            except OSError:  # died while idle: nothing of this batch ran, so re-queue all of it
                pending.extendleft(reversed(batch))
                worker.inflight.clear()
                self._replace(worker, workers, selector)

    def _receive(self, worker: _Worker, results: list[TaskOutcome | None]) -> None:
        for message in worker.read_messages():
            kind = message[0]
            if kind == "ready":
                worker.ready = True
                worker.last_progress = time.monotonic()
                self._ever_ready = True
            elif kind == "fatal":
                worker.fatal = message[1]
            elif kind == "result":
                _, task_id, value, error, finished_at = message
                if not worker.inflight or worker.inflight[0] != task_id:
                    worker.eof = True  # out-of-order reply: protocol error, treat as a crash
                    return
                worker.inflight.popleft()
                worker.last_progress = min(finished_at, time.monotonic())
                results[task_id] = TaskOutcome(value=value, error=error)
                if error == TIMEOUT:
                    self._note_failure("timeouts", "soft timeout", task_id)

    def _note_failure(self, counter: str, what: str, task_id: int) -> None:
        with self._cond:
            self._stats[counter] += 1
            first = self._stats[counter] == 1
        log = logger.warning if first else logger.debug
        log(
            "Worker %s on input %d; it is reported as failed. %s",
            what,
            task_id,
            "Further occurrences are logged at DEBUG level." if first else "",
        )

    def _lose_worker(
        self,
        worker: _Worker,
        error: str,
        results: list[TaskOutcome | None],
        pending: deque[int],
        workers: list[_Worker],
        selector,
    ) -> None:
        # The worker processes its batch in order, so the oldest in-flight item is the culprit.
        if worker.inflight:
            culprit = worker.inflight.popleft()
            results[culprit] = TaskOutcome(error=error)
            pending.extendleft(reversed(worker.inflight))
            worker.inflight.clear()
            self._note_failure(
                "timeouts" if error == TIMEOUT else "crashes",
                "hard timeout (worker killed)" if error == TIMEOUT else "worker crash",
                culprit,
            )
        self._replace(worker, workers, selector)

    def _replace(self, worker: _Worker, workers: list[_Worker], selector) -> None:
        selector.unregister(worker.out_fd)
        worker.kill()
        index = workers.index(worker)
        with self._cond:
            self._all.discard(worker)
            try:
                replacement = self._spawn_locked()
            except WorkerStartupError:
                del workers[index]
                self._cond.notify_all()
                if not self._ever_ready:
                    raise
                logger.exception("Could not start a replacement worker; continuing with fewer")
                return
        workers[index] = replacement
        selector.register(replacement.out_fd, selectors.EVENT_READ, replacement)

    def _startup_failed(self, worker: _Worker, workers: list[_Worker], selector) -> None:
        selector.unregister(worker.out_fd)
        worker.kill()
        workers.remove(worker)
        with self._cond:
            self._all.discard(worker)
            self._cond.notify_all()
        detail = worker.fatal or (
            f"exit code {worker.proc.returncode}" if worker.proc.returncode is not None else "start-up timed out"
        )
        if not self._ever_ready:
            raise WorkerStartupError(f"Worker for {self.handler!r} failed to start: {detail}")
        logger.error("A replacement worker for %r failed to start: %s", self.handler, detail)
