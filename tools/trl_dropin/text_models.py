"""Local stand-ins for the hub's tiny text models that TRL's GRPO tests load (`trl-internal-testing/tiny-*`).

Each is a randomly initialised model of the same architecture as the hub's (the same `transformers` class), a few
hundred parameters wide, with a byte-level tokenizer that keeps the family's special tokens (at their real ids for the
Qwen family, whose ids the tests write by hand) and the chat template TRL recognises for that family, read from the
installed TRL (`trl/chat_templates/*.jinja`), so that TRL's template-dependent paths (tool-call parsing, the
prefix-preserving training template, `enable_thinking`) take the branch they take on the hub's models.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import torch
import trl
from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSequenceClassification, GenerationConfig

from .data import ZEN_PROMPTS
from .vocab import QWEN2_PIECES, QWEN_SPECIALS, build_tokenizer


TEMPLATES = Path(trl.__file__).parent / "chat_templates"

# Mistral v0.2's instruction format; TRL ships no template for it (it has no tool or thinking branch to match).
MISTRAL_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}"
    "{{ '[INST] ' + message['content'] + ' [/INST]' }}{% else %}{{ message['content'] + eos_token }}{% endif %}"
    "{% endfor %}"
)


# Text whose words get merges besides the chat template: the stand-in datasets' prompts and the JSON a tool's schema
# renders to (`transformers.utils.get_json_schema`: its keys and type names), which the tool prompts repeat.
MERGE_CORPUS = [
    *(prompt for prompts in ZEN_PROMPTS.values() for prompt in prompts),
    '{"type": "function", "function": {"name": "", "description": "", "parameters": {"type": "object", '
    '"properties": {"": {"type": "integer", "description": ""}}, "required": []}, "return": {"type": "string"}}}',
    "number boolean array items null enum",
]


@dataclass(frozen=True)
class TokenizerSpec:
    """A family's tokenizer: its special tokens from `first_special` on, their roles and its chat template."""

    first_special: int
    specials: list[tuple[str, bool]]
    roles: dict[str, str]
    template: str | None  # file name under trl/chat_templates, or None for MISTRAL_TEMPLATE
    pieces: dict[int, str] = field(default_factory=dict)

    def build(self):
        template = (TEMPLATES / self.template).read_text() if self.template else MISTRAL_TEMPLATE
        # merges for the template's words (its tool instructions, JSON keys) and the datasets' prompts, so prompts
        # have Qwen-like lengths (`vocab.word_merges`); only where the family has free ids (Qwen)
        corpus = [template, *MERGE_CORPUS] if self.first_special > 256 else []
        tokenizer = build_tokenizer(self.first_special, self.specials, self.pieces, corpus, **self.roles)
        tokenizer.chat_template = template
        return tokenizer


def _specials(*names: str) -> list[tuple[str, bool]]:
    return [(name, True) for name in names]


QWEN_ROLES = {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "padding_side": "left"}
TOKENIZERS = {
    # Qwen2.5 and Qwen3 share the vocabulary (151643 <|endoftext|>, 151645 <|im_end|>, 151657 <tool_call>, ...).
    "qwen2.5": TokenizerSpec(151643, QWEN_SPECIALS, QWEN_ROLES, "qwen2_5.jinja", QWEN2_PIECES),
    "qwen3": TokenizerSpec(151643, QWEN_SPECIALS, QWEN_ROLES, "qwen3.jinja", QWEN2_PIECES),
    "llama3.2": TokenizerSpec(
        256,
        _specials("<|begin_of_text|>", "<|end_of_text|>", "<|finetune_right_pad_id|>", "<|start_header_id|>",
                  "<|end_header_id|>", "<|eom_id|>", "<|eot_id|>", "<|python_tag|>"),
        {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
        "llama3_2.jinja",
    ),
    "mistral": TokenizerSpec(256, _specials("<unk>", "<s>", "</s>"), {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}, None),
    "gemma": TokenizerSpec(
        256,
        _specials("<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"),
        {"pad_token": "<pad>", "eos_token": "<eos>", "bos_token": "<bos>", "unk_token": "<unk>"},
        "gemma.jinja",
    ),
    "cohere2": TokenizerSpec(
        256,
        _specials("<PAD>", "<BOS_TOKEN>", "<|END_OF_TURN_TOKEN|>", "<|START_OF_TURN_TOKEN|>", "<|USER_TOKEN|>",
                  "<|CHATBOT_TOKEN|>", "<|SYSTEM_TOKEN|>", "<|START_RESPONSE|>", "<|END_RESPONSE|>"),
        {"pad_token": "<PAD>", "bos_token": "<BOS_TOKEN>", "eos_token": "<|END_OF_TURN_TOKEN|>"},
        "cohere2.jinja",
    ),
    "glm4moe": TokenizerSpec(
        256,
        _specials("<|endoftext|>", "[MASK]", "[gMASK]", "[sMASK]", "<sop>", "<eop>", "<|system|>", "<|user|>",
                  "<|assistant|>", "<|observation|>")
        + [(t, False) for t in ("<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>",
                                "</tool_response>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>")],
        {"pad_token": "<|endoftext|>", "eos_token": "<|user|>"},
        "glm4moe.jinja",
    ),
    "gptoss": TokenizerSpec(
        256,
        _specials("<|startoftext|>", "<|endoftext|>", "<|return|>", "<|constrain|>", "<|channel|>", "<|start|>",
                  "<|end|>", "<|message|>", "<|call|>"),
        {"bos_token": "<|startoftext|>", "eos_token": "<|return|>", "pad_token": "<|endoftext|>"},
        "gptoss.jinja",
    ),
    "nemotron3": TokenizerSpec(
        256,
        _specials("<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>")
        + [(t, False) for t in ("<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>",
                                "</tool_response>")],
        {"unk_token": "<unk>", "bos_token": "<s>", "eos_token": "<|im_end|>", "pad_token": "<unk>"},
        "nemotron_3_nano.jinja",
    ),
}  # fmt: skip

SMALL = {"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4}
ATTENTION = {**SMALL, "num_key_value_heads": 2, "head_dim": 4, "max_position_embeddings": 1024}
MOE = {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 16}


@dataclass(frozen=True)
class ModelSpec:
    """A hub id's stand-in: the `transformers` model type, config overrides, tokenizer family, head."""

    model_type: str
    tokenizer: str
    config: dict
    vocab_size: int | None = None  # the hub model's embedding rows, when larger than the tokenizer
    classifier: bool = False


CAUSAL_LMS = {
    "tiny-Qwen2ForCausalLM-2.5": ModelSpec("qwen2", "qwen2.5", ATTENTION, 151936),
    "tiny-Qwen3ForCausalLM": ModelSpec("qwen3", "qwen3", ATTENTION, 151936),
    "tiny-Qwen3MoeForCausalLM": ModelSpec("qwen3_moe", "qwen3", {**ATTENTION, **MOE}, 151936),
    "tiny-LlamaForCausalLM-3.2": ModelSpec("llama", "llama3.2", ATTENTION),
    "tiny-MistralForCausalLM-0.2": ModelSpec("mistral", "mistral", ATTENTION),
    "tiny-Gemma2ForCausalLM": ModelSpec("gemma2", "gemma", {**ATTENTION, "tie_word_embeddings": True}),
    "tiny-Cohere2ForCausalLM": ModelSpec("cohere2", "cohere2", ATTENTION),
    "tiny-GptOssForCausalLM": ModelSpec(
        "gpt_oss", "gptoss", {**ATTENTION, "num_local_experts": 4, "num_experts_per_tok": 2, "intermediate_size": 16}
    ),
    "tiny-Glm4MoeForCausalLM": ModelSpec(
        "glm4_moe",
        "glm4moe",
        {
            **ATTENTION,
            "n_routed_experts": 4,
            "num_experts_per_tok": 2,
            "moe_intermediate_size": 16,
            "first_k_dense_replace": 1,
            "n_group": 1,
            "topk_group": 1,
        },
    ),  # fmt: skip
    "tiny-NemotronHForCausalLM-nano": ModelSpec(
        "nemotron_h",
        "nemotron3",
        {
            "hidden_size": 16,
            "intermediate_size": 32,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 4,
            "layers_block_type": ["linear_attention", "moe", "full_attention"],
            "use_mamba_kernels": False,
            "ssm_state_size": 8,
            "mamba_num_heads": 4,
            "mamba_head_dim": 8,
            "n_groups": 2,
            "chunk_size": 16,
            "n_routed_experts": 4,
            "num_experts_per_tok": 2,
            "moe_intermediate_size": 16,
            "moe_shared_expert_intermediate_size": 16,
            "max_position_embeddings": 1024,
        },
    ),  # fmt: skip
}
CLASSIFIERS = {
    "tiny-Qwen2ForSequenceClassification-2.5": ModelSpec("qwen2", "qwen2.5", ATTENTION, 151936, classifier=True),
    "tiny-Qwen3ForSequenceClassification": ModelSpec("qwen3", "qwen3", ATTENTION, 151936, classifier=True),
    "tiny-LlamaForSequenceClassification-3.2": ModelSpec("llama", "llama3.2", ATTENTION, classifier=True),
}

REMOTE_CONFIG = """from transformers import Qwen2Config


class RemoteConfig(Qwen2Config):
    model_type = "remote"
"""
REMOTE_MODEL = """from transformers import Qwen2ForCausalLM

from .configuration_remote import RemoteConfig


class RemoteForCausalLM(Qwen2ForCausalLM):
    config_class = RemoteConfig
"""


def build_text_model(path: Path, spec: ModelSpec, seed: int = 0) -> None:
    """Write `spec`'s random model, tokenizer and generation config to `path`."""
    tokenizer = TOKENIZERS[spec.tokenizer].build()
    ids = {role: tokenizer.convert_tokens_to_ids(getattr(tokenizer, f"{role}_token")) for role in ("bos", "eos", "pad")
           if getattr(tokenizer, f"{role}_token") is not None}  # fmt: skip
    config = AutoConfig.for_model(
        spec.model_type,
        vocab_size=max(spec.vocab_size or 0, len(tokenizer)),
        **{f"{role}_token_id": i for role, i in ids.items()},
        **spec.config,
    )
    if spec.classifier:
        config.num_labels = 1
    torch.manual_seed(seed)
    auto = AutoModelForSequenceClassification if spec.classifier else AutoModelForCausalLM
    model = auto.from_config(config, dtype=torch.float32)
    if not spec.classifier:
        model.generation_config = GenerationConfig(
            **{f"{role}_token_id": i for role, i in ids.items()}, do_sample=True, temperature=1.0
        )
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)


def build_remote_model(path: Path) -> None:
    """`tiny-RemoteForCausalLM`: a Qwen2 stand-in whose classes live in the folder (`trust_remote_code=True`)."""
    build_text_model(path, CAUSAL_LMS["tiny-Qwen2ForCausalLM-2.5"])
    (path / "configuration_remote.py").write_text(REMOTE_CONFIG)
    (path / "modeling_remote.py").write_text(REMOTE_MODEL)
    config = json.loads((path / "config.json").read_text())
    config.update(
        model_type="remote",
        architectures=["RemoteForCausalLM"],
        auto_map={
            "AutoConfig": "configuration_remote.RemoteConfig",
            "AutoModelForCausalLM": "modeling_remote.RemoteForCausalLM",
        },
    )
    (path / "config.json").write_text(json.dumps(config, indent=2))
