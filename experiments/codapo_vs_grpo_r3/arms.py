"""Round 3's arms (issue 63; the design note's section 3.3): each arm is a full recipe in `recipes/`, with its
number of optimizer steps and its read-out steps. Every arm generates the same 32 batches of 16 questions x 8
rollouts (4 096 rollouts); the 8-steps-per-phase arms take 8 optimizer steps per batch, so their read-outs after
batches 8, 16, 24 and 32 are after steps 64, 128, 192 and 256.

| arm | name | role |
|---|---|---|
| A0 | `grpo` | control: TRL's GRPO |
| A1 | `codapo_weighting` | GRPO with CoDaPO's weighting only (the paper's Table 4 ablation) |
| A2 | `codapo` | primary treatment: CoDaPO as Algorithm 1 |
| A3 | `codapo_authors` | the authors' released configuration scaled to this model |
| - | `grpo_authors_opt` | A3's matched GRPO control (A3's optimisation, no weighting, no S) |
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml


HERE = Path(__file__).resolve().parent
RECIPES = HERE / "recipes"
BATCHES = 32  # generation batches per run (16 B + 16 S phases for CoDaPO)
READ_OUT_BATCHES = (8, 16, 24, 32)  # greedy read-outs of every level, after these generation batches
SAMPLED_BATCHES = (32,)  # avg@4 at T = 0.6


@dataclass(frozen=True)
class Arm:
    """One arm: its recipe file and optimizer steps per generation batch (`steps_per_batch`)."""

    name: str
    label: str
    recipe: str
    steps_per_batch: int = 1
    description: str = ""

    @property
    def updates(self) -> int:
        """Optimizer steps of a run (`max_steps`)."""
        return BATCHES * self.steps_per_batch

    @property
    def greedy_steps(self) -> tuple[int, ...]:
        return tuple(b * self.steps_per_batch for b in READ_OUT_BATCHES)

    @property
    def sampled_steps(self) -> tuple[int, ...]:
        return tuple(b * self.steps_per_batch for b in SAMPLED_BATCHES)

    def recipe_path(self) -> Path:
        return RECIPES / self.recipe


ARMS: dict[str, Arm] = {
    arm.name: arm
    for arm in (
        Arm("grpo", "A0", "grpo.yaml", 1, "TRL's GRPO (control)"),
        Arm("codapo_weighting", "A1", "codapo_weighting.yaml", 1, "GRPO + CoDaPO's weighting (no S)"),
        Arm("codapo", "A2", "codapo.yaml", 1, "CoDaPO as Algorithm 1 (primary)"),
        Arm("codapo_authors", "A3", "codapo_authors.yaml", 8, "the authors' configuration"),
        Arm("grpo_authors_opt", "A3c", "grpo_authors_opt.yaml", 8, "GRPO with A3's optimisation"),
    )
}
PRIMARY, CONTROL = "codapo", "grpo"
LADDER = ("grpo", "codapo_weighting", "codapo", "codapo_authors")  # A0-A3: every arm of seeds 0-7


def load_recipe(arm: str) -> dict:
    """The arm's recipe as a dict; its `max_steps` must be the arm's `updates` (a recipe edited out of step with this
    table is an error)."""
    spec = ARMS[arm]
    recipe = yaml.safe_load(spec.recipe_path().read_text())
    if recipe.get("max_steps") != spec.updates:
        raise ValueError(
            f"{spec.recipe_path()} has max_steps {recipe.get('max_steps')}, the arm needs {spec.updates}."
        )
    return recipe


def seeded_recipe(arm: str, seed: int, pool: Path, overrides: Mapping | None = None) -> dict:
    """The arm's recipe for one run: seed `seed`, its pool file as the training data, plus `overrides` (e.g. the
    pilot rule's learning rate)."""
    recipe = load_recipe(arm)
    recipe.update({"seed": seed, "dataset_name": str(pool), **dict(overrides or {})})
    return recipe


def batch_of_step(arm: str, step: int) -> int:
    """The generation batch a read-out step of `arm` follows.

    Example:
        >>> batch_of_step("grpo", 16), batch_of_step("codapo_authors", 128)
        (16, 16)
    """
    per = ARMS[arm].steps_per_batch
    if step % per:
        raise ValueError(f"Step {step} of {arm} is inside a generation batch ({per} steps each).")
    return step // per
