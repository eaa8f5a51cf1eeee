"""The pacing of the program's output pipes (`codapo_trl.sandbox.pacing`), on plain pipes: a burst of reads, then
one per interval; full reads free; waiting pipes read together and released at once; a trickling writer wakes the
reader a bounded number of times whatever it writes."""

import fcntl
import os
import selectors
import threading
import time

import pytest

from codapo_trl.sandbox.pacing import PacedSelector


@pytest.fixture
def pipes():
    made = []

    def make():
        r, w = os.pipe()
        made.extend((r, w))
        return r, w

    yield make
    for fd in made:
        os.close(fd)


def _read_once(sel: PacedSelector, timeout: float) -> list[int]:
    """The descriptors ready within `timeout`, each read once and charged."""
    fds = []
    for key, _ in sel.select(timeout):
        data = os.read(key.fd, 1 << 16)
        sel.charge(key.fd, len(data), time.monotonic())
        fds.append(key.fd)
    return fds


def test_a_burst_then_one_read_per_interval(pipes):
    r, w = pipes()
    sel = PacedSelector(interval=0.1, burst=3, full_read=1 << 16, pipe_bytes=1 << 16)
    sel.register(r, selectors.EVENT_READ, "out", paced=True)
    for _ in range(3):  # the burst: read as soon as written
        os.write(w, b"x")
        assert _read_once(sel, 1.0) == [r]
    os.write(w, b"x")
    assert _read_once(sel, 1.0) == [r]  # the 4th read is allowed, but spends the bucket: the pipe waits now
    os.write(w, b"x")
    start = time.monotonic()
    assert sel.select(0.02) == []  # data is there, but the pipe is not read before its turn
    assert sel.watching()
    assert _read_once(sel, 1.0) == [r]
    assert 0.05 <= time.monotonic() - start < 0.5  # its turn came about one interval later
    sel.close()


def test_full_reads_are_free_and_unpaced_descriptors_never_wait(pipes):
    (r, w), (s, v) = pipes(), pipes()
    sel = PacedSelector(interval=10.0, burst=1, full_read=4096, pipe_bytes=1 << 16)
    sel.register(r, selectors.EVENT_READ, "out", paced=True)
    sel.register(s, selectors.EVENT_READ, "status")
    for _ in range(20):
        os.write(w, b"y" * 4096)
        os.write(v, b"z")
        ready = sel.select(1.0)
        assert sorted(key.fd for key, _ in ready) == sorted([r, s])
        for key, _ in ready:
            data = os.read(key.fd, 4096)
            sel.charge(key.fd, len(data), time.monotonic())
    sel.charge(r, 4096, time.monotonic(), free_if_full=False)  # charged whatever its size: the burst is spent
    sel.charge(r, 4096, time.monotonic(), free_if_full=False)
    os.write(w, b"y" * 4096)
    assert sel.select(0.05) == []  # a 10 s interval: waiting
    sel.close()


def test_waiting_pipes_share_wake_ups_and_are_released_at_once(pipes):
    (r1, w1), (r2, w2) = pipes(), pipes()
    sel = PacedSelector(interval=0.2, burst=1, full_read=1 << 16, pipe_bytes=1 << 16)
    sel.register(r1, selectors.EVENT_READ, "out", paced=True)
    sel.register(r2, selectors.EVENT_READ, "err", paced=True)
    for r, w in ((r1, w1), (r2, w2)):  # both buckets spent, 30 ms apart
        for _ in range(2):
            os.write(w, b"a")
            assert _read_once(sel, 1.0) == [r]
        time.sleep(0.03)
    os.write(w1, b"b")
    os.write(w2, b"b")
    assert sorted(_read_once(sel, 1.0)) == sorted([r1, r2])  # one wake-up for both: their turns share a grid
    for _ in range(3):  # spend what the wait for the grid gave back (at most one read each)
        os.write(w1, b"c")
        os.write(w2, b"c")
        _read_once(sel, 0.0)
    assert sel.select(0.01) == []  # both wait, with data in their pipes
    sel.release()  # e.g. the program has exited: read what is left now
    assert sorted(key.fd for key, _ in sel.select(0.0)) == sorted([r1, r2])
    sel.unregister(r1)  # whether waiting or not
    sel.unregister(r2)
    assert not sel.watching()
    sel.close()


def test_a_waiting_pipe_is_grown(pipes):
    r, w = pipes()
    grown = 256 * 1024
    sel = PacedSelector(interval=1.0, burst=1, full_read=1 << 16, pipe_bytes=grown)
    sel.register(r, selectors.EVENT_READ, "out", paced=True)
    assert fcntl.fcntl(r, fcntl.F_GETPIPE_SZ) == 65536  # never waited: the usual size
    for _ in range(2):  # the second read spends the bucket: the pipe waits
        os.write(w, b"a")
        assert _read_once(sel, 1.0) == [r]
    assert fcntl.fcntl(r, fcntl.F_GETPIPE_SZ) >= grown  # room for what the writer sends while the pipe waits
    sel.close()


@pytest.mark.timeout(30)
def test_a_trickling_writer_wakes_the_reader_a_bounded_number_of_times(pipes):
    r, w = pipes()
    interval, burst, duration = 0.02, 8, 1.0
    stop = threading.Event()

    def trickle():
        while not stop.is_set():
            try:
                os.write(w, b"ab")
            except OSError:
                return
            time.sleep(0.00003)

    writer = threading.Thread(target=trickle, daemon=True)
    sel = PacedSelector(interval=interval, burst=burst, full_read=1 << 16, pipe_bytes=1 << 16)
    sel.register(r, selectors.EVENT_READ, "out", paced=True)
    writer.start()
    reads, received = 0, 0
    end = time.monotonic() + duration
    try:
        while time.monotonic() < end:
            for key, _ in sel.select(end - time.monotonic()):
                data = os.read(key.fd, 1 << 16)
                sel.charge(key.fd, len(data), time.monotonic())
                reads += 1
                received += len(data)
    finally:
        stop.set()
        writer.join(5)
        sel.close()
    assert received > 1000  # the writer did trickle
    assert reads <= burst + duration / interval + 2, reads  # unpaced: one read per write, thousands
