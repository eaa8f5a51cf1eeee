"""Pytest plugin loaded (`-p trl_dropin.plugin`) into the run of TRL's copied tests, before their modules import.

- Pins precision: every TRL config is built with `bf16=False` and `fp16=False` (TRL defaults `bf16` to True and the
  tests' own conftest then trains in bf16 autocast on CPU, whose support and rounding vary between CPUs).
- Gives `trl.import_utils` the `is_*_available` helpers that the copied `testing_utils.py` imports but the installed
  TRL lacks (a test checkout newer than the installed TRL), each reporting "not available": the tests gated on them
  skip instead of the whole module failing to import.
- With `TRL_DROPIN_TRAINER=off` or `on`, replaces `trl.GRPOTrainer` and `trl.GRPOConfig` by `CoDaPOTrainer` and a
  `CoDaPOConfig` (weighting and sampling off, or CoDaPO's defaults), so that `from trl import GRPOTrainer` in the
  tests gets CoDaPO's classes. `stock` (the default) leaves TRL alone. In the on run, a test that does not say which
  reward is correctness (none does) gets one CoDaPO can read (`on_correctness`): its first reward function, a
  rollout counting as correct when that reward is `>= ON_THRESHOLD`, and a value offset (`ON_OFFSET`), so that its
  tools, environments and vision models train through CoDaPO's values, selection and loss while its own rewards
  still drive the advantages.
- With `TRL_DROPIN_SKIPS_OUT=<file>`, writes each collected test that its markers skip, with the reason, as one JSON
  `[test id, reason]` per line (`--list-skips`; run with `--collect-only`).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
import trl
import trl.import_utils as import_utils
from trl.trainer.base_config import _BaseConfig

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
if MODE not in ("stock", "off", "on"):
    raise ValueError(f"TRL_DROPIN_TRAINER must be stock, off or on, not {MODE!r}")

if MODE != "stock":
    from codapo_trl import CoDaPOConfig, CoDaPOTrainer

    if MODE == "off":

        @dataclass
        class DropInConfig(CoDaPOConfig):
            codapo_weighting: bool = False
            codapo_sampling: bool = False

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


class _ReportedVersion:
    """A module seen through a different `__version__` (everything else is the module's own)."""

    def __init__(self, module, version: str) -> None:
        self._module, self.__version__ = module, version

    def __getattr__(self, name: str):
        return getattr(self._module, name)


def _peft_before_ref_adapters(monkeypatch) -> None:
    # `test_train_moe_peft_model` (TRL issue 5222) asserts that no "ref" adapter is made for a LoRA that uses
    # `target_parameters`: the path TRL 1.16 still takes for PEFT 0.17-0.19 (peft#3340). With PEFT >= 0.20 here
    # (peft#3350), TRL 1.16 adds the "ref" adapter instead, so the test's first assertion no longer holds. TRL's GRPO
    # module alone is shown PEFT 0.19.0, so TRL takes the path the test was written for (reference log probs with
    # adapters disabled), and the test checks it in full.
    import trl.trainer.grpo_trainer as grpo

    monkeypatch.setattr(grpo, "peft", _ReportedVersion(grpo.peft, "0.19.0"))


# Tests written for a dependency's older behaviour, run against it by a scoped patch (docs/dropin.md lists them):
# `{test name: patch(monkeypatch)}`, applied for that test only.
VERSION_PATCHES = {"test_train_moe_peft_model": _peft_before_ref_adapters}


@pytest.fixture(autouse=True)
def _version_patches(request, monkeypatch):
    """Apply, for the test at hand only, its class's `VERSION_SHIMS` and its own `VERSION_PATCHES` (undone after)."""
    cls = getattr(request.node, "cls", None)
    for method, wrap in VERSION_SHIMS.get(getattr(cls, "__name__", ""), {}).items():
        monkeypatch.setattr(cls, method, wrap(cls.__dict__[method]))
    patch = VERSION_PATCHES.get(getattr(request.node, "originalname", ""))
    if patch is not None:
        patch(monkeypatch)
    yield
