import os
from pathlib import Path

import pytest
import yaml


os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(autouse=True, scope="session")
def _precision_must_be_pinned():
    """Every `GRPOConfig` (so `CoDaPOConfig`) and `SFTConfig` built in the test process pins its precision
    (`helpers_training.pin_precision`: TRL turns bf16 on by default, and bf16 rounds differently on different CPUs)."""
    from helpers_training import pin_precision
    from trl import GRPOConfig, SFTConfig

    originals = {cls: cls.__post_init__ for cls in (GRPOConfig, SFTConfig)}

    def checked(original):
        def __post_init__(self):
            pin_precision(self)
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
