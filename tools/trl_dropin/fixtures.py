"""Build every local stand-in TRL's GRPO tests load, once, under the working folder's `trl-internal-testing/`."""

from __future__ import annotations

import hashlib
import logging
import shutil
from pathlib import Path

from . import data, text_models, vlm_models


logger = logging.getLogger(__name__)


def _fingerprint() -> str:
    here = Path(__file__).parent
    sources = [here / f"{name}.py" for name in ("fixtures", "vocab", "data", "text_models", "vlm_models")]
    return hashlib.sha256(b"".join(p.read_bytes() for p in sources)).hexdigest()[:16]


def build_fixtures(hub: Path) -> None:
    """Write the models, tokenizers and datasets to `hub`; rebuilt when this package's code changed."""
    stamp = hub / ".built"
    if stamp.exists() and stamp.read_text() == _fingerprint():
        return
    if hub.exists():
        shutil.rmtree(hub)
    hub.mkdir(parents=True)
    data.build_datasets(hub)
    for name, spec in {**text_models.CAUSAL_LMS, **text_models.CLASSIFIERS}.items():
        logger.info("building %s", name)
        text_models.build_text_model(hub / name, spec)
    text_models.build_remote_model(hub / "tiny-RemoteForCausalLM")
    vlm_models.build_gemma3(hub / "tiny-Gemma3ForConditionalGeneration")
    vlm_models.build_llava_next(hub / "tiny-LlavaNextForConditionalGeneration")
    stamp.write_text(_fingerprint())
