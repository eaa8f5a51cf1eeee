"""Evaluation of reasoning models as in the CoDaPO paper: avg@n and unbiased pass@k on maths, science and code
benchmarks, per benchmark and per difficulty level, with every sample saved for audit.

Command line: `codapo-eval` (or `python -m codapo_trl.evaluation`), see [`codapo_trl.evaluation.cli`].

Python:

```python
>>> from codapo_trl.evaluation import evaluate_model, format_level_table
>>> result = evaluate_model("embedded/SmolLM2-135M-Instruct", ["arithmetic"], num_samples=4, max_new_tokens=64)
>>> result.accuracy("arithmetic"), result.benchmarks["arithmetic"].metrics["pass@4"]  # doctest: +SKIP
>>> print(format_level_table(result))  # doctest: +SKIP
```

Modules: [`benchmarks`] (registry and loading), [`generation`] (transformers and vLLM backends), [`code`] (code
benchmarks and sandboxed grading), [`metrics`] (pass@k, aggregation, tables, comparison), [`evaluate`] (the API and
output files), [`cli`].
"""

from codapo_trl.evaluation.benchmarks import (
    BENCHMARK_GROUPS,
    BENCHMARKS,
    Benchmark,
    BenchmarkItem,
    BenchmarkSpec,
    list_benchmarks,
    load_benchmark,
    register_benchmark,
)
from codapo_trl.evaluation.cli import main
from codapo_trl.evaluation.code import CodeGradingConfig
from codapo_trl.evaluation.evaluate import BenchmarkResult, EvaluationResult, evaluate_model
from codapo_trl.evaluation.generation import Completion, GenerationRequest, SamplingConfig, TransformersGenerator
from codapo_trl.evaluation.metrics import (
    compare_summaries,
    format_level_table,
    format_results_table,
    pass_at_k,
)


__all__ = [
    "BENCHMARKS",
    "BENCHMARK_GROUPS",
    "Benchmark",
    "BenchmarkItem",
    "BenchmarkResult",
    "BenchmarkSpec",
    "CodeGradingConfig",
    "Completion",
    "EvaluationResult",
    "GenerationRequest",
    "SamplingConfig",
    "TransformersGenerator",
    "compare_summaries",
    "evaluate_model",
    "format_level_table",
    "format_results_table",
    "list_benchmarks",
    "load_benchmark",
    "main",
    "pass_at_k",
    "register_benchmark",
]
