"""Checkpoints that survive a change of device or env backend (the path a CUDA resume takes).

CI has no GPU; these run on the CPU what a CUDA resume does: the checkpoint is read to the
CPU, generator states reach ``torch.Generator.set_state`` as CPU byte tensors, and envs
saved by one backend (numpy, or torch on another device) continue on the other with their
physical state and a re-seeded reset stream (one warning), never a traceback.
"""

import pytest
import torch

import steinrl

SMALL = {"particles": 2, "rollout.envs_per_particle": 3, "rollout.batch_size": 30, "critic.steps": 2,
         "rollout.sampling": "continuing"}


def trained(tmp_path, backend, seeds=None):
    cfg = steinrl.load_config("svgd-a2c", "CartpoleSwingUp", {**SMALL, "rollout.env_backend": backend})
    trainer = steinrl.Trainer(cfg, seeds)
    for _ in range(2):
        trainer.step_seeds()
    trainer.save(tmp_path / "c.pt")
    return cfg, trainer


class Recorder:
    """Stands in for a task's reset generator, recording what ``set_state`` receives."""

    def __init__(self, generator):
        self.generator, self.seen = generator, []

    def set_state(self, state):
        self.seen.append((state.device.type, state.dtype))
        self.generator.set_state(state)

    def __getattr__(self, name):
        return getattr(self.generator, name)


def test_generator_states_reach_set_state_as_cpu_byte_tensors(tmp_path):
    cfg, first = trained(tmp_path, "torch")
    expected = first.step()
    again = steinrl.Trainer(cfg)
    recorders = again.job.envs.generators = [Recorder(g) for g in again.job.envs.generators]
    again.restore(tmp_path / "c.pt")
    assert all(r.seen == [("cpu", torch.uint8)] for r in recorders)
    again.job.envs.generators = [r.generator for r in recorders]
    assert again.step()["train/surrogate"] == expected["train/surrogate"]  # continues exactly


@pytest.mark.parametrize("saved, resumed", [("numpy", "torch"), ("torch", "numpy")])
def test_a_checkpoint_of_one_backend_continues_on_the_other(tmp_path, saved, resumed):
    cfg, first = trained(tmp_path, saved)
    carry = first.job.sampler.carry
    other = steinrl.load_config("svgd-a2c", "CartpoleSwingUp", {**SMALL, "rollout.env_backend": resumed})
    trainer = steinrl.Trainer(other)
    state = torch.load(tmp_path / "c.pt", weights_only=True)
    state["config"] = other.to_dict()  # the same run on another backend (as `auto` on another device)
    with pytest.warns(UserWarning, match="re-seeded"):
        trainer.load_state_dict(state)
    assert torch.equal(trainer.job.sampler.carry.obs, carry.obs)  # the episodes in progress continue
    torch.testing.assert_close(trainer.job.task.get_state()["state"].double(),
                               first.job.task.get_state()["state"].double())
    row = trainer.step()
    assert row["rollout/episodes"] >= 0 and trainer.iteration == 3


def test_a_device_task_saved_on_another_device_type_reseeds_its_stream(tmp_path):
    """A CUDA generator's state (16 bytes) cannot enter a CPU generator: the restored run
    warns, re-seeds, and goes on; the same checkpoint restored twice gives the same numbers."""
    cfg, _ = trained(tmp_path, "torch")
    state = torch.load(tmp_path / "c.pt", weights_only=True)
    envs = state["job"]["sampler"]["envs"]
    envs["kind"], envs["rng"] = "torch:cuda", [torch.zeros(16, dtype=torch.uint8)]
    rows = []
    for _ in range(2):
        trainer = steinrl.Trainer(cfg)
        with pytest.warns(UserWarning, match="saved on torch:cuda"):
            trainer.load_state_dict(state)
        rows.append(trainer.step()["train/surrogate"])
    assert rows[0] == rows[1]


def test_optimizer_step_counts_stay_on_the_cpu_after_a_restore(tmp_path):
    cfg, _ = trained(tmp_path, "numpy")
    again = steinrl.Trainer(cfg).restore(tmp_path / "c.pt")
    steps = [s["step"] for s in again.job.agent.particle_optimizer.torch_optimizer.state.values()]
    assert steps and all(t.device.type == "cpu" for t in steps)
