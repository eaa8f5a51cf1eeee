"""A short CoDaPO run for the multi-process tests: `accelerate launch ... train_codapo.py OUT MODEL [key=value ...]`.

Each rank writes OUT/rank<r>.json with the S selections it held after every B update, the prompts it generated in
every call of TRL's generation, and a digest plus the change of its (gathered) final weights.
"""

import json
import os
import sys
from pathlib import Path


sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parents[2])]

import torch  # noqa: E402
from fakes import deterministic_rollout, hash_reward, question_dataset  # noqa: E402
from transformers import TrainerCallback  # noqa: E402
from trl import GRPOTrainer  # noqa: E402

from codapo_trl import CoDaPOConfig, CoDaPOTrainer  # noqa: E402


def full_parameters(trainer) -> dict[str, torch.Tensor]:
    model = trainer.accelerator.unwrap_model(trainer.model)
    params = dict(model.named_parameters())
    if trainer.is_deepspeed_enabled and trainer.accelerator.state.deepspeed_plugin.zero_stage == 3:
        import deepspeed

        with deepspeed.zero.GatheredParameters(list(params.values())):
            return {n: p.detach().clone().float() for n, p in params.items()}
    return {n: p.detach().clone().float() for n, p in params.items()}


class RecordSelection(TrainerCallback):
    def __init__(self):
        self.trainer = None
        self.selections = []
        self.last_step = None

    def on_step_end(self, args, state, control, **kwargs):
        state = self.trainer._codapo
        if state.selection is not None and state.selection_step != self.last_step:  # a new B phase selected
            self.last_step = state.selection_step
            self.selections.append([row["prompt"][-1]["content"] for row in state.selection])


def main():
    out, model = Path(sys.argv[1]), sys.argv[2]
    overrides = dict(arg.split("=", 1) for arg in sys.argv[3:])
    settings = dict(
        output_dir=str(out / "run"),
        per_device_train_batch_size=int(overrides.pop("per_device", 4)),
        gradient_accumulation_steps=int(overrides.pop("accumulation", 1)),
        steps_per_generation=int(overrides["spg"]) if "spg" in overrides else None,
        num_generations=4,
        max_completion_length=8,
        max_steps=int(overrides.pop("max_steps", 4 * int(overrides.pop("spg", 1)))),
        logging_steps=1,
        learning_rate=1e-3,
        optim="sgd",
        lr_scheduler_type="constant",
        max_grad_norm=0.0,
        report_to="none",
        use_cpu=True,
        bf16=False,
        save_strategy="no",
        seed=42,
        disable_tqdm=True,
        codapo_top_k=2,
        codapo_resample_timing=overrides.pop("timing", "before_update"),
        loss_type=overrides.pop("loss_type", "codapo"),
        codapo_question_log="questions.jsonl",
    )
    args = CoDaPOConfig(**settings)
    recorder = RecordSelection()
    trainer = CoDaPOTrainer(
        model,
        hash_reward,
        args=args,
        train_dataset=question_dataset(),
        rollout_func=deterministic_rollout,
        callbacks=[recorder],
    )
    recorder.trainer = trainer
    generated = []
    original = GRPOTrainer._generate_and_score_completions

    def spy(self, inputs):
        generated.append([row["prompt"][-1]["content"] for row in inputs])
        return original(self, inputs)

    GRPOTrainer._generate_and_score_completions = spy
    initial = full_parameters(trainer)
    trainer.train()
    final = full_parameters(trainer)
    rank = trainer.accelerator.process_index
    record = {
        "rank": rank,
        "world_size": trainer.accelerator.num_processes,
        "selections": recorder.selections,
        "generated": generated,
        "phases": [h["codapo/phase"] for h in trainer.state.log_history if "codapo/phase" in h],
        "digest": float(sum(p.double().sum() for p in final.values())),
    }
    torch.save({n: final[n] - initial[n] for n in final}, out / f"delta{rank}.pt")
    (out / f"rank{rank}.json").write_text(json.dumps(record))
    sys.stdout.flush()
    sys.stderr.flush()
    # torch's gloo backend can abort at interpreter exit ("terminate called without an active exception") after a
    # finished run; leave without running the interpreter's teardown.
    os._exit(0)


if __name__ == "__main__":
    main()
