"""The package's layering, read from the code's own imports (docs/architecture.md, Layers).

Every import in specplan/ counts: at module level, inside a function, under TYPE_CHECKING;
relative imports are resolved. The modules form no cycle, the packages form no cycle, and
every import goes from a layer to the same layer or one below it. A failure names each
offending import as file:line. Torch-free and fast: ast only, nothing of specplan is imported.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "specplan"
DOC = ROOT / "docs" / "architecture.md"

# Bottom first. A name is a package or a top-level module of specplan/ ("specplan" is the
# package's own __init__.py). docs/architecture.md shows this table with the reason for each
# layer; test_doc_shows_the_layers keeps the two the same.
# One line a layer: its name, then its packages and modules when they are not just the name.
_TABLE = """
foundation errors io version trace
methods
mesh
engines
schema
ir
passes
plan
verify
runtime
lower
views views pictures
sim
deploy
ecosystem
plugins
commands
api specplan api
cli cli __main__
"""
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = tuple(
    (words[0], tuple(words[1:]) or (words[0],))
    for words in (line.split() for line in _TABLE.strip().splitlines())
)
LAYER_OF = {name: i for i, (_, names) in enumerate(LAYERS) for name in names}


@dataclass(frozen=True)
class Import:
    source: str  # importing module, dotted
    target: str  # imported module of specplan, dotted
    where: str  # specplan/x/y.py:LINE

    def __str__(self) -> str:
        return f"{self.where}: {self.source} imports {self.target}"


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _known(name: str) -> str | None:
    """The specplan module `name` is, or lies in (a name imported from a module)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _targets(module: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:  # relative: from the module's package, one level up per extra dot
            package = module.split(".")
            if MODULES[module].name != "__init__.py":
                package = package[:-1]
            package = package[:len(package) - node.level + 1]
            base = ".".join(package + ([base] if base else []))
        names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base
                 for alias in node.names]
    return [t for t in map(_known, names) if t is not None and t != module]


def _imports() -> list[Import]:
    out = []
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                where = f"{path.relative_to(ROOT)}:{node.lineno}"
                out += [Import(module, t, where) for t in dict.fromkeys(_targets(module, node))]
    return out


IMPORTS = _imports()


def _unit(module: str) -> str:
    """The layer table's name of a module: its package under specplan/, or itself on top."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def _cycle_report(of, what: str) -> str:
    edges: dict[str, set[str]] = {}
    for imp in IMPORTS:
        a, b = of(imp.source), of(imp.target)
        if a != b:
            edges.setdefault(a, set()).add(b)
    lines = []
    for component in _cycles(edges):
        members = set(component)
        lines.append(f"{what} cycle: {', '.join(component)}")
        lines += [f"  {imp}" for imp in IMPORTS
                  if of(imp.source) in members and of(imp.target) in members
                  and of(imp.source) != of(imp.target)]
    return "\n".join(lines)


def test_every_module_has_a_layer():
    missing = sorted({_unit(m) for m in MODULES} - set(LAYER_OF))
    assert not missing, (f"modules outside the layer table (tests/test_layering.py LAYERS and "
                         f"docs/architecture.md, Layers): {', '.join(missing)}")


def test_no_module_cycle():
    report = _cycle_report(lambda m: m, "module")
    assert not report, "imports that close a cycle:\n" + report


def test_no_package_cycle():
    report = _cycle_report(_unit, "package")
    assert not report, "imports that close a cycle of packages:\n" + report


def test_imports_go_down_the_layers():
    upward = [imp for imp in IMPORTS if LAYER_OF.get(_unit(imp.target), -1) > LAYER_OF.get(_unit(imp.source), -1)]
    lines = [f"  {imp} (layer {LAYERS[LAYER_OF[_unit(imp.source)]][0]} -> "
             f"{LAYERS[LAYER_OF[_unit(imp.target)]][0]}, above it)" for imp in upward]
    assert not upward, ("imports against the layering (docs/architecture.md, Layers): a module "
                        "may import its own layer or one below it:\n" + "\n".join(lines))


def test_no_import_by_string():
    """importlib or __import__ with a literal specplan module would step around the checks above
    (an entry point a child process starts, as the sim's `module=`, is a name, not an import)."""
    found = []
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            arg = node.args[0]
            if (name in ("import_module", "__import__") and isinstance(arg, ast.Constant)
                    and str(arg.value).startswith("specplan")):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {name}({arg.value!r})")
    assert not found, "imports by string:\n" + "\n".join(found)


def test_doc_shows_the_layers():
    text = DOC.read_text()
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if re.match(r"\|\s*\d+\s*\|", line)]
    shown = []
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        shown.append((cells[1], tuple(re.findall(r"`([^`]+?)/?`", cells[2]))))
    want = [(layer, tuple(n.removesuffix(".py") for n in names)) for layer, names in LAYERS]
    got = [(layer, tuple(n.removesuffix(".py").removesuffix("/") for n in names)) for layer, names in shown]
    assert got == list(reversed(want)), ("docs/architecture.md, Layers (top first) differs from "
                                          f"tests/test_layering.py LAYERS:\n doc:   {got}\n test:  "
                                          f"{list(reversed(want))}")


def test_the_checks_see_function_level_and_relative_imports():
    """The parser itself: a function-level import and a relative one are both read."""
    tree = ast.parse("def f():\n    from ..plan import load_plan\n")
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom))
    assert _targets("specplan.verify.report", node) == ["specplan.plan"]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_only_runtime_comm_starts_worlds_and_creates_groups():
    """runtime/comm.py is the one home of process-group creation (DESIGN.md §7.4: every rank
    creates every group in one order); the runtime, simulate and the deployment simulator ask it."""
    home = PACKAGE / "runtime" / "comm.py"
    found = []
    for path in MODULES.values():
        if path == home:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("new_group", "init_process_group")):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.func.attr}")
    assert not found, "process groups made outside specplan/runtime/comm.py:\n" + "\n".join(found)
