"""seccomp: a tiny classic-BPF deny-list, assembled here and installed by the bootstrap just before the exec.

Syscall numbers for the two architectures we support (x86_64, aarch64). Besides whole system calls it refuses a few
by their arguments: signals to other processes, growing pipe buffers, new namespaces or processes, and (issue 61)
new executable memory: no anonymous executable mapping, no mapping both writable and executable, no `mprotect` to
executable, no personality that makes readable memory executable. Executable memory then only comes from files on
executable mounts, which the `mountns` layer makes read-only (every writable mount is `noexec`).
"""

from __future__ import annotations

import struct


_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_SYSCALLS = {
    # name: (x86_64, aarch64); -1 where the syscall does not exist
    "socket": (41, 198),
    "socketpair": (53, 199),
    "ptrace": (101, 117),
    "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271),
    "process_madvise": (440, 440),
    "pidfd_open": (434, 434),
    "pidfd_getfd": (438, 438),
    "pidfd_send_signal": (424, 424),
    "tkill": (200, 130),
    "mount": (165, 40),
    "umount2": (166, 39),
    "pivot_root": (155, 41),
    "chroot": (161, 51),
    "unshare": (272, 97),
    "setns": (308, 268),
    "keyctl": (250, 219),
    "add_key": (248, 217),
    "request_key": (249, 218),
    "bpf": (321, 280),
    "perf_event_open": (298, 241),
    "userfaultfd": (323, 282),
    "kexec_load": (246, 104),
    "kexec_file_load": (320, 294),
    "init_module": (175, 105),
    "finit_module": (313, 273),
    "delete_module": (176, 106),
    "reboot": (169, 142),
    "swapon": (167, 224),
    "swapoff": (168, 225),
    "acct": (163, 89),
    "settimeofday": (164, 170),
    "open_by_handle_at": (304, 265),
    "io_uring_setup": (425, 425),
    "fsopen": (430, 430),
    "fsconfig": (431, 431),
    "fsmount": (432, 432),
    "fspick": (433, 433),
    "move_mount": (429, 429),
    "open_tree": (428, 428),
    "mount_setattr": (442, 442),
    "open_tree_attr": (467, 467),
    "clock_settime": (227, 112),
    "clock_adjtime": (305, 266),
    "adjtimex": (159, 171),
    "syslog": (103, 116),
    "sethostname": (170, 161),
    "setdomainname": (171, 162),
    "quotactl": (179, 60),
    "quotactl_fd": (443, 443),
    "name_to_handle_at": (303, 264),
    "lookup_dcookie": (212, 18),
    "vhangup": (153, 58),
    "fanotify_init": (300, 262),
    "kcmp": (312, 272),
    "iopl": (172, -1),
    "ioperm": (173, -1),
    "modify_ldt": (154, -1),
    "uselib": (134, -1),
    "_sysctl": (156, -1),
    "nfsservctl": (180, 42),
    "process_mrelease": (448, 448),
    "fork": (57, -1),
    "vfork": (58, -1),
    # Deprecated (Linux 3.16) and unused by the standard library; it keeps a mapping's protection, refused anyway.
    "remap_file_pages": (216, 234),
    # Memory no rlimit counts (issue 61): memfd files are not in RLIMIT_AS and can be loaded as native code
    # (`dlopen("/proc/self/fd/N")`), SysV shared memory outlives the process in the host's IPC namespace.
    "memfd_create": (319, 279),
    "memfd_secret": (447, 447),
    "shmget": (29, 194),
    "shmat": (30, 196),
    "shmctl": (31, 195),
    "shmdt": (67, 197),
    # Host-wide or per-user kernel objects one program could exhaust (issue 61): aio contexts (`fs.aio-max-nr` is
    # shared by the whole host), inotify instances and watches (per user, counted up to the trainer's uid in a user
    # namespace), POSIX message queues and SysV message queues and semaphores. No honest program needs them (the
    # standard library wraps none of them).
    "io_setup": (206, 0),
    "io_destroy": (207, 1),
    "io_submit": (209, 2),
    "io_cancel": (210, 3),
    "io_getevents": (208, 4),
    "io_pgetevents": (333, 292),
    "inotify_init": (253, -1),
    "inotify_init1": (294, 26),
    "inotify_add_watch": (254, 27),
    "mq_open": (240, 180),
    "mq_unlink": (241, 181),
    "mq_timedsend": (242, 182),
    "mq_timedreceive": (243, 183),
    "mq_notify": (244, 184),
    "mq_getsetattr": (245, 185),
    "msgget": (68, 186),
    "msgsnd": (69, 189),
    "msgrcv": (70, 188),
    "msgctl": (71, 187),
    "semget": (64, 190),
    "semop": (65, 193),
    "semctl": (66, 191),
    "semtimedop": (220, 192),
}
# Signal-sending syscalls whose first argument (a pid / tgid) must be the program itself.
_SELF_ONLY = {"kill": (62, 129), "tgkill": (234, 131), "rt_sigqueueinfo": (129, 138), "rt_tgsigqueueinfo": (297, 240)}
_CLONE = {"clone": (56, 220), "clone3": (435, 435)}
# fcntl(fd, F_SETPIPE_SZ, n) is refused: pipe buffers are counted per user (the trainer's, in a user namespace), and
# at the default 64 KiB the max_open_files / 2 pipes a program can have hold 2 MiB at most.
_FCNTL = (72, 25)
_F_SETPIPE_SZ = 1031
# New executable memory (issue 61: with a memory-unsafe code object a program writes machine code into an RWX
# mapping and runs it). mmap: refused when executable and anonymous, or executable and writable (a private,
# copy-on-write mapping of a readable library would be writable code); file-backed executable mappings stay, as
# the dynamic loader maps shared libraries and extension modules that way. mprotect / pkey_mprotect: never to
# executable (the loader only lowers protections: RELRO, holes). personality: only the query and PER_LINUX
# (READ_IMPLIES_EXEC would make every readable mapping, heap and stacks included, executable).
_MMAP = (9, 222)
_MPROTECT = {"mprotect": (10, 226), "pkey_mprotect": (329, 288)}
_PERSONALITY = (135, 92)
_PROT_WRITE, _PROT_EXEC, _MAP_ANONYMOUS = 0x2, 0x4, 0x20
_PERSONALITY_QUERY, _PER_LINUX = 0xFFFFFFFF, 0
_CLONE_THREAD = 0x00010000
# CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET
_CLONE_NEW_ANY = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
SECCOMP_SELF_PLACEHOLDER = 0x7FFFFFF7


def _build_seccomp_filter(arch: str, allow_fork: bool) -> tuple[bytes, list[int]]:
    """Assemble the classic-BPF deny-list (a `sock_filter[]`) for `arch`.

    Returns the program and the indices of the instructions whose constant must be replaced by the program's own
    pid (known only in the child, after the PID namespace is entered). Denied syscalls fail with `EPERM` (so
    programs see an ordinary error); a foreign architecture is killed.
    """

    col = 0 if arch == "x86_64" else 1
    ld_w_abs, jeq_k, jset_k, ret_k = 0x20, 0x15, 0x45, 0x06
    allow, eperm, kill = 0x7FFF0000, 0x00050000 | 1, 0x80000000
    enosys = 0x00050000 | 38
    off_nr, off_arch, off_arg0 = 0, 4, 16  # struct seccomp_data; arg0's low 32 bits on little endian

    insns: list[list[int]] = [
        [ld_w_abs, 0, 0, off_arch],
        [jeq_k, 1, 0, _AUDIT_ARCH[arch]],
        [ret_k, 0, 0, kill],
        [ld_w_abs, 0, 0, off_nr],
    ]
    if arch == "x86_64":  # refuse the x32 ABI (syscall numbers with bit 30 set)
        insns += [[jset_k, 0, 1, 0x40000000], [ret_k, 0, 0, eperm]]
    patch: list[int] = []
    for name, nrs in _SELF_ONLY.items():
        # if nr == X: A = arg0; if A == self (or 0 = own process group, for kill) allow else EPERM
        body: list[list[int]] = [[ld_w_abs, 0, 0, off_arg0]]
        checks = [SECCOMP_SELF_PLACEHOLDER] + ([0] if name == "kill" else [])
        for i, value in enumerate(checks):
            body.append([jeq_k, len(checks) - i, 0, value])  # jump over the remaining checks and RET EPERM
        body += [[ret_k, 0, 0, eperm], [ret_k, 0, 0, allow]]
        insns.append([jeq_k, 0, len(body), nrs[col]])
        base = len(insns)
        for j, ins in enumerate(body):
            if ins[3] == SECCOMP_SELF_PLACEHOLDER:
                patch.append(base + j)
        insns += body
    off_arg1 = off_arg0 + 8
    insns += _executable_memory_rules(col, eperm, allow)
    insns += [
        [jeq_k, 0, 4, _FCNTL[col]],
        [ld_w_abs, 0, 0, off_arg1],
        [jeq_k, 0, 1, _F_SETPIPE_SZ],
        [ret_k, 0, 0, eperm],
        [ret_k, 0, 0, allow],
    ]
    # clone(): never into new namespaces; without allow_fork, threads only (CLONE_THREAD in the flags).
    # clone3() -> ENOSYS (its flags are in memory, out of a filter's reach) so that libc falls back to clone().
    insns += [
        [jeq_k, 0, 5 if not allow_fork else 4, _CLONE["clone"][col]],
        [ld_w_abs, 0, 0, off_arg0],
        [jset_k, 1, 0, _CLONE_NEW_ANY] if not allow_fork else [jset_k, 0, 1, _CLONE_NEW_ANY],
    ]
    if not allow_fork:
        insns += [[jset_k, 1, 0, _CLONE_THREAD]]
    insns += [
        [ret_k, 0, 0, eperm],
        [ret_k, 0, 0, allow],
        [jeq_k, 0, 1, _CLONE["clone3"][col]],
        [ret_k, 0, 0, enosys],
    ]
    for name, nrs in _SYSCALLS.items():
        if nrs[col] < 0 or (allow_fork and name in ("fork", "vfork")):
            continue
        insns += [[jeq_k, 0, 1, nrs[col]], [ret_k, 0, 0, eperm]]
    insns.append([ret_k, 0, 0, allow])
    return b"".join(struct.pack("=HBBI", *ins) for ins in insns), patch


def _executable_memory_rules(col: int, eperm: int, allow: int) -> list[list[int]]:
    """The instructions (column `col` of the syscall tables) that refuse new executable memory with `eperm`.

    Only the low 32 bits of each argument are read: every bit tested is there (the kernel's `personality` takes an
    `unsigned int`), and the higher bits of `prot` and `flags` do not change what these bits mean.
    """
    ld_w_abs, jeq_k, jset_k, ret_k = 0x20, 0x15, 0x45, 0x06
    off_arg0, off_arg2, off_arg3 = 16, 32, 40
    mmap = [
        [ld_w_abs, 0, 0, off_arg2],  # prot
        [jset_k, 0, 4, _PROT_EXEC],  # not executable: allow
        [jset_k, 2, 0, _PROT_WRITE],  # writable and executable: EPERM
        [ld_w_abs, 0, 0, off_arg3],  # flags
        [jset_k, 0, 1, _MAP_ANONYMOUS],  # anonymous and executable: EPERM; file-backed, read-only: allow
        [ret_k, 0, 0, eperm],
        [ret_k, 0, 0, allow],
    ]
    insns = [[jeq_k, 0, len(mmap), _MMAP[col]], *mmap]
    for nrs in _MPROTECT.values():
        insns += [
            [jeq_k, 0, 4, nrs[col]],
            [ld_w_abs, 0, 0, off_arg2],
            [jset_k, 0, 1, _PROT_EXEC],
            [ret_k, 0, 0, eperm],
            [ret_k, 0, 0, allow],
        ]
    insns += [
        [jeq_k, 0, 5, _PERSONALITY[col]],
        [ld_w_abs, 0, 0, off_arg0],
        [jeq_k, 2, 0, _PERSONALITY_QUERY],
        [jeq_k, 1, 0, _PER_LINUX],
        [ret_k, 0, 0, eperm],
        [ret_k, 0, 0, allow],
    ]
    return insns
