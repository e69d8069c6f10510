#!/usr/bin/env python
"""Score trained steinrl runs, plot learning curves, record videos (``steinrl evaluate ...``).

    python evaluate.py runs/CartpoleSwingUp/s2vgd-a2c/seed0-...        # table + evaluation.json
    python evaluate.py runs/CartpoleSwingUp --plot curves.png --plot-only
    python evaluate.py RUN --video swingup.gif
"""

from steinrl.run.cli import script

if __name__ == "__main__":
    script("evaluate", "evaluate.py")
