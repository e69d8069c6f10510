"""What a MuJoCo command prints and records: no deprecation notes about Gymnasium's model files,
and a video whose camera follows the body to the end of the episode."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import trained_run

from steinrl.errors import ConfigError

mujoco = pytest.importorskip("mujoco", reason="needs the mujoco extra")


def test_building_mujoco_envs_prints_no_settotalmass_deprecation(tmp_path):
    """HalfCheetah's and Ant's XML set ``settotalmass``: MuJoCo printed a deprecation note (and
    wrote MUJOCO_LOG.TXT) for every env built, four before a run's first line."""
    code = ("from steinrl import envs\nenvs.make('HalfCheetah-v5'); envs.make('Ant-v5')\n"
            "envs.make_vec('HalfCheetah-v5', 2); envs.make('SparseHalfCheetah')\nprint('built')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "built" and "settotalmass" not in proc.stderr and "WARNING" not in proc.stderr
    assert not (tmp_path / "MUJOCO_LOG.TXT").exists()


def test_only_the_settotalmass_note_is_dropped_and_only_while_an_env_is_built(capsys):
    """The hook is MuJoCo's warning handler for the build alone: any other MuJoCo warning is
    still printed, and MuJoCo's own handler is back afterwards."""
    from steinrl.envs.registration import _quiet_mujoco_model_warnings

    before = mujoco.get_mju_user_warning()
    with _quiet_mujoco_model_warnings("HalfCheetah-v5"):
        handler = mujoco.get_mju_user_warning()
        handler("compiler attribute 'settotalmass' is deprecated and will be removed in a future release")
        handler("something else went wrong")
    assert mujoco.get_mju_user_warning() is before
    err = capsys.readouterr().err
    assert "settotalmass" not in err and "WARNING: something else went wrong" in err
    with _quiet_mujoco_model_warnings("CartPole-v1"):  # not a MuJoCo env: untouched
        assert mujoco.get_mju_user_warning() is before


def _body_pixels(frame: np.ndarray) -> int:
    """Pixels of the cheetah's brown-orange capsules (the floor is black / pale green, the sky grey)."""
    rgb = frame.astype(int)
    return int(((rgb[..., 0] - rgb[..., 2] > 60) & (rgb[..., 0] > 100)).sum())


@pytest.fixture(scope="module")
def cheetah_run(tmp_path_factory):
    return trained_run(tmp_path_factory.mktemp("runs"), "svgd-ppo", "HalfCheetah-v5", iterations=1, horizon=12,
                       particles=2, **{"rollout.vectorization": "sync", "rollout.batch_size": 32})


def _renderable(cfg):
    from steinrl.rl.evaluation import check_video

    try:
        check_video(cfg)
    except ConfigError as exc:
        pytest.skip(f"MuJoCo cannot render here: {exc}")


def test_the_video_camera_follows_the_cheetah(cheetah_run, monkeypatch):
    """Gymnasium 1.4's camera stays put: 30 m on, the frame held no cheetah (the GIF then held
    that empty frame for the rest of the episode). The model's tracking camera keeps it in view."""
    from steinrl.rl.evaluation import _video_env
    from steinrl.run.config import read_run_config

    for key in ("DISPLAY", "WAYLAND_DISPLAY"):
        monkeypatch.delenv(key, raising=False)
    cfg = read_run_config(cheetah_run / "config.yaml")
    _renderable(cfg)
    env, _, first = _video_env(cfg, 0)
    try:
        model, data = env.unwrapped.model, env.unwrapped.data
        assert env.unwrapped.mujoco_renderer.camera_id == mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA,
                                                                              "track")
        data.qpos[0] += 30.0
        mujoco.mj_forward(model, data)
        far = env.render()
    finally:
        env.close()
    assert _body_pixels(first) > 0.01 * first[..., 0].size
    assert _body_pixels(far) > 0.5 * _body_pixels(first)


def test_the_gif_ends_with_the_episode(cheetah_run, tmp_path, monkeypatch):
    """One GIF frame per step, each shown for the env's own frame time: the GIF lasts as long as
    the episode, with no frame held over."""
    from PIL import Image

    from steinrl.rl.evaluation import record_video
    from steinrl.run.load import load_run

    for key in ("DISPLAY", "WAYLAND_DISPLAY"):
        monkeypatch.delenv(key, raising=False)
    cfg, policy, _ = load_run(cheetah_run)
    _renderable(cfg)
    gif = tmp_path / "ep.gif"
    frames = record_video(cfg, policy, gif)
    assert frames == cfg.rollout.horizon + 1  # the reset's frame and one a step
    with Image.open(gif) as image:
        durations = []
        for i in range(image.n_frames):
            image.seek(i)
            durations.append(image.info["duration"])
    assert len(durations) == frames and set(durations) == {50}  # HalfCheetah-v5: dt = 0.05 s
    assert os.path.getsize(gif) > 0
