"""Python warnings that TRL raises through this package's hooks, shown at the user's line instead of ours.

TRL warns with a `stacklevel` that names its caller: under stock `GRPOTrainer` that is the user's script, under
`CoDaPOTrainer` it is the `super()` call of one of our hooks (`codapo_trl/dynamics/mixin.py:...`), which tells the
user nothing. [`warnings_at_user_line`] records the warnings raised inside it and issues again each one that points
into this package, at the first frame of the stack outside this package, TRL, transformers and accelerate (the
user's `CoDaPOTrainer(...)` or `trainer.train()` line); every other warning is issued again unchanged.
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from collections.abc import Iterator


__all__ = ["warnings_at_user_line"]


def _folder(module_name: str) -> str:
    module = sys.modules.get(module_name)
    file = getattr(module, "__file__", None)
    return os.path.dirname(os.path.abspath(file)) + os.sep if file else "\0"


_OURS = _folder(__name__.rpartition(".")[0])
_LIBRARIES = ("trl", "transformers", "accelerate")


def _user_frame() -> tuple[str, int, dict] | None:
    """`(filename, line, module globals)` of the innermost frame outside this package and the libraries between
    the user and our hooks, or `None` (no such frame: everything is library code)."""
    skipped = (_OURS, *(_folder(name) for name in _LIBRARIES), os.path.dirname(contextlib.__file__) + os.sep)
    frame = sys._getframe(1)
    while frame is not None:
        if not os.path.abspath(frame.f_code.co_filename).startswith(skipped):
            return frame.f_code.co_filename, frame.f_lineno, frame.f_globals
        frame = frame.f_back
    return None


@contextlib.contextmanager
def warnings_at_user_line() -> Iterator[None]:
    """Issue the warnings raised in the block again once it ends, those pointing into this package at the user's
    line (see the module's docstring), where the warning filters decide again, as they would for stock TRL; the
    others as they were. For a block that runs once (a constructor): the warning registry, which makes a `default`
    warning show once per line, is reset whenever warnings are caught, so a block run per batch would repeat them."""
    caught: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            yield
    finally:
        _issue_again(caught)


def _issue_again(caught: list[warnings.WarningMessage]) -> None:
    user = _user_frame() if caught else None
    for warning in caught:
        if user is not None and os.path.abspath(warning.filename).startswith(_OURS):
            filename, lineno, module_globals = user
        else:  # issued again where it was raised, so that an outer recorder (pytest.warns) sees it as before
            filename, lineno, module_globals = warning.filename, warning.lineno, _module_globals(warning.filename)
        module = module_globals.get("__name__") if module_globals else None
        warnings.warn_explicit(  # a module name is needed: without one, warn_explicit issues nothing
            warning.message,
            warning.category,
            filename,
            lineno,
            module=module or os.path.splitext(os.path.basename(filename))[0],
            registry=module_globals.setdefault("__warningregistry__", {}) if module_globals is not None else {},
            source=warning.source,
        )


def _module_globals(filename: str) -> dict | None:
    """The globals of the loaded module whose file is `filename` (its warning registry lives there), or `None`."""
    for module in list(sys.modules.values()):
        if getattr(module, "__file__", None) == filename:
            return vars(module)
    return None
