"""How much smaller CoDaPO's gradient is than GRPO's on the same rollouts, and what that does to the optimizer.

CoDaPO multiplies each question's loss by its value `v = V_c(c) V_d(d)` (at most 1), so the logged `grad_norm` of a
CoDaPO run is about the batch's mean value times GRPO's. This script trains the tiny random model (or another local
model) with TRL's `GRPOTrainer` (its default loss) and with `CoDaPOTrainer` (the paper's defaults), same seed, same
config, and reports for each step the two gradient norms and CoDaPO's mean value; at step 1 both see the same
rollouts from the same weights, so their ratio is the method's scale alone. It also reports the size of AdamW's first
update in each run (scale-invariant: about the same), the share of non-zero gradient entries below AdamW's epsilon at
step 1 (where Adam's step is no longer scale-invariant) and how many steps TRL's default `max_grad_norm=1.0` would
clip.

    nice -n 10 python benchmarks/grad_norm_scale.py                 # tiny model, 6 steps, 8 rollouts per step
    nice -n 10 python benchmarks/grad_norm_scale.py --steps 10 --json
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile

import torch
from datasets import Dataset
from transformers import PrinterCallback, TrainerCallback
from trl import GRPOConfig, GRPOTrainer

from codapo_trl import CoDaPOConfig, CoDaPOTrainer
from codapo_trl.testing import build_tiny_model


def parity_reward(completions, **kwargs):
    """A 0/1 reward from the completion text: about half the rollouts of a random model are right."""
    return [float(sum(map(ord, c[-1]["content"])) % 2) for c in completions]


def questions(n: int) -> Dataset:
    return Dataset.from_dict(
        {"prompt": [[{"role": "user", "content": f"What is {i % 7} + {i % 5}?"}] for i in range(n)]}
    )


class FirstStep(TrainerCallback):
    """Keeps the gradient of the first optimizer step (no clipping: `max_grad_norm=0`) and the update it made."""

    def __init__(self):
        self.gradient: torch.Tensor | None = None
        self.update: torch.Tensor | None = None
        self._before: torch.Tensor | None = None

    @staticmethod
    def _flat(model, grad: bool = False) -> torch.Tensor:
        params = [p for p in model.parameters() if p.requires_grad]
        return torch.cat([(p.grad if grad else p).detach().flatten() for p in params]).clone()

    def on_step_begin(self, args, state, control, model=None, **kwargs):
        if state.global_step == 0:
            self._before = self._flat(model)

    def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
        if state.global_step == 0:
            self.gradient = self._flat(model, grad=True)

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if state.global_step == 1:
            self.update = self._flat(model) - self._before


def run(trainer_class, config_class, model_dir: str, steps: int, output_dir: str, **extra) -> dict:
    args = config_class(
        output_dir=output_dir,
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=16,
        max_steps=steps,
        learning_rate=1e-5,
        lr_scheduler_type="constant",
        max_grad_norm=0.0,  # log the raw norm; clipping is counted below against TRL's default of 1.0
        logging_steps=1,
        report_to="none",
        use_cpu=True,
        bf16=False,
        seed=0,
        save_strategy="no",
        disable_tqdm=True,
        model_init_kwargs={"dtype": "float32", "attn_implementation": "sdpa"},
        **extra,
    )
    recorder = FirstStep()
    trainer = trainer_class(model_dir, parity_reward, args=args, train_dataset=questions(64), callbacks=[recorder])
    trainer.remove_callback(PrinterCallback)
    trainer.train()
    history = [h for h in trainer.state.log_history if "grad_norm" in h]
    return {
        "grad_norm": [float(h["grad_norm"]) for h in history],
        "reward": [float(h["reward"]) for h in history],
        "value_mean": [h.get("codapo/value_mean") for h in history],
        "confidence_mean": [h.get("codapo/confidence_mean") for h in history],
        "gradient": recorder.gradient,
        "update": recorder.update,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny", help="'tiny' (the test model, built here) or a local model path")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--adam-epsilon", type=float, default=1e-8)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    options = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = str(build_tiny_model(f"{tmp}/model")) if options.model == "tiny" else options.model
        grpo = run(GRPOTrainer, GRPOConfig, model_dir, options.steps, f"{tmp}/grpo")
        codapo = run(CoDaPOTrainer, CoDaPOConfig, model_dir, options.steps, f"{tmp}/codapo")
    eps = options.adam_epsilon
    result = {
        "model": options.model,
        "steps": options.steps,
        "grpo_grad_norm": grpo["grad_norm"],
        "codapo_grad_norm": codapo["grad_norm"],
        "codapo_value_mean": codapo["value_mean"],
        "codapo_confidence_mean": codapo["confidence_mean"],
        "same_rollouts_step1": grpo["reward"][0] == codapo["reward"][0],
        "ratio_step1_grpo_over_codapo": grpo["grad_norm"][0] / codapo["grad_norm"][0],
        "update_norm_step1": {"grpo": float(grpo["update"].norm()), "codapo": float(codapo["update"].norm())},
        "nonzero_gradient_entries_below_adam_eps_step1": {
            name: float((run["gradient"][run["gradient"] != 0].abs() < eps).float().mean())
            for name, run in (("grpo", grpo), ("codapo", codapo))
        },
        "steps_clipped_at_max_grad_norm_1": {
            "grpo": sum(g > 1.0 for g in grpo["grad_norm"]),
            "codapo": sum(g > 1.0 for g in codapo["grad_norm"]),
        },
    }
    if options.json:
        print(json.dumps(result, indent=2))
        return
    print(f"{'step':>4} {'GRPO grad_norm':>15} {'CoDaPO grad_norm':>17} {'CoDaPO value_mean':>18}")
    for step, (g, c, v) in enumerate(zip(grpo["grad_norm"], codapo["grad_norm"], codapo["value_mean"]), start=1):
        print(f"{step:>4} {g:>15.4g} {c:>17.4g} {v if v is None else f'{v:.4g}':>18}")
    keys = [k for k in result if k.endswith("step1") or k.startswith("steps_clipped")]
    for key in keys:
        print(f"{key}: {result[key]}")


if __name__ == "__main__":
    main()
