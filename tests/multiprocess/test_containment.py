"""Containment of every resource a program can take from the host (issue 61, part 2), in every layer configuration
the sandbox accepts on this machine.

One hostile program per resource, each bounded even if the defence it tests failed: it stops at a modest size above
the limit (so a failure holds a few hundred MiB for a few seconds, never the host's memory), it runs under the
sandbox's wall-clock and memory limits, and it reports how much it held; the test asserts the bound. Each has an
honest counterpart (ordinary memory, a temporary file, the standard library's own native modules) that must keep
working. Resources no pure-Python program can reach (SysV shared memory, aio, inotify, message queues and
semaphores need native code, which the layers refuse: see `test_written_code_is_not_executed` and
`test_native_modules_outside_the_stdlib_are_hidden`) are tested on the seccomp filter itself, for real as root in a
child process, and on the IPC namespace alone. New executable memory is tried from pure Python (mmap), from native
code (ctypes, with the layers that mask it off) and from an opted-in native module (cffi). docs/isolation.md's
resource table points at these tests.

Configurations: "all" (every layer the detector finds) and each single layer off that the floor accepts; those it
refuses are listed with the reason in `test_refused_configurations_name_the_missing_layer`. The user-namespace
configuration of an unprivileged trainer cannot be chosen by a root trainer: it is checked as `nobody` in
`tests/multiprocess/test_sandbox.py::test_unprivileged_user_degrades_gracefully`.
"""

from __future__ import annotations

import glob
import json
import os
import struct
import subprocess
import sys

import pytest
from helpers_seccomp import bpf_verdict

from codapo_trl.sandbox import (
    _SYSCALLS,
    Sandbox,
    SandboxConfig,
    SandboxFloorError,
    Status,
    _build_seccomp_filter,
    detect_isolation,
    floor_gaps,
)


MEMORY_MB = 256
FAST = {"timeout": 6.0, "memory_mb": MEMORY_MB, "max_output_bytes": 1 << 16}
_ALL = detect_isolation(SandboxConfig(**FAST))
CANDIDATES = ["all"] + [f"no-{layer}" for layer in _ALL.active]


def _config(name: str, **extra) -> SandboxConfig:
    disable = frozenset() if name == "all" else frozenset({name[3:]})
    return SandboxConfig(**FAST, disable=disable, **extra)


def _gaps(name: str, **extra) -> list[str]:
    config = _config(name, **extra)
    return floor_gaps(detect_isolation(config).active, config.allow_fork, True, config.allow_native_modules)


ACCEPTED = [name for name in CANDIDATES if not _gaps(name)]
REFUSED = [name for name in CANDIDATES if _gaps(name)]
CONFIGS = [pytest.param(name, id=name) for name in ACCEPTED]
_SANDBOXES: dict[tuple, Sandbox] = {}


def _sandbox(name: str, **extra) -> Sandbox:
    key = (name, tuple(sorted(extra.items())))
    if key not in _SANDBOXES:
        _SANDBOXES[key] = Sandbox(_config(name, **extra), max_workers=1)
    return _SANDBOXES[key]


@pytest.fixture(scope="module", autouse=True)
def _close_sandboxes():
    yield
    for sb in _SANDBOXES.values():
        sb.close()
    _SANDBOXES.clear()


def _held(result) -> int:
    """The last `held N` line a program printed (MiB it held at once), 0 if none."""
    held = [int(line.split()[1]) for line in result.stdout.splitlines() if line.startswith("held ")]
    return held[-1] if held else 0


# ---------------------------------------------------------------------------------------------------- memory

ANONYMOUS = """
import mmap
kind, held, chunks = {kind!r}, 0, []
while held < {cap}:
    if kind == "heap":
        chunks.append(bytearray(32 << 20))  # zero-filled: touched
    else:  # MAP_SHARED anonymous memory: shmem, not the heap
        m = mmap.mmap(-1, 32 << 20)
        for i in range(0, 32 << 20, 4096):
            m[i] = 1
        chunks.append(m)
    held += 32
    print("held", held, flush=True)
"""


@pytest.mark.parametrize("kind", ["heap", "shared_mapping"])
@pytest.mark.parametrize("config", CONFIGS)
def test_anonymous_memory_is_bounded(config, kind):
    cap = 2 * MEMORY_MB
    result = _sandbox(config).run(ANONYMOUS.format(kind=kind, cap=cap))
    assert result.status in (Status.MEMORY, Status.RUNTIME_ERROR), result
    assert _held(result) <= MEMORY_MB, (config, kind, result.stdout[-200:])


FORKED = """
import os, time
r, w = os.pipe()
kids = []
for _ in range(6):
    pid = os.fork()
    if pid == 0:
        block = bytearray(100 << 20)
        os.write(w, b"x")
        time.sleep(3)
        os._exit(0)
    kids.append(pid)
time.sleep(1.5)
alive = sum(os.waitpid(pid, os.WNOHANG)[0] == 0 for pid in kids)
print("held", 100 * min(alive, len(os.read(r, 64))), flush=True)  # the PID namespace ends the children
"""


@pytest.mark.parametrize("config", CONFIGS)
def test_memory_of_forked_processes_is_bounded_together(config):
    """With `allow_fork=True` each process has its own RLIMIT_AS: the cgroup bounds their sum (memory_mb + 128
    MiB), and without the cgroup layer the floor refuses. Six children hold 100 MiB each (600 MiB if unbounded)."""
    if _gaps(config, allow_fork=True):
        with pytest.raises(SandboxFloorError, match="cgroup"):
            _sandbox(config, allow_fork=True)
        return
    result = _sandbox(config, allow_fork=True).run(FORKED)
    assert _held(result) <= MEMORY_MB + 128, (config, result)


MEMFD = """
import os
held, fds = 0, []
try:
    while held < {cap}:
        fd = os.memfd_create("m")
        fds.append(fd)
        for _ in range(16):  # RLIMIT_FSIZE is 16 MiB per file: many files
            os.write(fd, b"x" * (1 << 20))
            held += 1
        print("held", held, flush=True)
except OSError as exc:
    print("refused", exc)
"""


@pytest.mark.parametrize("config", CONFIGS)
def test_memfd_is_refused(config):
    """memfd files are not counted by RLIMIT_AS (56 of them held 896 MiB beyond the limit in round 4): seccomp
    refuses `memfd_create`, in every configuration the floor accepts."""
    result = _sandbox(config).run(MEMFD.format(cap=MEMORY_MB + 64))
    assert "refused" in result.stdout and _held(result) == 0, (config, result)


FILES = """
import os, tempfile
held, n = 0, 0
dirs = [".", "/tmp", "/var/tmp", "/dev/shm", tempfile.gettempdir()]
for d in dirs:
    while held < {cap}:
        try:
            with open(os.path.join(d, "f%d" % n), "wb") as f:
                f.write(b"x" * (8 << 20))
        except OSError:
            break
        n += 1
        held += 8
        print("held", held, flush=True)
"""


@pytest.mark.parametrize("config", CONFIGS)
def test_files_written_are_bounded_in_total(config):
    """Files in the working directory and the private /tmp, /var/tmp and /dev/shm are tmpfs memory: bounded by the
    tmpfs sizes (`tmpfs_mb` + 3 x 16 MiB), whatever their number (each is at most `max_file_mb`)."""
    sb = _sandbox(config)
    result = sb.run(FILES.format(cap=sb.config.tmpfs_mb + 3 * 16 + 96))
    assert _held(result) <= sb.config.tmpfs_mb + 3 * 16, (config, result.stdout[-200:])


POSIX_SHM = """
import os, _posixshmem
held = 0
try:
    while held < {cap}:
        fd = _posixshmem.shm_open("/codapo%d" % held, os.O_CREAT | os.O_RDWR, 0o600)
        os.posix_fallocate(fd, 0, 8 << 20)
        held += 8
        print("held", held, flush=True)
except OSError as exc:
    print("refused", exc)
"""


@pytest.mark.parametrize("config", CONFIGS)
def test_posix_shared_memory_is_bounded(config):
    """POSIX shared memory is a file in /dev/shm: the private 16 MiB tmpfs (mountns), or refused (Landlock: no
    writes outside the working directory)."""
    result = _sandbox(config).run(POSIX_SHM.format(cap=160))
    assert "refused" in result.stdout and _held(result) <= 16, (config, result)


HONEST = """
import _bisect, _decimal, _heapq, _json, _pickle, array, math, mmap, os, select, signal, tempfile, unicodedata, zlib
got = []
signal.signal(signal.SIGUSR1, lambda *a: got.append(1))
os.kill(os.getpid(), signal.SIGUSR1)
block = bytearray(64 << 20)
m = mmap.mmap(-1, 8 << 20)
m[:5] = b"hello"
with tempfile.TemporaryFile() as f:
    f.write(b"y" * (4 << 20))
    f.seek(0)
    size = len(f.read())
with open("scratch.txt", "w") as f:
    f.write("ok")
print(len(block) >> 20, m[:5].decode(), size >> 20, open("scratch.txt").read(), math.isqrt(10**20),
      str(_decimal.Decimal(1) / 7)[:5], _json.encode_basestring("a"), zlib.crc32(b"a"), len(got))
"""


@pytest.mark.parametrize("config", CONFIGS)
def test_honest_program_keeps_its_memory_files_and_native_modules(config):
    result = _sandbox(config).run(HONEST)
    assert result.ok, (config, result)
    expected = ["64", "hello", "4", "ok", "10000000000", "0.142", '"a"', "3904355907", "1"]
    assert result.stdout.split() == expected, result


SIGNALS = """
import os, signal
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGRTMIN + 1])
for _ in range(2000):  # each queued real-time signal is a kernel object counted against the user
    os.kill(os.getpid(), signal.SIGRTMIN + 1)  # past the limit the kernel drops it silently
with open("/proc/self/status") as f:
    queued = next(line.split()[1] for line in f if line.startswith("SigQ:"))  # "queued/limit"
print("held", queued.split("/")[0], "of", queued.split("/")[1])
"""


@pytest.mark.parametrize("config", CONFIGS)
def test_queued_signals_are_bounded(config):
    """Pending signals are counted per user (the trainer's, in a user namespace): RLIMIT_SIGPENDING is 256."""
    result = _sandbox(config).run(SIGNALS)
    assert 0 < _held(result) <= 256 and result.stdout.split()[-1] == "256", (config, result)


PIPES = """
import fcntl, os
pipes, held = [], 0
for _ in range(30):
    r, w = os.pipe()
    pipes.append((r, w))
    try:
        fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, 1 << 20)
    except OSError:
        pass
    held += fcntl.fcntl(w, fcntl.F_GETPIPE_SZ)
print("held", held >> 20, "KiB", held >> 10)
"""


@pytest.mark.parametrize("config", CONFIGS)
def test_pipe_buffers_are_bounded(config):
    """Pipe buffers are counted per user: growing one (`F_SETPIPE_SZ`) is refused by seccomp, so 30 pipes hold
    their default 64 KiB each (30 MiB at the 1 MiB the kernel would allow)."""
    result = _sandbox(config).run(PIPES)
    assert result.ok and result.stdout.split()[-1] == str(30 * 64), (config, result)


# ---------------------------------------------------------------------------------------------------- native code

WRITTEN_CODE = """
import glob, importlib.machinery, importlib.util, os, sys
out = []
def load(path):
    loader = importlib.machinery.ExtensionFileLoader("_json", path)
    importlib.util.module_from_spec(importlib.util.spec_from_file_location("_json", path, loader=loader))
    out.append("loaded " + path)
# a native module the program "wrote" (a copy of the standard library's: real code, harmless)
with open(glob.glob(sys.base_prefix + "/lib/python3*/lib-dynload/_json*.so")[0], "rb") as f:
    code = f.read()
for d in (".", "/tmp", "/var/tmp", "/dev/shm"):
    try:
        with open(d + "/mod.so", "wb") as f:
            f.write(code)
        load(d + "/mod.so")
    except Exception:
        pass
try:
    fd = os.memfd_create("mod")
    os.write(fd, code)
    load("/proc/self/fd/%d" % fd)
except Exception:
    pass
try:  # writing into its own code (nothing is written if the open succeeds)
    open("/proc/self/mem", "r+b").close()
    out.append("/proc/self/mem writable")
except Exception:
    pass
print(out)
"""


@pytest.mark.parametrize("config", CONFIGS)
def test_written_code_is_not_executed(config):
    """A module written to any writable place (noexec tmpfs), into a memfd (refused by seccomp) or into its own
    memory through /proc/self/mem (Landlock's read roots, the audit hook) never runs."""
    result = _sandbox(config).run(WRITTEN_CODE)
    assert result.ok and result.stdout.strip() == "[]", (config, result)


def _foreign_native_modules() -> list[str]:
    """Native modules outside the runner's standard library that exist on this machine."""
    python = _ALL.python_executable
    prefix = os.path.dirname(os.path.dirname(python))
    found = glob.glob(prefix + "/lib/python3*/site-packages/**/*.so", recursive=True)[:20]
    found += glob.glob("/usr/lib/python3/dist-packages/*.so") + glob.glob("/usr/local/lib/python3*/*-packages/*.so")
    if prefix != "/usr":  # another installation's own ctypes, built for the same Python version
        found += glob.glob("/usr/lib/python3*/lib-dynload/_ctypes*.so")
    return sorted(set(found))


FOREIGN = """
import importlib.machinery, importlib.util, sys
out = []
for path in {paths!r}:
    name = path.rsplit("/", 1)[1].split(".")[0]
    try:
        loader = importlib.machinery.ExtensionFileLoader(name, path)
        importlib.util.module_from_spec(importlib.util.spec_from_file_location(name, path, loader=loader))
        out.append(path)
    except Exception:
        pass
try:  # found by the import system in those directories, as `import` would with them on the path
    spec = importlib.machinery.PathFinder.find_spec("_cffi_backend", {dirs!r})
    importlib.util.module_from_spec(spec)
    out.append("import _cffi_backend")
except Exception:
    pass
print(out)
"""


@pytest.mark.parametrize("config", CONFIGS)
def test_native_modules_outside_the_stdlib_are_hidden(config):
    paths = _foreign_native_modules()
    if not any("_cffi_backend" in p for p in paths):
        pytest.skip("no _cffi_backend on this machine to try")
    dirs = sorted({os.path.dirname(p) for p in paths})
    result = _sandbox(config).run(FOREIGN.format(paths=paths, dirs=dirs))
    assert result.ok and result.stdout.strip() == "[]", (config, result)


def test_allow_native_modules_lets_them_load():
    """The opt-in: with `allow_native_modules=True` site-packages' `_cffi_backend` loads (the test above can fail)."""
    paths = [p for p in _foreign_native_modules() if "_cffi_backend" in p]
    if not paths:
        pytest.skip("no _cffi_backend on this machine to try")
    result = _sandbox("all", allow_native_modules=True).run(FOREIGN.format(paths=paths[:1], dirs=[]))
    assert result.ok and paths[0] in result.stdout, result


# ---------------------------------------------------------------------------------------------------- executable memory

EXEC_MEMORY = """
import _posixshmem, glob, math, mmap, os, sys, threading
import _decimal, _hashlib, _json, _sqlite3, pyexpat, zlib
R, W, X = mmap.PROT_READ, mmap.PROT_WRITE, mmap.PROT_EXEC
out = []
def attempt(name, make):
    try:
        make().close()
        out.append(name + ":ok")
    except PermissionError:
        out.append(name + ":refused")
    except OSError as exc:
        out.append(name + ":" + type(exc).__name__)
lib = glob.glob(sys.base_prefix + "/lib/python3*/lib-dynload/_json*.so")[0]
lib_fd = os.open(lib, os.O_RDONLY)
with open(lib, "rb") as f:
    code = f.read()
# new executable memory: anonymous, or a copy-on-write library made writable
attempt("anon_rwx", lambda: mmap.mmap(-1, 1 << 16, prot=R | W | X))
attempt("anon_rx", lambda: mmap.mmap(-1, 1 << 16, prot=R | X))
attempt("anon_shared_rwx", lambda: mmap.mmap(-1, 1 << 16, flags=mmap.MAP_SHARED, prot=R | W | X))
attempt("lib_private_rwx", lambda: mmap.mmap(lib_fd, 4096, flags=mmap.MAP_PRIVATE, prot=R | W | X))
# what honest programs and the dynamic loader do
attempt("anon_rw", lambda: mmap.mmap(-1, 1 << 16))
attempt("lib_private_rx", lambda: mmap.mmap(lib_fd, 4096, flags=mmap.MAP_PRIVATE, prot=R | X))
def written(where):  # a file the program writes: in a directory, or in /dev/shm as multiprocessing does
    if where == "/dev/shm":
        fd = _posixshmem.shm_open("/codapo-code", os.O_CREAT | os.O_RDWR, 0o600)
    else:
        fd = os.open(where + "/code.bin", os.O_CREAT | os.O_RDWR, 0o600)
    os.write(fd, code)
    return fd
for d in (".", "/tmp", "/var/tmp", "/dev/shm"):  # mapped executable / read-only
    try:
        fd = written(d)
    except OSError:
        continue  # not writable here (Landlock, the audit hook)
    attempt("written_rx" + d, lambda: mmap.mmap(fd, 4096, flags=mmap.MAP_PRIVATE, prot=R | X))
    attempt("written_r" + d, lambda: mmap.mmap(fd, 4096, access=mmap.ACCESS_READ))
if {fork}:  # a child inherits the filter
    pid = os.fork()
    if pid == 0:
        try:
            mmap.mmap(-1, 4096, prot=R | W | X)
            os._exit(3)
        except PermissionError:
            os._exit(4)
    out.append("child_anon_rwx:" + {{3: "ok", 4: "refused"}}.get(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), "?"))
done = []
threads = [threading.Thread(target=lambda: done.append(math.factorial(2000) > 0)) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
out.append("threads:%d" % len(done))
out.append("modules:" + _json.encode_basestring("a") + str(_decimal.Decimal(1) / 8) + str(zlib.crc32(b"a")))
print(" ".join(out))
"""


@pytest.mark.parametrize("fork", [False, True], ids=["one-process", "allow_fork"])
@pytest.mark.parametrize("config", CONFIGS)
def test_no_new_executable_memory(config, fork):
    """No new executable memory (issue 61: a memory-unsafe code object wrote machine code into an RWX mapping and
    ran it, redteam61 `oob_native`): seccomp refuses anonymous executable mappings and writable executable ones
    (a private copy of a library), the mountns layer's noexec mounts every file the program writes (with
    allow_fork: /dev/shm too), and a forked child inherits it all. Honest counterparts in the same run: anonymous
    read-write memory, the loader's read-only executable mapping of a library, a read-only mapping of a written
    file, extension modules and threads."""
    if fork and _gaps(config, allow_fork=True):
        pytest.skip("allow_fork is refused without the cgroup layer (test_memory_of_forked_processes_...)")
    result = _sandbox(config, **({"allow_fork": True} if fork else {})).run(EXEC_MEMORY.format(fork=fork))
    assert result.ok, (config, result)
    got = dict(item.split(":", 1) for item in result.stdout.split())
    for hostile in ("anon_rwx", "anon_rx", "anon_shared_rwx", "lib_private_rwx", "written_rx."):
        assert got.pop(hostile) == "refused", (config, hostile, result.stdout)
    for honest in ("anon_rw", "lib_private_rx", "written_r."):
        assert got.pop(honest) == "ok", (config, honest, result.stdout)
    assert got.pop("threads") == "4" and got.pop("modules") == '"a"0.1253904355907', (config, result.stdout)
    if fork:
        assert got.pop("child_anon_rwx") == "refused", (config, result.stdout)
        assert "written_rx/dev/shm" in got, (config, result.stdout)  # writable with allow_fork (multiprocessing)
    for name, outcome in got.items():  # the other writable directories of this configuration
        assert outcome == ("refused" if name.startswith("written_rx") else "ok"), (config, name, result.stdout)


# Raw system calls, for which a program needs native code: ctypes, which the mountns layer masks and the audit hook
# refuses, so these runs have seccomp as the only layer that could refuse them (below the floor, on purpose).
NATIVE_EXEC_MEMORY = """
import ctypes, mmap, os
NR = {nrs!r}
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.syscall.argtypes = [ctypes.c_long] * 7
page = mmap.mmap(-1, 1 << 16)
addr = ctypes.addressof(ctypes.c_char.from_buffer(page))
out = []
def call(label, name, *args):
    ctypes.set_errno(0)
    rc = libc.syscall(NR[name], *args, *[0] * (6 - len(args)))
    err = ctypes.get_errno()
    try:
        if rc == -1:
            raise OSError(err, os.strerror(err))
        out.append(label + ":ok")
    except PermissionError:
        out.append(label + ":refused")
    except OSError as exc:
        out.append(label + ":" + type(exc).__name__)
R, W, X = 1, 2, 4
call("mprotect_rx", "mprotect", addr, 4096, R | X)
call("mprotect_rwx", "mprotect", addr + 4096, 4096, R | W | X)
call("pkey_mprotect_rx", "pkey_mprotect", addr + 8192, 4096, R | X, -1)
call("mmap_anon_rwx", "mmap", 0, 4096, R | W | X, 0x22, -1, 0)  # MAP_PRIVATE | MAP_ANONYMOUS
call("personality_read_implies_exec", "personality", 0x0400000)
call("mprotect_r", "mprotect", addr + 12288, 4096, R)  # honest: lowering and restoring a protection
call("mprotect_rw", "mprotect", addr + 12288, 4096, R | W)
call("mmap_anon_rw", "mmap", 0, 4096, R | W, 0x22, -1, 0)
call("personality_query", "personality", 0xFFFFFFFF)
page[12288] = 1  # still writable
print(" ".join(out))
"""
_EXEC_NRS = {
    "x86_64": {"mmap": 9, "mprotect": 10, "pkey_mprotect": 329, "personality": 135},
    "aarch64": {"mmap": 222, "mprotect": 226, "pkey_mprotect": 288, "personality": 92},
}


def test_native_code_cannot_make_memory_executable():
    """With native code (here ctypes, unmasked on purpose: mountns and the audit hook are off) a program calls
    mprotect, pkey_mprotect, mmap and personality itself: seccomp refuses every way to executable memory and lets
    the honest calls through. The same program without seccomp succeeds, so the refusals are the filter's."""
    if "seccomp" not in _ALL.active or os.uname().machine not in _EXEC_NRS:
        pytest.skip("needs the seccomp layer on x86_64 or aarch64")
    program = NATIVE_EXEC_MEMORY.format(nrs=_EXEC_NRS[os.uname().machine])
    hostile = ("mprotect_rx", "mprotect_rwx", "pkey_mprotect_rx", "mmap_anon_rwx", "personality_read_implies_exec")
    for off, expected in ((frozenset(), "refused"), (frozenset({"seccomp"}), "ok")):
        config = SandboxConfig(**FAST, disable=frozenset({"mountns", "audit"}) | off, allow_below_floor=True)
        with Sandbox(config, max_workers=1) as sb:
            result = sb.run(program)
        assert result.ok, (off, result)
        got = dict(item.split(":", 1) for item in result.stdout.split())
        assert {name: got.pop(name) for name in hostile} == dict.fromkeys(hostile, expected), (off, result.stdout)
        assert got == dict.fromkeys(("mprotect_r", "mprotect_rw", "mmap_anon_rw", "personality_query"), "ok"), got


CFFI_EXEC_MEMORY = """
import importlib.machinery, mmap, sys
class SitePackages:  # top-level modules found there too, as they would be with `site`
    @staticmethod
    def find_spec(name, path=None, target=None):
        return importlib.machinery.PathFinder.find_spec(name, {dirs!r}) if path is None else None
sys.meta_path.append(SitePackages)
import cffi
ffi = cffi.FFI()
ffi.cdef("int mprotect(void *addr, size_t len, int prot); int abs(int);")
libc = ffi.dlopen(None)
page = mmap.mmap(-1, 1 << 16)
out = ["abs:%d" % libc.abs(-3), "mprotect_r:%d" % libc.mprotect(ffi.from_buffer(page), 4096, 1)]
ffi.errno = 0
out.append("mprotect_rx:%d,%d" % (libc.mprotect(ffi.from_buffer(page), 4096, 5), ffi.errno))
try:  # a callback is a trampoline libffi writes into executable memory
    out.append("callback:%d" % ffi.callback("int(int)", lambda x: x + 1)(1))
except MemoryError:
    out.append("callback:refused")
print(" ".join(out))
"""


def test_allow_native_modules_gives_no_executable_memory():
    """The opt-in `allow_native_modules=True` gives programs native code (site-packages' cffi calls any libc
    function), but no new executable memory: seccomp refuses mprotect to PROT_EXEC (EPERM) and libffi's callback
    trampolines. Calls into existing code still work."""
    python = _ALL.python_executable
    dirs = glob.glob(os.path.dirname(os.path.dirname(python)) + "/lib/python3*/site-packages")
    if not any(os.path.isdir(os.path.join(d, "cffi")) for d in dirs):
        pytest.skip("no cffi in the runner interpreter's site-packages on this machine")
    result = _sandbox("all", allow_native_modules=True).run(CFFI_EXEC_MEMORY.format(dirs=dirs))
    assert result.ok, result
    assert result.stdout.split() == ["abs:3", "mprotect_r:0", "mprotect_rx:-1,1", "callback:refused"], result


NUMPY = """
import importlib.machinery, sys
class SitePackages:
    @staticmethod
    def find_spec(name, path=None, target=None):
        return importlib.machinery.PathFinder.find_spec(name, {dirs!r}) if path is None else None
sys.meta_path.append(SitePackages)
import numpy
a = numpy.arange(1, 10, dtype=float).reshape(3, 3) + numpy.eye(3)  # [[2, 2, 3], [4, 6, 6], [7, 8, 10]]: det -2
print(round(float(numpy.linalg.det(a)), 6), int((a @ numpy.linalg.inv(a)).round().trace()))
"""


def test_numpy_still_loads_with_allow_native_modules():
    """The honest counterpart: numpy (its extension modules, OpenBLAS and its threads) loads and computes under the
    filter. In the `no-audit` configuration: the audit hook refuses numpy's `import ctypes` with `PermissionError`,
    which numpy does not catch (as before this filter)."""
    python = _ALL.python_executable
    dirs = glob.glob(os.path.dirname(os.path.dirname(python)) + "/lib/python3*/site-packages")
    if not any(os.path.isdir(os.path.join(d, "numpy")) for d in dirs) or "no-audit" not in ACCEPTED:
        pytest.skip("no numpy in the runner interpreter's site-packages, or no-audit refused on this machine")
    result = _sandbox("no-audit", allow_native_modules=True).run(NUMPY.format(dirs=dirs))
    assert result.ok and result.stdout.split() == ["-2.0", "3"], result


@pytest.mark.parametrize("allow_fork", [False, True])
def test_seccomp_refuses_new_executable_memory(allow_fork):
    """The filter on both architectures: executable mappings only of files and never writable, mprotect never to
    executable, only the personality query and PER_LINUX; whatever the upper 32 bits of the arguments hold."""
    eperm, allow = 0x00050001, 0x7FFF0000
    R, W, X, SHARED, PRIVATE, ANON = 1, 2, 4, 0x01, 0x02, 0x20
    for arch_name, arch, nrs in (
        ("x86_64", 0xC000003E, {"mmap": 9, "mprotect": 10, "pkey_mprotect": 329, "personality": 135}),
        ("aarch64", 0xC00000B7, {"mmap": 222, "mprotect": 226, "pkey_mprotect": 288, "personality": 92}),
    ):
        prog, _ = _build_seccomp_filter(arch_name, allow_fork)
        mmap_cases = [
            (R | W | X, PRIVATE | ANON, eperm),
            (R | X, PRIVATE | ANON, eperm),
            (X, SHARED | ANON, eperm),
            (R | W | X, PRIVATE, eperm),  # a file's private copy, writable and executable
            (R | W | X, SHARED, eperm),
            (R | X | (1 << 32), PRIVATE | ANON | (1 << 40), eperm),
            (R | X, PRIVATE, allow),  # the dynamic loader's code segments
            (R | X, PRIVATE | 0x800, allow),  # MAP_DENYWRITE
            (R | W, PRIVATE | ANON, allow),
            (R | W, SHARED | ANON, allow),
            (0, PRIVATE | ANON, allow),  # the loader's reservation (PROT_NONE)
            (R | W | (1 << 34), SHARED, allow),  # bit 2 of the upper half is not PROT_EXEC
        ]
        for prot, flags, expected in mmap_cases:
            verdict = bpf_verdict(prog, nrs["mmap"], arch, (0, 4096, prot, flags, 3, 0))
            assert verdict == expected, (arch_name, hex(prot), hex(flags))
        for name in ("mprotect", "pkey_mprotect"):
            for prot, expected in (
                (R | X, eperm),
                (X, eperm),
                (R | W | X, eperm),
                (R, allow),
                (R | W, allow),
                (0, allow),
            ):
                assert bpf_verdict(prog, nrs[name], arch, (1 << 20, 4096, prot, 0)) == expected, (
                    arch_name,
                    name,
                    prot,
                )
        for persona, expected in ((0xFFFFFFFF, allow), (0, allow), (0x0400000, eperm), (0x0040000, eperm), (8, eperm)):
            assert bpf_verdict(prog, nrs["personality"], arch, (persona,)) == expected, (arch_name, hex(persona))
        remap = _SYSCALLS["remap_file_pages"][0 if arch_name == "x86_64" else 1]
        assert bpf_verdict(prog, remap, arch) == eperm, arch_name


# ---------------------------------------------------------------------------------------------------- the kernel

# System calls no honest program needs that take memory no rlimit counts, or host-wide / per-user kernel objects.
CONTAINMENT_SYSCALLS = (
    "memfd_create",
    "memfd_secret",
    "shmget",
    "shmat",
    "shmctl",
    "shmdt",
    "io_setup",
    "io_submit",
    "io_getevents",
    "io_pgetevents",
    "inotify_init",
    "inotify_init1",
    "inotify_add_watch",
    "mq_open",
    "mq_timedsend",
    "msgget",
    "msgsnd",
    "semget",
    "semop",
    "semtimedop",
    "add_key",
    "keyctl",
)


@pytest.mark.parametrize("allow_fork", [False, True])
def test_seccomp_refuses_unbounded_and_host_wide_resources(allow_fork):
    for arch_name, arch, col in (("x86_64", 0xC000003E, 0), ("aarch64", 0xC00000B7, 1)):
        prog, _ = _build_seccomp_filter(arch_name, allow_fork)
        for name in CONTAINMENT_SYSCALLS:
            nr = _SYSCALLS[name][col]
            if nr >= 0:
                assert bpf_verdict(prog, nr, arch) == 0x00050001, (arch_name, name)  # EPERM
        for allowed in ("mmap", "read"):  # what honest programs need is not caught
            nr = {"mmap": (9, 222), "read": (0, 63)}[allowed][col]
            assert bpf_verdict(prog, nr, arch) == 0x7FFF0000, (arch_name, allowed)
        fcntl = (72, 25)[col]
        assert bpf_verdict(prog, fcntl, arch, (3, 1031)) == 0x00050001, arch_name  # F_SETPIPE_SZ
        assert bpf_verdict(prog, fcntl, arch, (3, 1)) == 0x7FFF0000, arch_name  # F_GETFD


_LIVE = r"""
import ctypes, json, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
libc.syscall.restype = ctypes.c_long
prog = bytes.fromhex(sys.argv[1])
class Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
buf = ctypes.create_string_buffer(prog, len(prog))
fprog = Fprog(len(prog) // 8, ctypes.cast(buf, ctypes.c_void_p))
assert libc.prctl(38, 1, 0, 0, 0) == 0
assert libc.prctl(22, 2, ctypes.addressof(fprog), 0, 0) == 0, ctypes.get_errno()
ctx = ctypes.c_ulong(0)
calls = {  # real arguments, small sizes: each would succeed (and is undone below) without the filter
    "memfd_create": (319, ctypes.c_char_p(b"x"), 0),
    "shmget": (29, 0, 1 << 20, 0o1600),
    "io_setup": (206, 1, ctypes.byref(ctx)),
    "inotify_init1": (294, 0),
    "mq_open": (240, ctypes.c_char_p(b"codapo-test"), 0o100 | 2, 0o600, None),
    "msgget": (68, 0, 0o1600),
    "semget": (64, 0, 1, 0o1600),
}
out = {}
for name, (nr, *args) in calls.items():
    ctypes.set_errno(0)
    rc = libc.syscall(nr, *args)
    out[name] = [rc, ctypes.get_errno()]
    if rc >= 0:  # the filter let it through: undo it
        if name == "shmget": libc.shmctl(rc, 0, None)
        elif name == "io_setup": libc.syscall(207, ctx)
        elif name == "msgget": libc.msgctl(rc, 0, None)
        elif name == "semget": libc.semctl(rc, 0, 0)
        elif name == "mq_open": libc.mq_unlink(b"codapo-test")
print(json.dumps(out))
"""


def test_seccomp_refuses_them_live():
    """The filter installed for real (as the trainer's user) refuses each call with arguments that would succeed."""
    if os.uname().machine != "x86_64":
        pytest.skip("the syscall numbers above are x86_64's")
    prog, patch = _build_seccomp_filter("x86_64", False)
    prog = bytearray(prog)
    for idx in patch:
        struct.pack_into("=I", prog, idx * 8 + 4, 0x7FFFFFF0)
    proc = subprocess.run(
        [sys.executable, "-I", "-c", _LIVE, bytes(prog).hex()], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    for name, (rc, errno) in json.loads(proc.stdout).items():
        assert rc == -1 and errno == 1, (name, rc, errno)


SYSV = """
import ctypes, json, os
libc = ctypes.CDLL(None, use_errno=True)
libc.shmget.argtypes = [ctypes.c_int, ctypes.c_size_t, ctypes.c_int]
out = []
for size in (64 << 20, 8 << 20, 8 << 20, 8 << 20):
    ctypes.set_errno(0)
    out.append([size >> 20, libc.shmget(0, size, 0o1600) >= 0, ctypes.get_errno()])
print(json.dumps(out))
"""


def test_ipc_namespace_bounds_and_frees_sysv_shared_memory(monkeypatch):
    """Defence in depth below seccomp: the private IPC namespace (netns layer) holds at most 16 MiB of SysV shared
    memory (shmmax, shmall set by the bootstrap as root) and frees it with the run. Run below the floor on purpose
    (no seccomp, mountns, Landlock or audit hook, so that ctypes can call shmget)."""
    if "netns" not in _ALL.active or os.geteuid() != 0:
        pytest.skip("needs the netns layer and a root trainer (a user namespace mapping no root cannot set shmmax)")
    monkeypatch.delenv("CODAPO_SANDBOX_ALLOW_BELOW_FLOOR", raising=False)
    disable = frozenset({"seccomp", "mountns", "landlock", "audit"})
    with open("/proc/sysvipc/shm") as f:
        before = len(f.readlines())
    with Sandbox(SandboxConfig(**FAST, disable=disable, allow_below_floor=True), max_workers=1) as sb:
        result = sb.run(SYSV)
    assert result.ok, result
    # 64 MiB > shmmax (EINVAL); two segments of 8 MiB fill shmall; the third finds no space (ENOSPC)
    assert json.loads(result.stdout) == [[64, False, 22], [8, True, 0], [8, True, 0], [8, False, 28]], result
    with open("/proc/sysvipc/shm") as f:
        assert len(f.readlines()) == before  # nothing left in the host's namespace


# ---------------------------------------------------------------------------------- OOM kills, tasks, multiprocessing

TMPFS_HOG = """
import sys
held = 0
for i in range({files}):
    with open("f%d" % i, "wb") as f:
        for _ in range(16):
            f.write(b"x" * (1 << 20))
            held += 1
    print("held", held, flush=True, file=sys.{log})
print({answer})
"""


@pytest.mark.parametrize("config", CONFIGS)
def test_an_oom_kill_is_the_programs_result_never_a_skip(config):
    """Memory the program holds outside its processes (here tmpfs files, with a `tmpfs_mb` above the cgroup's
    `memory_mb + 128`) once made the bootstrap the OOM killer's pick: the run ended as `sandbox_error` and the
    reward was `None`, a skip (redteam61 finding 4, `oob_sem_memory_reward`, `oob_memfd_beyond_as`). The program's
    processes are now the first pick (`oom_score_adj` 1000) and an OOM kill without a report is MEMORY: reward 0.
    The honest counterpart writes 64 MiB of files in the same sandbox and is paid."""
    from codapo_trl.rewards.code import evaluate_code

    if _gaps(config, allow_fork=True):
        pytest.skip("allow_fork is refused without the cgroup layer (test_memory_of_forked_processes_...)")
    sb = _sandbox(config, allow_fork=True, tmpfs_mb=MEMORY_MB + 256)  # cgroup: MEMORY_MB + 128
    tests = {"format": "stdio", "inputs": [""], "outputs": ["42"]}
    for _ in range(2):  # the victim was the same process every time: twice is enough to see it
        result = sb.run(TMPFS_HOG.format(files=(MEMORY_MB + 224) // 16, answer=42, log="stdout"))
        assert result.status is Status.MEMORY, (config, result)
        assert "before the program's report" not in result.reason, (config, result)  # the bootstrap survived
        assert _held(result) <= MEMORY_MB + 128, (config, result.stdout[-200:])
    hostile = evaluate_code(
        TMPFS_HOG.format(files=(MEMORY_MB + 224) // 16, answer=42, log="stdout"), tests, sandbox=sb
    )
    assert hostile.reward == 0.0, (config, hostile)
    honest = evaluate_code(TMPFS_HOG.format(files=4, answer=42, log="stderr"), tests, sandbox=sb)
    assert honest.reward == 1.0, (config, honest)


def test_a_run_without_a_report_after_an_oom_kill_is_memory():
    """Whatever process the OOM killer takes (the bootstrap before its report included), the run is the program's
    MEMORY; without an OOM kill, a missing report stays the sandbox's error."""
    sb = _sandbox("all")
    for oom, judged, expected in [
        (True, False, Status.MEMORY),
        (True, True, Status.MEMORY),
        (False, False, Status.SANDBOX_ERROR),
        (False, True, Status.RUNTIME_ERROR),
    ]:
        result = sb.run("pass")
        result.signal = result.exit_code = result.verdict = None
        sb._classify(result, None, False, None, None, oom, judged, judging=True)
        assert result.status is expected, (oom, judged, result)


THREADS = """
import threading, time
threading.stack_size(1 << 16)
threads = []
try:
    for _ in range({cap}):
        t = threading.Thread(target=time.sleep, args=(1.5,))
        t.start()
        threads.append(t)
except RuntimeError as exc:
    print("refused", exc)
print("held", len(threads), flush=True)
"""


@pytest.mark.parametrize("config", CONFIGS)
def test_threads_are_bounded(config):
    """Threads are tasks: `RLIMIT_NPROC` bounds them per uid, and root's own uid is exempt, so without the uid
    layer the pids cgroup does (772 threads against `max_processes=16` in redteam61 finding 6). The program stops
    at 300; the honest counterpart's 8 threads run."""
    sb = _sandbox(config)
    result = sb.run(THREADS.format(cap=300))
    assert "refused" in result.stdout and _held(result) <= sb.config.max_processes + 4, (config, result)
    honest = sb.run(THREADS.format(cap=8))
    assert honest.ok and _held(honest) == 8, (config, honest)


def test_floor_refuses_unbounded_threads():
    """A root trainer without the uid layer needs the cgroup layer for its threads; a non-root trainer's shared
    `RLIMIT_NPROC` bounds them; a user namespace does on Linux >= 5.14."""
    layers = ("netns", "pidns", "mountns", "landlock", "seccomp", "audit")
    assert any("threads" in gap for gap in floor_gaps(layers, trainer_is_root=True))
    assert not floor_gaps((*layers, "cgroup"), trainer_is_root=True)
    assert not floor_gaps((*layers, "uid"), trainer_is_root=True)
    assert not floor_gaps(layers, trainer_is_root=False)
    assert not floor_gaps((*layers, "userns"), False, True, trainer_is_root=True)
    assert any("threads" in gap for gap in floor_gaps((*layers, "userns"), False, False, trainer_is_root=True))


MULTIPROCESSING = """
from multiprocessing import Pool, shared_memory

def square(x):
    return x * x

if __name__ == "__main__":
    with Pool(2) as pool:
        total = sum(pool.map(square, range(100)))
        pool.close()  # the workers end by themselves: terminate() would signal them, which seccomp refuses
        pool.join()
    shm = shared_memory.SharedMemory(create=True, size=1 << 20)
    shm.buf[:2] = b"ok"
    print(total, bytes(shm.buf[:2]).decode())
    shm.close()
    shm.unlink()
"""

SHM_HOG = """
from multiprocessing import shared_memory
shm = shared_memory.SharedMemory(create=True, size=160 << 20)  # sparse: pages are taken when touched
for held in range(160):
    shm.buf[held << 20 : (held + 1) << 20] = b"x" * (1 << 20)  # SIGBUS past the private /dev/shm's 16 MiB
    print("held", held + 1, flush=True)
"""


@pytest.mark.parametrize("config", CONFIGS)
def test_multiprocessing_works_with_allow_fork_within_dev_shm(config):
    """`multiprocessing.Pool` (its locks are POSIX semaphores in /dev/shm) and `shared_memory` failed with
    `allow_fork=True` (Landlock refused /dev/shm, redteam61 "honest counterparts that failed"). With `allow_fork`
    and the mountns layer /dev/shm is writable: it is the run's private 16 MiB noexec tmpfs. Hostile: a 160 MiB
    shared block holds at most 16 MiB. Without `allow_fork` multiprocessing needs processes and is refused."""
    if _gaps(config, allow_fork=True):
        pytest.skip("allow_fork is refused without the cgroup layer")
    sb = _sandbox(config, allow_fork=True)
    result = sb.run(MULTIPROCESSING)
    assert result.ok and result.stdout.split() == ["328350", "ok"], (config, result)
    hostile = sb.run(SHM_HOG)
    assert not hostile.ok and _held(hostile) <= 16, (config, hostile)
    assert not _sandbox(config).run(MULTIPROCESSING).ok  # no fork: refused, as documented


# ---------------------------------------------------------------------------------------------------- the floor


@pytest.mark.parametrize("config", REFUSED or [pytest.param("none", marks=pytest.mark.skip("none refused"))])
def test_refused_configurations_name_the_missing_layer(config, monkeypatch):
    """Without mountns (files unbounded in total and executable, foreign native modules) or seccomp (memfd, SysV,
    aio, inotify) the floor refuses, and the message names the layer."""
    monkeypatch.delenv("CODAPO_SANDBOX_ALLOW_BELOW_FLOOR", raising=False)
    layer = config[3:]
    assert layer in ("mountns", "seccomp"), (config, _gaps(config))
    with pytest.raises(SandboxFloorError, match=f"needs the {layer} layer"):
        Sandbox(_config(config))


def test_floor_gaps_per_resource():
    full = ("uid", "netns", "pidns", "mountns", "cgroup", "landlock", "seccomp", "audit")
    assert floor_gaps(full) == [] and floor_gaps(full, allow_fork=True) == []
    no_cgroup = tuple(layer for layer in full if layer != "cgroup")
    assert floor_gaps(no_cgroup) == []
    assert any("whole process tree" in gap for gap in floor_gaps(no_cgroup, allow_fork=True))
    no_mountns = tuple(layer for layer in full if layer != "mountns")
    gaps = floor_gaps(no_mountns)
    assert any("noexec" in gap for gap in gaps) and any("_cffi_backend" in gap for gap in gaps)
    gaps = floor_gaps(no_mountns, allow_native_modules=True)  # the opt-in lifts only the native-module gap
    assert any("noexec" in gap for gap in gaps) and not any("_cffi_backend" in gap for gap in gaps)
    gaps = floor_gaps(tuple(layer for layer in full if layer != "seccomp"))
    assert any("memfd" in gap for gap in gaps) and any("aio" in gap for gap in gaps)
    assert any("executable memory" in gap for gap in gaps)
    gaps = floor_gaps(tuple(layer for layer in full if layer not in ("landlock", "audit")))
    assert gaps == ["no writes into the program's own code through /proc/self/mem (needs the landlock or audit layer)"]


# ---------------------------------------------------------------------------------------------------- checkouts

_BELOW_TMP = """
import sys
from codapo_trl.sandbox import mounts
checkout = sys.argv[1]
host_dirs = mounts._host_data_dirs
mounts._host_data_dirs = lambda python: (*host_dirs(python), checkout)  # as a checkout of the project would be
from codapo_trl.sandbox import SandboxConfig, detect_isolation, run_python
print("active", " ".join(sorted(detect_isolation(SandboxConfig(timeout=6.0)).active)))
print("result", run_python("print(6 * 7)", timeout=6.0).stdout.strip())
"""


def test_a_checkout_below_tmp_keeps_every_layer(tmp_path):
    """A project checked out below /tmp is one of the directories the mount layer hides, and the private tmpfs over
    /tmp hides it already: hiding it again inside the namespace failed (its mount point was gone), the mount layer
    dropped out and the floor refused every run. Run in a fresh process, since detection is once per process."""
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / "secret.txt").write_text("trainer's file")
    done = subprocess.run(
        [sys.executable, "-c", _BELOW_TMP, str(checkout)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "mountns" in done.stdout.split("active", 1)[1].splitlines()[0], done.stdout
    assert "result 42" in done.stdout, done.stdout
    leak = Sandbox(SandboxConfig(**FAST), max_workers=1)
    try:  # and the program still cannot read it
        result = leak.run(f"print(open({str(checkout / 'secret.txt')!r}).read())")
        assert "trainer's file" not in result.stdout
    finally:
        leak.close()
