"""A TRL GRPO script turned into CoDaPO, runnable offline on a laptop CPU: no hub, no GPU.

    python examples/dropin_offline.py                 # the embedded SmolLM2-135M-Instruct (`make demo`'s model)
    python examples/dropin_offline.py --model tiny    # a random 2-layer model built in seconds: checks the wiring only

The only CoDaPO lines are the import and the config class; everything else is TRL's `GRPOTrainer` script as it
stands. The data is the synthetic leveled addition task (`load_math_dataset("arithmetic")`, generated locally), the
reward the package's maths verifier. Each update prints one progress line (step, phase B or S, reward, value,
solved and unsolved fractions, loss, learning rate); the full metrics go to `--output-dir`'s `trainer_state.json`
and to any tracker set with `--report-to`.
"""

from __future__ import annotations

import argparse
import tempfile

from codapo_trl import CoDaPOConfig, CoDaPOTrainer, load_math_dataset  # instead of: from trl import GRPO...
from codapo_trl.models import DEFAULT_EMBEDDED_MODEL, resolve_model_name_or_path
from codapo_trl.rewards import math_accuracy_reward
from codapo_trl.testing import build_tiny_model


def main(argv: list[str] | None = None) -> CoDaPOTrainer:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--model", default=DEFAULT_EMBEDDED_MODEL, help="a local checkpoint, the embedded alias, or 'tiny'"
    )
    parser.add_argument("--steps", type=int, default=8, help="optimizer steps (B and S alternate)")
    parser.add_argument("--questions", type=int, default=64, help="training questions")
    parser.add_argument("--output-dir", default="outputs/dropin-offline")
    parser.add_argument("--report-to", default="none")
    options = parser.parse_args(argv)

    if options.model == "tiny":
        model = str(build_tiny_model(tempfile.mkdtemp(prefix="codapo-tiny-")))
    else:
        model = resolve_model_name_or_path(options.model)  # the embedded alias is converted once, offline
    dataset = load_math_dataset("arithmetic", limit=options.questions)

    args = CoDaPOConfig(  # instead of: GRPOConfig(...), with the same arguments
        output_dir=options.output_dir,
        max_steps=options.steps,
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=64,
        learning_rate=1e-5,
        logging_steps=1,
        save_strategy="no",
        report_to=options.report_to,
        use_cpu=True,
        bf16=False,  # float32 on CPU: the same numbers on every processor
        model_init_kwargs={"dtype": "float32"},
        codapo_weight_offset=0.1,  # a model that solves little yet still trains (README, "Cold start")
    )
    trainer = CoDaPOTrainer(model, reward_funcs=math_accuracy_reward, args=args, train_dataset=dataset)
    trainer.train()
    return trainer


if __name__ == "__main__":
    main()
