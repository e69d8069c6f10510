#!/usr/bin/env python
"""Train a steinrl agent: ``python train.py --algo s2vgd-a2c --env CartpoleSwingUp``.

See ``python train.py --help`` and the README for the flags.
"""

import sys

from steinrl.run.cli import run_cli, train_main

if __name__ == "__main__":
    sys.exit(run_cli(train_main))
