"""Drop-in check: TRL's own GRPO trainer tests, run offline, with `GRPOTrainer` and with `CoDaPOTrainer` swapped in.

TRL's test file is not part of this repository: point `--trl-tests` at a checkout's `tests/` folder (it needs
`test_grpo_trainer.py`, `testing_utils.py`, `conftest.py` and `__init__.py`), e.g. from a clone of
huggingface/trl at the installed version. The script copies those files into `--work` (outside the repository),
builds offline stand-ins for the hub ids the tests load (every text causal LM id is a tiny random Qwen2 from
`codapo_trl.testing`, the sequence-classification ids a Qwen2 classifier with the same tokenizer,
`trl-internal-testing/zen` a small local dataset with the same configs and splits) and runs pytest from `--work`, so that those ids resolve to
the local folders. Vision, vLLM, liger, bitsandbytes and GPU tests skip or fail alike for both trainers.

With `--trainer codapo`, `trl.GRPOTrainer` and `trl.GRPOConfig` are replaced, before the test module is imported, by
`CoDaPOTrainer` and a `CoDaPOConfig` whose `codapo_weighting` and `codapo_sampling` default to `False`; `loss_type`
keeps CoDaPO's default `"codapo"` (per-question token averaging, with v = 1 it is GRPO's objective up to the
aggregation). A drop-in passes what its parent passes: compare the two runs' outcomes test by test.

    python experiments/trl_dropin.py --trl-tests /path/to/trl/tests --work /tmp/dropin --trainer grpo
    python experiments/trl_dropin.py --trl-tests /path/to/trl/tests --work /tmp/dropin --trainer codapo
    python experiments/trl_dropin.py --work /tmp/dropin --compare
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
TEST_FILES = ("__init__.py", "conftest.py", "testing_utils.py", "test_grpo_trainer.py")
CAUSAL_LM_IDS = (
    "tiny-Qwen2ForCausalLM-2.5",
    "tiny-Qwen3ForCausalLM",
    "tiny-Qwen3MoeForCausalLM",
    "tiny-LlamaForCausalLM-3.2",
    "tiny-MistralForCausalLM-0.2",
    "tiny-GptOssForCausalLM",
    "tiny-Gemma2ForCausalLM",
    "tiny-Cohere2ForCausalLM",
    "tiny-Glm4MoeForCausalLM",
    "tiny-NemotronHForCausalLM-nano",
)
CLASSIFIER_IDS = (
    "tiny-Qwen2ForSequenceClassification-2.5",
    "tiny-Qwen3ForSequenceClassification",
    "tiny-LlamaForSequenceClassification-3.2",
)

SWAP_PLUGIN = '''
"""Loaded with `-p`: swap TRL's GRPO classes for CoDaPO's before the test module imports them."""
from dataclasses import dataclass

import trl
from codapo_trl import CoDaPOConfig, CoDaPOTrainer


@dataclass
class DropInConfig(CoDaPOConfig):
    codapo_weighting: bool = False
    codapo_sampling: bool = False


class DropInTrainer(CoDaPOTrainer):
    def __init__(self, model, reward_funcs=None, args=None, **kwargs):
        if args is None:
            name = model if isinstance(model, str) else model.config._name_or_path
            args = DropInConfig(f"{str(name).split('/')[-1]}-GRPO")
        super().__init__(model, reward_funcs, args=args, **kwargs)


trl.GRPOConfig, trl.GRPOTrainer = DropInConfig, DropInTrainer
'''

# Beginnings of the lines of the Zen of Python (`import this`), 17 for training and 2 for testing, as the tests expect.
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

ZEN_README = """---
configs:
- config_name: standard_prompt_only
  data_files:
  - split: train
    path: standard_prompt_only/train.jsonl
  - split: test
    path: standard_prompt_only/test.jsonl
- config_name: conversational_prompt_only
  data_files:
  - split: train
    path: conversational_prompt_only/train.jsonl
  - split: test
    path: conversational_prompt_only/test.jsonl
---
"""


def build_fixtures(work: Path) -> None:
    """The hub ids TRL's tests load, as local folders under `work/trl-internal-testing`."""
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForSequenceClassification

    from codapo_trl.testing import build_tiny_model

    hub = work / "trl-internal-testing"
    base = hub / CAUSAL_LM_IDS[0]
    if not base.exists():
        build_tiny_model(base)
    for name in CAUSAL_LM_IDS[1:]:
        if not (hub / name).exists():
            shutil.copytree(base, hub / name)
    tokenizer = AutoTokenizer.from_pretrained(base)
    config = Qwen2Config.from_pretrained(base)
    config.num_labels = 1
    for name in CLASSIFIER_IDS:
        if not (hub / name).exists():
            Qwen2ForSequenceClassification(config).save_pretrained(hub / name)
            tokenizer.save_pretrained(hub / name)
    zen = hub / "zen"
    for split, prompts in ZEN_PROMPTS.items():
        for config_name, make in (
            ("standard_prompt_only", lambda p: p),
            ("conversational_prompt_only", lambda p: [{"role": "user", "content": p}]),
        ):
            (zen / config_name).mkdir(parents=True, exist_ok=True)
            with open(zen / config_name / f"{split}.jsonl", "w") as f:
                f.writelines(json.dumps({"prompt": make(p)}) + "\n" for p in prompts)
    (zen / "README.md").write_text(ZEN_README)


def adapt_helpers(path: Path) -> None:
    """Availability helpers that the checkout's `testing_utils.py` imports but the installed TRL lacks report
    "not available" (their tests skip), instead of failing the whole module's import."""
    text = path.read_text()
    block = re.search(r"from trl\.import_utils import \(([^)]*)\)", text)
    if block is None:
        return
    import_utils = importlib.import_module("trl.import_utils")
    names = [n.strip() for n in block.group(1).split(",") if n.strip()]
    missing = [n for n in names if not hasattr(import_utils, n)]
    shim = "import trl.import_utils as _iu\n" + "".join(
        f"_iu.{n} = getattr(_iu, {n!r}, lambda *args, **kwargs: False)\n" for n in missing
    )
    path.write_text(shim + text)


def run(trl_tests: Path, work: Path, trainer: str, extra: list[str]) -> Path:
    tests = work / "tests"
    tests.mkdir(parents=True, exist_ok=True)
    for name in TEST_FILES:
        shutil.copy(trl_tests / name, tests / name)
    adapt_helpers(tests / "testing_utils.py")
    build_fixtures(work)
    (work / "dropin_swap.py").write_text(SWAP_PLUGIN)
    report = work / f"report-{trainer}.xml"
    command = [sys.executable, "-m", "pytest", "tests/test_grpo_trainer.py", "-q", "-p", "no:cacheprovider"]
    command += ["-o", "addopts=", "--timeout=300", f"--junitxml={report}", "-rf"]
    if trainer == "codapo":
        command += ["-p", "dropin_swap"]
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "PYTHONPATH": os.pathsep.join([str(work), str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    subprocess.run(command + extra, cwd=work, env=env, check=False)
    return report


def outcomes(report: Path) -> dict[str, str]:
    result = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        result[name] = (
            {"failure": "failed", "error": "error", "skipped": "skipped"}.get(kinds[0], "?") if kinds else "passed"
        )
    return result


def summary(result: dict[str, str]) -> str:
    counts = {kind: sum(1 for v in result.values() if v == kind) for kind in ("passed", "failed", "error", "skipped")}
    return ", ".join(f"{n} {kind}" for kind, n in counts.items())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trl-tests", type=Path, help="TRL's tests/ folder (not needed with --compare)")
    parser.add_argument("--work", type=Path, required=True, help="scratch folder outside the repository")
    parser.add_argument("--trainer", choices=["grpo", "codapo"], default="codapo")
    parser.add_argument("--compare", action="store_true", help="compare the two runs' saved reports")
    args, extra = parser.parse_known_args()
    if not args.compare:
        run(args.trl_tests, args.work, args.trainer, extra)
    results = {
        t: outcomes(args.work / f"report-{t}.xml")
        for t in ("grpo", "codapo")
        if (args.work / f"report-{t}.xml").exists()
    }
    for trainer, result in results.items():
        print(f"{trainer}: {summary(result)}")
    if len(results) == 2:
        grpo, codapo = results["grpo"], results["codapo"]
        worse = sorted(n for n, v in grpo.items() if v == "passed" and codapo.get(n) != "passed")
        print(f"passed with GRPOTrainer but not with CoDaPOTrainer: {len(worse)}")
        for name in worse:
            print(f"  {name}: {codapo.get(name)}")


if __name__ == "__main__":
    main()
