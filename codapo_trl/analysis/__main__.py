"""`python -m codapo_trl.analysis`: the `codapo-analyze` command."""

import sys

from codapo_trl.analysis.cli import main


sys.exit(main())
