"""The package's shape: no import cycles, each folder imports only the layers below it,
no module over ~400 lines (read from the source, as the architecture doc states it)."""

import ast
from pathlib import Path

from conftest import ROOT

PACKAGE = ROOT / "steinrl"
#: which top-level parts of steinrl each part may import at module level (docs/architecture.md)
ALLOWED = {
    "errors": set(),
    "registry": {"errors"},
    "envs": {"errors", "envs"},
    "core": {"errors", "registry", "core"},
    "rl": {"errors", "registry", "core", "envs", "rl"},
    "bandits": {"errors", "registry", "core", "bayes", "bandits"},
    "bayes": {"errors", "registry", "core", "bayes"},
    "baselines": {"errors", "registry", "core", "envs", "rl", "baselines"},
    "run": {"errors", "registry", "core", "envs", "rl", "bandits", "bayes", "baselines", "run"},
    "sb3": {"errors", "registry", "core", "envs", "rl", "baselines", "run", "sb3"},
}


def modules():
    """Module name -> path of every steinrl module (envs/ and its files install as steinrl.envs)."""
    out = {}
    for root, prefix in ((PACKAGE, "steinrl"), (ROOT / "envs", "steinrl.envs")):
        for path in root.rglob("*.py"):
            parts = path.relative_to(root).with_suffix("").parts
            name = ".".join((prefix, *parts)).removesuffix(".__init__")
            out[name] = path
    return out


def top_level_imports(name, path):
    """steinrl modules imported at module level (imports inside functions and ``if TYPE_CHECKING:`` are skipped)."""
    tree = ast.parse(path.read_text())
    found = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in tree.body:
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            found |= {base} | {f"{base}.{a.name}" for a in node.names}
    return {m for m in found if m.startswith("steinrl")}


def graph():
    mods = modules()
    return {name: {m for m in top_level_imports(name, path) if m in mods and m != name} for name, path in mods.items()}


def test_no_import_cycles():
    g = graph()
    state = {}

    def visit(node, stack):
        state[node] = "open"
        for nxt in g[node]:
            if state.get(nxt) == "open":
                raise AssertionError("import cycle: " + " -> ".join(stack[stack.index(nxt):] + [nxt]))
            if nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = "done"

    for node in g:
        if node not in state:
            visit(node, [node])


def _part(module):
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_each_folder_imports_only_the_layers_below_it():
    bad = []
    for name, deps in graph().items():
        part = _part(name)
        if part == "__init__":
            continue
        for dep in deps:
            if _part(dep) not in ALLOWED[part] and _part(dep) != "__init__":
                bad.append(f"{name} imports {dep}")
    assert not bad, bad


def test_no_module_over_about_400_lines():
    long = {name: n for name, path in modules().items() if (n := len(path.read_text().splitlines())) > 410}
    assert not long, long
