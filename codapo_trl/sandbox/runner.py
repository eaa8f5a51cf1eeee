"""The sandbox's runner: trusted code that runs the program inside the sandbox and confirms how it ended.

The bootstrap ([`codapo_trl.sandbox.bootstrap`]) execs, as the program's process, after every isolation layer is
set up:

    python -I -S -B -X utf8 <workdir>/.codapo_runner.py <workdir> <read roots joined by U+0001> <audit 0|1> <report fd>

It only uses the standard library and never imports this package (the isolated interpreter could not: the checkout
is hidden). How it reaches the sandbox: the bootstrap reads this file on the host before it enters the mount
namespace and writes a copy into the run's private working directory, the one place every layer lets the program's
uid read (mountns hides the checkout, Landlock only allows the interpreter's prefix and the working directory, the
audit hook is not installed yet, and a file there is readable whatever uid the program runs as); the runner deletes
the copy before anything else, so the program's working directory holds only `solution.py`. Copying one small file
exposes nothing else of the checkout (a bind mount of the file would need a mount point, and an inherited fd a path
through `/proc` that Landlock would refuse), and costs a few microseconds per run.

Then it reads and deletes the harness's spec (`.codapo_harness`: nonce, mode, arguments), installs the integrity
guard (an audit hook that alone can write the confirmation, with the nonce, on the report fd), the defence-in-depth
audit hook when asked, and runs the program under the harness (see [`codapo_trl.sandbox.Harness`] for the
`script`, `call` and `check` modes). Names the program could replace (built-ins, module attributes) are bound as
default arguments before the program runs.
"""

import sys


def _codapo_install_guard(nonce, report_fd):
    # The harness's integrity guard, always installed (whatever the isolation layers): the only way to write the
    # confirmation is an audit event raised from the harness's own frame, once, in the original process. The
    # nonce lives only in this closure; the ways to reach closures, frames' state or raw memory are refused.
    import os

    _write, _getpid, _getframe, _pid, _realpath = os.write, os.getpid, sys._getframe, os.getpid(), os.path.realpath
    # the registered harness frame, confirmation sent, tampering seen, frames protected, inside own_frame()
    state = [None, False, "", False, False]

    def own_frame():  # the frame that raised the event being handled (not refused by the protection below)
        state[4] = True
        try:
            return _getframe(2)
        finally:
            state[4] = False

    def guard(
        event,
        args,
        _Err=PermissionError,
        _isinstance=isinstance,
        _str=str,
        _bytes=bytes,
        _ValueError=ValueError,
        _frames=frozenset(("tb_frame", "gi_frame", "cr_frame", "ag_frame")),
        _denied=frozenset(
            (
                "sys.settrace",
                "sys.setprofile",
                "sys._current_frames",
                "gc.get_objects",
                "gc.get_referrers",
                "gc.get_referents",
                "code.__new__",
            )
        ),
        _modules=frozenset(
            (
                "ctypes",
                "_ctypes",
                "_ctypes_test",
                "_testcapi",
                "_testinternalcapi",
                "_testbuffer",
                "_testmultiphase",
                "_xxsubinterpreters",
                "_xxtestfuzz",
            )
        ),
    ):
        if state[3] and not state[4]:
            # While a check-format test runs, no frame is handed out: the test's own frame holds the expected
            # values (ValueError is what the standard library expects when no frame is available).
            if event == "sys._getframe":
                raise _ValueError("sandbox: frames are not available during the tests")
            if event == "object.__getattr__" and args[1] in _frames:
                raise _Err("sandbox: frames are not available during the tests")
        if event == "codapo.confirm":
            if own_frame() is not state[0] or state[1] or _getpid() != _pid:
                state[2] = state[2] or "a confirmation was forged"
                raise _Err("sandbox: only the harness confirms")
            state[1] = True
            verdict = args[0]
            if state[2]:
                verdict = "fail " + state[2]
            _write(report_fd, (nonce + " " + verdict + "\n").encode("utf-8", "replace"))
            return
        if event == "codapo.register":
            if state[0] is None:
                state[0] = own_frame()
            return
        if event == "codapo.protect":
            if own_frame() is not state[0]:
                raise _Err("sandbox: only the harness protects frames")
            state[3] = args[0]
            return
        if event in _denied or event.startswith("ctypes."):
            raise _Err("sandbox: " + event + " is not allowed")
        if event == "import" and args[0] in _modules:
            raise _Err("sandbox: import " + args[0] + " is not allowed")
        if event == "marshal.loads" and own_frame().f_code.co_filename != "<frozen importlib._bootstrap_external>":
            raise _Err("sandbox: marshal.loads is not allowed")
        if event == "open" and (_isinstance(args[0], _str) or _isinstance(args[0], _bytes)):
            path = args[0] if _isinstance(args[0], _str) else args[0].decode("utf-8", "replace")
            if "proc" in path or not path.startswith("/"):
                parts = _realpath(path).split("/")
                if (
                    len(parts) > 3
                    and parts[1] == "proc"
                    and ("mem" in parts or "map_files" in parts or "pagemap" in parts)
                ):
                    raise _Err("sandbox: reading process memory is not allowed")

    sys.addaudithook(guard)


def _codapo_install_audit_hook():
    import os

    work = sys.argv[1]
    read_roots = tuple(r for r in sys.argv[2].split("\x01") if r)

    def hook(
        event,
        args,
        _work=work,
        _read_roots=read_roots,
        _getpid=os.getpid,
        _getcwd=os.getcwd,
        _fspath=os.fspath,
        _fsdecode=os.fsdecode,
        _isinstance=isinstance,
        _int=int,
        _str=str,
        _tuple=tuple,
        _Err=PermissionError,
        _WRITE=os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND,
        _self=None,
    ):
        def deny(what):
            raise _Err("sandbox: " + what + " is not allowed")

        def norm(p):
            if _isinstance(p, _int):
                return None
            try:
                p = _fsdecode(_fspath(p))
            except Exception:
                deny("unusual path")
            if not p.startswith("/"):
                p = _getcwd() + "/" + p
            parts = []
            for part in p.split("/"):
                if part in ("", "."):
                    continue
                if part == "..":
                    if parts:
                        parts.pop()
                    continue
                parts.append(part)
            return "/" + "/".join(parts)

        def inside(p, roots):
            for r in roots:  # noqa: SIM110 (no global name such as `any`: the program may have replaced it)
                if p == r or p.startswith(r.rstrip("/") + "/"):
                    return True
            return False

        if event == "open":
            path = norm(args[0])
            if path is None:
                return
            mode, flags = args[1], args[2]
            writing = (_isinstance(flags, _int) and flags & _WRITE) or (
                _isinstance(mode, _str) and ("w" in mode or "a" in mode or "x" in mode or "+" in mode)
            )
            if writing:
                if not (
                    inside(path, (_work, "/dev/fd", "/proc/self/fd"))
                    or path in ("/dev/null", "/dev/stdout", "/dev/stderr")
                ):
                    deny("writing " + path)
            elif not inside(path, _read_roots):
                deny("reading " + path)
            return
        if event.startswith(
            (
                "socket.",
                "ctypes.",
                "os.exec",
                "os.posix_spawn",
                "os.spawn",
                "os.system",
                "subprocess.",
                "os.startfile",
                "pty.",
                "gc.get_",
                "sys.settrace",
                "sys.setprofile",
                "sys._current_frames",
                "os.symlink",
                "os.link",
                "os.chroot",
                "os.mknod",
                "os.mkfifo",
                "os.setxattr",
                "os.removexattr",
                "webbrowser.",
                "sys.unraisablehook",
            )
        ):
            deny(event)
        if event in ("os.kill", "os.killpg"):
            if event == "os.kill" and args[0] == _getpid():
                return
            deny(event)
        if event == "import" and args[0] in ("ctypes", "_ctypes", "_xxsubinterpreters"):
            deny("import " + args[0])
        if event == "object.__setattr__" and args[0] is _self:
            deny("setting " + args[1])
        if event in (
            "os.remove",
            "os.rmdir",
            "os.mkdir",
            "os.rename",
            "os.truncate",
            "os.chmod",
            "os.chown",
            "os.utime",
            "os.chdir",
            "shutil.rmtree",
            "shutil.copyfile",
            "shutil.copymode",
            "shutil.copystat",
            "shutil.move",
            "shutil.chown",
            "shutil.make_archive",
            "shutil.unpack_archive",
        ):
            for a in args:
                if _isinstance(a, (_str, bytes)) or hasattr(a, "__fspath__"):
                    p = norm(a)
                    if p is not None and not inside(p, (_work,)):
                        deny(event + " on " + p)

    hook.__defaults__ = hook.__defaults__[:-1] + (hook,)  # so that it can refuse changes to itself
    sys.addaudithook(hook)


def _codapo_read_spec():
    # "<nonce>\n<mode>\n<JSON of the rest, for call and check only>": no json import for scripts.
    import os

    os.unlink(sys.argv[0])  # this file's copy in the working directory (see the module's docstring)
    path = sys.argv[1] + "/.codapo_harness"
    with open(path, "rb") as f:
        nonce, mode, rest = f.read().decode().split("\n", 2)
    os.unlink(path)
    spec = {"nonce": nonce, "mode": mode}
    if mode != "script":
        import json

        spec.update(json.loads(rest))
    return spec


def _codapo_harness(
    spec,
    _audit=sys.audit,
    _exit=__import__("os")._exit,  # noqa: B008 (bound once, before the program can replace anything)
    _count=__import__("_thread")._count,  # noqa: B008
    _type=type,
    _isinstance=isinstance,
    _len=len,
    _str=str,
    _int=int,
    _float=float,
    _bool=bool,
    _list=list,
    _tuple=tuple,
    _dict=dict,
    _none=type(None),  # noqa: B008
    _repr_f=float.__repr__,
    _repr_i=int.__repr__,
    _BaseException=BaseException,
    _SystemExit=SystemExit,
    _builtins=__import__("builtins"),  # noqa: B008
    _sys=sys,
    _compile=compile,
    _exec=exec,
    _callable=callable,
    _set=set,
    _frozenset=frozenset,
    _PLAIN=(int, float, complex, bool, str, bytes, type(None)),  # noqa: B008
):
    # Runs the program (and, for "call" and "check", its tests) and confirms, through the guard, only after the
    # last test returned: every way of ending early (exit calls, exit handlers, signals, BaseException, a closed
    # channel, threads still running) leaves the run unconfirmed or confirmed as failed.
    _audit("codapo.register")
    mode = spec["mode"]
    stdout = _sys.stdout
    if mode == "call":  # before the program runs: it could replace them
        from _json import encode_basestring_ascii as _enc
        from json import loads as _loads

    def plain(value, depth=0):
        # JSON text of a value made of plain built-in types only (no subclass can override equality).
        t = _type(value)
        if depth > 100:
            raise ValueError("return value nested too deeply")
        if value is None or t is _bool:
            return "null" if value is None else ("true" if value else "false")
        if t is _int:
            return _repr_i(value)
        if t is _float:
            if value != value:
                return "NaN"
            if value == 1e400 or value == -1e400:
                return "Infinity" if value > 0 else "-Infinity"
            return _repr_f(value)
        if t is _str:
            return _enc(value)
        if t is _list or t is _tuple:
            return "[" + ",".join([plain(v, depth + 1) for v in value]) + "]"
        if t is _dict:
            items = []
            for k, v in _list(value.items()):
                tk = _type(k)
                if tk is _str:
                    key = _enc(k)
                elif tk is _int or tk is _float or tk is _bool or k is None:
                    key = _enc(plain(k, depth + 1))
                else:
                    raise TypeError(f"dict key of type {tk.__name__}")
                items.append(key + ":" + plain(v, depth + 1))
            return "{" + ",".join(items) + "}"
        raise TypeError(f"return value of type {t.__name__} is not plain data")

    def check_plain(value, depth=0):
        # Only built-in types whose equality no program can redefine (a subclass could make == always true).
        t = _type(value)
        if depth > 100:
            raise ValueError("return value nested too deeply")
        if t in _PLAIN:
            return
        if t is _list or t is _tuple or t is _set or t is _frozenset or t in containers[0]:
            for v in value:
                check_plain(v, depth + 1)
            return
        if t is _dict or t in containers[1] or (t is containers[2] and counter_intact()):
            for k, v in _list(_dict.items(value)):
                check_plain(k, depth + 1)
                check_plain(v, depth + 1)
            return
        raise TypeError(f"the candidate returned a {t.__name__}, not plain data")

    containers = [(), (), None, None]  # C-implemented sequence types, C mapping types, Counter, its class dict

    def counter_intact():  # Counter is pure Python: accepted only while no method of it was replaced
        d = containers[2].__dict__
        return _len(d) == _len(containers[3]) and all(d.get(k) is v for k, v in containers[3].items())

    def guarded(fn):
        def candidate(*args, **kwargs):
            result = fn(*args, **kwargs)
            check_plain(result)
            return result

        return candidate

    try:
        import types

        main = types.ModuleType("__main__")
        main.__file__ = "solution.py"
        main.__builtins__ = _builtins
        if mode == "script":
            _sys.modules["__main__"] = main
        with open("solution.py", "rb") as f:
            code = _compile(f.read(), "solution.py", "exec")
        del types, f
        if mode == "script":
            try:
                _exec(code, main.__dict__)
            except _SystemExit as exc:
                if exc.code is not None and not (_type(exc.code) is _int and exc.code == 0):
                    status = exc.code & 255 if _type(exc.code) is _int else 1
                    if _type(exc.code) is not _int:
                        _sys.stderr.write(f"{exc.code}\n")  # as the interpreter does; not the user's `print`
                    _sys.stdout.flush()
                    stdout.flush()
                    _audit("codapo.confirm", f"fail exit code {status}")
                    _exit(status)
            threading = _sys.modules.get("threading")
            if threading is not None:
                threading._shutdown()  # non-daemon threads finish, as at a normal interpreter exit
            _sys.stdout.flush()
            stdout.flush()
            verdict = "ok"  # daemon threads may be left: they end with the process, as usual
        elif mode == "call":
            args = _loads(spec["args"])
            main.__name__ = "solution"
            _exec(code, main.__dict__)
            name = spec["fn_name"]
            fn = main.__dict__.get(name)
            if fn is None and _isinstance(main.__dict__.get("Solution"), _type):
                fn = getattr(main.__dict__["Solution"](), name, None)
            verdict = ("ok " + plain(fn(*args))) if _callable(fn) else ("fail function " + name + " is not defined")
        else:  # check
            _audit("codapo.protect", True)
            import collections as _collections  # before the program: its C types cannot be patched, Counter can

            containers[:] = [
                (_collections.deque,),
                (_collections.OrderedDict, _collections.defaultdict),
                _collections.Counter,
                _dict(_collections.Counter.__dict__),
            ]
            snapshot = _dict(_builtins.__dict__)
            if spec.get("prelude"):
                _exec(_compile(spec["prelude"], "prelude.py", "exec"), main.__dict__)
            _exec(code, main.__dict__)
            candidate = main.__dict__.get(spec["entry_point"])
            test_ns = _dict(main.__dict__)  # the program holds no reference to it: nothing can swap `check`
            _exec(_compile(spec["test"], "test.py", "exec"), test_ns)
            check = test_ns.get("check")
            if _count():
                verdict = "fail a thread was running when the tests started"
            elif not _callable(candidate) or not _callable(check):
                verdict = "fail " + spec["entry_point"] + " or check is not defined"
            else:
                modules = [
                    v
                    for k, v in _list(test_ns.items())
                    if _type(v) is _type(_sys) and k in check.__code__.co_names and v is not _sys
                ]
                before = [(m, _dict(m.__dict__)) for m in modules]
                check(guarded(candidate))
                verdict = "ok"
                for k, v in snapshot.items():
                    if _builtins.__dict__.get(k) is not v:
                        verdict = "fail the program replaced the built-in " + k
                for m, d in before:
                    for k, v in d.items():
                        if m.__dict__.get(k) is not v:
                            verdict = "fail the program replaced " + m.__name__ + "." + k
        if mode != "script" and _count():
            verdict = "fail a thread was still running after the tests"
    except _BaseException as exc:
        try:  # noqa: SIM105 (nothing imported or looked up globally once the program ran)
            _audit("codapo.protect", False)  # the traceback below needs the frames
        except _BaseException:
            pass
        try:
            name = _type(exc).__name__
            detail = _str(exc)[:200] if _type(exc) in (_SystemExit, AssertionError) else ""
        except _BaseException:
            name, detail = "exception", ""
        try:
            import traceback

            traceback.print_exception(exc)
        except _BaseException:
            pass
        try:
            _sys.stdout.flush()
            stdout.flush()
        except _BaseException:
            pass
        try:  # noqa: SIM105
            _audit("codapo.confirm", "fail " + name + (": " + detail if detail else ""))
        except _BaseException:
            pass
        _exit(1)
    try:
        _audit("codapo.confirm", verdict)
    except _BaseException:
        _exit(1)
    _exit(0 if verdict == "ok" or verdict.startswith("ok ") else 1)


if __name__ == "__main__":
    _spec = _codapo_read_spec()
    _codapo_install_guard(_spec.pop("nonce"), int(sys.argv[4]))
    _codapo_install_audit_hook() if sys.argv[3] == "1" else None
    del _codapo_install_guard, _codapo_install_audit_hook, _codapo_read_spec
    _codapo_harness(_spec)
