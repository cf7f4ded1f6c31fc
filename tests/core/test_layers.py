"""The package's layers hold: no import cycle between modules, no import pointing up.

Every import of ``corpus_audit`` is read with :mod:`ast` (function-level and ``TYPE_CHECKING``
ones included, since they are imports all the same); the module graph is built from them and
checked:

- **no cycle**: no two modules reach each other through imports (Tarjan's strongly connected
  components; every component of more than one module is printed);
- **no upward import**: the layer of a module is its top folder, and imports point down
  ``cli -> commands -> stages, report -> tables -> methods, backends -> core`` (same layer is
  allowed);
- **stages stand alone**: a module of ``stages/<name>`` (a stage's module or package) imports
  no other stage's modules and nothing of ``report/``, and ``report/`` imports no stage: what
  two of them share lives in ``tables/`` (or lower);
- **methods/ is pure**: a module of ``methods/`` imports only ``methods/`` and ``core/`` (not
  ``backends/``, though it shares their layer): models and files come in as arguments, the stage
  that calls a method loads the model or reads the corpus.

``from package import submodule`` is an edge to the submodule. Lazy registry entries
(``"corpus_audit.backends.engines.local:LocalEngine"``, stage targets) are strings, not
imports, and are resolved by :func:`corpus_audit.core.registry.load` when used.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = "corpus_audit"
ROOT = Path(__file__).resolve().parents[2]
# the layer of a module is its top folder (cli.py and api.py: their own layer, at the top)
LAYERS = {
    "core": 0,
    "methods": 1,
    "backends": 1,
    "tables": 2,
    "stages": 3,
    "report": 3,
    "commands": 4,
    "cli": 5,
    "api": 5,
}
ORDER = "cli, api -> commands -> stages, report -> tables -> methods, backends -> core"
# top folders whose modules may import only the listed top folders (and their own)
ONLY = {"methods": {"methods", "core"}}


def package_modules(root: Path = ROOT, package: str = PACKAGE) -> dict[str, Path]:
    """``{dotted module name: file}`` for every ``.py`` file of the package."""
    out = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def module_imports(name: str, path: Path, known: set[str], package: str = PACKAGE) -> set[str]:
    """The package's modules that module ``name`` imports anywhere in its file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against this module's package
                here = name.split(".") if is_package else name.split(".")[:-1]
                here = here[: len(here) - (node.level - 1)]
                base = ".".join([*here, base] if base else here)
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                for alias in node.names
            ]
        else:
            continue
        for target in targets:
            if target != package and not target.startswith(package + "."):
                continue
            while target and target not in known:  # a name inside a module: the module
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def import_graph(root: Path = ROOT, package: str = PACKAGE) -> dict[str, set[str]]:
    """``{module: the package modules it imports}``."""
    modules = package_modules(root, package)
    return {m: module_imports(m, p, set(modules), package) for m, p in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), sorted."""
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph) + 100))
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def layer(module: str) -> int | None:
    """The layer of ``corpus_audit.<top>...``; None for the package itself."""
    parts = module.split(".")
    return LAYERS.get(parts[1]) if len(parts) > 1 else None


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """``"a -> b"`` for every import of a module from a higher layer."""
    out = []
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            low, high = layer(module), layer(target)
            if low is not None and high is not None and high > low:
                out.append(f"{module} -> {target}")
    return out


def impure_imports(graph: dict[str, set[str]]) -> list[str]:
    """``"a -> b"`` for every import of a module of a folder of :data:`ONLY` from a folder
    outside its allowed list."""
    out = []
    for module, targets in sorted(graph.items()):
        parts = module.split(".")
        allowed = ONLY.get(parts[1]) if len(parts) > 1 else None
        if allowed is None:
            continue
        for target in sorted(targets):
            top = target.split(".")[1] if target.count(".") else None
            if top is not None and top not in allowed:
                out.append(f"{module} -> {target}")
    return out


def owner(module: str) -> str | None:
    """``stages.<name>`` for a module of a stage's module or package, ``report`` for the
    report room; None elsewhere."""
    parts = module.split(".")
    if len(parts) >= 3 and parts[1] == "stages":
        return f"stages.{parts[2]}"
    return "report" if len(parts) >= 2 and parts[1] == "report" else None


def cross_stage_imports(graph: dict[str, set[str]]) -> list[str]:
    """``"a -> b"`` for every import of one stage's (or the report's) modules by another's."""
    out = []
    for module, targets in sorted(graph.items()):
        mine = owner(module)
        if mine is None:
            continue
        for target in sorted(targets):
            theirs = owner(target)
            if theirs is not None and theirs != mine:
                out.append(f"{module} -> {target}")
    return out


def test_no_stage_imports_another_stage_or_the_report() -> None:
    found = cross_stage_imports(import_graph())
    listing = "\n".join(f"  {line}" for line in found)
    assert not found, (
        f"{len(found)} imports cross from one stage to another (or between stages and the "
        f"report); move what they share to tables/ or lower:\n{listing}"
    )


def test_the_stage_rule_fires(tmp_path: Path) -> None:
    """stages.a -> stages.b and report -> stages.a break the rule; a module of a stage's own
    package and tables/ do not."""
    pkg = tmp_path / PACKAGE
    for folder in ("tables", "stages", "stages/a", "report"):
        (pkg / folder).mkdir(parents=True)
        (pkg / folder / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "tables" / "t.py").write_text("")
    (pkg / "stages" / "a" / "part.py").write_text("from corpus_audit.tables import t\n")
    (pkg / "stages" / "a" / "__init__.py").write_text("from corpus_audit.stages.a import part\n")
    (pkg / "stages" / "b.py").write_text("def f():\n    from corpus_audit.stages.a import part\n")
    (pkg / "report" / "r.py").write_text("from corpus_audit.stages import a\n")
    graph = import_graph(tmp_path)
    assert cross_stage_imports(graph) == [
        "corpus_audit.report.r -> corpus_audit.stages.a",
        "corpus_audit.stages.b -> corpus_audit.stages.a.part",
    ]


def test_every_top_folder_has_a_layer() -> None:
    tops = {m.split(".")[1] for m in package_modules() if m.count(".") >= 1}
    assert tops <= set(LAYERS), f"modules outside the layers {ORDER}: {sorted(tops - set(LAYERS))}"


def test_no_import_cycle_between_modules() -> None:
    found = cycles(import_graph())
    listing = "\n".join(f"  {len(c)} modules: {' <-> '.join(c)}" for c in found)
    assert not found, f"{len(found)} import cycles:\n{listing}"


def test_no_import_points_up_the_layers() -> None:
    found = upward_imports(import_graph())
    listing = "\n".join(f"  {line}" for line in found)
    assert not found, f"{len(found)} imports point up ({ORDER}):\n{listing}"


def test_methods_import_only_core() -> None:
    found = impure_imports(import_graph())
    listing = "\n".join(f"  {line}" for line in found)
    assert not found, (
        f"{len(found)} imports of methods/ reach beyond core/ (models and files come in as "
        f"arguments):\n{listing}"
    )


def test_the_methods_rule_fires_on_a_backend_import(tmp_path: Path) -> None:
    """methods -> backends is the same layer (no upward import) and still breaks the rule;
    methods -> core and backends -> methods do not."""
    pkg = tmp_path / PACKAGE
    for folder in ("core", "methods", "backends"):
        (pkg / folder).mkdir(parents=True)
        (pkg / folder / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "core" / "c.py").write_text("")
    (pkg / "methods" / "m.py").write_text(
        "from corpus_audit.core import c\ndef f():\n    from corpus_audit.backends.b import load\n"
    )
    (pkg / "methods" / "pure.py").write_text("from corpus_audit.core import c\n")
    (pkg / "backends" / "b.py").write_text("from corpus_audit.methods.pure import m\n")
    graph = import_graph(tmp_path)
    assert upward_imports(graph) == []
    assert cycles(graph) == []
    assert impure_imports(graph) == ["corpus_audit.methods.m -> corpus_audit.backends.b"]


def test_the_graph_sees_function_level_and_lazy_imports(tmp_path: Path) -> None:
    """A function-level import is an edge; a registry string is not."""
    pkg = tmp_path / PACKAGE
    (pkg / "core").mkdir(parents=True)
    (pkg / "stages").mkdir()
    for init in (pkg, pkg / "core", pkg / "stages"):
        (init / "__init__.py").write_text("")
    (pkg / "core" / "a.py").write_text(
        "def f():\n    from corpus_audit.stages import b\nLAZY = 'corpus_audit.stages.b:run'\n"
    )
    (pkg / "stages" / "b.py").write_text("from corpus_audit.core import a\n")
    graph = import_graph(tmp_path)
    assert graph["corpus_audit.core.a"] == {"corpus_audit.stages.b"}
    assert cycles(graph) == [["corpus_audit.core.a", "corpus_audit.stages.b"]]
    assert upward_imports(graph) == ["corpus_audit.core.a -> corpus_audit.stages.b"]


# print the findings for any checkout: python tests/core/test_layers.py DIR
if __name__ == "__main__":
    where = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT
    graph = import_graph(where)
    print(f"{len(graph)} modules, {sum(len(t) for t in graph.values())} import edges")
    for c in cycles(graph):
        print(f"cycle of {len(c)}: {' <-> '.join(c)}")
    for line in upward_imports(graph):
        print(f"up: {line}")
    for line in impure_imports(graph):
        print(f"impure: {line}")
    for line in cross_stage_imports(graph):
        print(f"cross-stage: {line}")


def test_progress_bars_use_tqdm_auto():
    """One progress-bar import: ``tqdm.auto`` (widgets in Jupyter, plain bars in a terminal)."""
    plain = []
    for name, path in package_modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.ImportFrom)
                and node.module in ("tqdm", "tqdm.std")
                or isinstance(node, ast.Import)
                and any(a.name == "tqdm" for a in node.names)
            ):
                plain.append(f"{name}:{node.lineno}")
    assert not plain, "import tqdm.auto instead: " + ", ".join(plain)


def test_queries_kept_in_files_run_one_way() -> None:
    """A query of ``corpus_audit/sql/`` runs through ``Study.sql`` / ``execute_sql`` (named
    parameters bound by DuckDB) or ``execute_sql_rows`` (a batch insert): no module but the
    store reads a file's text itself (``sql_text``) to run it some other way."""
    found = []
    for name, path in package_modules().items():
        if name == f"{PACKAGE}.core.store":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.ImportFrom):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.Name):
                names = [node.id]
            elif isinstance(node, ast.Attribute):
                names = [node.attr]
            if "sql_text" in names:
                found.append(f"{name}:{node.lineno}")
    assert not found, "run the file with Study.sql / execute_sql: " + ", ".join(sorted(set(found)))
