#!/usr/bin/env python
"""Train a steinrl agent: ``python train.py --algo s2vgd-a2c --env CartpoleSwingUp``.

The same as ``steinrl train ...``; see ``python train.py --help`` and the README.
"""

from steinrl.run.cli import script

if __name__ == "__main__":
    script("train", "train.py")
