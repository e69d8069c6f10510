import os
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _single_thread():
    """Tiny tensors: one intra-op thread is faster and keeps results identical across runs."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def run_script(script: str, *args: str, cwd: Path | None = None, timeout: float = 300):
    """Run ``python <script> args`` from the repo root; returns the CompletedProcess."""
    import subprocess

    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.run([sys.executable, str(ROOT / script), *args], capture_output=True, text=True,
                          cwd=cwd or ROOT, timeout=timeout, env=env)
