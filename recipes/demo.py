"""Launcher of the demo (`codapo_trl.jobs.demo`, also the console script `codapo-demo` and `make demo`).

python recipes/demo.py
"""

from codapo_trl.jobs.demo import main


if __name__ == "__main__":
    main()
