"""Local stand-ins for the hub's tiny vision-language models that TRL's GRPO tests load.

Each is a randomly initialised model of the hub model's class (a two-layer vision tower and a two-layer text model)
with a processor of the family's own class: its image processor (small images), the family's tokenizer roles with
its image tokens, and the chat template TRL recognises for it, read from the installed TRL. Built here: Gemma 3 and
LLaVA-NeXT. The Qwen2-VL, Qwen2.5-VL, Qwen3.5 and Gemma 4 processors also need a video processor, which needs
torchvision (see `plugin.UNBUILT`).
"""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForImageTextToText, GenerationConfig

from .text_models import TEMPLATES
from .vocab import build_tokenizer


TEXT = {"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 4, "max_position_embeddings": 4096}  # fmt: skip


def _save(path: Path, config, processor, seed: int, eos: int | list[int], pad: int) -> None:
    torch.manual_seed(seed)
    model = AutoModelForImageTextToText.from_config(config, dtype=torch.float32)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("mm_input_projection_weight"):  # zeros at init: images would change nothing
                param.normal_(std=0.02)
    model.generation_config = GenerationConfig(eos_token_id=eos, pad_token_id=pad, do_sample=True)
    model.save_pretrained(path)
    processor.save_pretrained(path)


GEMMA3_SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>", "<start_of_image>",
                   "<end_of_image>", "<image_soft_token>"]  # fmt: skip
SIGLIP = {"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
          "image_size": 32, "patch_size": 8}  # fmt: skip


def build_gemma3(path: Path, seed: int = 0) -> None:
    """Gemma 3: SigLIP tower (32 px, 8 px patches) pooled to 4 soft tokens per image, Gemma's tokenizer roles."""
    from transformers import Gemma3ImageProcessor, Gemma3Processor

    tokenizer = build_tokenizer(
        256,
        [(t, True) for t in GEMMA3_SPECIALS],
        pad_token="<pad>", eos_token="<eos>", bos_token="<bos>", unk_token="<unk>", padding_side="left",
        extra_special_tokens={"boi_token": "<start_of_image>", "eoi_token": "<end_of_image>",
                              "image_token": "<image_soft_token>"},
    )  # fmt: skip
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in GEMMA3_SPECIALS}
    text = {**TEXT, "vocab_size": len(tokenizer), "sliding_window": 64}
    config = AutoConfig.for_model(
        "gemma3",
        text_config=text,
        vision_config={**SIGLIP, "vision_use_head": False},  # Gemma 3 reads the tower's patch features, not a head
        mm_tokens_per_image=4,
        boi_token_index=ids["<start_of_image>"],
        eoi_token_index=ids["<end_of_image>"],
        image_token_index=ids["<image_soft_token>"],
        pad_token_id=ids["<pad>"],
        eos_token_id=[ids["<eos>"], ids["<end_of_turn>"]],
        bos_token_id=ids["<bos>"],
    )
    template = (TEMPLATES / "gemma3.jinja").read_text()
    tokenizer.chat_template = template
    image_processor = Gemma3ImageProcessor(size={"height": 32, "width": 32})
    processor = Gemma3Processor(image_processor, tokenizer, chat_template=template, image_seq_length=4)
    _save(path, config, processor, seed, eos=[ids["<eos>"], ids["<end_of_turn>"]], pad=ids["<pad>"])


LLAMA2_SPECIALS = ["<unk>", "<s>", "</s>", "<image>", "<pad>"]
CLIP = {"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
        "image_size": 32, "patch_size": 8, "projection_dim": 16}  # fmt: skip
PINPOINTS = [[32, 32], [32, 64], [64, 32]]


def build_llava_next(path: Path, seed: int = 0) -> None:
    """LLaVA-NeXT: CLIP tower (32 px tiles, 8 px patches, features from the second-to-last layer) and a Llama text
    model, Llama 2's tokenizer roles plus `<image>`, the LLaVA-NeXT template."""
    from transformers import LlavaNextImageProcessor, LlavaNextProcessor

    tokenizer = build_tokenizer(
        256,
        [(t, True) for t in LLAMA2_SPECIALS],
        unk_token="<unk>", bos_token="<s>", eos_token="</s>", pad_token="<pad>", padding_side="left",
        extra_special_tokens={"image_token": "<image>"},
    )  # fmt: skip
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in LLAMA2_SPECIALS}
    text = {**TEXT, "model_type": "llama", "vocab_size": len(tokenizer)}
    config = AutoConfig.for_model(
        "llava_next",
        text_config=text,
        vision_config={**CLIP, "model_type": "clip_vision_model"},
        image_grid_pinpoints=PINPOINTS,
        image_token_index=ids["<image>"],
        vision_feature_layer=-2,
        vision_feature_select_strategy="default",
        pad_token_id=ids["<pad>"],
        eos_token_id=ids["</s>"],
        bos_token_id=ids["<s>"],
    )
    template = (TEMPLATES / "llava_next.jinja").read_text()
    tokenizer.chat_template = template
    image_processor = LlavaNextImageProcessor(
        size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}, image_grid_pinpoints=PINPOINTS
    )
    processor = LlavaNextProcessor(
        image_processor,
        tokenizer,
        patch_size=8,
        vision_feature_select_strategy="default",
        chat_template=template,
        num_additional_image_tokens=1,
    )
    _save(path, config, processor, seed, eos=ids["</s>"], pad=ids["<pad>"])
