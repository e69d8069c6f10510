"""What earlier versions of steinrl wrote, in today's terms: keys that moved.

A key a user writes in its old place gets one error line naming the new one
(:data:`MOVED_KEYS`, :func:`check_moved`); a run directory's saved
config is migrated silently (:func:`migrate_run_config`), so old runs resume and evaluate.
"""

from __future__ import annotations

from typing import Any

from steinrl.errors import ConfigError

__all__ = ["MOVED_KEYS", "check_moved", "migrate_run_config"]

#: Keys that have moved, with what to write instead (a saved run config is migrated: :func:`migrate_run_config`).
MOVED_KEYS = {
    ("update", "bandwidth"): "update.bandwidth is now a parameter of the kernel: update.kernel: {bandwidth: ...} "
                             "(e.g. --set 'update.kernel={bandwidth: s2vgd}')",
}


def check_moved(path: tuple[str, ...], where: str) -> None:
    """Raise :class:`ConfigError` naming the new place of a moved key (dotted, or bare)."""
    moved = MOVED_KEYS.get(path) or next((m for p, m in MOVED_KEYS.items() if path == p[-1:]), None)
    if moved:
        raise ConfigError(f"{moved} (in {where})")


def migrate_run_config(data: dict[str, Any]) -> dict[str, Any]:
    """A run config saved by an earlier version in today's keys (:data:`MOVED_KEYS`): the
    update's ``bandwidth`` joins its kernel (an update without a kernel only logged it)."""
    update = data.get("update")
    if isinstance(update, dict) and "bandwidth" in update:
        update = dict(update)
        rule = update.pop("bandwidth")
        if isinstance(update.get("kernel"), str):
            update["kernel"] = {"name": update["kernel"], "bandwidth": rule}
        data = {**data, "update": update}
    return data
