"""Render ``docs/config.md`` from the parts' option declarations.

    python -m steinrl.run.docs > docs/config.md

``tests/test_config.py`` fails when the committed file differs from this output.
"""

from __future__ import annotations

from steinrl.core.kernels import FUNCTION_SPACE_OPTIONS, KERNELS, SPACE
from steinrl.core.repulsion import REPULSIONS
from steinrl.registry import Option
from steinrl.run.algos import JOBS
from steinrl.run.config import RUN_OPTIONS, TRAINER_OPTIONS

HEADER = """# Configuration reference

Generated from the options each registered part declares (`python -m steinrl.run.docs >
docs/config.md`; a test fails when this file is stale). A run's config is nested: the
top-level keys below and one section per part. Which options a section has depends on
the parts the algorithm picks: `s2vgd-a2c` has the householder layer's `layer.K`, the
a2c estimator's `estimator.gae_lambda` and a `critic` section; `svgd-reinforce` has
none of these.

Set keys in YAML (nested, or dotted like `update.lr: 1e-3`) or on the command line with
`--set update.lr=1e-3`. A bare key means the first section below that has it
(`--set batch_size=1000` is `rollout.batch_size`; `lr` is `update.lr` and `hidden` is
`policy.hidden`, the critic's sections coming last). Resolution order, later wins: declared
defaults (and the method's own, e.g. `vmg` sets `layer.K: 0`; the RL algorithms of `s2vgd` set `layer.scales: false`, a
measured choice that `--preset paper` turns back to the S²VGD paper's `true`, see
[research/results/swingup_10seeds.md](../research/results/swingup_10seeds.md#defaults-that-followed)),
`configs/<env>.yaml`
(the swing-up tasks' set `temperature: 15`, also measured; `--preset paper` sets the papers' 10),
`--preset`, `--config` files, flags and `--set`. Every value is checked against its declared type and range.
"""


def _type(option: Option) -> str:
    types = option.type if isinstance(option.type, tuple) else (option.type,)
    names = {bool: "bool", int: "int", float: "float", str: "str", None: "null", dict: "mapping"}
    return " \\| ".join(names.get(t, "list[int]") for t in types)


def _default(option: Option) -> str:
    value = option.default
    if isinstance(value, dict):  # a mapping option (a kernel): YAML's flow style
        return "{" + ", ".join(f"{k}: {v}" for k, v in value.items()) + "}"
    return "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def _kernels() -> list[str]:
    """The kernel table: every registered kernel with its parameters (``update.kernel``)."""
    lines = ["## Stein kernels (`update.kernel`)", "",
             "`update.kernel` names a kernel, alone (`imq`) or with its parameters (`{name: imq, beta: -0.3, "
             "bandwidth: s2vgd}`; on the command line `--set 'update.kernel={name: imq, beta: -0.3}'`). A mapping "
             "without `name` sets parameters of the kernel configured so far (`--set 'update.kernel={bandwidth: "
             "s2vgd}'`). YAML needs a space after each colon: `{name:imq}` is one key with no value (an error that "
             "says so).", "",
             "| kernel | k(x, y), d = ‖x − y‖ | parameters (default) |", "|---|---|---|"]
    for name, cls in KERNELS.items():
        lines.append(f"| `{name}` | {cls.doc} | {_parameters(cls.options)} |")
    lines += ["", "Every kernel also takes where it looks at the particles, and in function space what it sees "
              "(`--set 'update.kernel={space: functions, states: 32}'`):", "",
              "| parameter (default) | description |", "|---|---|"]
    lines += [f"| `{o.name}` ({_default(o)}) | {o.doc.rstrip('.')}{_choices(o)}. |"
              for o in (SPACE, *FUNCTION_SPACE_OPTIONS)]
    return lines + [""]


def _parameters(options: tuple[Option, ...]) -> str:
    return "; ".join(f"`{o.name}` ({_default(o)}): {o.doc.rstrip('.')}" for o in options) + "." if options else "none"


def _choices(option: Option) -> str:
    choices = option.allowed_choices()
    return f" (one of: {', '.join(f'`{c}`' for c in choices)})" if choices else ""


def _repulsions() -> list[str]:
    """The repulsion controller table (``update.repulsion``)."""
    lines = ["## Repulsion controllers (`update.repulsion`)", "",
             "`update.repulsion` sets the weight λ of the Stein direction's repulsive term, φ_i = driving_i + λ_i "
             "repulsive_i: a controller's name alone (`share`) or with its parameters (`--set "
             "'update.repulsion={name: share, target: 0.2}'`); `constant` with weight 1 is SVGD's own direction "
             "(docs/algorithms.md#repulsion-controllers).", "",
             "| controller | what it does | parameters (default) |", "|---|---|---|"]
    for name, cls in REPULSIONS.items():
        lines.append(f"| `{name}` | {cls.doc} | {_parameters(cls.options)} |")
    return lines + [""]


def _table(options: tuple[Option, ...] | str) -> list[str]:
    if isinstance(options, str):  # a section documented elsewhere: a sentence saying where
        return [options, ""]
    if not options:
        return ["(no options)", ""]
    lines = ["| key | type | default | description |", "|---|---|---|---|"]
    for o in options:
        doc = o.doc
        choices = o.allowed_choices()
        if choices:
            doc += f" One of: {', '.join(f'`{c}`' for c in choices)}."
        lines.append(f"| `{o.name}` | {_type(o)} | `{_default(o)}` | {doc} |")
    return lines + [""]


def render() -> str:
    out = [HEADER, "## Top level (every run)", "", *_table(TRAINER_OPTIONS), "## `run` (the command-line run loop)",
           "", *_table(RUN_OPTIONS)]
    for job_name, job in JOBS.items():
        out += [f"## Algorithms of the `{job_name}` job", ""]
        for section, part, options in job.doc_sections():
            title = f"`{section}`" if section else "top level"
            out += [f"### {title}" + (f" — {part}" if part else ""), "", *_table(options)]
    out += _kernels() + _repulsions()
    return "\n".join(out).rstrip() + "\n"


if __name__ == "__main__":
    print(render(), end="")
