"""The sandbox's bootstrap: trusted code that sets up the isolation layers and then runs the program.

Run by the trainer as `python -I -S -B /path/to/bootstrap.py <config.json>` (by path, as a script: it imports
nothing from this package, only the standard library, and is never imported). It reads its configuration (written by
[`codapo_trl.sandbox.executor.Executor`]) and deletes it, then:

1. joins the run's cgroups and unshares the user, network, mount and PID namespaces (in this process);
2. becomes a child subreaper and forks the program's process, which sets up the mounts, forks once more (the PID
   namespace's init stays behind as PID 1), copies the runner ([`codapo_trl.sandbox.runner`]) and the program into
   the private working directory, drops capabilities, sets rlimits, switches uid, sets `no_new_privs`, installs
   Landlock and seccomp and execs the runner by its path in the working directory;
3. waits for the program, reports its exit status and resource usage on the status pipe (one JSON line per event),
   kills and reaps whatever the program left behind, and exits.

Every set-up failure is reported as `{"event": "setup_error", "stage": ...}`, so that the trainer can tell which
layer does not work on this machine.
"""

import ctypes
import json
import os
import resource
import signal
import sys
import time


CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC, MS_PRIVATE, MS_RELATIME = 1024, 2048, 4096, 16384, 1 << 18, 1 << 21
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 1, 38, 22, 2
PR_SET_CHILD_SUBREAPER = 36
PR_CAPBSET_DROP, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, PR_SET_SECUREBITS = 24, 47, 4, 28

# Set by `load` from the configuration file, before anything else runs.
CFG: dict = {}
STATUS_FD = -1
CHANNEL_FDS: list = []  # the program's ends of its channel to the judge (`call` and `check` runs)
STAGE = ["bootstrap"]
libc: ctypes.CDLL


def load(config_path: str) -> None:
    global CFG, STATUS_FD, CHANNEL_FDS, libc
    with open(config_path, "rb") as f:
        CFG = json.loads(f.read())
    os.unlink(config_path)
    STATUS_FD = CFG["status_fd"]
    CHANNEL_FDS = CFG["channel_fds"]
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    libc.unshare.argtypes = [ctypes.c_int]
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]


def report(**kw):
    try:  # noqa: SIM105 (contextlib is not worth importing in every run's bootstrap)
        os.write(STATUS_FD, (json.dumps(kw) + "\n").encode())
    except OSError:
        pass


def check(rc, what):
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, what + ": " + os.strerror(err))


def b(s):
    return None if s is None else s.encode()


def mount(src, tgt, fstype, flags, data=None):
    check(libc.mount(b(src), b(tgt), b(fstype), flags, b(data)), "mount " + tgt)


def write_file(path, text):
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def set_ipc_limits(limits):
    # The new IPC namespace's own limits (issue 61): SysV shared memory, message queues and semaphores bounded, no
    # POSIX message queue (defence in depth: seccomp refuses them all). Best effort: root may write them, a user
    # namespace that maps no root may not (the kernel refuses); the namespace's objects die with it either way.
    for name, value in limits.items():
        try:
            write_file("/proc/sys/" + name, value)
        except OSError:
            return


def mount_points():
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            mp = line.split()[4]
            out.append(mp.encode().decode("unicode_escape"))
    return out


def remount_readonly(mp):
    st = os.statvfs(mp)
    keep = 0
    for st_bit, ms_bit in (
        (2, MS_NOSUID),
        (4, MS_NODEV),
        (8, MS_NOEXEC),
        (1024, MS_NOATIME),
        (2048, MS_NODIRATIME),
        (4096, MS_RELATIME),
    ):
        if st.f_flag & st_bit:
            keep |= ms_bit
    mount(None, mp, None, MS_REMOUNT | MS_BIND | MS_RDONLY | keep)


def setup_mounts(cfg):
    STAGE[0] = "mountns"
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    keep_fds = []
    for path in cfg["expose"]:
        keep_fds.append((path, os.open(path, os.O_PATH | os.O_DIRECTORY)))
    failed = 0
    for mp in mount_points():
        try:
            remount_readonly(mp)
        except OSError:
            failed += 1
    if failed and cfg["strict_readonly"]:
        raise OSError(f"could not remount {failed} mount(s) read-only")
    # A minimal /dev: no GPU, tty, kvm, fuse or disk device nodes, only these (bound from the real ones).
    dev_fds = [
        (name, os.open("/dev/" + name, os.O_PATH))
        for name in ("null", "zero", "full", "random", "urandom")
        if os.path.exists("/dev/" + name)
    ]
    mount("tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,nr_inodes=64,mode=0755")
    for name, fd in dev_fds:
        os.close(os.open("/dev/" + name, os.O_WRONLY | os.O_CREAT, 0o666))
        mount(f"/proc/self/fd/{fd}", "/dev/" + name, None, MS_BIND)
        os.close(fd)
    for name, target in (
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ):
        os.symlink(target, "/dev/" + name)
    os.mkdir("/dev/shm", 0o1777)
    remount_readonly("/dev")
    for path in cfg["mask_files"]:  # native modules that give Python code raw memory access
        mount("/dev/null", path, None, MS_BIND)
    # Every mount a program can write is size-limited and noexec (issue 61: no code the program writes can run, a
    # file it writes cannot be mapped executable); hidden directories are empty and (once the interpreter's
    # directories are bound back below them) read-only.
    sealed = MS_NOSUID | MS_NODEV | MS_NOEXEC
    for path in cfg["hide"]:
        mount("tmpfs", path, "tmpfs", sealed, "size=1m,nr_inodes=256,mode=0755")
    for path in cfg["private_tmp"]:
        mount("tmpfs", path, "tmpfs", sealed, f"size={int(cfg['tmp_kb'])}k,nr_inodes=1024,mode=1777")
    for path, fd in keep_fds:  # the interpreter, if it lived below a directory hidden above
        os.makedirs(path, mode=0o755, exist_ok=True)
        mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
        remount_readonly(path)
        os.close(fd)
    for path in cfg["hide"]:
        remount_readonly(path)
    for path in cfg["hide_modules"]:  # Python modules outside the standard library (once the interpreter is back)
        if os.path.isdir(path):  # (not there: below a hidden directory already)
            mount("tmpfs", path, "tmpfs", sealed | MS_RDONLY, "size=4k,nr_inodes=16,mode=0755")
    work = cfg["workdir"]
    os.makedirs(work, exist_ok=True)
    opts = f"size={int(cfg['tmpfs_kb'])}k,nr_inodes=4096,mode=0700"  # int(): as %d did
    if cfg["uid"] is not None:
        opts += f",uid={cfg['uid']},gid={cfg['uid']}"
    mount("tmpfs", work, "tmpfs", sealed, opts)
    if cfg["pidns"]:
        try:  # noqa: SIM105
            mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        except OSError:
            pass


def install_seccomp(spec):
    STAGE[0] = "seccomp"
    import struct

    prog = bytearray.fromhex(spec["prog"])
    for idx in spec["self_insns"]:
        struct.pack_into("=I", prog, idx * 8 + 4, os.getpid())

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    buf = ctypes.create_string_buffer(bytes(prog), len(prog))
    fprog = SockFprog(len(prog) // 8, ctypes.cast(buf, ctypes.c_void_p))
    check(libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0), "seccomp")


def install_landlock(spec):
    # Landlock: writes only in the working directory (and /dev/null), reads only below spec["read"], no TCP
    # bind/connect (ABI >= 4), no signals or abstract unix sockets beyond the program's own processes (ABI >= 6).
    STAGE[0] = "landlock"
    import struct

    sys_create, sys_add, sys_restrict = 444, 445, 446  # the same on every architecture
    abi = libc.syscall(sys_create, None, 0, 1)  # LANDLOCK_CREATE_RULESET_VERSION
    if abi < 1:
        raise OSError(ctypes.get_errno(), "landlock unavailable")
    fs_all = (1 << 13) - 1
    if abi >= 2:
        fs_all |= 1 << 13  # REFER
    if abi >= 3:
        fs_all |= 1 << 14  # TRUNCATE
    if abi >= 5:
        fs_all |= 1 << 15  # IOCTL_DEV
    read = (1 << 0) | (1 << 2) | (1 << 3)  # EXECUTE, READ_FILE, READ_DIR
    file_rw = ((1 << 1) | (1 << 2) | (1 << 14) | (1 << 15)) & fs_all  # WRITE_FILE, READ_FILE, TRUNCATE, IOCTL_DEV
    net = 3 if abi >= 4 else 0  # BIND_TCP, CONNECT_TCP: handled, never allowed
    scoped = 3 if abi >= 6 else 0  # ABSTRACT_UNIX_SOCKET, SIGNAL
    attr = struct.pack("=QQQ", fs_all, net, scoped)
    size = 8 if abi < 4 else (16 if abi < 6 else 24)
    buf = ctypes.create_string_buffer(attr, len(attr))
    ruleset = libc.syscall(sys_create, buf, ctypes.c_size_t(size), 0)
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset")
    try:
        # The working directory: every right but EXECUTE (issue 61: nothing the program writes is executed).
        # The private /dev/shm too when the program may fork: multiprocessing's locks are POSIX semaphores there.
        writable = [spec["write"], *spec.get("extra_write", [])]
        rules = [(p, read) for p in spec["read"]] + [(p, fs_all & ~1) for p in writable] + [("/dev/null", file_rw)]
        for path, access in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                if not os.path.isdir(path):
                    access &= (1 << 0) | (1 << 1) | (1 << 2) | (1 << 14) | (1 << 15)  # rights that apply to files
                rule = ctypes.create_string_buffer(struct.pack("=Qi", access & fs_all, fd), 12)
                check(0 if libc.syscall(sys_add, ruleset, 1, rule, 0) == 0 else -1, "landlock_add_rule " + path)
            finally:
                os.close(fd)
        check(0 if libc.syscall(sys_restrict, ruleset, 0) == 0 else -1, "landlock_restrict_self")
    finally:
        os.close(ruleset)


def drop_capabilities():
    # Whatever uid the program runs as: an empty bounding set (an exec as root gains nothing), no ambient
    # capabilities, and root's special treatment locked off.
    STAGE[0] = "caps"
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    if os.geteuid() != 0:
        with open("/proc/self/status") as f:
            permitted = next((int(ln.split()[1], 16) for ln in f if ln.startswith("CapPrm:")), 1)
        if not permitted:
            return  # holds no capability, and no_new_privs (set below) stops an exec from granting any
    prctl = libc.prctl
    for cap in range(64):
        if prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            if ctypes.get_errno() == 22:  # EINVAL: past the kernel's last capability
                break
            check(-1, f"dropping capability {cap} from the bounding set")
    # SECBIT_NOROOT (+ locked), SECBIT_KEEP_CAPS_LOCKED, SECBIT_NO_CAP_AMBIENT_RAISE (+ locked)
    check(libc.prctl(PR_SET_SECUREBITS, 0x01 | 0x02 | 0x20 | 0x40 | 0x80, 0, 0, 0), "securebits")


def close_channel():
    for fd in CHANNEL_FDS:
        try:  # noqa: SIM105
            os.close(fd)
        except OSError:
            pass


def init_process(pid):
    # PID 1 of the program's PID namespace (the program itself is PID 2, so that a signal it sends itself is not
    # ignored the way the kernel ignores it for a namespace's init): wait for it, report how it ended, and exit,
    # which makes the kernel kill whatever it left behind.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    close_channel()  # only the program holds its channel: the judge sees it end when the program does
    while True:
        try:
            done, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(0)
        except InterruptedError:
            continue
        if done == pid:
            break
    if os.WIFSIGNALED(status):
        report(event="program", signal=os.WTERMSIG(status))
        os._exit(128)
    os._exit(os.WEXITSTATUS(status))


def child(cfg):
    check(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "pdeathsig")
    # The cgroup's OOM killer must pick the program's processes, never the bootstrap: memory the program holds
    # outside its processes (tmpfs files, kernel objects) leaves the bootstrap the largest process, and its death
    # lost the program's result (issue 61). Raising the score needs no privilege; with CAP_SYS_RESOURCE it is also
    # the floor the program cannot go below. Best effort: the trainer classifies an OOM kill as MEMORY anyway.
    try:  # noqa: SIM105
        write_file("/proc/self/oom_score_adj", "1000")
    except OSError:
        pass
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    if cfg["mountns"]:
        setup_mounts(cfg)
    if cfg["pidns"]:
        STAGE[0] = "pidns"
        pid = os.fork()
        if pid != 0:
            init_process(pid)
        check(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "pdeathsig")
    STAGE[0] = "workdir"
    work = cfg["workdir"]
    try:  # bytes a source was decoded from (a coding declaration may make them valid) come back as they were
        source = CFG["source"].encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate: the program's own SyntaxError, never a set-up failure
        source = CFG["source"].encode("utf-8", "surrogatepass")
    with open(os.path.join(work, "solution.py"), "wb") as f:
        f.write(source)
    # The runner (run by this path) and the wire format it speaks to the judge: the only files of the checkout that
    # the program's process needs, copied so that the checkout itself stays hidden (mountns, Landlock); the runner
    # deletes the copies before the program starts.
    for copy, source in zip(cfg["runner"]["copies"], cfg["runner_sources"]):
        with os.fdopen(os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644), "wb") as f:
            f.write(source)
    if cfg["uid"] is not None and not cfg["mountns"]:
        os.chown(work, cfg["uid"], cfg["uid"])
    if cfg["uid"] is not None:
        for fd in (0, 1, 2):  # the pipes belong to the trainer's uid: give them to the program (/dev/stdin etc.)
            try:  # noqa: SIM105
                os.fchown(fd, cfg["uid"], cfg["uid"])
            except OSError:
                pass
    if cfg["nice"]:
        os.nice(cfg["nice"])
    drop_capabilities()
    STAGE[0] = "rlimits"
    for name, soft, hard in cfg["rlimits"]:
        res = getattr(resource, name)
        cur_soft, cur_hard = resource.getrlimit(res)
        if cur_hard != resource.RLIM_INFINITY:
            hard = min(hard, cur_hard)
            soft = min(soft, hard)
        resource.setrlimit(res, (soft, hard))
    if cfg["uid"] is not None:
        STAGE[0] = "uid"
        os.setgroups([])
        os.setresgid(cfg["uid"], cfg["uid"], cfg["uid"])
        os.setresuid(cfg["uid"], cfg["uid"], cfg["uid"])
        check(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "pdeathsig")
    os.setsid()  # own session and process group: kill(0, ...) cannot reach the bootstrap
    STAGE[0] = "no_new_privs"
    check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    if cfg["landlock"]:
        install_landlock(cfg["landlock"])
    if cfg["seccomp"]:
        install_seccomp(cfg["seccomp"])
    STAGE[0] = "exec"
    os.chdir(work)
    os.set_inheritable(STATUS_FD, False)
    for fd in CHANNEL_FDS:
        os.set_inheritable(fd, True)
    os.execve(cfg["argv"][0], cfg["argv"], cfg["env"])


def main():
    cfg = CFG
    try:
        cfg["runner_sources"] = []
        for path in cfg["runner"]["sources"]:  # before the mount namespace hides the checkout
            with open(path, "rb") as f:
                cfg["runner_sources"].append(f.read())
        if cfg["cgroup_procs"]:
            STAGE[0] = "cgroup"
            for path in cfg["cgroup_procs"]:
                write_file(path, str(os.getpid()))
        if cfg["userns"]:
            STAGE[0] = "userns"
            outer_uid, outer_gid = os.geteuid(), os.getegid()
            check(libc.unshare(CLONE_NEWUSER), "unshare(CLONE_NEWUSER)")
            write_file("/proc/self/setgroups", "deny")
            write_file("/proc/self/uid_map", f"{cfg['inner_id']} {outer_uid} 1\n")
            write_file("/proc/self/gid_map", f"{cfg['inner_id']} {outer_gid} 1\n")
        for layer, flag in (
            ("netns", CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS),
            ("mountns", CLONE_NEWNS),
            ("pidns", CLONE_NEWPID),
        ):
            if cfg[layer]:
                STAGE[0] = layer
                check(libc.unshare(flag), "unshare(" + layer + ")")
                if layer == "netns":
                    set_ipc_limits(cfg["ipc_limits"])
    except Exception as exc:
        report(event="setup_error", stage=STAGE[0], error=f"{type(exc).__name__}: {exc}")
        return 0
    # Orphans of the program (daemons, double forks) become our children, so that we can reap them.
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    pid = os.fork()
    if pid == 0:
        try:
            child(cfg)
        except BaseException as exc:
            report(event="setup_error", stage=STAGE[0], error=f"{type(exc).__name__}: {exc}")
        os._exit(127)
    close_channel()  # only the program holds its channel now

    def stop(signum, frame):
        # Sent by the trainer on a time or output limit (SIGUSR1), or our own alarm if the trainer is gone.
        try:  # noqa: SIM105
            os.kill(pid, signal.SIGKILL)  # safe: only we reap it
        except OSError:
            pass

    signal.signal(signal.SIGUSR1, stop)
    signal.signal(signal.SIGALRM, stop)
    signal.alarm(cfg["alarm"])
    _, status, ru = os.wait4(pid, 0)
    report(
        event="exit",
        exit_code=os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
        signal=os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
        cpu_time=ru.ru_utime + ru.ru_stime,
        max_rss_kb=ru.ru_maxrss,
    )
    # With a PID namespace the kernel has killed and reaped everything already. Without one, kill what the
    # program left behind (identified by its uid, or else by the token in its environment) and reap it.
    if not cfg["pidns"]:
        sweep(cfg)
    while True:
        try:
            os.wait()
        except ChildProcessError:
            break
        except InterruptedError:
            continue
    return 0


def sweep(cfg):
    me = os.getpid()
    token = ("CODAPO_SANDBOX_RUN=" + cfg["env"]["CODAPO_SANDBOX_RUN"]).encode()
    for _ in range(200):
        found = 0
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) == me:
                continue
            try:
                if cfg["uid"] is not None:
                    if os.stat("/proc/" + name).st_uid != cfg["uid"]:
                        continue
                else:
                    with open(f"/proc/{name}/environ", "rb") as f:
                        if token not in f.read():
                            continue
                with open(f"/proc/{name}/stat", "rb") as f:
                    if f.read().rpartition(b")")[2].split()[0] == b"Z":
                        continue  # already dead, waiting to be reaped
                os.kill(int(name), signal.SIGKILL)
                found += 1
            except (OSError, IndexError):
                continue
        if not found:
            return
        time.sleep(0.002)
        # reap what died meanwhile so that zombies do not count as found again
        while True:
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break


if __name__ == "__main__":
    load(sys.argv[1])
    sys.exit(main())
