"""What one execution is given and what it returns: limits ([`SandboxConfig`]), the harness mode ([`Harness`]), the
outcome ([`ExecutionResult`], [`Status`]) and which isolation layers are active ([`IsolationReport`])."""

from __future__ import annotations

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
            resident memory plus its tmpfs files is limited to `memory_mb + 128` MiB as well.
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
        status (`Status`): `ok` (exit code 0 and confirmed by the harness), `timeout`, `memory`, `output_limit`, `runtime_error` or
            `sandbox_error` (the sandbox itself failed: not the program's fault).
        stdout (`str`): captured standard output (at most `max_output_bytes`, decoded as UTF-8 with replacement).
        stderr (`str`): the last `stderr_tail_bytes` of standard error.
        exit_code (`int`, *optional*): the program's exit code, if it exited.
        signal (`int`, *optional*): the signal that killed it, if any.
        wall_time (`float`): seconds from launch to the end of the run.
        cpu_time (`float`, *optional*): user + system CPU seconds of the program (and its waited-for children).
        max_rss_mb (`float`, *optional*): peak resident memory of the program.
        reason (`str`): one-line human-readable explanation for anything but `ok`.
        stage (`str`, *optional*): for `sandbox_error`, the set-up stage that failed.
        confirmed (`bool`): the harness confirmed, on its own channel with the run's nonce, that the program (and
            its tests) ran to the end (see [`Harness`]); `status` is `ok` only then.
        harness_value (`str`, *optional*): what the harness confirmed with (the JSON return value in `"call"`
            mode), or its failure message.
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
    confirmed: bool = False
    harness_value: str | None = None

    @property
    def ok(self) -> bool:
        return self.status is Status.OK


@dataclass(frozen=True)
class Harness:
    """What the trusted harness inside the sandbox does with the program, and what it confirms.

    The harness (trusted code that runs the program in its own interpreter) reports on a channel of its own, with
    a per-run random nonce the program never sees, and only from its own stack frame once the program (and its
    tests) returned; [`ExecutionResult.confirmed`] is true only then. Modes:

    - `"script"` (default): run the program as `__main__` (its standard output is judged by the caller); confirmed
      when the program's code returned (or raised `SystemExit` with status 0), its non-daemon threads finished and
      its output was flushed.
    - `"call"`: run the program as a module, call `fn_name(*json.loads(args))` (a function, or a method of a class
      `Solution`) and confirm with the JSON text of the return value, which must be made of plain built-in types.
    - `"check"`: run `prelude`, the program and `test` (HumanEval style), then call `check(entry_point)`; confirmed
      when `check` returned, the candidate only returned plain built-in values, no built-in or module attribute the
      test uses was replaced, and no thread is left.

    Args:
        mode (`str`): `"script"`, `"call"` or `"check"`.
        fn_name (`str`, *optional*): the function called in `"call"` mode.
        args (`str`, *optional*): JSON list of the arguments in `"call"` mode.
        test (`str`, *optional*): test code defining `check(candidate)` in `"check"` mode.
        entry_point (`str`, *optional*): name of the candidate function in `"check"` mode.
        prelude (`str`): code run before the program in `"check"` mode (the prompt's imports).
    """

    mode: str = "script"
    fn_name: str | None = None
    args: str | None = None
    test: str | None = None
    entry_point: str | None = None
    prelude: str = ""

    def __post_init__(self) -> None:
        if self.mode not in ("script", "call", "check"):
            raise ValueError(f"unknown harness mode {self.mode!r}; use 'script', 'call' or 'check'")
        if self.mode == "call" and (not self.fn_name or self.args is None):
            raise ValueError("a 'call' harness needs `fn_name` and `args`")
        if self.mode == "check" and (not self.test or not self.entry_point):
            raise ValueError("a 'check' harness needs `test` and `entry_point`")

    def spec(self, nonce: str) -> dict:
        return {
            "nonce": nonce,
            "mode": self.mode,
            "fn_name": self.fn_name,
            "args": self.args,
            "test": self.test,
            "entry_point": self.entry_point,
            "prelude": self.prelude,
        }


SCRIPT = Harness()


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
