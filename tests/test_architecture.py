"""The package's shape: no import cycles at any level (imports inside functions count), each
folder imports only the layers below it (at any level too), no module over ~400 lines and no
function over ~80 in the package, envs/ and benchmarks/ (read from the source, as the
architecture doc states it)."""

import ast

from conftest import ROOT

PACKAGE = ROOT / "steinrl"
#: which top-level parts of steinrl each part may import at module level (docs/architecture.md)
ALLOWED = {
    "errors": set(),
    "registry": {"errors"},
    "job": {"errors", "registry"},
    "envs": {"errors", "envs"},
    "core": {"errors", "registry", "job", "core"},
    "rl": {"errors", "registry", "job", "core", "envs", "rl"},
    "bandits": {"errors", "registry", "job", "core", "bayes", "bandits"},
    "bayes": {"errors", "registry", "job", "core", "bayes"},
    "baselines": {"errors", "registry", "job", "core", "envs", "rl", "baselines"},
    "run": {"errors", "registry", "job", "core", "envs", "rl", "bandits", "bayes", "baselines", "run"},
    "sb3": {"errors", "registry", "job", "core", "envs", "rl", "baselines", "run", "sb3"},
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


def _imported(node, package):
    """steinrl modules named by one import statement (``from a import b`` names ``a`` and ``a.b``)."""
    if isinstance(node, ast.Import):
        return {a.name for a in node.names}
    base = node.module or ""
    if node.level:
        base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
    return {base} | {f"{base}.{a.name}" for a in node.names}


def _type_checking_only(tree):
    """The import nodes under ``if TYPE_CHECKING:`` (never run)."""
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return skipped


def imports(name, path, top_level_only=False):
    """steinrl modules imported by a module: at module level, or (``top_level_only`` False)
    anywhere, inside functions and methods too; ``if TYPE_CHECKING:`` imports are skipped."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    nodes = tree.body if top_level_only else ast.walk(tree)
    skipped = _type_checking_only(tree)
    found = set()
    for node in nodes:
        if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in skipped:
            found |= _imported(node, package)
    return {m for m in found if m.startswith("steinrl")}


def graph(top_level_only=False):
    mods = modules()
    return {name: {m for m in imports(name, path, top_level_only) if m in mods and m != name}
            for name, path in mods.items()}


def find_cycle(g):
    """One import cycle of the graph ``g`` (module -> modules it imports) as a list, or None."""
    state = {}

    def visit(node, stack):
        state[node] = "open"
        for nxt in sorted(g[node]):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt, stack + [nxt])
                if found:
                    return found
        state[node] = "done"
        return None

    for node in sorted(g):
        if node not in state:
            found = visit(node, [node])
            if found:
                return found
    return None


def test_find_cycle_sees_a_cycle_through_a_function_level_import(tmp_path):
    """The checker itself: a circle closed by an import inside a function is found."""
    (tmp_path / "a.py").write_text("import steinrl.b\n")
    (tmp_path / "b.py").write_text("def f():\n    from steinrl.a import x\n")
    g = {f"steinrl.{m}": imports(f"steinrl.{m}", tmp_path / f"{m}.py") for m in "ab"}
    assert find_cycle(g) == ["steinrl.a", "steinrl.b", "steinrl.a"]
    assert find_cycle({f"steinrl.{m}": imports(f"steinrl.{m}", tmp_path / f"{m}.py", top_level_only=True)
                       for m in "ab"}) is None


def test_no_import_cycles_at_any_level():
    """No module reaches itself through imports, counting those inside functions."""
    cycle = find_cycle(graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def _part(module):
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_each_folder_imports_only_the_layers_below_it():
    """At any level: an import inside a function counts too (``steinrl compare`` lives in ``run``,
    so the CLI imports nothing of ``sb3``); ``if TYPE_CHECKING:`` imports do not run."""
    bad = []
    for name, deps in graph().items():
        part = _part(name)
        if part == "__init__":
            continue
        for dep in deps:
            if part not in ALLOWED:
                bad.append(f"{name}: steinrl.{part} has no layer yet; give it one in ALLOWED (docs/architecture.md)")
            elif _part(dep) not in ALLOWED[part] and _part(dep) != "__init__":
                bad.append(f"{name} imports {dep}")
    assert not bad, bad


def source_files():
    """Every module of the package, of envs/, of benchmarks/ and of research/scripts/ (the size rule holds for all)."""
    return sorted([*PACKAGE.rglob("*.py"), *(ROOT / "envs").rglob("*.py"), *(ROOT / "benchmarks").glob("*.py"),
                   *(ROOT / "research" / "scripts").glob("*.py")])


def test_no_module_over_about_400_lines():
    long = {str(p.relative_to(ROOT)): n for p in source_files() if (n := len(p.read_text().splitlines())) > 410}
    assert not long, long


def test_no_function_over_about_80_lines():
    long = [f"{p.relative_to(ROOT)}:{node.lineno} {node.name} ({n} lines)" for p in source_files()
            for node in ast.walk(ast.parse(p.read_text()))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and (n := node.end_lineno - node.lineno + 1) > 85]
    assert not long, long


def test_the_run_stack_tests_no_metric_by_name():
    """steinrl.run knows jobs through the Job protocol only: no string in its code (docstrings
    and help texts aside) is a job's headline metric or x-axis metric."""
    from steinrl.run.algos import JOBS

    names = {m for _, job in JOBS.items() for m in (job.headline_metric, job.x_metric) if m}
    found = []
    for path in sorted((PACKAGE / "run").glob("*.py")):
        tree = ast.parse(path.read_text())
        prose = set()
        for node in ast.walk(tree):
            body = getattr(node, "body", None)
            if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
                prose.add(id(body[0].value))  # a docstring
            if isinstance(node, ast.keyword) and node.arg in ("help", "description", "epilog"):
                prose |= {id(n) for n in ast.walk(node.value)}
        found += [f"{path.name}:{node.lineno} {node.value!r}" for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose
                  and any(name in node.value for name in names)]
    assert names and not found, found
