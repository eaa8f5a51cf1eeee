"""Training-dynamics analysis of checkpoints: the protocol of the paper's Appendix B.2, on your own runs.

For a fixed, seeded set of questions per difficulty level, every checkpoint (in step order, optionally with the base
model as step 0) samples `M` trajectories per question with evaluation's generators and grading; each trajectory then
gets its correctness, confidence (geometric-mean token probability), GRPO advantage within its group and gradient
norms. Per checkpoint and level: accuracy, the min / max / mean / std / median / excess kurtosis of confidence,
gradient norms and advantages (the layout of the paper's Appendix B tables), and the figures of its Section 3.

Modules, one job each (every name below is importable from `codapo_trl.analysis` itself):

- [`checkpoints`]: which checkpoints to analyse ([`find_checkpoints`]);
- [`questions`]: the fixed, seeded questions per level ([`select_questions`]);
- [`scoring`]: what analysis adds to evaluation: per-trajectory confidence, advantages and gradient norms
  ([`trajectory_statistics`], [`group_advantages`], [`resolve_grad_params`]), the records of a group, and the rule
  for ungraded samples;
- [`results`]: [`AnalysisResult`]: tables, files, reading a saved analysis back;
- [`training_logs`]: `trainer_state.json` and the per-question log of a run ([`find_training_logs`]);
- [`plots`]: the figures (each function returns a `matplotlib.figure.Figure`; importing leaves matplotlib's backend
  alone), e.g. [`plot_training_dynamics`];
- [`run`]: [`analyze_checkpoints`], the orchestrator;
- [`cli`]: the `codapo-analyze` command ([`main`]).

Command line: `codapo-analyze` (or `python -m codapo_trl.analysis`), e.g. on CPU:

```bash
codapo-analyze outputs/SmolLM2-135M-Instruct-CoDaPO-demo --base embedded/SmolLM2-135M-Instruct --dataset arithmetic \\
    --levels 1 3 5 --questions-per-level 5 --samples-per-question 4 --max-new-tokens 48 --grad-params lm_head
```

Python:

```python
>>> from codapo_trl.analysis import analyze_checkpoints
>>> result = analyze_checkpoints(["outputs/SmolLM2-135M-Instruct-CoDaPO-demo"], "arithmetic",
...                              base="embedded/SmolLM2-135M-Instruct", levels=[1, 3, 5], questions_per_level=5,
...                              samples_per_question=4, max_new_tokens=48, grad_params="lm_head",
...                              output_dir="outputs/analysis/demo")
>>> print(result.format_table("confidence"))  # doctest: +SKIP
```
"""

from codapo_trl.analysis.checkpoints import Checkpoint, find_checkpoints
from codapo_trl.analysis.cli import build_parser, main
from codapo_trl.analysis.plots import plot_training_dynamics
from codapo_trl.analysis.questions import Question, select_questions
from codapo_trl.analysis.results import STATISTICS, TABLE_METRICS, AnalysisResult, statistics_table
from codapo_trl.analysis.run import analyze_checkpoints
from codapo_trl.analysis.scoring import (
    ADVANTAGE_EPSILON,
    GradientTarget,
    TrajectoryRecord,
    bin_label,
    difficulty_bin,
    group_advantages,
    resolve_grad_params,
    trajectory_statistics,
)
from codapo_trl.analysis.training_logs import find_training_logs, load_question_log, load_trainer_state


__all__ = [
    "ADVANTAGE_EPSILON",
    "STATISTICS",
    "TABLE_METRICS",
    "AnalysisResult",
    "Checkpoint",
    "GradientTarget",
    "Question",
    "TrajectoryRecord",
    "analyze_checkpoints",
    "bin_label",
    "build_parser",
    "difficulty_bin",
    "find_checkpoints",
    "find_training_logs",
    "group_advantages",
    "load_question_log",
    "load_trainer_state",
    "main",
    "plot_training_dynamics",
    "resolve_grad_params",
    "select_questions",
    "statistics_table",
    "trajectory_statistics",
]
