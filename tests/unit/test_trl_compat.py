"""`codapo_trl._trl_compat`: the private TRL hooks and attributes the core depends on, and their checks."""

import warnings
from collections import defaultdict, deque

import pytest
from trl import GRPOTrainer

from codapo_trl import _trl_compat as compat


def test_every_named_hook_exists_in_the_installed_trl():
    assert compat._hook_problems(GRPOTrainer, compat.GRPO_HOOKS) == []
    assert compat._hook_problems(compat.VLLMGeneration, compat.VLLM_HOOKS) == []


def test_a_missing_hook_or_parameter_is_reported():
    class OldTrainer:
        def _compute_loss(self, model):
            pass

    problems = compat._hook_problems(OldTrainer, {"_compute_loss": ("model", "inputs"), "_generate": ("prompts",)})
    assert problems == ["OldTrainer._compute_loss has no parameter(s) ['inputs']", "OldTrainer._generate is missing"]


def test_an_unsupported_version_warns_and_a_changed_hook_is_an_import_error(monkeypatch):
    monkeypatch.setattr(compat.trl, "__version__", "1.17.0")
    with pytest.warns(
        UserWarning, match=r"supports TRL >=1\.16\.0,<1\.17\.0 \(tested with 1\.16\.0\), found 1\.17\.0"
    ):
        compat._check_trl()
    monkeypatch.setattr(compat.trl, "__version__", "1.16.1.dev0")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compat._check_trl()  # a 1.16 patch release is in range
    monkeypatch.setitem(compat.GRPO_HOOKS, "_no_such_hook", ())
    with pytest.raises(
        ImportError, match=r"GRPOTrainer\._no_such_hook is missing.*pip install 'trl>=1\.16\.0,<1\.17\.0'"
    ):
        compat._check_trl()


def test_missing_trainer_attributes_are_a_clear_error():
    class Half:
        _step = 0

    with pytest.raises(RuntimeError, match=r"needs the GRPOTrainer attributes \['_buffered_inputs', '_metrics'"):
        compat.check_trainer_attributes(Half())


def test_separate_logs_captures_then_restores():
    class Trainer:
        _metrics = {"train": defaultdict(list, {"kept": [1.0]})}
        _logs = {"prompt": deque(["p"], maxlen=3), "rewards": defaultdict(lambda: deque(maxlen=3))}

    trainer = Trainer()
    own_metrics, own_logs = trainer._metrics["train"], trainer._logs
    with compat.separate_logs(trainer) as captured:
        compat.train_metrics(trainer)["new"].append(2.0)
        trainer._logs["prompt"].append("q")
        trainer._logs["rewards"]["acc"].append(1.0)
    assert compat.train_metrics(trainer) is own_metrics and trainer._logs is own_logs
    assert dict(captured.metrics) == {"new": [2.0]} and captured.logs["prompt"].maxlen == 3
    compat.extend_logs(trainer, compat.plain_logs(captured.logs))
    assert list(own_logs["prompt"]) == ["p", "q"] and list(own_logs["rewards"]["acc"]) == [1.0]
    assert own_metrics == {"kept": [1.0]}


def test_every_trl_hook_the_core_overrides_is_named_and_overridden_at_one_level():
    from codapo_trl import CoDaPOTrainer, DynamicsMixin
    from codapo_trl.vllm_cpu import CPUVLLMGeneration

    def trl_overrides(cls, parent, methods=True):
        names = {n for n in vars(cls) if n.startswith("_") and not n.startswith("__") and hasattr(parent, n)}
        return {n for n in names if callable(getattr(parent, n)) == methods}

    mixin, trainer = trl_overrides(DynamicsMixin, GRPOTrainer), trl_overrides(CoDaPOTrainer, GRPOTrainer)
    assert trl_overrides(CoDaPOTrainer, GRPOTrainer, methods=False) <= set(compat.GRPO_CLASS_ATTRIBUTES)
    assert mixin | trainer <= set(compat.GRPO_HOOKS)
    assert trl_overrides(CPUVLLMGeneration, compat.VLLMGeneration) <= set(compat.VLLM_HOOKS)
    assert not mixin & trainer, f"hooks overridden by both DynamicsMixin and CoDaPOTrainer: {mixin & trainer}"
    assert "_generate_and_score_completions" in mixin and trainer == {"_get_train_sampler"}
