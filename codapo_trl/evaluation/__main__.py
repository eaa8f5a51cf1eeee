"""`python -m codapo_trl.evaluation`: the `codapo-eval` command."""

import sys

from codapo_trl.evaluation.cli import main


sys.exit(main())
