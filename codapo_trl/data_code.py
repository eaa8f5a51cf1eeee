"""Old import path of `codapo_trl.data.code`, kept because `recipes/codapo_code.py`, other tests and README use it;
new code imports `codapo_trl.data.code`."""

from codapo_trl.data.code import (
    CODE_SYSTEM_PROMPT,
    HUMANEVAL_HUB_ID,
    TACO_DIFFICULTIES,
    TACO_HUB_ID,
    build_code_prompt,
    load_code_jsonl,
    load_humaneval,
    load_taco,
)


__all__ = [
    "CODE_SYSTEM_PROMPT",
    "HUMANEVAL_HUB_ID",
    "TACO_DIFFICULTIES",
    "TACO_HUB_ID",
    "build_code_prompt",
    "load_code_jsonl",
    "load_humaneval",
    "load_taco",
]
