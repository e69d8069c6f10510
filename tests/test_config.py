"""Config resolution from the parts' declarations: keys, types, files, docs, packaging."""

import configparser

import pytest
from conftest import ROOT

from steinrl.core.priors import PRIORS
from steinrl.errors import ConfigError
from steinrl.run.config import load_config, load_yaml, parse_set, read_run_config, save_config, schema


def test_keys_nested_dotted_and_bare_mean_the_same(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("rollout:\n  batch_size: 123\nupdate.lr: 0.002\n")
    a = load_config("s2vgd-a2c", "Cartpole", config_files=[f])
    b = load_config("s2vgd-a2c", "Cartpole", {"rollout.batch_size": 123, "update.lr": 0.002})
    c = load_config("s2vgd-a2c", "Cartpole", {"batch_size": 123, "update": {"lr": 0.002}})
    assert a.to_dict() == b.to_dict() == c.to_dict()
    assert a.rollout.batch_size == 123 and a.update.lr == 0.002


def test_sections_are_typed_frozen_settings_of_their_parts():
    """A section is a frozen dataclass, an instance of each part's settings it is composed of (the
    update: the particle optimizer's and the coupling's); attribute access only, no string keys;
    equal configs compare equal and a config pickles."""
    import dataclasses
    import pickle

    from steinrl.core.couplings import SteinSettings
    from steinrl.core.layers import FactoredSettings
    from steinrl.core.particle_optimizer import OptimizerSettings
    from steinrl.core.priors import GaussianPriorSettings
    from steinrl.rl.critics import ValueEnsembleSettings
    from steinrl.rl.estimators.a2c import A2CSettings
    from steinrl.rl.heads import GaussianHeadSettings
    from steinrl.rl.policy import PolicySettings

    cfg = load_config("s2vgd-a2c", "Pendulum-v1", {"update.lr": 0.002, "layer.K": 2})
    assert isinstance(cfg.update, OptimizerSettings) and isinstance(cfg.update, SteinSettings)
    assert isinstance(cfg.policy, PolicySettings) and isinstance(cfg.policy, GaussianHeadSettings)
    assert isinstance(cfg.prior, GaussianPriorSettings) and (cfg.prior.name, cfg.prior.weight) == ("gaussian", None)
    assert isinstance(cfg.layer, FactoredSettings) and cfg.layer.K == 2 and cfg.layer.scales is False
    assert isinstance(cfg.critic, ValueEnsembleSettings) and isinstance(cfg.estimator, A2CSettings)
    assert cfg.update.lr == 0.002 and isinstance(cfg.policy.hidden, list)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.update.lr = 1.0
    with pytest.raises(TypeError):
        cfg.update["lr"]  # noqa: B018
    assert load_config("s2vgd-a2c", "Pendulum-v1", {"update.lr": 0.002, "layer.K": 2}).update == cfg.update
    assert pickle.loads(pickle.dumps(cfg)).to_dict() == cfg.to_dict()


def test_values_are_read_as_their_declared_type():
    cfg = load_config(overrides=parse_set(["update.lr=1e-3", "batch_size=5e3", "sampling=continuing",
                                           "policy.hidden=[8, 4]", "prior.weight=null",
                                           "update.kernel={bandwidth: 0.5}"]))
    assert cfg.update.lr == 0.001 and isinstance(cfg.update.lr, float)  # YAML 1.1 reads 1e-3 as a string
    assert cfg.rollout.batch_size == 5000 and isinstance(cfg.rollout.batch_size, int)
    assert cfg.rollout.sampling == "continuing" and cfg.policy.hidden == [8, 4] and cfg.prior.weight is None
    assert cfg.update.kernel["bandwidth"] == 0.5 and load_config().update.kernel["bandwidth"] == "svpg"


@pytest.mark.parametrize("overrides, message", [
    ({"batch_size": 2.5}, "'rollout.batch_size' in the command line must be an integer, got 2.5"),
    ({"update.lr": 1e400}, "must be a finite number"),
    ({"update.lr": "nan"}, "must be a finite number"),
    ({"update.optimizer": "lbfgs"}, "must be one of adam, rmsprop, rmsprop_tf, sgd; got 'lbfgs'"),
    ({"prior.name": "laplace"}, "unknown prior 'laplace'; registered: " + ", ".join(PRIORS.names())),
    ({"update.kernel": {"bandwidth": -1.0}}, "'update.kernel' in the command line: kernel 'rbf': parameter "
                                             "'bandwidth' must be 'svpg' or 's2vgd' or 'svpg_adaptive' or a positive"),
    ({"rollout": 3}, "'rollout' in the command line is a config section"),
    ({"a.b.c": 1}, "must be <key> or <section>.<key>"),
    ({"seed": -1}, "'seed' in the command line must be in [0, 2**32), got -1"),
    ({"tempreature": 3}, "did you mean 'temperature'?"),
    ({"env": ""}, "Unknown environment ''"),
    ({"algo": "s2vgd-foo"}, "unknown algo 's2vgd-foo'"),
])
def test_bad_values_name_the_key_and_what_is_valid(overrides, message):
    with pytest.raises(ConfigError, match=None) as info:
        load_config(overrides=overrides)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_method_defaults_and_part_sections():
    assert load_config("vmg-a2c").layer.K == 0 and load_config("s2vgd-a2c").layer.K == 1
    assert load_config("svgd-a2c").to_dict()["layer"] == {}
    assert "critic" not in load_config("svgd-reinforce") and "critic" in load_config("svgd-ppo")
    joint = load_config(overrides={"prior.name": "joint"})
    assert {"a", "b"} <= set(joint.to_dict()["prior"]) and "variance" not in joint.to_dict()["prior"]
    sections = schema("s2vgd-ppo")
    assert [o.name for o in sections["estimator"]] == ["discount", "normalize_advantages", "gae_lambda",
                                                       "clip_range", "epochs", "minibatches", "normalize_per_minibatch",
                                                       "ent_coef", "max_grad_norm", "anneal_lr", "scale_rewards",
                                                       "reward_clip", "target_kl"]
    choices = next(o for o in sections["prior"] if o.name == "name").allowed_choices()
    assert choices == PRIORS.names()  # read from the registry, not copied


@pytest.mark.parametrize("text, message", [
    ("iterations: 3\niterations: 4\n", "duplicate key 'iterations'"),
    ("- 1\n- 2\n", "must hold a mapping of config keys, got a list"),
    ("iterations: [\n", "cannot parse"),
])
def test_bad_yaml_files(tmp_path, text, message):
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_yaml(f)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_non_utf8_config_file(tmp_path):
    f = tmp_path / "latin1.yaml"
    f.write_bytes("# température\niterations: 3\n".encode("latin-1"))
    with pytest.raises(ConfigError, match="is not UTF-8 text"):
        load_yaml(f)


def test_saved_config_reads_back_equal(tmp_path):
    cfg = load_config("kron-ppo", "DoublePendulum", {"seed": 3, "critic.name": "linear"})
    save_config(cfg, tmp_path / "config.yaml", {"command": "x"})
    assert read_run_config(tmp_path / "config.yaml").to_dict() == cfg.to_dict()
    assert cfg.replace({"seed": 4}).seed == 4 and cfg.seed == 3
    with pytest.raises(AttributeError, match="read-only"):
        cfg.seed = 5


def test_docs_config_md_is_current():
    from steinrl.run.docs import render

    assert (ROOT / "docs" / "config.md").read_text() == render(), \
        "docs/config.md is stale: run python -m steinrl.run.docs > docs/config.md"


def test_every_package_is_listed_in_setup_cfg():
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg")
    listed = set(parser["options"]["packages"].split())
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "steinrl").rglob("__init__.py")}
    found |= {"steinrl.envs", "steinrl.configs"}
    assert found == listed, f"setup.cfg packages differ: missing {found - listed}, extra {listed - found}"


def test_every_key_of_the_shipped_yaml_files_is_a_key_of_some_algorithm():
    """Per-task files and presets serve several algorithms (keys an algorithm lacks are
    skipped), so check here that none of their keys is a typo."""
    from steinrl.run.algos import JOBS
    from steinrl.run.config import CONFIG_DIR, _items, load_yaml, schema

    known = set()
    for _, job in JOBS.items():
        for algo in job.algorithm_names():
            for env in ("CartpoleSwingUp", "Mushroom", "Wheel", "Linear", "SparseLinear"):
                try:
                    sections = schema(algo, {"env": env, "prior": "joint"})
                except Exception:  # noqa: BLE001 - a task of another job
                    continue
                known |= {(s, o.name) if s else (o.name,) for s, options in sections.items() for o in options}
    for path in sorted([*CONFIG_DIR.glob("*.yaml"), *CONFIG_DIR.glob("presets/*.yaml")]):
        for key, _ in _items(load_yaml(path), str(path)):
            bare_ok = len(key) == 1 and any(k[-1] == key[0] for k in known)
            assert key in known or bare_ok, f"{path.name}: {'.'.join(key)} is no algorithm's config key"


def test_rl_s2vgd_freezes_the_scales_and_the_paper_preset_restores_them():
    """The RL default of s2vgd follows the study (Λ fixed at 1); ``--preset paper`` gives the
    S²VGD paper's learned Λ; the bandit s2vgd-ts keeps the method's (paper's) default, and an
    explicit value beats both."""
    import steinrl

    rl = steinrl.load_config("s2vgd-a2c", "CartpoleSwingUp")
    assert rl.layer.scales is False
    paper = steinrl.load_config("s2vgd-a2c", "CartpoleSwingUp", preset="paper")
    assert paper.layer.scales is True and paper.layer.scales_centre == 0.0
    assert steinrl.load_config("svgd-a2c", "CartpoleSwingUp", preset="paper").algo == "svgd-a2c"  # keys skipped
    assert steinrl.load_config("vmg-a2c", "CartpoleSwingUp").layer.scales is True
    assert steinrl.load_config("s2vgd-ts", "Mushroom").layer.scales is True
    assert steinrl.load_config("s2vgd-a2c", "CartpoleSwingUp", {"layer.scales": True}).layer.scales is True
    trainer = steinrl.Trainer(rl.replace({"particles": 2, "rollout.batch_size": 50, "iterations": 1}))
    assert not any("lambda" in name for name, _ in trainer.job.agent.policy.named_parameters())
    trainer.close()


def test_swingup_tasks_default_to_temperature_15_and_the_paper_preset_restores_10():
    """α = 15 where the study measured it best (both swing-ups, their configs/<env>.yaml);
    the papers' 10 elsewhere and under ``--preset paper``; flags and ``--set`` win over both."""
    import steinrl

    for env in ("CartpoleSwingUp", "CartpoleSwingUpRllab"):
        for algo in ("s2vgd-a2c", "svgd-reinforce"):
            assert steinrl.load_config(algo, env).temperature == 15.0
            assert steinrl.load_config(algo, env, preset="fast").temperature == 15.0
            assert steinrl.load_config(algo, env, preset="paper").temperature == 10.0
        assert steinrl.load_config("s2vgd-a2c", f"steinrl/{env}-v0").temperature == 15.0  # the id, too
    assert steinrl.load_config("s2vgd-a2c", "steinrl/Cartpole-v0").iterations == 100  # configs/Cartpole.yaml
    for env in ("DoublePendulum", "Cartpole", "Pendulum-v1"):
        assert steinrl.load_config("s2vgd-a2c", env).temperature == 10.0
    assert steinrl.load_config("svgd-a2c", "CartpoleSwingUp", {"temperature": 7}).temperature == 7.0
    assert steinrl.load_config("svgd-a2c", "CartpoleSwingUp", {"temperature": 7}, preset="paper").temperature == 7.0


@pytest.mark.parametrize("where, text", [("set", "update.kernel={name:imq,beta:-0.3}"),
                                         ("file", "update:\n  kernel: {name: imq, beta:-0.3}\n")])
def test_a_mapping_without_spaces_after_its_colons_hints_at_yaml(tmp_path, capsys, where, text):
    """``{name:imq,beta:-0.3}``: YAML reads ``name:imq`` as one key with no value; the error says
    YAML needs a space after the colon and shows the mapping as meant (it used to read "kernel
    'rbf' has no parameter 'beta:-0.3', 'name:imq'")."""
    from steinrl.run.cli import run_cli, train_main

    if where == "set":
        args = ["--set", text]
    else:
        (tmp_path / "k.yaml").write_text(text)
        args = ["--config", str(tmp_path / "k.yaml")]
    code = run_cli(train_main, ["--algo", "svgd-a2c", "--env", "Cartpole", "--logdir", str(tmp_path / "runs"), *args])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: config key 'update.kernel'")
    assert "YAML needs a space after each colon: {name: imq, beta: -0.3}" in err
    assert "has no parameter" not in err and not (tmp_path / "runs").exists()


def test_docs_config_md_joins_a_kernels_parameters_without_doubled_stops():
    """A kernel's parameter docs end in a full stop: joined with "; " they read "number.; `beta`"."""
    from steinrl.run.docs import render

    text = render()
    assert ".;" not in text and "a fixed positive number; `beta` (-0.5)" in text
