"""MuJoCo as a new user meets it: a Gymnasium id's own horizon, vectorization without EnvPool,
and videos without a display (a headless renderer, or one ``error:`` line naming MUJOCO_GL)."""

from __future__ import annotations

import os
import subprocess
import sys

import gymnasium as gym
import pytest
from conftest import ROOT, trained_run

from steinrl import envs
from steinrl.envs import envpool as envpool_adapter
from steinrl.envs.rendering import choose_mujoco_gl, use_headless_gl
from steinrl.errors import ConfigError
from steinrl.run.config import load_config, read_run_config, save_config


# --- horizon -----------------------------------------------------------------------------
@pytest.mark.parametrize(("env", "limit"), [("Hopper-v5", 1000), ("HalfCheetah-v5", 1000), ("Reacher-v5", 50),
                                            ("Pendulum-v1", 200), ("MountainCar-v0", 200),
                                            ("CartpoleSwingUp", 500), ("steinrl/DoublePendulum-v0", 500)])
def test_horizon_defaults_to_the_tasks_registered_time_limit(env, limit):
    """The limits Gymnasium documents for these ids (and steinrl's 500), not the option's 500."""
    assert load_config("svgd-a2c", env).rollout.horizon == limit
    assert load_config("svgd-a2c", env, preset="fast").rollout.horizon == limit  # the preset sets none


def test_a_horizon_set_anywhere_wins_over_the_registered_limit(tmp_path):
    assert load_config("svgd-a2c", "Hopper-v5", {"horizon": 300}).rollout.horizon == 300
    assert load_config("svgd-a2c", "Hopper-v5", {"rollout.horizon": 500}).rollout.horizon == 500
    (tmp_path / "h.yaml").write_text("rollout:\n  horizon: 250\n")
    assert load_config("svgd-a2c", "Hopper-v5", config_files=[tmp_path / "h.yaml"]).rollout.horizon == 250
    # a saved run keeps its horizon, also where it was the old default
    save_config(load_config("svgd-a2c", "Hopper-v5", {"horizon": 500}), tmp_path / "config.yaml")
    assert read_run_config(tmp_path / "config.yaml").rollout.horizon == 500
    assert load_config("svgd-a2c", "Hopper-v5").replace({"particles": 3}).rollout.horizon == 1000


# --- vectorization on the base install ---------------------------------------------------
def test_without_envpool_auto_is_gymnasiums_sync_and_envpool_says_what_to_install(monkeypatch):
    monkeypatch.setattr(envpool_adapter, "envpool_installed", lambda: False)
    assert load_config("svgd-a2c", "Hopper-v5").rollout.vectorization == "auto"
    with pytest.raises(ConfigError, match=r'vectorization envpool cannot run Hopper-v5: EnvPool is not installed '
                                          r'\(pip install "steinrl\[envpool\]"\)'):
        envs.make_vec("Hopper-v5", 2, vectorization_mode="envpool")
    assert isinstance(envs.make_vec("CartPole-v1", 2, vectorization_mode="auto"), gym.vector.SyncVectorEnv)
    pytest.importorskip("mujoco", reason="needs the mujoco extra")
    venv = envs.make_vec("Hopper-v5", 2, vectorization_mode="auto", max_episode_steps=7)
    assert isinstance(venv, gym.vector.SyncVectorEnv)
    venv.close()


# --- MuJoCo's OpenGL backend -------------------------------------------------------------
def _libraries(*present):
    return lambda name: f"lib{name}.so" if name in present else None


def test_choose_mujoco_gl():
    linux = {"platform": "linux"}
    assert choose_mujoco_gl({"MUJOCO_GL": "osmesa"}, find_library=_libraries(), **linux) == "osmesa"  # the user's
    assert choose_mujoco_gl({"DISPLAY": ":0"}, find_library=_libraries("EGL"), **linux) is None  # GLFW on the display
    assert choose_mujoco_gl({"WAYLAND_DISPLAY": "w"}, find_library=_libraries("EGL"), **linux) is None
    assert choose_mujoco_gl({}, platform="darwin", find_library=_libraries()) is None
    assert choose_mujoco_gl({}, find_library=_libraries("EGL", "OSMesa"), **linux) == "egl"
    assert choose_mujoco_gl({}, find_library=_libraries("OSMesa"), **linux) == "osmesa"
    assert choose_mujoco_gl({"PYOPENGL_PLATFORM": "osmesa"}, find_library=_libraries("EGL", "OSMesa"),
                            **linux) == "osmesa"
    with pytest.raises(ConfigError, match="no display and no headless OpenGL library.*MUJOCO_GL=egl"):
        choose_mujoco_gl({}, find_library=_libraries(), **linux)
    environ = {}
    assert use_headless_gl(environ, find_library=_libraries("OSMesa"), **linux) == "osmesa"
    assert environ == {"MUJOCO_GL": "osmesa"}  # set before MuJoCo's first render
    environ = {"DISPLAY": ":0"}
    assert use_headless_gl(environ, find_library=_libraries("EGL"), **linux) is None and "MUJOCO_GL" not in environ


def _evaluate_video(run, video, **env_vars):
    environ = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "MUJOCO_GL")}
    environ.update(env_vars, PYTHONUNBUFFERED="1")
    return subprocess.run([sys.executable, str(ROOT / "evaluate.py"), str(run), "--episodes", "1", "--video",
                           str(video)], capture_output=True, text=True, cwd=video.parent, timeout=300, env=environ,
                          check=False)  # (cwd: MuJoCo writes MUJOCO_LOG.TXT where it fails)


@pytest.fixture(scope="module")
def mujoco_run(tmp_path_factory):
    pytest.importorskip("mujoco", reason="needs the mujoco extra")
    return trained_run(tmp_path_factory.mktemp("runs"), "svgd-a2c", "InvertedPendulum-v5", iterations=1,
                       horizon=20)


def test_video_without_a_display_uses_a_headless_renderer(mujoco_run, tmp_path):
    """No DISPLAY, no MUJOCO_GL: EGL or OSMesa, whichever is installed, records the episode;
    with neither, one error line naming MUJOCO_GL."""
    gif = tmp_path / "ep.gif"
    proc = _evaluate_video(mujoco_run, gif)
    if proc.returncode == 0:
        assert gif.read_bytes()[:3] == b"GIF" and f"wrote {gif}" in proc.stdout
    else:
        assert proc.returncode == 2 and proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1
        assert "MUJOCO_GL" in proc.stderr and not gif.exists()


def test_a_renderer_that_cannot_start_stops_with_one_error_line(mujoco_run, tmp_path):
    """MUJOCO_GL=glfw without a display: GLFW cannot open a context (today's traceback ended in
    mujoco.FatalError); now one line naming MUJOCO_GL and what to set, exit 2, no video."""
    gif = tmp_path / "ep.gif"
    proc = _evaluate_video(mujoco_run, gif, MUJOCO_GL="glfw")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: cannot render InvertedPendulum-v5 with MUJOCO_GL=glfw")
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "MUJOCO_GL=egl" in proc.stderr and "MUJOCO_GL=osmesa" in proc.stderr
    assert not gif.exists()


def test_a_mujoco_gl_that_cannot_load_is_a_config_error(tmp_path):
    """MuJoCo loads MUJOCO_GL's backend when it is imported: a bad value is one ConfigError
    naming it, not an ImportError / AttributeError from deep inside PyOpenGL."""
    pytest.importorskip("mujoco", reason="needs the mujoco extra")
    code = ("from steinrl import envs\nfrom steinrl.errors import ConfigError\n"
            "try:\n    envs.make('InvertedPendulum-v5')\nexcept ConfigError as exc:\n    print(exc)\n")
    environ = dict(os.environ, MUJOCO_GL="nonsense")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120,
                          check=False, env=environ)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("InvertedPendulum-v5: MuJoCo cannot load the OpenGL backend MUJOCO_GL=nonsense")
