"""Device handling with the device as a parameter: nothing here needs (or skips for) a GPU.

CUDA's presence is faked by monkeypatching ``torch.cuda.is_available`` / ``device_count``;
backend resolution and compile modes take the device type from the config, which names any
device without touching it.
"""

import pytest
import torch
from conftest import tiny_config

import steinrl
from steinrl.errors import ConfigError
from steinrl.rl.job import env_backend
from steinrl.rl.rollout import compile_mode
from steinrl.run.cli import run_cli, train_main
from steinrl.run.trainer import check_device


def fake_cuda(monkeypatch, count):
    """This process now sees ``count`` CUDA devices (0: no CUDA)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: count > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)


# ----------------------------------------------------------------------------- device parsing
@pytest.mark.parametrize("count, device, error", [
    (0, "cpu", None),
    (0, "cuda", "CUDA is not available here; use --device cpu"),
    (0, "cuda:0", "CUDA is not available here"),
    (1, "cuda", None),
    (1, "cuda:0", None),
    (1, "cuda:1", "'cuda:1' requested but this machine has 1 CUDA device(s); use cuda:0, cuda or cpu"),
    (4, "cuda:3", None),
    (4, "cuda:4", "has 4 CUDA device(s); use cuda:0 to cuda:3, cuda or cpu"),
    (1, "cuda:-1", "device must be a torch device such as cpu or cuda, got 'cuda:-1'"),
    (1, "gpu", "device must be a torch device such as cpu or cuda, got 'gpu'"),
    (1, "xla", "device 'xla' is not supported; use cpu or cuda"),
])
def test_check_device(monkeypatch, count, device, error):
    fake_cuda(monkeypatch, count)
    if error is None:
        check_device(device)
    else:
        with pytest.raises(ConfigError) as exc:
            check_device(device)
        assert error in str(exc.value)


@pytest.mark.parametrize("count, device", [(0, "cuda:0"), (1, "cuda:1"), (2, "cuda:7")])
def test_unavailable_device_is_one_error_line_and_nothing_written(tmp_path, monkeypatch, capsys, count, device):
    fake_cuda(monkeypatch, count)
    code = run_cli(train_main, ["--device", device, "--logdir", str(tmp_path), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "CUDA" in err and list(tmp_path.iterdir()) == []


# ----------------------------------------------------------------------------- backend resolution
@pytest.mark.parametrize("device, seeds, backend", [
    ("cpu", 1, "numpy"),  # on the host the numpy tasks are faster
    ("cpu", 2, "torch"),  # several seeds need the torch twins (each group resets from its own generator)
    ("cuda", 1, "torch"),  # on a device the whole rollout stays there
    ("cuda:1", 1, "torch"),
    ("mps", 1, "torch"),
])
def test_auto_backend_with_the_device_as_a_parameter(device, seeds, backend):
    cfg = tiny_config("svgd-a2c", "CartpoleSwingUp", device=device)
    assert env_backend(cfg, seeds) == backend
    assert env_backend(cfg.replace({"rollout.env_backend": "numpy"}), 1) == "numpy"  # explicit wins
    assert env_backend(cfg.replace({"rollout.env_backend": "torch"}), seeds) == "torch"


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_auto_backend_without_a_torch_twin_is_numpy_on_every_device(device):
    cfg = tiny_config("svgd-a2c", "CartPole-v1", device=device)
    assert env_backend(cfg, 1) == "numpy"
    with pytest.raises(ConfigError, match="has no torch twin"):
        env_backend(cfg.replace({"rollout.env_backend": "torch"}), 1)
    with pytest.raises(ConfigError, match="several seeds"):
        env_backend(cfg.replace({"rollout.env_backend": "numpy"}), 2)


# ----------------------------------------------------------------------------- compile modes
@pytest.mark.parametrize("device, mode", [("cpu", None), ("cuda", "reduce-overhead"),
                                          ("cuda:1", "reduce-overhead"), ("mps", None),
                                          (torch.device("cuda", 0), "reduce-overhead")])
def test_compile_mode_per_device(device, mode):
    assert compile_mode(device) == mode


@pytest.mark.parametrize("device, mode", [("cpu", None), ("cuda", "reduce-overhead")])
def test_the_sampler_compiles_its_whole_step_in_the_devices_mode(monkeypatch, device, mode):
    """``rollout.compile`` on a device task: the sampler asks torch.compile for its step in
    compile_mode(its device), whole (fullgraph), once (no CUDA needed: the compiler is replaced by
    a recorder and the sampler's device relabelled after it is built); a host task never compiles."""
    cfg = tiny_config("svgd-a2c", "CartpoleSwingUp", **{"rollout.env_backend": "torch", "rollout.compile": True})
    sampler = steinrl.Trainer(cfg).job.sampler
    sampler.device = torch.device(device)
    calls = []
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: calls.append(kw) or fn)
    first = sampler._compiled_step()
    assert sampler._compiled_step() is first
    assert calls == [{"fullgraph": True, "dynamic": False, "mode": mode}]
    host = steinrl.Trainer(cfg.replace({"rollout.env_backend": "numpy"})).job.sampler
    assert not host._compile
