import os

import pytest


os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """Path to a tiny random Qwen2 causal LM with a character-level ChatML tokenizer, built offline."""
    from codapo_trl.testing import build_tiny_model

    return str(build_tiny_model(tmp_path_factory.mktemp("tiny-model")))
