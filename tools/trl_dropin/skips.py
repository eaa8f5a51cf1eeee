"""Which TRL tests may be skipped, and for which reason: `(test id, reason)` pairs, each matched exactly.

A skip is allowed only when its test id and its reason are both in [`ALLOWED_SKIPS`]; a skip of another test, or of
a listed test for another reason, fails the check. The pairs are what collecting TRL's `main` at 1.10.0.dev0 (commit
f2cd57710) with this harness's plugin gives (`python -m trl_dropin --trl-tests ... --work ... --list-skips` prints
them; read the list before replacing it): GPU-only, liger, bitsandbytes, kernels and vLLM tests by the tests' own
markers, the VLMs whose processors need torchvision ([`UNBUILT`]), and the Liger-loss tests TRL 1.16 made moot
([`VERSION_SKIPS`]); the plugin marks those two kinds, with these reasons.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def junit_id(nodeid: str) -> str:
    """The id a junit report gives a test (`Class::test[params]`, or `module::test` outside a class), from its pytest
    node id (`tests/test_grpo_trainer.py::Class::test[params]`).

    Example:
    ```python
    >>> junit_id("tests/test_grpo_trainer.py::TestGRPOTrainer::test_training[standard_prompt_only]")
    'TestGRPOTrainer::test_training[standard_prompt_only]'
    >>> junit_id("tests/test_grpo_trainer.py::test_free_function")
    'test_grpo_trainer::test_free_function'
    ```
    """
    parts = nodeid.split("::")
    if len(parts) >= 3:
        return "::".join(parts[-2:])
    return f"{Path(parts[0]).stem}::{parts[-1]}"


def skip_reason(item: Any) -> str | None:
    """The reason a collected pytest item will be skipped by its `skipif` / `skip` markers, as pytest decides it
    (`skipif` first, the first whose boolean condition holds; then `skip`), or `None`. String conditions are not
    evaluated (TRL's markers use booleans)."""
    for mark in item.iter_markers(name="skipif"):
        conditions = mark.args or (mark.kwargs.get("condition"),)
        if any(isinstance(c, bool) and c for c in conditions):
            return mark.kwargs.get("reason", "")
    for mark in item.iter_markers(name="skip"):
        return mark.kwargs.get("reason", mark.args[0] if mark.args else "unconditional skip")
    return None


def unexpected_skips(skipped: dict[str, str], allowed: dict[str, str]) -> list[str]:
    """The skips of `skipped` (`{test id: reason}`) that `allowed` does not list with that very reason, each as a line
    saying what was skipped and why.

    Example:
    ```python
    >>> unexpected_skips({"T::a": "test requires vllm", "T::b": "no reason"}, {"T::a": "test requires vllm"})
    ["T::b: skipped for 'no reason', which ALLOWED_SKIPS does not list for it"]
    ```
    """
    lines = []
    for test, reason in sorted(skipped.items()):
        if allowed.get(test) != reason:
            expected = f" (listed for {allowed[test]!r})" if test in allowed else ""
            lines.append(f"{test}: skipped for {reason!r}, which ALLOWED_SKIPS does not list for it{expected}")
    return lines


# Hub models with no local stand-in, and why: a test that loads one is skipped with this reason (the tests' own
# markers skip the GPU-only, liger, bitsandbytes and vLLM tests).
TORCHVISION = (
    "needs a local {0}: transformers' {0} processor requires a video processor, which needs torchvision; PyPI's "
    "torchvision is the CUDA build, whose C++ ops do not load against the CPU torch here (no CPU torchvision wheel "
    "is reachable from this machine)"
)
UNBUILT = {
    "tiny-Qwen2VLForConditionalGeneration": TORCHVISION.format("Qwen2-VL"),
    "tiny-Qwen2_5_VLForConditionalGeneration": TORCHVISION.format("Qwen2.5-VL"),
    "tiny-Qwen3_5ForConditionalGeneration-NoThink": TORCHVISION.format("Qwen3.5"),
    "tiny-Qwen3_5MoeForConditionalGeneration-3.6": TORCHVISION.format("Qwen3.5-MoE"),
    "tiny-Gemma4ForConditionalGeneration": TORCHVISION.format("Gemma 4"),
}


LIGER_LOSS_REMOVED = (
    "liger: written for TRL's Liger GRPO loss, which TRL 1.16 removed (`use_liger_kernel=True` now only warns and "
    "applies Liger's layer kernels at train start), so {0}; liger-kernel is not installed here"
)
# Tests of the checkout that exercise what the installed TRL no longer has (docs/dropin.md): skipped, with why.
VERSION_SKIPS = {
    "test_liger_kernel_with_peft_non_lm_head_target_allowed": LIGER_LOSS_REMOVED.format(
        "constructing without liger-kernel no longer raises the ImportError the test expects"
    ),
    "test_liger_kernel_with_peft_modules_to_save_lm_head_allowed": LIGER_LOSS_REMOVED.format(
        "constructing without liger-kernel no longer raises the ImportError the test expects"
    ),
    "test_liger_kernel_with_peft_prompt_learning_raises": LIGER_LOSS_REMOVED.format(
        "the loss's prompt-learning guard the test expects is gone"
    ),
}


ALLOWED_SKIPS: dict[str, str] = {
    **dict.fromkeys(
        [
            "TestGRPOTrainer::test_compute_liger_loss_passes_vllm_is_ratio",
            "TestGRPOTrainer::test_train_delta_clipping[True]",
            "TestGRPOTrainer::test_train_loss_types[bnpo-True]",
            "TestGRPOTrainer::test_train_loss_types[cispo-True]",
            "TestGRPOTrainer::test_train_loss_types[dapo-True]",
            "TestGRPOTrainer::test_train_loss_types[dr_grpo-True]",
            "TestGRPOTrainer::test_train_loss_types[luspo-True]",
            "TestGRPOTrainer::test_train_loss_types[sapo-True]",
            "TestGRPOTrainer::test_train_loss_types[vespo-True]",
            "TestGRPOTrainer::test_train_with_bias_correction_kl[True]",
            "TestGRPOTrainer::test_train_with_off_policy_mask_with_liger",
            "TestGRPOTrainerSlow::test_liger_grpo_kernel_importance_sampling",
            "TestGRPOTrainerSlow::test_train_with_liger_grpo_kernel[trl-internal-testing/tiny-LlamaForCausalLM-3.2]",
            "TestGRPOTrainerSlow::test_train_with_liger_grpo_kernel[trl-internal-testing/tiny-MistralForCausalLM-0.2]",
            "TestGRPOTrainerSlow::test_train_with_liger_grpo_kernel_and_peft[trl-internal-testing/tiny-LlamaForCausalLM-3.2]",
            "TestGRPOTrainerSlow::test_train_with_liger_grpo_kernel_and_peft[trl-internal-testing/tiny-MistralForCausalLM-0.2]",
            "TestGRPOTrainerVLM::test_train_vlm_and_liger[trl-internal-testing/tiny-Qwen2_5_VLForConditionalGeneration]",
        ],
        "test requires liger-kernel",
    ),
    **{f"TestGRPOTrainer::{name}": reason for name, reason in VERSION_SKIPS.items()},
    **dict.fromkeys(
        [
            "TestGRPOTrainer::test_train_vllm_and_peft",
            "TestGRPOTrainer::test_train_vllm_importance_sampling_correction[0.5-5.0]",
            "TestGRPOTrainer::test_train_vllm_importance_sampling_correction[0.5-None]",
            "TestGRPOTrainer::test_train_vllm_importance_sampling_correction[None-3.0]",
            "TestGRPOTrainer::test_train_vllm_structured_outputs",
            "TestGRPOTrainer::test_train_vllm_with_additional_generation_kwargs",
            "TestGRPOTrainerSlow::test_train_vllm",
            "TestGRPOTrainerVLM::test_train_vlm_and_vllm[trl-internal-testing/tiny-Gemma3ForConditionalGeneration]",
            "TestGRPOTrainerVLM::test_train_vlm_and_vllm[trl-internal-testing/tiny-Gemma4ForConditionalGeneration]",
            "TestGRPOTrainerVLM::test_train_vlm_and_vllm[trl-internal-testing/tiny-Qwen2_5_VLForConditionalGeneration]",
        ],
        "test requires vllm",
    ),
    **dict.fromkeys(
        [
            "TestGRPOTrainerSlow::test_train_with_transformers_continuous_batching[trl-internal-testing/tiny-LlamaForCausalLM-3.2]",
            "TestGRPOTrainerSlow::test_train_with_transformers_continuous_batching[trl-internal-testing/tiny-MistralForCausalLM-0.2]",
        ],
        "test requires accelerator",
    ),
    **dict.fromkeys(
        [
            "TestGRPOTrainerSlow::test_vlm_processor_vllm_colocate_mode",
            "TestGRPOTrainerSlow::test_vlm_training[HuggingFaceTB/SmolVLM-Instruct]",
        ],
        "test requires bitsandbytes",
    ),
    **dict.fromkeys(
        [
            "TestGRPOTrainerVLM::test_train_vlm[trl-internal-testing/tiny-Gemma4ForConditionalGeneration]",
        ],
        UNBUILT["tiny-Gemma4ForConditionalGeneration"],
    ),
    **dict.fromkeys(
        [
            "TestGRPOTrainerVLM::test_train_vlm[trl-internal-testing/tiny-Qwen2VLForConditionalGeneration]",
        ],
        UNBUILT["tiny-Qwen2VLForConditionalGeneration"],
    ),
    **dict.fromkeys(
        [
            "TestGRPOTrainerVLM::test_train_vlm[trl-internal-testing/tiny-Qwen2_5_VLForConditionalGeneration]",
            "TestGRPOTrainerVLM::test_train_vlm_and_importance_sampling[trl-internal-testing/tiny-Qwen2_5_VLForConditionalGeneration]",
            "TestGRPOTrainerVLM::test_train_vlm_beta_non_zero[trl-internal-testing/tiny-Qwen2_5_VLForConditionalGeneration]",
            "TestGRPOTrainerVLM::test_train_vlm_multi_image[trl-internal-testing/tiny-Qwen2_5_VLForConditionalGeneration]",
            "TestGRPOTrainerVLM::test_train_vlm_peft[trl-internal-testing/tiny-Qwen2_5_VLForConditionalGeneration]",
        ],
        UNBUILT["tiny-Qwen2_5_VLForConditionalGeneration"],
    ),
    **dict.fromkeys(
        [
            "TestGRPOTrainerVLM::test_train_vlm[trl-internal-testing/tiny-Qwen3_5ForConditionalGeneration-NoThink]",
            "TestGRPOTrainerVLM::test_train_with_tools_multimodal_response",
        ],
        UNBUILT["tiny-Qwen3_5ForConditionalGeneration-NoThink"],
    ),
    **dict.fromkeys(
        [
            "TestGRPOTrainerVLM::test_train_vlm[trl-internal-testing/tiny-Qwen3_5MoeForConditionalGeneration-3.6]",
        ],
        UNBUILT["tiny-Qwen3_5MoeForConditionalGeneration-3.6"],
    ),
}
"""`{test id: reason}`: the skips of TRL's `main` at 1.10.0.dev0 (f2cd57710) under this harness (see the module)."""
