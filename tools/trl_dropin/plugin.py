"""Pytest plugin loaded (`-p trl_dropin.plugin`) into the run of TRL's copied tests, before their modules import.

- Pins precision: every TRL config is built with `bf16=False` and `fp16=False` (TRL defaults `bf16` to True and the
  tests' own conftest then trains in bf16 autocast on CPU, whose support and rounding vary between CPUs).
- Gives `trl.import_utils` the `is_*_available` helpers that the copied `testing_utils.py` imports but the installed
  TRL lacks (a test checkout newer than the installed TRL), each reporting "not available": the tests gated on them
  skip instead of the whole module failing to import.
- With `TRL_DROPIN_TRAINER=off`, `stockloss` or `on`, replaces `trl.GRPOTrainer` and `trl.GRPOConfig` by
  `CoDaPOTrainer` and a `CoDaPOConfig` (off: weighting and sampling off, CoDaPO's loss; stockloss: the same with
  TRL's own default `loss_type`, so CoDaPO's trainer runs stock TRL's objective; on: CoDaPO's defaults), so that
  `from trl import GRPOTrainer` in the tests gets CoDaPO's classes. `stock` (the default) leaves TRL alone. In the
  on run, a test that does not say which reward is correctness (none does) gets one CoDaPO can read
  (`on_correctness`): its first reward function, a rollout counting as correct when that reward is `>= ON_THRESHOLD`,
  and a value offset (`ON_OFFSET`), so that its tools, environments and vision models train through CoDaPO's values,
  selection and loss while its own rewards still drive the advantages.
- With `TRL_DROPIN_RECORD=<file>`, appends one JSON line per `training_step` of a GRPO trainer: the test, the loss
  and a fingerprint of the accumulated gradients (`records.py`), for the stock-loss run's step-by-step comparison.
- With `TRL_DROPIN_SKIPS_OUT=<file>`, writes each collected test that its markers skip, with the reason, as one JSON
  `[test id, reason]` per line (`--list-skips`; run with `--collect-only`).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, fields
from pathlib import Path

import pytest
import torch
import trl
import trl.import_utils as import_utils
from trl.trainer.base_config import _BaseConfig
from trl.trainer.grpo_trainer import GRPOTrainer

from trl_dropin.on_run import ON_OFFSET, on_correctness
from trl_dropin.skips import UNBUILT, VERSION_SKIPS, junit_id, skip_reason


_post_init = _BaseConfig.__post_init__


def _pinned_post_init(self) -> None:
    self.bf16 = False
    self.fp16 = False
    _post_init(self)


_BaseConfig.__post_init__ = _pinned_post_init


def _unavailable(*args, **kwargs) -> bool:
    return False


_helpers = Path("tests/testing_utils.py")
if _helpers.exists():
    _block = re.search(r"from trl\.import_utils import \(([^)]*)\)", _helpers.read_text())
    for _name in re.findall(r"\w+", _block.group(1) if _block else ""):
        if not hasattr(import_utils, _name):
            setattr(import_utils, _name, _unavailable)

MODE = os.environ.get("TRL_DROPIN_TRAINER", "stock")
if MODE not in ("stock", "off", "stockloss", "on"):
    raise ValueError(f"TRL_DROPIN_TRAINER must be stock, off, stockloss or on, not {MODE!r}")
STOCK_LOSS_TYPE = next(f.default for f in fields(trl.GRPOConfig) if f.name == "loss_type")
"""TRL's own default `loss_type` (read off the installed `GRPOConfig`), the stockloss run's default."""

RECORD = os.environ.get("TRL_DROPIN_RECORD")
_training_step = GRPOTrainer.training_step


def _recorded_training_step(self, model, inputs, num_items_in_batch):
    loss = _training_step(self, model, inputs, num_items_in_batch)
    grads = [p.grad.detach().double() for p in model.parameters() if p.grad is not None]
    norm = torch.sqrt(sum((g * g).sum() for g in grads)).item() if grads else 0.0
    total = sum(g.sum() for g in grads).item() if grads else 0.0
    # PYTEST_CURRENT_TEST is the running test's node id and phase (`tests/x.py::Class::test[a] (call)`)
    test = junit_id(os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" ", 1)[0])
    self._dropin_steps = getattr(self, "_dropin_steps", -1) + 1
    row = {"test": test, "step": self._dropin_steps, "loss": loss.item(), "grad_norm": norm, "grad_sum": total}
    with open(RECORD, "a") as out:
        out.write(json.dumps(row) + "\n")
    return loss


if RECORD:
    GRPOTrainer.training_step = _recorded_training_step

if MODE != "stock":
    from codapo_trl import CoDaPOConfig, CoDaPOTrainer

    if MODE == "off":

        @dataclass
        class DropInConfig(CoDaPOConfig):
            codapo_weighting: bool = False
            codapo_sampling: bool = False

    elif MODE == "stockloss":

        @dataclass
        class DropInConfig(CoDaPOConfig):
            codapo_weighting: bool = False
            codapo_sampling: bool = False
            loss_type: str = STOCK_LOSS_TYPE

    else:

        @dataclass
        class DropInConfig(CoDaPOConfig):
            codapo_weight_offset: float = ON_OFFSET

    class DropInTrainer(CoDaPOTrainer):
        def __init__(self, model, reward_funcs=None, args=None, **kwargs):
            if args is None:  # GRPOTrainer builds a default GRPOConfig; the drop-in builds its own config
                name = model if isinstance(model, str) else model.config._name_or_path
                args = DropInConfig(f"{str(name).split('/')[-1]}-GRPO")
            super().__init__(model, reward_funcs, args=args, **kwargs)

        def _dynamics_options_default(self):
            # called once TRL has named the rewards (environments' included), before CoDaPO settles correctness
            options = super()._dynamics_options_default()
            if MODE == "on":
                options = on_correctness(options, self.reward_func_names)
            return options

    trl.GRPOConfig, trl.GRPOTrainer = DropInConfig, DropInTrainer


def pytest_collection_modifyitems(config, items) -> None:
    import inspect

    import pytest

    for item in items:
        if item.originalname in VERSION_SKIPS:
            item.add_marker(pytest.mark.skip(reason=VERSION_SKIPS[item.originalname]))
            continue
        source = inspect.getsource(item.function) if hasattr(item, "function") else ""
        params = str(getattr(getattr(item, "callspec", None), "params", {}))
        for model, reason in UNBUILT.items():
            # a model the test names in its parameters, or, unparametrised, loads in its body
            if model in params or (model in source and "model_id" not in source):
                item.add_marker(pytest.mark.skip(reason=reason))
                break
    skips_out = os.environ.get("TRL_DROPIN_SKIPS_OUT")
    if skips_out:
        with open(skips_out, "w") as out:
            for item in items:
                reason = skip_reason(item)
                if reason is not None:
                    out.write(json.dumps([junit_id(item.nodeid), reason]) + "\n")


def _with_eos_token_ids(make_trainer):
    def make(self):
        trainer = make_trainer(self)
        if not hasattr(trainer, "eos_token_ids"):
            trainer.eos_token_ids = [trainer._tokenizer.eos_token_id]
        return trainer

    return make


# Tests written against an older TRL than the installed one, adapted to the installed TRL's internals (each says what
# and why; docs/dropin.md lists them): `{class name: {method: wrapper}}`.
VERSION_SHIMS = {
    # The hand-built trainer of the tests' own `_make_trainer` predates `GRPOTrainer.eos_token_ids` (set in
    # `__init__` by TRL 1.16, read by `_generate` to log truncated completions): give it the tokenizer's EOS id.
    "TestGRPORolloutDispatch": {"_make_trainer": _with_eos_token_ids},
}


@pytest.fixture(autouse=True)
def _version_shims(request, monkeypatch):
    """Apply, for the test at hand only, its class's `VERSION_SHIMS` (undone after)."""
    cls = getattr(request.node, "cls", None)
    for method, wrap in VERSION_SHIMS.get(getattr(cls, "__name__", ""), {}).items():
        monkeypatch.setattr(cls, method, wrap(cls.__dict__[method]))
    yield
