#!/usr/bin/env python
"""Score trained steinrl runs, plot learning curves, record videos.

    python evaluate.py runs/CartpoleSwingUp/s2vgd-a2c/seed0-...        # table + evaluation.json
    python evaluate.py runs/CartpoleSwingUp --plot curves.png --plot-only
    python evaluate.py RUN --video swingup.gif
"""

import sys

from steinrl.run.cli import evaluate_main, run_cli

if __name__ == "__main__":
    sys.exit(run_cli(evaluate_main))
