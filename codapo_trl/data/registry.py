"""The dataset registry: `DatasetSpec` (where a dataset lives and how its fields map onto the common columns),
`DATASET_REGISTRY` with the built-in specs (MATH, MATH-500, GSM8K, AIME, AMC, OlympiadBench, Minerva, MMLU, GPQA,
arithmetic), `register_dataset` and `list_datasets`.

To add a dataset: `register_dataset(DatasetSpec(name=..., hub_id=..., question_field=..., answer_field=...))`; a
question or answer that needs more than one field gets a builder (see `codapo_trl.data.hub`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import datasets
from datasets import Dataset

from codapo_trl.answers import ANSWER_TYPES, gsm8k_final_answer, plain_answer, solution_last_boxed
from codapo_trl.data.arithmetic import registry_builder as arithmetic_builder
from codapo_trl.data.hub import (
    gpqa_answer,
    gpqa_question,
    minerva_answer,
    minerva_question,
    mmlu_answer,
    mmlu_question,
    olympiad_answer,
    olympiad_question,
)


__all__ = ["DATASET_REGISTRY", "DatasetSpec", "get_spec", "list_datasets", "register_dataset"]


@dataclass(frozen=True)
class DatasetSpec:
    """Declarative description of a dataset: where it lives and how its fields map onto the common columns.

    Args:
        name (`str`):
            Registry name, e.g. `"math"`.
        hub_id (`str` or `None`):
            Hugging Face Hub dataset id; `None` for generated datasets (see `builder`).
        config (`str` or `None`, *optional*):
            Hub configuration name (`load_dataset(hub_id, config)`).
        splits (`Mapping[str, str]`, *optional*):
            Our split names mapped to the hub's, e.g. `{"test": "train"}` for a benchmark published as `train`.
        question_field (`str`, *optional*, defaults to `"problem"`):
            Column holding the question.
        answer_field (`str`, *optional*, defaults to `"answer"`):
            Column the gold answer is parsed from.
        answer_parser (`Callable[[Any], str | None]`, *optional*, defaults to [`plain_answer`]):
            Turns the `answer_field` value into the final answer string (`None` drops the row).
        question_builder (`Callable[[dict], str]`, *optional*):
            Builds the question from a whole row instead of `question_field` (e.g. a question plus lettered choices).
        answer_builder (`Callable[[dict], str | None]`, *optional*):
            Builds the answer from a whole row instead of `answer_field` + `answer_parser`.
        level_field (`str`, *optional*):
            Column with the difficulty level, parsed by [`parse_level`]; `None` when the data has no levels.
        answer_type (`str`, *optional*, defaults to `"math"`):
            One of `"math"`, `"number"`, `"choice"`.
        raw_answer_column (`str`, *optional*):
            If set, the unparsed `answer_field` value is kept under this name (e.g. GSM8K's worked solution, whose
            `answer` column is replaced by the bare number).
        builder (`Callable[..., Dataset]`, *optional*):
            For generated datasets: `builder(split=..., **kwargs)` returns the raw rows.
        description (`str`, *optional*):
            One line for listings.
    """

    name: str
    hub_id: str | None
    config: str | None = None
    splits: Mapping[str, str] = field(default_factory=lambda: {"train": "train", "test": "test"})
    question_field: str = "problem"
    answer_field: str = "answer"
    answer_parser: Callable[[Any], str | None] = plain_answer
    question_builder: Callable[[dict], str] | None = None
    answer_builder: Callable[[dict], str | None] | None = None
    level_field: str | None = None
    answer_type: str = "math"
    raw_answer_column: str | None = None
    builder: Callable[..., Dataset] | None = None
    description: str = ""

    def __post_init__(self):
        if self.answer_type not in ANSWER_TYPES:
            raise ValueError(f"answer_type must be one of {ANSWER_TYPES}, got {self.answer_type!r}")
        if self.hub_id is None and self.builder is None:
            raise ValueError(f"Dataset spec {self.name!r} needs a hub_id or a builder.")

    def hub_split(self, split: str) -> str:
        """The hub split name for one of our split names, with a clear error for unknown ones."""
        try:
            return self.splits[split]
        except KeyError:
            raise ValueError(
                f"Dataset {self.name!r} has no split {split!r}; valid splits: {sorted(self.splits)}."
            ) from None

    def load_raw(self, split: str = "train", **kwargs) -> Dataset:
        """Download (or generate) the raw rows of `split`, before formatting.

        Args:
            split (`str`, *optional*, defaults to `"train"`):
                One of our split names (see `splits`).
            kwargs:
                For hub datasets: extra `datasets.load_dataset` arguments (e.g. `cache_dir`, `revision`).
                For generated datasets: the builder's arguments (e.g. `num_per_level`, `seed`).
        """
        hub_split = self.hub_split(split)
        if self.builder is not None:
            return self.builder(split=hub_split, **kwargs)
        return datasets.load_dataset(self.hub_id, self.config, split=hub_split, **kwargs)


DATASET_REGISTRY: dict[str, DatasetSpec] = {}
"""Dataset specs by name; add one with [`register_dataset`]."""


def register_dataset(spec: DatasetSpec, *, overwrite: bool = False) -> DatasetSpec:
    """Add a [`DatasetSpec`] to [`DATASET_REGISTRY`] under `spec.name` and return it."""
    if spec.name in DATASET_REGISTRY and not overwrite:
        raise ValueError(f"A dataset named {spec.name!r} is already registered; pass overwrite=True to replace it.")
    DATASET_REGISTRY[spec.name] = spec
    return spec


def list_datasets() -> list[str]:
    """Names of the registered datasets."""
    return sorted(DATASET_REGISTRY)


def get_spec(name: str) -> DatasetSpec:
    """The registered spec called `name`, with a clear error listing the registered names."""
    try:
        return DATASET_REGISTRY[name]
    except KeyError:
        raise ValueError(f"Unknown dataset spec {name!r}; registered names: {list_datasets()}.") from None


# ---------------------------------------------------------------------------------------------------------------------
# Built-in specs
# ---------------------------------------------------------------------------------------------------------------------

register_dataset(
    DatasetSpec(
        name="math",
        hub_id="DigitalLearningGmbH/MATH-lighteval",
        config="default",
        splits={"train": "train", "test": "test"},
        question_field="problem",
        answer_field="solution",
        answer_parser=solution_last_boxed,
        level_field="level",
        description="MATH (Hendrycks et al.), 7500 train / 5000 test; the paper's training set",
    )
)
register_dataset(
    DatasetSpec(
        name="math500",
        hub_id="HuggingFaceH4/MATH-500",
        splits={"test": "test"},
        question_field="problem",
        answer_field="answer",
        level_field="level",
        description="MATH-500 evaluation subset (Lightman et al.)",
    )
)
register_dataset(
    DatasetSpec(
        name="gsm8k",
        hub_id="openai/gsm8k",
        config="main",
        splits={"train": "train", "test": "test"},
        question_field="question",
        answer_field="answer",
        answer_parser=gsm8k_final_answer,
        answer_type="number",
        raw_answer_column="solution",
        description="GSM8K grade-school word problems; the answer is the number after '####'",
    )
)
register_dataset(
    DatasetSpec(
        name="aime24",
        hub_id="HuggingFaceH4/aime_2024",
        splits={"test": "train"},
        question_field="problem",
        answer_field="answer",
        description="AIME 2024 I and II (30 problems), published as a single 'train' split",
    )
)
register_dataset(
    DatasetSpec(
        name="aime25",
        hub_id="math-ai/aime25",
        splits={"test": "test"},
        question_field="problem",
        answer_field="answer",
        description="AIME 2025 I and II",
    )
)
register_dataset(
    DatasetSpec(
        name="mmlu",
        hub_id="cais/mmlu",
        config="all",
        splits={"test": "test", "validation": "validation", "dev": "dev"},
        question_builder=mmlu_question,
        answer_builder=mmlu_answer,
        answer_type="choice",
        description="MMLU, 57 subjects, four lettered choices appended to the question",
    )
)
register_dataset(
    DatasetSpec(
        name="amc23",
        hub_id="math-ai/amc23",
        splits={"test": "test"},
        question_field="question",
        answer_field="answer",
        description="AMC 2023 (40 problems with numeric answers)",
    )
)
register_dataset(
    DatasetSpec(
        name="olympiadbench",
        hub_id="Hothan/OlympiadBench",
        config="OE_TO_maths_en_COMP",
        splits={"test": "train"},
        question_field="question",
        question_builder=olympiad_question,
        answer_field="final_answer",
        answer_parser=olympiad_answer,
        description="OlympiadBench, open-ended text-only English maths competition subset (674 problems)",
    )
)
register_dataset(
    DatasetSpec(
        name="minerva",
        hub_id="math-ai/minervamath",
        splits={"test": "test"},
        question_builder=minerva_question,
        answer_builder=minerva_answer,
        description="Minerva Math (272 undergraduate STEM problems)",
    )
)
register_dataset(
    DatasetSpec(
        name="gpqa_diamond",
        hub_id="Idavidrein/gpqa",
        config="gpqa_diamond",
        splits={"test": "train"},
        question_builder=gpqa_question,
        answer_builder=gpqa_answer,
        answer_type="choice",
        description="GPQA Diamond (198 questions; gated on the hub), options A-D in a fixed per-question order",
    )
)
register_dataset(
    DatasetSpec(
        name="arithmetic",
        hub_id=None,
        splits={"train": "train", "test": "test", "validation": "test"},
        question_field="question",
        answer_field="answer",
        level_field="level",
        answer_type="number",
        builder=arithmetic_builder,
        description="synthetic 'What is a + b?' in seven levels (1-5 by default); offline; the embedded default's dataset",
    )
)
