"""Property tests (Hypothesis) of the user-facing inputs: ``--set`` overrides, YAML config
files and the ``train`` command line. Every bad input must give a one-line
:class:`~steinrl.errors.ConfigError` (exit 2, nothing written), never another exception.

The examples are derandomized (the same ones on every run, for a given source tree:
Hypothesis also draws constants from the code). The defects these properties found are
fixed; each keeps a regression test at the end.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import math
import shutil
from pathlib import Path

import pytest
import yaml
from conftest import trained_run
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from steinrl.errors import ConfigError
from steinrl.run.algos import algo_names
from steinrl.run.cli import run_cli, train_main
from steinrl.run.config import load_config, load_yaml, parse_set, presets, schema

FUZZ = settings(max_examples=100, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

SCHEMA = schema("s2vgd-a2c")
OPTIONS = {(section, o.name): o for section, opts in SCHEMA.items() for o in opts}
DOTTED_KEYS = [f"{s}.{n}" if s else n for s, n in OPTIONS]
BARE_KEYS = sorted({n for _, n in OPTIONS})
SECTIONS = [s for s in SCHEMA if s]
ENVS = ["Cartpole", "CartpoleSwingUp", "DoublePendulum", "CartpoleRllab", "CartPole-v1", "Mushroom", "Wheel"]


# --- helpers ---
def _huge_number(text: str) -> bool:
    """A number of 1e7 or more anywhere in the value: a run of such a size (``particles=1e8``)
    is legal but would take the test's time and memory."""
    def huge(v) -> bool:
        if isinstance(v, dict):
            return any(huge(x) for x in v.values())
        if isinstance(v, list):
            return any(huge(x) for x in v)
        if isinstance(v, str):
            try:
                v = float(v)
            except ValueError:
                return False
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and abs(v) >= 1e7

    try:
        return huge(yaml.safe_load(text))
    except Exception:  # noqa: BLE001
        return False



# --- strategies -----------------------------------------------------------------------------
SPECIAL_VALUES = [
    "nan", ".nan", "NaN", "-nan", "inf", ".inf", "-.inf", "+.inf", "Infinity", "1e400", "-1e400", "1e-400", "1e999",
    "1e30", "1.5e300", "1e-3", "5e3", "2.5", "-0.0", "0", "1", "-1", "3", "16", "0x10", "0o7", "1_000", "+5", "1:30",
    "true", "false", "True", "FALSE", "yes", "no", "on", "off", "y", "null", "~", "Null", "", " ", "'3'", '"1e-3"',
    "[]", "{}", "[25, 10]", "[1, -1]", "[0]", "[true]", "[1.5]", "[[1]]", "[1, [2]]", "a: b", "{a: 1}", "{hidden: [4]}",
    "svpg", "adam", "sgd", "tanh", "relu", "cpu", "cuda", "mlp", "linear", "gaussian", "invgamma", "joint", "sync",
    "async", "Cartpole", "s2vgd-a2c", "runs", "x\ny", "- 1", "&a [*a]", "*a", "!!str 5", "!!binary aGk=", "!!set {a}",
    "!!python/object:os.system", "%", "@", "`", "'unterminated", "[unterminated", "{a: 1, a: 2}",
]


def scalar_texts(big: bool = True) -> st.SearchStrategy[str]:
    """YAML text of one value: random text, ints, floats (nan/inf/huge), bools and other specials."""
    ints = st.integers() if big else st.integers(-3, 6)
    floats = st.floats(allow_nan=True, allow_infinity=True) if big else st.floats(-1e3, 1e3) | st.sampled_from(
        [float("nan"), float("inf"), -float("inf"), 1e300])
    return st.one_of(
        st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12),
        ints.map(str),
        floats.map(repr),
        floats.map(lambda f: f"{f:e}"),
        st.booleans().map(str),
        st.sampled_from(SPECIAL_VALUES),
    )


def value_texts(big: bool = True) -> st.SearchStrategy[str]:
    return st.recursive(scalar_texts(big), lambda inner: st.lists(inner, max_size=4).map(
        lambda xs: "[" + ", ".join(xs) + "]"), max_leaves=6)


junk_keys = st.one_of(
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=10),
    st.builds(lambda s, k: f"{s}.{k}", st.sampled_from(SECTIONS), st.text(max_size=6)),
    st.sampled_from(["", " ", ".", "..", "a..b", "x.y.z", "run.", ".lr", "policy", "run", "update.lr.x", "LR",
                     "lrr", "seed ", " seed", "policy.hidden.0", "=", "prior.a", "critic.reg"]),
)


@st.composite
def keys(draw) -> str:
    """A config key: mostly a dotted key of the schema, sometimes a bare one, a few junk."""
    kind = draw(st.integers(0, 9))
    if kind < 7:
        return draw(st.sampled_from(DOTTED_KEYS))
    return draw(st.sampled_from(BARE_KEYS) if kind < 9 else junk_keys)


#: options whose value sets how long a run takes; the CLI property draws only small values for them
SIZE_KEYS = {"particles", "iterations", "rounds", "batch_size", "envs_per_particle", "horizon", "hidden", "K", "steps",
             "minibatch", "threads", "log_every", "checkpoint_every"}


def option_of(key: str):
    """The option a ``--set`` key names (bare keys: the top level, then the first section that has it), or None."""
    key = key.strip()
    if "." in key:
        return OPTIONS.get(tuple(key.split(".", 1)))
    return next((o for (section, name), o in OPTIONS.items() if name == key and section == ""),
                next((o for (section, name), o in OPTIONS.items() if name == key), None))


def typed_texts(option, big: bool) -> st.SearchStrategy[str]:
    """YAML text of a value of the option's declared type (in or out of its range)."""
    if option.name == "algo":
        return st.sampled_from(algo_names())
    if option.name == "env":
        return st.sampled_from(ENVS)
    if option.name == "device":
        return st.sampled_from(["cpu", "cpu:0", "cuda", "meta", "xla"])
    small = not big and option.name in SIZE_KEYS
    branches = []
    for t in option.type if isinstance(option.type, tuple) else (option.type,):
        if t is None:
            branches.append(st.just("null"))
        elif t is bool:
            branches.append(st.sampled_from(["true", "false", "True", "no"]))
        elif t is int:
            branches.append((st.integers(0, 4) if small else st.integers(-2, 10**6)).map(str))
        elif t is float:
            branches.append(st.floats(-10, 1e4).map(repr) | st.sampled_from(["1e-3", "0.5", "1", "0", "1e7"]))
        elif t is str:
            choices = option.allowed_choices()
            branches.append(st.sampled_from(choices) if choices else st.text(max_size=8))
        elif t == list[int]:
            branches.append(st.lists(st.integers(0, 8) if small else st.integers(-1, 100), max_size=3).map(str))
        elif t is dict:  # a kernel: a flow mapping of known and unknown names, parameters and values
            entry = st.tuples(st.sampled_from(["name", "bandwidth", "beta", "gamma"]),
                              st.sampled_from(["rbf", "imq", "laplace", "svpg", "s2vgd", "-0.3", "0.5", "2", "[1]"]))
            branches.append(st.lists(entry, max_size=3).map(lambda kv: "{" + ", ".join(f"{k}: {v}" for k, v in kv)
                                                            + "}"))
        else:
            raise AssertionError(f"undeclared option type {t!r}")
    return st.one_of(branches)


@st.composite
def set_items(draw, big: bool = True, exclude: frozenset = frozenset()) -> str:
    """One ``--set KEY=VALUE`` string (sometimes without ``=``): mostly a value of the key's type."""
    key = draw(keys())
    assume(key.strip() not in exclude)
    option = option_of(key)
    if option is not None and draw(st.integers(0, 2)) < 2:  # (Hypothesis favours small integers)
        value = draw(typed_texts(option, big))
    elif big or option is None or option.name not in SIZE_KEYS:
        value = draw(value_texts(big=True))
    else:  # keys that set how much work a run does: small values (or invalid ones)
        value = draw(value_texts(big=False))
    if not big:  # for runs: no value that would ask for huge (legal but slow) sizes
        assume(not _huge_number(value))
    if draw(st.integers(0, 19)) == 19:
        return key + value  # no '='
    return f"{key}={value}"


# --- checks ---------------------------------------------------------------------------------
def assert_one_line(message: str) -> None:
    assert message, "an empty error message"
    assert message.splitlines() == [message], f"not one line: {message!r}"


def has_type(value, t) -> bool:
    if isinstance(t, tuple):
        return any(has_type(value, u) for u in t)
    if t is None:
        return value is None
    if t is bool:
        return isinstance(value, bool)
    if t is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if t is float:
        return isinstance(value, float) and math.isfinite(value)
    if t is str:
        return isinstance(value, str)
    if t == list[int]:
        return isinstance(value, list) and all(has_type(v, int) for v in value)
    if t is dict:  # a mapping option, normalised (a kernel: its name and every parameter)
        return isinstance(value, dict) and all(isinstance(k, str) for k in value)
    raise AssertionError(f"undeclared option type {t!r}")


def assert_typed(cfg) -> None:
    """Every key of ``cfg`` is declared by the schema of its algo and chosen parts, with a value of the
    declared type, within the declared choices and range."""
    plain = cfg.to_dict()
    chosen = {"env": cfg.env, **{part: plain[part]["name"] for part in ("prior", "critic")
                                 if part in plain and "name" in plain[part]}}
    sections = schema(cfg.algo, chosen)
    assert set(cfg) == {o.name for o in sections[""]} | {s for s in sections if s}
    for section, options in sections.items():
        values = cfg if section == "" else plain[section]
        assert set(values) - {s for s in sections if s and section == ""} == {o.name for o in options}, section
        for o in options:
            value, where = values[o.name], f"{section}.{o.name}" if section else o.name
            assert has_type(value, o.type), (where, value, o.type)
            choices = o.allowed_choices()
            if choices is not None and isinstance(value, str):
                assert value in choices, (where, value)
            if o.check is not None and value is not None and not (isinstance(value, str) and choices):
                assert o.check(value) is None, (where, value)


# --- (a) --set overrides -----------------------------------------------------------------------
@FUZZ
@given(items=st.lists(set_items(), max_size=4))
def test_set_overrides_give_a_typed_config_or_a_one_line_config_error(items):
    try:
        cfg = load_config(overrides=parse_set(items))
    except ConfigError as exc:
        event("ConfigError")
        assert_one_line(str(exc))
        return
    event("valid config")
    assert_typed(cfg)


def test_the_set_property_reaches_valid_configs():
    """The strategy is not all junk: typical values of every key resolve."""
    for key in DOTTED_KEYS:
        default = OPTIONS[tuple(key.split(".")) if "." in key else ("", key)].default
        text = yaml.safe_dump(default).removesuffix("\n...\n").strip()
        assert_typed(load_config(overrides=parse_set([f"{key}={text}"])))


# --- (b) YAML config files ----------------------------------------------------------------------
YAML_FRAGMENTS = ["a", "lr", "update", "policy", "hidden", "seed", "1", "-3", "1e-3", "nan", ".inf", "~", "null",
                  "true", "- ", ": ", ":", "{", "}", "[", "]", ", ", "&x ", "*x", "? ", "!!str ", "!!python/object:os.system ",
                  "!!binary ", "---", "...", "# c", "'", '"', "|", ">", "\t", "  ", "\n", "\n  ", "%YAML 1.1\n",
                  "%TAG ! tag:x,2000:\n", "\ufeff", "\x00", "\x85", "\u2028", "é", "\\", "=", ".", "<<: "]

yaml_texts = st.one_of(
    st.lists(st.sampled_from(YAML_FRAGMENTS), max_size=30).map("".join),
    st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                 lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6) | st.integers(), inner,
                                                                            max_size=3), max_leaves=8)
    .map(lambda data: yaml.safe_dump(data, allow_unicode=True)),
    st.builds(lambda k, v, dup: f"{k}: {v}\n" + (f"{k}: {v}\n" if dup else ""), keys(), value_texts(), st.booleans()),
    st.text(max_size=60),
)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


@FUZZ
@given(content=st.one_of(st.binary(max_size=120), yaml_texts.map(lambda t: t.encode("utf-8", "surrogatepass"))))
def test_load_yaml_gives_a_dict_or_a_one_line_config_error(scratch, content):
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    path = scratch / "config.yaml"
    path.write_bytes(content)
    try:
        data = load_yaml(path)
    except ConfigError as exc:
        event("ConfigError")
        assert_one_line(str(exc))
        return
    event("dict")
    assert isinstance(data, dict)


# --- (c) the train command, in process -----------------------------------------------------------
TINY_ARGS = ["--env", "Cartpole", "--particles", "2", "--set", "envs_per_particle=2", "--set", "batch_size=32",
             "--set", "horizon=30", "--set", "critic.steps=2", "--no-progress"]
ITERATIONS = st.integers(0, 2).flatmap(lambda i: st.sampled_from(["1", "2", "3", "4"]) if i < 2 else
                                      st.sampled_from(["0", "-1", "x", "1.5", "", "1e3", " 2"]))
text_arg = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=10)


def flag(name: str, values: st.SearchStrategy[str]) -> st.SearchStrategy[list[str]]:
    return values.map(lambda v: [name, v])


@st.composite
def config_file(draw, folder: Path) -> str:
    """A path for ``--config``: small valid overrides, junk, a missing file or a directory."""
    kind = draw(st.integers(0, 3))
    if kind == 0:
        return str(folder / "missing.yaml")
    if kind == 1:
        return str(folder)
    if kind == 2:
        items = draw(st.lists(set_items(big=False, exclude=frozenset({"logdir", "run.logdir"})), max_size=3))
        text = "\n".join(f"{k.strip()!r}: {v}" for k, _, v in (i.partition("=") for i in items))
    else:
        text = draw(yaml_texts)
    path = folder / f"c{draw(st.integers(0, 10**9))}.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    return str(path)


def train_flags(folder: Path) -> st.SearchStrategy[list[str]]:
    """One random flag of ``steinrl train`` with a random (often wrong) value."""
    def mostly(valid, invalid=text_arg):
        return st.integers(0, 3).flatmap(lambda i: valid if i < 3 else invalid)

    set_flag = flag("--set", set_items(big=False, exclude=frozenset({"logdir", "run.logdir", "name"})))
    return st.integers(0, 2).flatmap(lambda i: set_flag if i < 2 else other_flags(folder, mostly))


def other_flags(folder: Path, mostly) -> st.SearchStrategy[list[str]]:
    return st.one_of(
        flag("--algo", mostly(st.sampled_from(["s2vgd-a2c", "svgd-a2c", "vmg-reinforce", "kron-ppo",
                                               "independent-a2c"]) | st.sampled_from(algo_names()))),
        flag("--env", mostly(st.sampled_from(ENVS))),
        flag("--preset", mostly(st.sampled_from(presets()))),
        flag("--particles", mostly(st.integers(1, 4).map(str), st.integers(-2, 0).map(str) | text_arg)),
        flag("--rounds", st.sampled_from(["1", "2", "0", "-1", "x"])),
        flag("--seed", mostly(st.integers(0, 2**63).map(str), st.integers(-3, -1).map(str) | text_arg)),
        flag("--temperature", mostly(st.floats(0, 100).map(repr),
                                     st.floats(allow_nan=True, allow_infinity=True).map(repr) | text_arg)),
        flag("--device", mostly(st.sampled_from(["cpu", "cpu:0"]),
                                st.sampled_from(["cuda", "cuda:1", "meta", "xla", "CPU", ""]) | text_arg)),
        flag("--run-name", mostly(st.sampled_from(["r", "run-1", "é", "r r", "~", "..."]),
                                  st.sampled_from(["..", ".", "a/b", "/abs", "-", ""]) | text_arg)),
        flag("--config", config_file(folder)),
        st.sampled_from([["--no-progress"], ["--bogus"], ["-x"], ["positional"], ["--set"], ["--iterations"],
                         ["--help"], ["--set", "="], ["--config"]]),
    )


@pytest.fixture(scope="module")
def template_run(tmp_path_factory):
    """A finished 2-iteration run to resume (copied for every example)."""
    return trained_run(tmp_path_factory.mktemp("template"), **{"run.tensorboard": True})


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else b"<dir>")
            for p in sorted(folder.rglob("*"))}


_examples = itertools.count()


@FUZZ
@given(data=st.data())
def test_train_cli_exits_0_2_or_3_and_a_user_error_is_one_line_with_nothing_written(scratch, template_run, data):
    n = next(_examples)
    example = scratch / f"cli{n}"
    logdir, files = example / "logs", example / "files"
    files.mkdir(parents=True)
    resume = data.draw(st.integers(0, 3)) == 0
    if resume:
        run_dir = logdir / "Cartpole" / "s2vgd-a2c" / "r"
        shutil.copytree(template_run, run_dir)
        target = data.draw(st.sampled_from([run_dir, run_dir, run_dir / "checkpoint.pt", logdir, example / "missing"]))
        argv = ["--resume", str(target)]
        extra = data.draw(st.lists(train_flags(files), max_size=2)) if data.draw(st.integers(0, 3)) == 0 else []
        if data.draw(st.booleans()):
            extra.append(["--no-progress"])
    else:
        argv = list(TINY_ARGS)
        extra = data.draw(st.lists(train_flags(files), max_size=3))
    argv += [a for f in extra for a in f]
    argv += ["--iterations", data.draw(ITERATIONS)]
    if not resume or data.draw(st.integers(0, 3)) == 3:  # a resumed run keeps its own logdir
        argv += ["--logdir", str(logdir)]
    before = snapshot(logdir) if logdir.exists() else None

    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            code = run_cli(train_main, argv)
        except SystemExit as exc:  # --help
            code = exc.code
    err = err.getvalue()
    event(f"{'resume' if resume else 'new run'}: exit {code}")
    if "--help" in argv and code == 0:
        return
    assert code in (0, 2, 3), (argv, code, err[-2000:])
    if code == 2:
        assert err.startswith("error:") and err.endswith("\n") and len(err.splitlines()) == 1, (argv, err)
        after = snapshot(logdir) if logdir.exists() else None
        assert after == before, (argv, err, sorted(set(after or {}) ^ set(before or {})))
    shutil.rmtree(example, ignore_errors=True)


# --- the defects the properties found (fixed; regression tests) ---------------------------------
@pytest.mark.parametrize("item", ["rollout.\r0=1", "0\x85=[", "policy.\u2028x=1"])
def test_config_error_messages_quote_keys(item):
    with pytest.raises(ConfigError) as info:
        load_config(overrides=parse_set([item]))
    assert_one_line(str(info.value))


@pytest.mark.parametrize("value", ["2001-02-30", "!!int abc", "!!float x", "!!timestamp x", "!!bool maybe", "9" * 5000])
def test_set_value_that_pyyaml_cannot_construct_is_a_config_error(value):
    with pytest.raises(ConfigError):
        parse_set([f"seed={value}"])


def test_train_cli_with_an_impossible_date_value_exits_2(tmp_path, capsys):
    code = run_cli(train_main, [*TINY_ARGS, "--iterations", "1", "--set", "seed=2001-02-30", "--logdir",
                                str(tmp_path)])
    assert code == 2 and capsys.readouterr().err.startswith("error:")


@pytest.mark.parametrize("text", ["{[1]: 2}\n", "? [1]\n: 2\n", "? {a: 1}\n: 2\n", "seed: 2001-02-30\n",
                                  "seed: !!int abc\n", "seed: !!timestamp x\n", "a: " + "[" * 3000 + "]" * 3000 + "\n"])
def test_unloadable_yaml_is_a_config_error(tmp_path, text):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError):
        load_yaml(path)


@pytest.mark.parametrize("prior", ["joint", "invgamma"])
def test_a_bare_name_key_must_say_whose_name(prior):
    with pytest.raises(ConfigError, match="must name its section: prior.name"):
        load_config(overrides=parse_set([f"name={prior}"]))
    assert load_config(overrides=parse_set([f"prior.name={prior}"])).prior.name == prior


@pytest.mark.parametrize("seed", [2**32, 2**64])
def test_train_cli_with_a_seed_beyond_32_bits_exits_2(tmp_path, capsys, seed):
    # seeds are in [0, 2**32), as --seeds and the config's seed check say: 2**64 is no exception
    code = run_cli(train_main, [*TINY_ARGS, "--iterations", "1", "--seed", str(seed), "--logdir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and list(tmp_path.iterdir()) == []
    assert err.startswith("error:") and "[0, 2**32)" in err and str(seed) in err and "Traceback" not in err


def test_train_cli_with_the_largest_seed_trains(tmp_path, capsys):
    code = run_cli(train_main, [*TINY_ARGS, "--iterations", "1", "--seed", str(2**32 - 1), "--logdir", str(tmp_path)])
    assert code == 0 and len(list(tmp_path.glob("Cartpole/*/seed4294967295-*/metrics.jsonl"))) == 1


def test_train_cli_with_an_absurd_particle_count_exits_2(tmp_path, capsys):
    code = run_cli(train_main, [*TINY_ARGS, "--iterations", "1", "--set", "particles=1e20", "--logdir", str(tmp_path)])
    assert code == 2 and list(tmp_path.iterdir()) == []


def test_train_cli_with_an_unavailable_mps_device_exits_2(tmp_path, capsys):
    import torch

    if torch.backends.mps.is_available():
        pytest.skip("MPS is available here")
    code = run_cli(train_main, [*TINY_ARGS, "--iterations", "1", "--device", "mps", "--logdir", str(tmp_path)])
    assert code == 2 and list(tmp_path.iterdir()) == []
