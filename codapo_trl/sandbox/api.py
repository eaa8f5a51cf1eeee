"""The public sandbox: [`Sandbox`] (an [`Executor`] with detected layers, refused below the isolation floor) and
process-wide shared instances."""

from __future__ import annotations

import threading

from codapo_trl.sandbox.config import ExecutionResult, IsolationReport, SandboxConfig
from codapo_trl.sandbox.detection import detect_isolation
from codapo_trl.sandbox.executor import Executor
from codapo_trl.sandbox.floor import check_floor


class Sandbox(Executor):
    """Runs Python programs in isolation, up to `max_workers` at a time.

    The isolation layers are detected once per process (see [`detect_isolation`]); below the isolation floor (see
    [`floor_gaps`]) construction fails with [`SandboxFloorError`] unless explicitly opted out.

    Args:
        config (`SandboxConfig`, *optional*): limits and options.
        max_workers (`int`): executions run concurrently by [`Sandbox.map`] (and at most this many by concurrent
            [`Sandbox.run`] calls on this instance).
        isolation (`IsolationReport`, *optional*): layers to use; detected with [`detect_isolation`] by default.

    Example:

    ```python
    >>> sb = Sandbox(SandboxConfig(timeout=2))
    >>> sb.run("print(int(input()) * 2)", stdin="21\\n").stdout
    '42\\n'
    ```
    """

    def __init__(
        self, config: SandboxConfig | None = None, max_workers: int = 2, isolation: IsolationReport | None = None
    ) -> None:
        config = config or SandboxConfig()
        isolation = isolation or detect_isolation(config)
        check_floor(isolation, config)
        super().__init__(config, max_workers, isolation)


_SHARED: dict[tuple, Sandbox] = {}
_SHARED_LOCK = threading.Lock()


def get_sandbox(config: SandboxConfig | None = None, max_workers: int = 2) -> Sandbox:
    """A process-wide [`Sandbox`] for `(config, max_workers)`, created on first use."""
    config = config or SandboxConfig()
    key = (config, max_workers)
    with _SHARED_LOCK:
        if key not in _SHARED:
            _SHARED[key] = Sandbox(config, max_workers=max_workers)
        return _SHARED[key]


def run_python(source: str, stdin: str | bytes = "", **config_kwargs) -> ExecutionResult:
    """Run one program in the shared sandbox; `config_kwargs` are [`SandboxConfig`] fields."""
    return get_sandbox(SandboxConfig(**config_kwargs)).run(source, stdin)
