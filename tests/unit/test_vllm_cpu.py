"""`codapo_trl.vllm_cpu` without an engine: how the CPU weight sync is applied (the vLLM tier runs it for real)."""

import types

import pytest
from trl.generation.vllm_generation import VLLMGeneration
from trl.trainer import grpo_trainer

from codapo_trl import CoDaPOTrainer, GRPODynamicsTrainer
from codapo_trl.vllm_cpu import CPUVLLMGeneration, CPUVLLMMixin, with_cpu_vllm_sync


class Probe:
    """Stands in for GRPOTrainer: records which class TRL's constructor would build its vLLM backend from."""

    def __init__(self, fail=False):
        self.seen = grpo_trainer.VLLMGeneration
        if fail:
            raise ValueError("bad argument")


def test_the_mixin_swaps_trls_vllm_backend_only_while_constructing():
    class Trainer(CPUVLLMMixin, Probe):
        pass

    assert Trainer().seen is CPUVLLMGeneration
    assert grpo_trainer.VLLMGeneration is VLLMGeneration
    with pytest.raises(ValueError, match="bad argument"):
        Trainer(fail=True)
    assert grpo_trainer.VLLMGeneration is VLLMGeneration  # restored when construction fails too


def test_our_trainers_and_wrapped_baselines_carry_the_mixin():
    assert issubclass(CoDaPOTrainer, CPUVLLMMixin) and issubclass(GRPODynamicsTrainer, CPUVLLMMixin)
    wrapped = with_cpu_vllm_sync(grpo_trainer.GRPOTrainer)
    assert issubclass(wrapped, grpo_trainer.GRPOTrainer) and issubclass(wrapped, CPUVLLMMixin)
    assert wrapped.__name__ == "GRPOTrainer" and with_cpu_vllm_sync(wrapped) is wrapped
    assert with_cpu_vllm_sync(CoDaPOTrainer) is CoDaPOTrainer


def test_a_server_without_the_reload_extension_is_a_clear_error_at_start():
    generation = CPUVLLMGeneration.__new__(CPUVLLMGeneration)
    response = types.SimpleNamespace(status_code=404, text="Not Found")
    session = types.SimpleNamespace(post=lambda url, json: response)
    generation.vllm_client = types.SimpleNamespace(base_url="http://127.0.0.1:1", session=session)
    with pytest.raises(RuntimeError, match="--worker-extension-cls codapo_trl.vllm_cpu.CPUWeightSyncExtension"):
        generation._check_server_extension()
