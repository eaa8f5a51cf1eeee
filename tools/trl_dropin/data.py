"""Local stand-ins for the datasets TRL's GRPO tests load: `trl-internal-testing/zen`, `zen-image` and
`zen-multi-image`.

`zen` has the configs the tests read (`standard_prompt_only`: a `prompt` string; `conversational_prompt_only`: a
`prompt` list with one user message) over the opening words of the lines of the Zen of Python, 17 for `train` and 2 for
`test`, in the order `test_prepare_input_called_with_correct_data` asserts. The image sets have the one config the tests
read (`conversational_prompt_only`): the same conversational prompts with an `image` column (`zen-image`) or an
`images` column of one to three images (`zen-multi-image`), small RGB images of a few sizes (ours: the hub's pixels
are not known here). Each config is a folder of parquet files named by a `README.md` card, so `load_dataset` reads
it by the hub id relative to the working folder.
"""

from __future__ import annotations

from pathlib import Path

from datasets import Dataset, Image, Sequence


ZEN_PROMPTS = {
    "train": [
        "Beautiful is better than",
        "Explicit is",
        "Simple is better",
        "Complex",
        "Flat is better than",
        "Sparse is better",
        "Readability",
        "Special cases aren't special",
        "Although practicality beats",
        "Errors should never",
        "Unless explicitly",
        "In the face of ambiguity, refuse",
        "There should be one-- and preferably",
        "Although that way may not be obvious",
        "Now is better",
        "Although never is often better than",
        "If the implementation is hard to explain,",
    ],
    "test": ["If the implementation is easy to explain,", "Namespaces are one honking great idea --"],
}
SIZES = [(16, 16), (24, 16), (16, 32), (32, 24)]


def _card(configs: list[str]) -> str:
    lines = ["---", "configs:"]
    for config in configs:
        lines += [f"- config_name: {config}", "  data_files:"]
        lines += [f"  - split: {split}\n    path: {config}/{split}.parquet" for split in ZEN_PROMPTS]
    return "\n".join([*lines, "---", ""])


def _image(index: int):
    from PIL import Image as PILImage

    width, height = SIZES[index % len(SIZES)]
    return PILImage.new("RGB", (width, height), color=((53 * index) % 256, (97 * index) % 256, (151 * index) % 256))


def _conversational(prompt: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": prompt}]


def build_datasets(hub: Path) -> None:
    """Write `zen`, `zen-image` and `zen-multi-image` under `hub` (the `trl-internal-testing` folder)."""
    for split, prompts in ZEN_PROMPTS.items():
        standard = Dataset.from_dict({"prompt": prompts})
        conversational = Dataset.from_dict({"prompt": [_conversational(p) for p in prompts]})
        for config, data in (("standard_prompt_only", standard), ("conversational_prompt_only", conversational)):
            (hub / "zen" / config).mkdir(parents=True, exist_ok=True)
            data.to_parquet(hub / "zen" / config / f"{split}.parquet")
        offset = 0 if split == "train" else len(ZEN_PROMPTS["train"])
        single = Dataset.from_dict(
            {"image": [_image(offset + i) for i in range(len(prompts))], "prompt": conversational["prompt"]}
        ).cast_column("image", Image())
        multi = Dataset.from_dict(
            {
                "images": [[_image(offset + i + k) for k in range(1 + (offset + i) % 3)] for i in range(len(prompts))],
                "prompt": conversational["prompt"],
            }
        ).cast_column("images", Sequence(Image()))
        for name, data in (("zen-image", single), ("zen-multi-image", multi)):
            (hub / name / "conversational_prompt_only").mkdir(parents=True, exist_ok=True)
            data.to_parquet(hub / name / "conversational_prompt_only" / f"{split}.parquet")
    (hub / "zen" / "README.md").write_text(_card(["standard_prompt_only", "conversational_prompt_only"]))
    for name in ("zen-image", "zen-multi-image"):
        (hub / name / "README.md").write_text(_card(["conversational_prompt_only"]))
