"""The sandbox's runner: trusted code that starts the program inside the sandbox and, for `call` and `check` runs,
answers the judge's requests with plain data. It computes no verdict.

The bootstrap ([`codapo_trl.sandbox.bootstrap`]) execs, as the program's process, after every isolation layer is
set up:

    python -I -S -B -X utf8 <workdir>/.codapo_runner.py <workdir> <read roots joined by U+0001> <audit 0|1> <channel>

It only uses the standard library and never imports this package (the isolated interpreter could not: the checkout
is hidden). How it reaches the sandbox: the bootstrap reads this file (and, for `call` and `check` runs, the wire
format [`codapo_trl.sandbox.wire`]) on the host before it enters the mount namespace and writes copies into the
run's private working directory, the one place every layer lets the program's uid read (mountns hides the
checkout, Landlock only allows the interpreter's prefix and the working directory); the runner deletes the copies
before anything else, so the program's working directory holds only `solution.py`.

Then it installs the defence-in-depth audit hook when asked (it protects the machine, not a verdict: sockets,
subprocesses, foreign signals, ctypes, writes outside the working directory, reads outside the interpreter), gives
the program the `exit`/`quit` built-ins an interpreter started without `site` lacks, and:

- `<channel>` is `-` (`script`): runs `solution.py` as `__main__`, and the interpreter ends as it would for
  `python solution.py` (exit handlers, non-daemon threads, flushing); the caller judges its standard output.
- `<channel>` is `<read fd>,<write fd>` (`call`, `check`): reads the judge's `init` request (which function, the
  module's name, `solution`, so that an `if __name__ == "__main__":` block does not run, as in HumanEval's harness;
  the prompt's import lines), runs the program's module, answers `ready`, then answers each `call`
  request with the candidate's result and the post-call state of its arguments, or the name of the exception it
  raised, in the wire format, until the judge closes the channel. Whatever the program does to this process (or
  to the channel) can only change what it answers, which the judge reads as plain data.
"""

import sys


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
        if event == "import" and args[0] in (
            # raw memory access or a fresh interpreter: ways to switch this hook off (masked by mountns as well)
            "ctypes",
            "_ctypes",
            "_ctypes_test",
            "_testcapi",
            "_testinternalcapi",
            "_testbuffer",
            "_testmultiphase",
            "_xxsubinterpreters",
            "_xxtestfuzz",
        ):
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


class _Quitter:
    # `exit()` and `quit()`, which `site` adds to an ordinary interpreter (the sandbox's runs without `site`).
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return "Use " + self.name + "() or Ctrl-D (i.e. EOF) to exit"

    def __call__(self, code=None):
        try:  # noqa: SIM105
            sys.stdin.close()
        except Exception:
            pass
        raise SystemExit(code)


def _codapo_load():
    # Delete this file's copy (and load the wire format's) before the program can see them.
    import os

    os.unlink(sys.argv[0])
    wire = None
    path = sys.argv[1] + "/.codapo_wire.py"
    if sys.argv[4] != "-":
        with open(path, "rb") as f:
            source = f.read()
        wire = {"__name__": "codapo_wire"}
        exec(compile(source, "wire.py", "exec"), wire)
    if os.path.exists(path):
        os.unlink(path)
    import builtins

    builtins.exit, builtins.quit = _Quitter("exit"), _Quitter("quit")
    return wire


def _codapo_module(name):
    import builtins
    import types

    module = types.ModuleType(name)
    module.__file__ = "solution.py"
    module.__builtins__ = builtins
    sys.modules[name] = module  # what `dataclasses`, `pickle`, `typing` look up by a class's `__module__`
    with open("solution.py", "rb") as f:
        code = compile(f.read(), "solution.py", "exec")
    return module, code


def _codapo_script():
    module, code = _codapo_module("__main__")
    exec(code, module.__dict__)  # exceptions, SystemExit and the interpreter's exit as for `python solution.py`


def _codapo_serve(wire, channel):
    import os

    read_fd, write_fd = (int(fd) for fd in channel.split(","))
    encode, decode, frame, WireError = wire["encode"], wire["decode"], wire["frame"], wire["WireError"]
    buf = [b""]

    def receive():
        while b"\n" not in buf[0]:
            data = os.read(read_fd, 1 << 16)
            if not data:
                return None
            buf[0] += data
        head, _, rest = buf[0].partition(b"\n")
        n = int(head)
        while len(rest) < n:
            data = os.read(read_fd, 1 << 16)
            if not data:
                return None
            rest += data
        buf[0] = rest[n:]
        return decode(rest[:n])

    def send(message):
        try:
            payload = encode(message)
        except (WireError, RecursionError, MemoryError) as exc:
            payload = encode(("bad", str(exc)[:200]))
        data = frame(payload)
        while data:
            data = data[os.write(write_fd, data) :]

    def describe(exc):
        try:
            return type(exc).__name__, str(exc)[:300]
        except BaseException:
            return "Exception", ""

    def changed_state(values):
        # the arguments' state after the call, when one of them can have changed
        for v in values:
            if not (v is None or isinstance(v, (bool, int, float, str))):
                return values
        return None

    init = receive()
    if init is None:
        os._exit(0)
    _, mode, name, module_name, prelude = init
    module, code = _codapo_module(module_name)
    try:
        if prelude:
            exec(compile(prelude, "prelude.py", "exec"), module.__dict__)
        exec(code, module.__dict__)
        fn = module.__dict__.get(name)
        if mode == "call" and not callable(fn) and isinstance(module.__dict__.get("Solution"), type):
            fn = getattr(module.__dict__["Solution"](), name, None)
    except BaseException as exc:
        kind, text = describe(exc)
        send(("error", kind + (": " + text if text else "")))
        os._exit(1)
    send(("ready", callable(fn)))
    while True:
        request = receive()
        if request is None:  # the judge has its verdict
            try:  # noqa: SIM105
                sys.stdout.flush()
            except BaseException:
                pass
            os._exit(0)
        _, args, kwargs = request
        try:
            result = fn(*args, **kwargs)
        except BaseException as exc:
            send(("raise", *describe(exc)))
            continue
        if mode == "call":
            send(("ok", result, None, None))
        else:
            send(("ok", result, changed_state(args), changed_state(tuple(kwargs.values())) and kwargs))


if __name__ == "__main__":
    _wire = _codapo_load()
    _codapo_install_audit_hook() if sys.argv[3] == "1" else None
    del _codapo_install_audit_hook
    if _wire is None:
        del _codapo_load, _codapo_serve, _wire
        _codapo_script()
    else:
        _codapo_serve(_wire, sys.argv[4])
