"""Datasets for CoDaPO training and evaluation, in the conversational format TRL's `GRPOTrainer` expects.

Every loader returns a `datasets.Dataset` with at least these columns:

- `prompt`: the conversation given to the policy, `[{"role": "system", ...}, {"role": "user", "content": question}]`
  (no system turn when the system prompt is `None` or empty);
- `question`: the raw question text;
- `answer`: the gold final answer as a string (what a math-verify based reward compares a completion with);
- `level`: difficulty level as an `int` (1-5 for MATH-style data) or `None` when the data has no levels;
- `answer_type`: `"math"` (any expression math-verify can compare), `"number"` (a plain number: the completion must
  give the number itself, not an expression that evaluates to it) or `"choice"` (a multiple-choice letter).

Source columns (e.g. MATH's `solution` and `type`) are kept: TRL passes every dataset column to the reward functions.

Datasets are looked up by name in [`DATASET_REGISTRY`] (real hub ids; each entry is a small declarative
[`DatasetSpec`]), or read from a local `.jsonl`/`.json`/`.parquet` file with automatic field detection. The
`arithmetic` entry is a synthetic, seeded, leveled addition task that runs offline on a laptop CPU; it is the
dataset of the embedded SmolLM2-135M default.

The package, one job per module: `formatting` (the common columns, the system prompt, `format_math_dataset`),
`loading` (`load_math_dataset`), `registry` (`DatasetSpec`, the built-in specs), `hub` (adapters for hub datasets
whose rows need more than a field mapping), `arithmetic` (the synthetic task) and `code` (code problems: TACO,
HumanEval; imported on its own, it loads the sandbox's test formats). Gold-answer parsers live in
`codapo_trl.answers`.

Example:

```python
>>> from codapo_trl.data import load_math_dataset
>>> ds = load_math_dataset("arithmetic", "test", num_per_level=2)
>>> ds[0]["prompt"][1]
{'role': 'user', 'content': 'What is 0 + 6?'}
```
"""

from codapo_trl.answers import ANSWER_PARSERS, ANSWER_TYPES, auto_answer, gsm8k_final_answer, plain_answer
from codapo_trl.answers import solution_last_boxed as last_boxed
from codapo_trl.data.arithmetic import (
    ARITHMETIC_LEVELS,
    ARITHMETIC_TEMPLATE,
    ARITHMETIC_TEST_FRACTION,
    ArithmeticLevel,
    arithmetic_pool_sizes,
    arithmetic_question,
    carry_count,
    make_arithmetic_dataset,
    sampled_split,
)
from codapo_trl.data.arithmetic import _arithmetic_pools as _arithmetic_pools  # tests reach it through the package
from codapo_trl.data.formatting import (
    CORE_COLUMNS,
    LEVEL_CANDIDATES,
    QUESTION_CANDIDATES,
    SYSTEM_PROMPT,
    format_math_dataset,
    make_conversation,
    parse_level,
)
from codapo_trl.data.loading import LOCAL_SUFFIXES, load_math_dataset
from codapo_trl.data.registry import DATASET_REGISTRY, DatasetSpec, list_datasets, register_dataset


__all__ = [
    "ANSWER_PARSERS",
    "ANSWER_TYPES",
    "ARITHMETIC_LEVELS",
    "ARITHMETIC_TEMPLATE",
    "ARITHMETIC_TEST_FRACTION",
    "CORE_COLUMNS",
    "DATASET_REGISTRY",
    "LEVEL_CANDIDATES",
    "LOCAL_SUFFIXES",
    "QUESTION_CANDIDATES",
    "SYSTEM_PROMPT",
    "ArithmeticLevel",
    "DatasetSpec",
    "arithmetic_pool_sizes",
    "arithmetic_question",
    "auto_answer",
    "carry_count",
    "format_math_dataset",
    "gsm8k_final_answer",
    "last_boxed",
    "list_datasets",
    "load_math_dataset",
    "make_arithmetic_dataset",
    "make_conversation",
    "parse_level",
    "plain_answer",
    "register_dataset",
    "sampled_split",
]
