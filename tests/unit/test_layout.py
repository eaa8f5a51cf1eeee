"""The house's layout rules, checked over the whole package: no import cycle (function-level and `TYPE_CHECKING`
imports included), no module over 600 lines without a reason at its top, no edit of `sys.path` anywhere."""

import ast
import re
from pathlib import Path

import codapo_trl


PACKAGE = Path(codapo_trl.__file__).parent
ROOT = PACKAGE.parent
MAX_LINES = 600


def import_graph(package_dir):
    """`{module: {imported modules of the package}}` from every import statement of every module (module level,
    function level and `TYPE_CHECKING` blocks alike), `from a import b` counting as `a.b` when that is a module."""
    modules = {}
    for path in package_dir.rglob("*.py"):
        parts = path.relative_to(package_dir.parent).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph = {}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        edges = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = name.split(".") if is_package else name.split(".")[:-1]
                    anchor = anchor[: len(anchor) - node.level + 1]
                    base = ".".join(anchor + ([node.module] if node.module else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            else:
                continue
            edges |= {t for t in targets if t in modules and t != name}
        graph[name] = edges
    return graph


def cycles(graph):
    """The strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on_stack, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_the_package_imports_no_cycle():
    """No circle of imports anywhere in the package. A package's `__init__` importing its own submodules is an edge
    like any other, so a submodule importing a name from its package's `__init__` is a cycle (the old `analysis.py`
    and `analysis_plots.py` imported each other inside functions)."""
    graph = import_graph(PACKAGE)
    assert "codapo_trl.analysis.plots" in graph["codapo_trl.analysis.results"]  # the graph sees real imports
    assert "codapo_trl.analysis.scoring" in graph["codapo_trl.analysis"]
    assert "codapo_trl.answers" in graph["codapo_trl.dynamics.question_log"]  # relative imports resolved
    assert cycles(graph) == []
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]  # the checker finds one


def test_long_modules_say_why_at_the_top():
    """A module over 600 lines states its length and the reason in its docstring ("Length: ...")."""
    unexplained = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if text.count("\n") > MAX_LINES and "Length:" not in (ast.get_docstring(ast.parse(text)) or ""):
            unexplained.append(str(path.relative_to(ROOT)))
    assert unexplained == []


def test_nothing_edits_sys_path():
    """Scripts, tests and benchmarks import the installed package (or get paths through PYTHONPATH), never by
    editing `sys.path`."""
    edit = re.compile(r"sys\.path(\.insert|\.append|\.extend|\s*\[[^\]]*\]\s*=|\s*\+=|\s*=)")
    folders = ("codapo_trl", "tests", "recipes", "benchmarks", "experiments", "tools")
    offenders = [
        f"{path.relative_to(ROOT)}:{number}"
        for folder in folders
        for path in sorted((ROOT / folder).rglob("*.py"))
        if path.name != "test_layout.py"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if edit.search(line)
    ]
    assert offenders == []
