"""A classic-BPF interpreter for the sandbox's seccomp filter, so that tests can ask the filter itself what it does
with a system call on either architecture, without running one."""

from __future__ import annotations

import struct


def bpf_verdict(prog: bytes, nr: int, arch: int, args: tuple[int, ...] = ()) -> int:
    """The action the filter `prog` returns for system call `nr` on `arch` (`struct seccomp_data`; the arguments are
    zero unless given). Knows the instructions the sandbox's filter uses: load, return, jump if equal, jump if set."""
    args = (*args, *(0,) * (6 - len(args)))
    data = struct.pack("=iIQ", nr, arch, 0) + b"".join(struct.pack("=Q", a) for a in args)
    insns = [struct.unpack("=HBBI", prog[i : i + 8]) for i in range(0, len(prog), 8)]
    pc, acc = 0, 0
    for _ in range(10_000):
        code, jt, jf, k = insns[pc]
        if code == 0x20:
            acc = struct.unpack_from("=I", data, k)[0]
        elif code == 0x06:
            return k
        elif code == 0x15:
            pc += jt if acc == k else jf
        elif code == 0x45:
            pc += jt if acc & k else jf
        else:
            raise AssertionError(f"unexpected instruction {code:#x}")
        pc += 1
    raise AssertionError("filter did not return")
