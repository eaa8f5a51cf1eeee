"""What one execution is given and what it returns: limits ([`SandboxConfig`]), the harness mode ([`Harness`]), the
outcome ([`ExecutionResult`], [`Status`]) and which isolation layers are active ([`IsolationReport`])."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import StrEnum


ALL_LAYERS = ("uid", "userns", "netns", "pidns", "mountns", "cgroup", "landlock", "seccomp", "audit")

_MiB = 1024 * 1024


class Status(StrEnum):
    """Outcome of one execution (or, for `WRONG`, of one checked test case)."""

    OK = "ok"
    WRONG = "wrong"
    TIMEOUT = "timeout"
    MEMORY = "memory"
    OUTPUT_LIMIT = "output_limit"
    RUNTIME_ERROR = "runtime_error"
    SANDBOX_ERROR = "sandbox_error"


@dataclass(frozen=True)
class SandboxConfig:
    """Limits and options of one execution.

    Args:
        timeout (`float`): wall-clock limit in seconds for the whole run (interpreter start-up included).
        cpu_time (`float`, *optional*): CPU-time limit in seconds per process (`RLIMIT_CPU`, rounded up to whole
            seconds); defaults to `timeout`.
        memory_mb (`int`): address-space limit per process (`RLIMIT_AS`); with the `cgroup` layer the whole tree's
            resident memory plus its tmpfs files is limited to `memory_mb + 128` MiB as well. Memory no rlimit
            counts is bounded by the layers (see `docs/isolation.md`): memfd and SysV shared memory are refused by
            `seccomp`, files by the tmpfs sizes of `mountns`.
        max_output_bytes (`int`): cap on captured stdout, and on total stderr; exceeding either kills the run.
        stderr_tail_bytes (`int`): how much of the end of stderr is kept in the result.
        max_file_mb (`int`): largest file the program may write (`RLIMIT_FSIZE`).
        tmpfs_mb (`int`): size of the private working-directory tmpfs (`mountns` layer).
        max_processes (`int`): processes + threads the program may have (`RLIMIT_NPROC` / `pids.max`).
        max_open_files (`int`): `RLIMIT_NOFILE`.
        stack_mb (`int`): `RLIMIT_STACK` (also glibc's default thread stack size).
        allow_fork (`bool`): let the program create processes (the `seccomp` layer refuses them by default;
            threads are always allowed).
        nice (`int`): niceness added to the program.
        python_executable (`str`, *optional*): interpreter that runs the program; defaults to the base
            interpreter of the running Python (the program cannot see a virtualenv's packages).
        python_flags (`tuple[str, ...]`): interpreter flags; by default isolated mode without `site`.
        disable (`frozenset[str]`): isolation layers not to use even if available (see `ALL_LAYERS`).
        uid_base (`int`): first uid of the pool used when the trainer is root.
        uid_count (`int`): size of that pool (one uid per concurrent execution on the machine).
        base_dir (`str`, *optional*): where per-run directories are created; defaults to the temp dir.
        allow_below_floor (`bool`): run untrusted programs even when the active layers do not reach the isolation
            floor (see [`floor_gaps`]); also switched on by the environment variable
            `CODAPO_SANDBOX_ALLOW_BELOW_FLOOR=1`. For debugging on machines without namespaces only.
        allow_native_modules (`bool`): let programs load native extension modules from outside the standard
            library's own `lib-dynload` (third-party packages in the interpreter's `site-packages`, such as
            `_cffi_backend`, and other Python installations on the machine). Off by default: the `mountns` layer
            hides those directories (an extension module runs native code, which the audit hook cannot see), and
            without `mountns` the floor refuses. Only for a trusted interpreter whose packages you want programs to
            use (numpy still needs the import path: the interpreter runs with `-S`).
    """

    timeout: float = 4.0
    cpu_time: float | None = None
    memory_mb: int = 512
    max_output_bytes: int = 4 * _MiB
    stderr_tail_bytes: int = 4096
    max_file_mb: int = 16
    tmpfs_mb: int = 64
    max_processes: int = 16
    max_open_files: int = 64
    stack_mb: int = 16
    allow_fork: bool = False
    nice: int = 0
    python_executable: str | None = None
    python_flags: tuple[str, ...] = ("-I", "-S", "-B", "-X", "utf8")
    disable: frozenset[str] = frozenset()
    uid_base: int = 61000
    uid_count: int = 512
    base_dir: str | None = None
    allow_below_floor: bool = False
    allow_native_modules: bool = False

    def __post_init__(self) -> None:
        unknown = set(self.disable) - set(ALL_LAYERS)
        if unknown:
            raise ValueError(f"unknown isolation layers in `disable`: {sorted(unknown)}; known: {ALL_LAYERS}")
        if self.timeout <= 0 or self.memory_mb <= 0 or self.max_output_bytes <= 0:
            raise ValueError("timeout, memory_mb and max_output_bytes must be positive")


@dataclass
class ExecutionResult:
    """What one execution produced.

    Attributes:
        status (`Status`): for a script, `ok` (exit status 0, no signal); for `call` and `check` runs, the judge's
            verdict: `ok` (the test passed), `wrong` (a wrong value or a failed assertion), or the reason no
            verdict was reached (`runtime_error`, `timeout`, `memory`, `output_limit`); `sandbox_error` only when
            the sandbox could not set up, the judge could not start or the test itself cannot run: never for
            anything the program does or sends.
        stdout (`str`): captured standard output (at most `max_output_bytes`, decoded as UTF-8 with replacement).
        stderr (`str`): the last `stderr_tail_bytes` of standard error.
        exit_code (`int`, *optional*): the program's exit code, if it exited.
        signal (`int`, *optional*): the signal that killed it, if any.
        wall_time (`float`): seconds from launch to the end of the run.
        cpu_time (`float`, *optional*): user + system CPU seconds of the program (and its waited-for children).
        max_rss_mb (`float`, *optional*): peak resident memory of the program.
        reason (`str`): one-line human-readable explanation for anything but `ok`.
        stage (`str`, *optional*): for `sandbox_error`, the set-up stage that failed.
        verdict (`str`, *optional*): for `call` and `check` runs, the judge's verdict line (see
            [`codapo_trl.sandbox.judge`]), or `None` if the judge gave none.
    """

    status: Status
    stdout: str = ""
    stderr: str = ""
    exit_code: int | None = None
    signal: int | None = None
    wall_time: float = 0.0
    cpu_time: float | None = None
    max_rss_mb: float | None = None
    reason: str = ""
    stage: str | None = None
    verdict: str | None = None

    @property
    def ok(self) -> bool:
        return self.status is Status.OK


@dataclass(frozen=True)
class Harness:
    """How a program is run and who judges it.

    - `"script"` (default): the program runs as `__main__` with the given standard input and ends as
      `python solution.py` would; the caller judges its standard output.
    - `"call"` and `"check"`: the program's process only runs the program's module, named `solution` (not
      `__main__`: as HumanEval's own harness `exec`s it, an `if __name__ == "__main__":` block does not run), and
      answers requests; the verdict is computed by a judge process that never runs the program's code
      ([`codapo_trl.sandbox.judge`]),
      from plain data decoded by [`codapo_trl.sandbox.wire`]. `"call"` calls `fn_name(*json.loads(args))` (a
      function, or a method of a class `Solution`) once and compares the result with `json.loads(expected)`;
      `"check"` runs `context` (or `prelude`) and `test` (HumanEval style) in the judge and calls
      `check(candidate)` with a proxy that forwards each call to the program.

    Args:
        mode (`str`): `"script"`, `"call"` or `"check"`.
        fn_name (`str`, *optional*): the function called in `"call"` mode.
        args (`str`, *optional*): JSON list of the arguments in `"call"` mode.
        expected (`str`, *optional*): JSON of the expected return value in `"call"` mode.
        test (`str`, *optional*): test code defining `check(candidate)` in `"check"` mode.
        entry_point (`str`, *optional*): name of the candidate function in `"check"` mode.
        prelude (`str`): import lines run before the program in its module (`"check"` mode: the prompt's imports),
            and before the test in the judge when `context` is not a module on its own.
        context (`str`): dataset code run in the judge before the test (`"check"` mode: HumanEval's prompt, which
            defines helpers such as `poly` that some tests call).
    """

    mode: str = "script"
    fn_name: str | None = None
    args: str | None = None
    expected: str | None = None
    test: str | None = None
    entry_point: str | None = None
    prelude: str = ""
    context: str = ""

    def __post_init__(self) -> None:
        if self.mode not in ("script", "call", "check"):
            raise ValueError(f"unknown harness mode {self.mode!r}; use 'script', 'call' or 'check'")
        if self.mode == "call" and (not self.fn_name or self.args is None or self.expected is None):
            raise ValueError("a 'call' harness needs `fn_name`, `args` and `expected`")
        if self.mode == "check" and (not self.test or not self.entry_point):
            raise ValueError("a 'check' harness needs `test` and `entry_point`")

    def judge_spec(self) -> dict:
        """What the judge is told about the run (besides its channel and budget)."""
        if self.mode == "call":
            spec = {"mode": "call", "name": self.fn_name, "module": "solution"}
            for key, text in (("args", self.args), ("expected", self.expected)):
                if len(text) > _JUDGE_DECODES_JSON_CHARS:  # the judge decodes it: the trainer only copies the text
                    spec[key + "_json"] = text
                else:
                    spec[key] = json.loads(text)
            return spec
        return {
            "mode": "check",
            "name": self.entry_point,
            "module": "solution",
            "test": self.test,
            "prelude": self.prelude,
            "context": self.context,
        }


SCRIPT = Harness()
# A call's arguments or expected value whose JSON text is longer than this are sent to the judge as that text: the
# trainer's wire encoding of a decoded value costs about 0.1 s of its CPU per MB; the judge then imports `json`
# (milliseconds of its own start-up, which every smaller run is spared).
_JUDGE_DECODES_JSON_CHARS = 1 << 16


@dataclass(frozen=True)
class IsolationReport:
    """Which isolation layers are active, and why the others are not."""

    active: tuple[str, ...]
    missing: dict[str, str] = field(default_factory=dict)
    python_executable: str = ""
    privileged: bool = False

    def summary(self) -> str:
        """Every layer, and whether it is active (with the reason when it is not)."""
        parts = ["caps: on", "rlimits: on"]
        for layer in ALL_LAYERS:
            if layer in self.active:
                parts.append(f"{layer}: on")
            else:
                parts.append(f"{layer}: OFF ({self.missing.get(layer, 'not available')})")
        return "; ".join(parts)
