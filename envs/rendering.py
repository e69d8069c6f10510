"""Tiny numpy rasteriser for the ``rgb_array`` render mode (no pygame, no Box2D), and the
choice of MuJoCo's OpenGL backend where there is no display (:func:`choose_mujoco_gl`).

Frames are ``(H, W, 3)`` uint8 arrays. World coordinates are metres with y up; a
:class:`Canvas` maps them to pixels (row 0 at the top).
"""

from __future__ import annotations

import ctypes.util
import math
import os
import sys
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

import numpy as np

from steinrl.errors import ConfigError

Color = tuple[int, int, int]

BACKGROUND: Color = (255, 255, 255)
TRACK: Color = (40, 40, 40)
CART: Color = (60, 60, 60)
POLE: Color = (202, 152, 101)
JOINT: Color = (129, 132, 203)
TARGET: Color = (220, 60, 60)


class Canvas:
    """An ``(height, width, 3)`` uint8 image showing the world rectangle centred on
    ``center`` (m) with ``pixels_per_metre`` scale."""

    def __init__(
        self,
        width: int,
        height: int,
        pixels_per_metre: float,
        center: tuple[float, float] = (0.0, 0.0),
        background: Color = BACKGROUND,
    ) -> None:
        self.width, self.height = int(width), int(height)
        self.scale = float(pixels_per_metre)
        self.center = center
        self.image = np.empty((self.height, self.width, 3), dtype=np.uint8)
        self.image[...] = background

    def to_pixels(self, x: float, y: float) -> tuple[float, float]:
        """World point (m) -> (column, row) in pixels (floats)."""
        col = (x - self.center[0]) * self.scale + self.width / 2.0
        row = self.height / 2.0 - (y - self.center[1]) * self.scale
        return col, row

    def _window(
        self, cols: tuple[float, float], rows: tuple[float, float], pad: float
    ) -> tuple[slice, slice, np.ndarray, np.ndarray] | None:
        c0 = max(int(math.floor(min(cols) - pad)), 0)
        c1 = min(int(math.ceil(max(cols) + pad)) + 1, self.width)
        r0 = max(int(math.floor(min(rows) - pad)), 0)
        r1 = min(int(math.ceil(max(rows) + pad)) + 1, self.height)
        if c0 >= c1 or r0 >= r1:
            return None
        cc = np.arange(c0, c1, dtype=np.float64)[None, :] + 0.5  # pixel centres
        rr = np.arange(r0, r1, dtype=np.float64)[:, None] + 0.5
        return slice(r0, r1), slice(c0, c1), cc, rr

    def segment(
        self, p0: tuple[float, float], p1: tuple[float, float], half_width: float, color: Color
    ) -> None:
        """Thick line (round caps) from ``p0`` to ``p1``; ``half_width`` in m."""
        (c0, r0), (c1, r1) = self.to_pixels(*p0), self.to_pixels(*p1)
        radius = max(half_width * self.scale, 0.5)
        win = self._window((c0, c1), (r0, r1), radius + 1)
        if win is None:
            return
        rows, cols, cc, rr = win
        dc, dr = c1 - c0, r1 - r0
        length2 = dc * dc + dr * dr
        t = 0.0 if length2 == 0 else np.clip(((cc - c0) * dc + (rr - r0) * dr) / length2, 0.0, 1.0)
        dist2 = (cc - (c0 + t * dc)) ** 2 + (rr - (r0 + t * dr)) ** 2
        self.image[rows, cols][dist2 <= radius * radius] = color

    def disc(self, center: tuple[float, float], radius: float, color: Color) -> None:
        """Filled circle; ``radius`` in m."""
        self.segment(center, center, radius, color)

    def rectangle(
        self, center: tuple[float, float], half_extent: tuple[float, float], color: Color
    ) -> None:
        """Axis-aligned filled rectangle; ``half_extent`` = (half width, half height) in m."""
        x, y = center
        hx, hy = half_extent
        (c0, r0), (c1, r1) = self.to_pixels(x - hx, y + hy), self.to_pixels(x + hx, y - hy)
        rows = slice(max(int(round(r0)), 0), max(min(int(round(r1)), self.height), 0))
        cols = slice(max(int(round(c0)), 0), max(min(int(round(c1)), self.width), 0))
        self.image[rows, cols] = color

    def horizontal_line(self, y: float, color: Color, thickness_px: int = 1) -> None:
        """Full-width horizontal line at height ``y`` (m)."""
        row = int(round(self.to_pixels(0.0, y)[1]))
        if 0 <= row < self.height:
            self.image[row : row + thickness_px] = color


def render_cartpole(
    x: float,
    theta: float,
    *,
    track_half_width: float,
    pole_length: float,
    width: int = 600,
    height: int = 400,
) -> np.ndarray:
    """Frame of a cart at ``x`` (m) with a pole at angle ``theta`` (rad, 0 up, tip at
    ``x − l sin θ``); the view spans ``±(track_half_width + 0.5)`` m. Returns
    ``(height, width, 3)`` uint8."""
    canvas = Canvas(width, height, width / (2.0 * (track_half_width + 0.5)), center=(0.0, 0.2))
    cart_half = (0.25, 0.1)  # m
    canvas.horizontal_line(-cart_half[1], TRACK, thickness_px=2)
    for side in (-track_half_width, track_half_width):  # track limits
        canvas.rectangle((side, 0.0), (0.01, 0.15), TRACK)
    canvas.rectangle((x, 0.0), cart_half, CART)
    tip = (x - pole_length * math.sin(theta), pole_length * math.cos(theta))
    canvas.segment((x, 0.0), tip, 0.04, POLE)
    canvas.disc((x, 0.0), 0.05, JOINT)
    return canvas.image


def render_double_pendulum(
    theta1: float, theta2: float, *, link_length: float, target: tuple[float, float], size: int = 400
) -> np.ndarray:
    """Frame of a two-link arm pinned at the origin with absolute angles ``theta1``,
    ``theta2`` (rad, 0 hanging down, counter-clockwise) and a marker at ``target`` (m).
    Returns ``(size, size, 3)`` uint8."""
    canvas = Canvas(size, size, size / (4.0 * link_length + 0.6))
    elbow = (link_length * math.sin(theta1), -link_length * math.cos(theta1))
    tip = (elbow[0] + link_length * math.sin(theta2), elbow[1] - link_length * math.cos(theta2))
    canvas.disc(target, 0.06, TARGET)
    canvas.segment((0.0, 0.0), elbow, 0.05, POLE)
    canvas.segment(elbow, tip, 0.05, POLE)
    canvas.disc((0.0, 0.0), 0.06, JOINT)
    canvas.disc(elbow, 0.06, JOINT)
    return canvas.image


# --- MuJoCo's OpenGL backend -------------------------------------------------------------
#: MuJoCo's headless OpenGL backends in order of preference: (``MUJOCO_GL`` value, library).
HEADLESS_GL: tuple[tuple[str, str], ...] = (("egl", "EGL"), ("osmesa", "OSMesa"))

#: What to do where MuJoCo cannot render (one line, for ``error: ...``).
GL_HINT = ("set MUJOCO_GL=egl (needs libEGL, e.g. apt install libegl1) or MUJOCO_GL=osmesa (needs libOSMesa, "
           "e.g. apt install libosmesa6), or run under a display (e.g. xvfb-run)")


def choose_mujoco_gl(environ: Mapping[str, str] | None = None, platform: str | None = None,
                     find_library: Callable[[str], str | None] = ctypes.util.find_library) -> str | None:
    """The ``MUJOCO_GL`` backend MuJoCo should render with here.

    The user's own ``MUJOCO_GL`` wins; where a display exists (any platform but Linux, or
    ``DISPLAY`` / ``WAYLAND_DISPLAY`` set) None, MuJoCo's default (GLFW); otherwise the first
    of EGL and OSMesa whose library is installed (only the one ``PYOPENGL_PLATFORM`` names,
    where it is set).

    :raises ConfigError: no display and neither library (the message names ``MUJOCO_GL``).
    """
    environ = os.environ if environ is None else environ
    platform = sys.platform if platform is None else platform
    if environ.get("MUJOCO_GL"):
        return environ["MUJOCO_GL"]
    if not platform.startswith("linux") or environ.get("DISPLAY") or environ.get("WAYLAND_DISPLAY"):
        return None
    forced = environ.get("PYOPENGL_PLATFORM", "").lower()
    for backend, library in HEADLESS_GL:
        if (not forced or forced == backend) and find_library(library):
            return backend
    raise ConfigError(f"MuJoCo cannot render here: there is no display and no headless OpenGL library "
                      f"(EGL or OSMesa{f' for PYOPENGL_PLATFORM={forced}' if forced else ''}); {GL_HINT}")


def use_headless_gl(environ: MutableMapping[str, str] | None = None, **choose: Any) -> str | None:
    """Set ``MUJOCO_GL`` to :func:`choose_mujoco_gl`'s choice (``choose``: its keyword
    arguments) before MuJoCo's first render, and return it (None: MuJoCo's default)."""
    environ = os.environ if environ is None else environ
    backend = choose_mujoco_gl(environ, **choose)
    if backend is not None:
        environ["MUJOCO_GL"] = backend
    return backend


# --- MuJoCo's camera ---------------------------------------------------------------------
#: The camera of Gymnasium's MuJoCo models that follows the body (``mode="trackcom"``: HalfCheetah,
#: Hopper, Walker2d, Ant, Swimmer).
TRACKING_CAMERA = "track"


def track_body(env: Any) -> bool:
    """Render MuJoCo env ``env`` (``render_mode="rgb_array"``) from its model's tracking camera,
    which follows the body's centre of mass; True where the model has one.

    Gymnasium 1.4 renders a MuJoCo task from a free camera placed by ``DEFAULT_CAMERA_CONFIG``
    (HalfCheetah's: distance 4, no tracking), which stays put: a running cheetah leaves the frame
    after a few seconds. The model's own ``track`` camera keeps it in view; a task without one
    (InvertedDoublePendulum, which does not travel) keeps Gymnasium's camera. Set before the
    first frame."""
    unwrapped = getattr(env, "unwrapped", env)
    renderer = getattr(unwrapped, "mujoco_renderer", None)
    if renderer is None:
        return False
    import mujoco

    camera = mujoco.mj_name2id(unwrapped.model, mujoco.mjtObj.mjOBJ_CAMERA, TRACKING_CAMERA)
    if camera < 0:
        return False
    renderer.camera_id = camera
    return True
