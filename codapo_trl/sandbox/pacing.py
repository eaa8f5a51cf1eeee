"""Pacing of the program's output pipes: how often the trainer's supervising thread may wake up to read them.

The executor ([`codapo_trl.sandbox.executor`]) reads a program's standard output and error in the trainer's own
process. Read as soon as they became readable, they let the program choose how often that thread woke up: a
program writing 2 bytes every 30 µs woke it about 25,000 times a second, 0.4 to 0.85 s of the trainer's CPU per run.
[`PacedSelector`] is the executor's selector with a rate limit on the pipes the program can write to:

- a read that filled the caller's buffer (`full_read` bytes) is free: such reads are bounded by the bytes read, and
  the executor stops counting output at `max_output_bytes` (the run is then stopped and every later read is
  charged, see [`PacedSelector.charge`]);
- any other read is charged to a token bucket per descriptor (a generic cell rate algorithm): `burst` reads at
  once, then one per `interval` seconds. Past that, the descriptor leaves the selector until its next read is due,
  while the kernel holds what the program writes meanwhile in the pipe, grown to `pipe_bytes` the first time it
  waits when the kernel allows it (the program blocks when it is full, and its wall-clock limit runs on; a pipe
  that never waits keeps its usual 64 KiB and costs nothing of the user's pipe quota);
- due times are rounded up to a grid of `interval` seconds shared by every descriptor of the selector, so that
  several paced pipes are read in one wake-up;
- [`PacedSelector.release`] puts every waiting descriptor back at once: when the program has exited, so that the
  rest of its output and the end of file are read without waiting for a token.

So however the program writes, one run wakes the trainer's thread for its paced pipes at most
`burst x (paced pipes) + duration / interval` times for small reads, plus `output bytes / full_read` times for full
ones. An honest program, which writes its output in a few pieces, never spends its burst and is read as before; a
fast writer is read in full buffers, with the pipe's capacity (not the interval) bounding how long it can wait.
"""

from __future__ import annotations

import contextlib
import fcntl
import math
import selectors
import time


class PacedSelector:
    """A `selectors.DefaultSelector` whose descriptors registered with `paced=True` wake the caller at most `burst`
    times at once and then once per `interval` seconds, except for reads that filled the caller's buffer.

    Args:
        interval (`float`): seconds between two charged reads of one descriptor once its burst is spent; also the
            grid the due times are rounded up to.
        burst (`int`): charged reads allowed at once, per descriptor.
        full_read (`int`): the size of the caller's reads; a read of this size (or more) is free.
        pipe_bytes (`int`): capacity asked for a paced pipe the first time it waits (`F_SETPIPE_SZ`; kept as it is
            when refused).
    """

    def __init__(self, interval: float, burst: int, full_read: int, pipe_bytes: int) -> None:
        self.interval, self.burst, self.full_read, self.pipe_bytes = interval, burst, full_read, pipe_bytes
        self._sel = selectors.DefaultSelector()
        self._t0 = time.monotonic()  # origin of the grid of wake-up times
        self._data: dict[int, object] = {}  # every watched descriptor (in the selector or waiting) -> its label
        self._due: dict[int, float] = {}  # paced descriptor -> the theoretical time of its next charged read
        self._waiting: dict[int, float] = {}  # descriptor out of the selector -> when it goes back in
        self._grown: dict[int, bool] = {}  # paced descriptor -> whether its pipe was grown

    def register(self, fd: int, events: int, data: object, paced: bool = False) -> None:
        """Watch `fd` for `events` (`selectors.EVENT_READ` or `EVENT_WRITE`); `paced` (a pipe read by the caller)
        puts it under the rate limit."""
        if paced:
            self._due[fd] = -math.inf
        self._sel.register(fd, events, data)
        self._data[fd] = data

    def unregister(self, fd: int) -> None:
        """Stop watching `fd` (in the selector or waiting for its next read)."""
        self._data.pop(fd, None)
        self._due.pop(fd, None)
        self._grown.pop(fd, None)
        if self._waiting.pop(fd, None) is None:
            self._sel.unregister(fd)

    def watching(self) -> bool:
        """Whether any descriptor is still watched (in the selector or waiting)."""
        return bool(self._data)

    def charge(self, fd: int, nbytes: int, now: float, free_if_full: bool = True) -> None:
        """Account for a read of `nbytes` from `fd` at `now` (`time.monotonic()`); nothing for a descriptor that is
        not paced. `free_if_full=False` charges a full read too. Past the burst, `fd` leaves the selector until its
        next read is due."""
        if fd not in self._due or (free_if_full and nbytes >= self.full_read):
            return
        due = max(self._due[fd], now - self.burst * self.interval) + self.interval
        self._due[fd] = due
        if due > now and fd not in self._waiting:
            if not self._grown.get(fd):  # the first time it waits: room for what the program writes meanwhile
                self._grown[fd] = True
                with contextlib.suppress(OSError):  # past the user's pipe quota or pipe-max-size: kept as it is
                    if fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ) < self.pipe_bytes:
                        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, self.pipe_bytes)
            self._sel.unregister(fd)
            self._waiting[fd] = self._t0 + math.ceil((due - self._t0) / self.interval) * self.interval

    def release(self) -> None:
        """Put every waiting descriptor back in the selector now (their next charged reads are still paced)."""
        for fd in list(self._waiting):
            self._resume(fd)

    def select(self, timeout: float) -> list[tuple[selectors.SelectorKey, int]]:
        """Like `selectors.BaseSelector.select`: the descriptors ready within `timeout` seconds (an empty list when
        none was). A waiting descriptor goes back into the selector when its next read is due."""
        end = time.monotonic() + timeout
        while True:
            now = time.monotonic()
            for fd, when in list(self._waiting.items()):
                if when <= now:
                    self._resume(fd)
            wait = end - now
            if self._waiting:
                wait = min(wait, min(self._waiting.values()) - now)
            wait = max(0.0, wait)
            if self._sel.get_map():
                ready = self._sel.select(wait)
            else:  # only waiting descriptors: sleep until the first is due
                time.sleep(wait)
                ready = []
            if ready or not self._waiting or time.monotonic() >= end:
                return ready

    def _resume(self, fd: int) -> None:
        del self._waiting[fd]
        self._sel.register(fd, selectors.EVENT_READ, self._data[fd])

    def close(self) -> None:
        """Close the underlying selector (the descriptors themselves stay open)."""
        self._sel.close()
        self._data.clear()
        self._due.clear()
        self._waiting.clear()
        self._grown.clear()
