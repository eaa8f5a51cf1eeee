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
    assert {"_generate_and_score_completions", "_get_train_sampler"} <= mixin and trainer == set()


def _epochs(sampler, count):
    """`count` successive iterations of `sampler` as lists, set to each epoch first as the Trainer loop does when
    `sampler` has `set_epoch`."""
    orders = []
    for epoch in range(count):
        if hasattr(sampler, "set_epoch"):
            sampler.set_epoch(epoch)
        orders.append(list(sampler))
    return orders


def _trl_sampler(seed=7, shuffle=True):
    return compat.RepeatSampler(list(range(10)), mini_repeat_count=2, batch_size=3, repeat_count=2, shuffle=shuffle,
                                seed=seed)  # fmt: skip


def test_the_epoch_sampler_draws_trls_orders_epoch_after_epoch():
    trl_orders = _epochs(_trl_sampler(), 4)
    assert len({tuple(order) for order in trl_orders}) == 4  # the epochs' orders differ
    assert _epochs(compat.EpochRepeatSampler.from_sampler(_trl_sampler()), 4) == trl_orders
    unseeded = compat.EpochRepeatSampler.from_sampler(_trl_sampler(shuffle=False))
    assert _epochs(unseeded, 2) == _epochs(_trl_sampler(shuffle=False), 2)


def test_a_fresh_epoch_sampler_set_to_a_later_epoch_draws_that_epochs_order():
    """What a resumed process does: a new sampler, set to the epoch it resumes in (TRL's would draw epoch 0's)."""
    trl_orders = _epochs(_trl_sampler(), 5)
    for epoch in (2, 1, 3):
        sampler = compat.EpochRepeatSampler.from_sampler(_trl_sampler())
        sampler.set_epoch(epoch)
        assert list(sampler) == trl_orders[epoch]
        sampler.set_epoch(epoch + 1)
        assert list(sampler) == trl_orders[epoch + 1]
    sampler = compat.EpochRepeatSampler.from_sampler(_trl_sampler())
    sampler.set_epoch(3)
    list(sampler)
    sampler.set_epoch(1)  # back to an earlier epoch
    assert list(sampler) == trl_orders[1]


def test_the_epoch_sampler_multiplies_the_repeats_and_refuses_another_sampler():
    doubled = compat.EpochRepeatSampler.from_sampler(_trl_sampler(), repeat_factor=2)
    assert doubled.repeat_count == 4 and len(doubled) == 2 * len(_trl_sampler())
    # each generation batch of 3 questions x 2 generations comes 4 times in a row instead of 2
    single = list(_trl_sampler())
    assert list(doubled) == [i for k in range(0, len(single), 12) for i in single[k : k + 6] * 4]
    with pytest.raises(TypeError, match="RepeatSampler"):
        compat.EpochRepeatSampler.from_sampler(list(range(3)))
