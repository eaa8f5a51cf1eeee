import os
from pathlib import Path

import pytest
import yaml


os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# TRL's configs turn `bf16` on unless told otherwise, and what bf16 autocast computes depends on the CPU (its kernels
# round differently on different processors), so a test that inherits the default passes on one machine and fails on
# another. In the test process every TRL config must therefore say `bf16` (or `fp16`) itself: an unpinned one raises
# at construction. `CODAPO_TEST_UNPINNED_BF16=on` / `off` lets unpinned configs through with bf16 on / off instead
# (to find the tests that inherit it: run the suite both ways and compare).
UNPINNED_BF16 = os.environ.get("CODAPO_TEST_UNPINNED_BF16", "error")
if UNPINNED_BF16 not in ("error", "on", "off"):
    raise ValueError(f"CODAPO_TEST_UNPINNED_BF16 must be 'error', 'on' or 'off', not {UNPINNED_BF16!r}")


class PrecisionNotPinnedError(ValueError):
    """A test built a TRL config without saying `bf16`/`fp16`: its numbers would depend on the machine's CPU."""


def _pin_precision(config) -> None:
    if config.bf16 is not None or config.fp16:
        return
    if UNPINNED_BF16 == "error":
        raise PrecisionNotPinnedError(
            f"{type(config).__name__} built without `bf16`: TRL turns it on by default and bf16 autocast rounds "
            "differently on different CPUs; pass bf16=False (or True, with bounds that hold on any CPU)"
        )
    config.bf16 = UNPINNED_BF16 == "on"


@pytest.fixture(autouse=True, scope="session")
def _precision_must_be_pinned():
    """Every `GRPOConfig` (so `CoDaPOConfig`) and `SFTConfig` built in the test process pins its precision."""
    from trl import GRPOConfig, SFTConfig

    originals = {cls: cls.__post_init__ for cls in (GRPOConfig, SFTConfig)}

    def checked(original):
        def __post_init__(self):
            _pin_precision(self)
            original(self)

        return __post_init__

    for cls, original in originals.items():
        cls.__post_init__ = checked(original)
    yield
    for cls, original in originals.items():
        cls.__post_init__ = original


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """Path to a tiny random Qwen2 causal LM with a character-level ChatML tokenizer, built offline."""
    from codapo_trl.testing import build_tiny_model

    return str(build_tiny_model(tmp_path_factory.mktemp("tiny-model")))


@pytest.fixture
def tiny_recipe(tiny_model_dir, tmp_path):
    """`tiny_recipe(output_dir, **overrides) -> Path`: the demo recipe shrunk to the tiny model (2 updates of 8-token
    completions on 64 questions, 4 x 2 rollouts per update, a checkpoint per update), written to tmp_path."""
    demo = Path(__file__).resolve().parents[1] / "recipes" / "SmolLM2-135M-Instruct" / "codapo" / "config_demo.yaml"

    def write(output_dir, **overrides) -> Path:
        recipe = yaml.safe_load(demo.read_text())
        recipe.update(
            model_name_or_path=tiny_model_dir,
            output_dir=str(output_dir),
            max_steps=2,
            max_completion_length=8,
            per_device_train_batch_size=4,
            gradient_accumulation_steps=2,
            dataset_limit=64,
        )
        recipe.update({"save_strategy": "steps", "save_steps": 1, **overrides})
        path = tmp_path / "recipe.yaml"
        path.write_text(yaml.safe_dump(recipe))
        return path

    return write
