"""What the `mountns` layer hides, keeps and masks, and what programs may read (also used by Landlock and the audit
hook): host directories hidden behind empty tmpfs, private temporary directories, the interpreter's directories bound
back, and native modules that give raw memory access."""

from __future__ import annotations

import functools
import glob
import os
import sys
import tempfile

from codapo_trl.sandbox.host import _python_roots


_HIDE_CANDIDATES = ("/root", "/home", "/run/secrets", "/var/run/secrets", "/mnt", "/media", "/srv", "/opt", "/work")
# Top-level directories that hold the system itself: never hidden whole (a project below them is hidden itself).
_SYSTEM_TOPS = frozenset(
    (
        "",
        "usr",
        "lib",
        "lib32",
        "lib64",
        "libx32",
        "bin",
        "sbin",
        "etc",
        "proc",
        "sys",
        "dev",
        "run",
        "var",
        "tmp",
        "boot",
        "snap",
        "nix",
    )
)
_PRIVATE_TMP_CANDIDATES = ("/tmp", "/var/tmp", "/dev/shm")
_READ_ROOTS = (
    "/dev",
    "/proc/self/fd",
    "/proc/self/status",
    "/proc/self/stat",
    "/proc/self/statm",
    "/proc/self/net",
    "/proc/cpuinfo",
    "/proc/meminfo",
    "/usr/share/zoneinfo",
    "/etc/localtime",
    "/usr/lib/locale",
)
# What the dynamic loader needs besides the interpreter's own prefix (Landlock also governs ld.so's reads).
_LANDLOCK_EXTRA_READ = (
    "/usr/lib",
    "/usr/lib64",
    "/usr/lib32",
    "/lib",
    "/lib64",
    "/lib32",
    "/usr/local/lib",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
)


@functools.cache
def _host_data_dirs(python: str) -> tuple[str, ...]:
    """Where the project checkout, its environment and its data may live (the working directory, this package,
    the trainer's `sys.prefix` and import path): hidden from programs by the `mountns` layer. A directory below a
    top-level directory that is not part of the system (`/work/proj`) hides that whole top-level directory."""
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the checkout
    roots = _python_roots(python)
    out: list[str] = []
    for path in (os.getcwd(), here, sys.prefix, *sys.path):
        if not path or not os.path.isabs(path):
            continue
        path = os.path.realpath(path)
        if any(path == r or path.startswith(r + "/") for r in roots):
            continue  # the runner's own interpreter
        top = path.split("/")[1]
        target = path if top in _SYSTEM_TOPS else "/" + top
        if target not in ("/",) and os.path.isdir(target) and target not in out:
            out.append(target)
    return tuple(out)


# The audit hook refuses importing these too (they could switch it off): masking holds without the hook.
_MASKED_MODULE_PREFIXES = ("_ctypes", "_testcapi", "_testinternalcapi")


@functools.cache
def _masked_modules(python: str) -> list[str]:
    """Native modules of the runner interpreter that give Python code raw memory access (hidden by `mountns`)."""
    out = []
    for root in _python_roots(python):
        for dynload in glob.glob(os.path.join(root, "lib", "python3*", "lib-dynload")):
            for name in sorted(os.listdir(dynload)):
                if name.split(".")[0] in _MASKED_MODULE_PREFIXES:
                    out.append(os.path.realpath(os.path.join(dynload, name)))
    return sorted(set(out))


def hidden_dirs(python: str, base_dir: str | None) -> list[str]:
    """Directories the `mountns` layer hides behind an empty tmpfs: user directories, secrets, the project checkout
    and its environment (never the parent of the working directories, below `base_dir` or the temp dir)."""
    home = os.path.realpath(os.path.expanduser("~"))
    candidates = [*_HIDE_CANDIDATES, home, *_host_data_dirs(python)]
    out = []
    for path in candidates:
        if path in ("/", "/tmp", "/usr", "/etc") or not os.path.isdir(path) or os.path.islink(path):
            continue
        workdir_parent = os.path.realpath(base_dir or tempfile.gettempdir())
        if workdir_parent == path or workdir_parent.startswith(path + "/"):
            continue  # hiding it would hide the working directory's mount point
        if path not in out:
            out.append(path)
    # A directory inside another hidden one is hidden already (and its mount point would be gone).
    return [p for p in out if not any(p != q and p.startswith(q + "/") for q in out)]


def exposed_dirs(python: str, base_dir: str | None) -> list[str]:
    """Interpreter directories below a hidden or private-tmp directory: they are bind-mounted back."""
    covered = hidden_dirs(python, base_dir) + [os.path.realpath(p) for p in _PRIVATE_TMP_CANDIDATES]
    return [r for r in _python_roots(python) if any(r == h or r.startswith(h + "/") for h in covered)]
