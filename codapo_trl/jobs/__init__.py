"""The jobs: command-line programs that put the library together. Each module has a `main(argv=None)` console entry.

| module       | console script      | launcher in `recipes/` | job                                                      |
|--------------|---------------------|------------------------|----------------------------------------------------------|
| `train`      | `codapo-train`      | `codapo_math.py`       | train on maths with CoDaPO or a baseline, from a recipe  |
| `train_code` | `codapo-train-code` | `codapo_code.py`       | the same job on programming problems (sandboxed reward)  |
| `demo`       | `codapo-demo`       | `demo.py`              | evaluate, train, evaluate again on the embedded default  |

`running` holds what every job shares around the training itself: logging, resuming, leaving a multi-process run.
Nothing here is imported by the rest of the package.
"""
