"""What the `mountns` layer hides, keeps and masks, and what programs may read (also used by Landlock and the audit
hook): host directories hidden behind empty tmpfs, private temporary directories, the interpreter's directories bound
back, native modules that give raw memory access, and every native module outside the standard library's own."""

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


# Where Python installations keep their modules, besides the runner interpreter's own prefix.
_SYSTEM_PYTHON_LIBS = ("/usr/lib/python3*", "/usr/local/lib/python3*", "/usr/lib64/python3*", "/usr/lib/pypy*")
_PACKAGE_DIRS = ("site-packages", "dist-packages")


@functools.cache
def _stdlib_dirs(python: str) -> tuple[str, ...]:
    """The runner interpreter's standard-library directories (`<prefix>/lib/python3.X`, holding `os.py`)."""
    out = []
    for root in _python_roots(python):
        for lib in glob.glob(os.path.join(root, "lib", "python3*")):
            if os.path.isfile(os.path.join(lib, "os.py")):
                out.append(os.path.realpath(lib))
    return tuple(sorted(set(out)))


@functools.cache
def _foreign_module_dirs(python: str) -> tuple[str, ...]:
    """Directories that hold Python modules outside the runner's standard library: the `site-packages` and
    `dist-packages` of its prefix and of its standard library, and every other Python installation's library
    below `/usr` (an extension module built for another version can still be loaded). Hidden by `mountns` unless
    `allow_native_modules` (issue 61: `_cffi_backend` in site-packages gave programs native code)."""
    stdlib = _stdlib_dirs(python)
    out: list[str] = []
    for root in _python_roots(python):
        for pattern in ("lib/python3*/*-packages", "lib/python3/*-packages", "lib64/python3*/*-packages"):
            out += glob.glob(os.path.join(root, pattern))
    for pattern in _SYSTEM_PYTHON_LIBS:
        for lib in glob.glob(pattern):
            real = os.path.realpath(lib)
            if real in stdlib or any(s.startswith(real + "/") for s in stdlib):
                out += [os.path.join(real, d) for d in _PACKAGE_DIRS]  # the runner's own: only its packages
            else:
                out.append(real)
    dirs = sorted({os.path.realpath(d) for d in out if os.path.isdir(d) and not os.path.islink(d)})
    return tuple(d for d in dirs if not any(d != q and d.startswith(q + "/") for q in dirs))


@functools.cache
def _foreign_native_files(python: str) -> tuple[str, ...]:
    """Native modules inside the runner's standard library but outside `lib-dynload` (a test directory's, a
    vendored package's): masked by `mountns` unless `allow_native_modules`."""
    out = []
    for lib in _stdlib_dirs(python):
        for here, dirs, files in os.walk(lib):
            dirs[:] = [d for d in dirs if d not in ("lib-dynload", *_PACKAGE_DIRS)]
            out += [os.path.join(here, f) for f in files if f.endswith(".so") or ".so." in f]
    return tuple(sorted(out))


def native_module_masks(python: str, allow_native_modules: bool) -> list[str]:
    """Files the `mountns` layer binds `/dev/null` over: native modules with raw memory access, and (unless
    `allow_native_modules`) native modules of the standard library's directory outside `lib-dynload`."""
    masks = _masked_modules(python)
    if not allow_native_modules:
        masks = sorted({*masks, *_foreign_native_files(python)})
    return masks


def module_dirs_to_hide(python: str, allow_native_modules: bool) -> list[str]:
    """Directories of Python modules outside the runner's standard library, which the `mountns` layer hides behind
    an empty read-only tmpfs after the interpreter's directories are bound back (so also its own `site-packages`);
    none with `allow_native_modules`."""
    return [] if allow_native_modules else list(_foreign_module_dirs(python))


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
        if any(path.startswith(os.path.realpath(t) + "/") for t in _PRIVATE_TMP_CANDIDATES):
            continue  # a checkout below /tmp: the private tmpfs over /tmp hides it already (its mount point is gone)
        if path not in out:
            out.append(path)
    # A directory inside another hidden one is hidden already (and its mount point would be gone).
    return [p for p in out if not any(p != q and p.startswith(q + "/") for q in out)]


def exposed_dirs(python: str, base_dir: str | None) -> list[str]:
    """Interpreter directories below a hidden or private-tmp directory: they are bind-mounted back."""
    covered = hidden_dirs(python, base_dir) + [os.path.realpath(p) for p in _PRIVATE_TMP_CANDIDATES]
    return [r for r in _python_roots(python) if any(r == h or r.startswith(h + "/") for h in covered)]
