"""The package's layers, read from the source: no import cycle anywhere
(imports inside functions included), nothing imports upward, and the core
packages never import the Spark layer.

Floors of ``udaf/`` (STYLE.md): leaves (SQL text, Arrow helpers, inputs,
units, numpy engines) -> the protocol (``spec``) -> the family specs and
shared family modules -> the drivers -> the generated functions.  A
family spec module imports no other family's spec module (shared code
lives in a named shared module).  A new module must be given a floor here:
the test fails on a module it does not know.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CORE = ["ehist", "lp_norms", "distinct", "frequencies", "quantiles"]
PACKAGES = CORE + ["udaf"]

FLOORS = {
    0: {"_convert", "inputs", "_arrow", "exact", "frames", "sql_text", "unwrap", "capabilities", "data"},
    1: {"family", "spec"},
    2: {"hashed_items"},  # and every *_spec module
    3: {"keys", "native", "two_phase", "union", "exact_answers", "per_row", "streaming"},
    4: {"functions", "__init__", "warm", "daemon"},
}
#: Modules below the drivers: no pyspark import at module level.
NO_SPARK_BELOW = 3


def floor(name: str) -> int:
    if name.endswith("_spec"):
        return 2
    for level, names in FLOORS.items():
        if name in names:
            return level
    raise AssertionError(f"udaf/{name}.py has no floor in tests/test_layers.py: give it one")


def modules() -> dict:
    """``package.module`` -> its source path, for every module of the packages."""
    out = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).glob("*.py")):
            out[package if path.stem == "__init__" else f"{package}.{path.stem}"] = path
    return out


def imports(path: Path, package: str) -> list:
    """(imported module or package, at module level, line) of a source file."""
    out = []
    tree = ast.parse(path.read_text())
    top = {id(node) for node in tree.body}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = (package if node.module is None else f"{package}.{node.module}") if node.level else node.module
            names = [f"{base}.{a.name}" for a in node.names] + [base]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        out += [(n, id(node) in top, node.lineno) for n in names]
    return out


def edges() -> dict:
    """Module -> {imported project module: (at module level, line)}: a name
    imported from a package counts as its submodule where one exists, else
    as the package."""
    known = modules()
    out = {}
    for name, path in known.items():
        package = name.split(".")[0]
        deps = {}
        for target, at_top, line in imports(path, package):
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name and target.split(".")[0] in PACKAGES:
                deps.setdefault(target, (at_top, line))
        out[name] = deps
    return out


def cycles(graph: dict) -> list:
    """The strongly connected components of more than one module."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def without_packages(graph: dict) -> dict:
    """Imports of a package's ``__init__`` (which re-exports its modules)
    left out, inside the package: a module importing its own package's
    public names is not a cycle of modules."""
    return {m: {d for d in deps if not (d == m.split(".")[0] and m != d)} for m, deps in graph.items()}


def test_no_import_cycle_anywhere():
    assert cycles(without_packages(edges())) == []


def test_udaf_imports_point_down_its_floors():
    wrong = []
    for name, deps in edges().items():
        if not name.startswith("udaf"):
            continue
        mine = floor(name.partition(".")[2] or "__init__")
        for dep, (_, line) in deps.items():
            if dep.startswith("udaf."):
                theirs = floor(dep.partition(".")[2])
                if theirs > mine:
                    wrong.append(f"{name}:{line} imports {dep} (floor {theirs} above {mine})")
    assert wrong == []


def test_a_family_spec_imports_no_other_family():
    wrong = [f"{name}:{line} imports {dep}" for name, deps in edges().items() if name.endswith("_spec")
             for dep, (_, line) in deps.items() if dep.endswith("_spec")]
    assert wrong == []


@pytest.mark.parametrize("package", CORE)
def test_the_core_never_imports_the_spark_layer(package):
    for name, path in modules().items():
        if name.split(".")[0] != package:
            continue
        for target, _, line in imports(path, package):
            assert not target.startswith(("udaf", "pyspark", "pandas", "pyarrow")), f"{name}:{line} imports {target}"
            if package == "ehist":  # the base of every family imports no other family
                assert target.split(".")[0] not in PACKAGES or target.startswith("ehist"), f"{name}:{line}"


def test_below_the_drivers_no_pyspark_at_import():
    for name, path in modules().items():
        if name.startswith("udaf.") and floor(name.partition(".")[2]) < NO_SPARK_BELOW:
            for target, at_top, line in imports(path, "udaf"):
                assert not (at_top and target.startswith("pyspark")), f"{name}:{line} imports {target}"


HEAVY = ("pyspark", "pyarrow", "pandas")


def heavy(name: str, graph: dict, seen=frozenset()) -> bool:
    """Whether importing module ``name`` imports pyspark, pyarrow or
    pandas: itself at its top, or through a project module it imports at
    its top."""
    path = modules()[name]
    for target, at_top, _ in imports(path, name.split(".")[0]):
        if at_top and target.split(".")[0] in HEAVY:
            return True
    return any(at_top and dep not in seen and heavy(dep, graph, seen | {name})
               for dep, (at_top, _) in graph[name].items())


def test_udaf_imports_inside_functions_only_keep_spark_lazy():
    """An import inside a function is there to keep pyspark, pyarrow or
    pandas from being imported with the module (a light module importing a
    heavy one when it is called), not to break a cycle: a project module
    that is light, or imported by a module as heavy, is imported at the
    top. ``udaf/__init__`` is the exception: ``import udaf`` imports none
    of the family modules until a name is asked for."""
    graph = edges()
    wrong = []
    for name, deps in graph.items():
        if not name.startswith("udaf.") or name == "udaf":
            continue
        for dep, (at_top, line) in deps.items():
            if not at_top and not (heavy(dep, graph) and not heavy(name, graph)):
                wrong.append(f"{name}:{line} imports {dep} inside a function")
    assert wrong == []


def test_the_checks_catch_what_they_should():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    assert floor("eh_spec") == 2 and floor("two_phase") == 3
    with pytest.raises(AssertionError, match="has no floor"):
        floor("new_module")


#: What a family declares about itself, as class keywords (udaf.family.Family, udaf.spec.Spec): the
#: class attribute each sets.
DECLARATIONS = {"family": "family", "sketch": "sketch_type", "one_step": "one_step", "frame_type": "frame_type"}


def test_a_family_spec_declares_itself_in_its_class_statement():
    """The package's specs name their family, synopsis and one-step function
    as class keywords, so a spec's body holds its parameters (and the
    registration lines of two specs are not a block repeated between them)."""
    wrong = []
    for name, path in modules().items():
        if not name.endswith("_spec"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                wrong += [f"{name}.{node.name}:{s.lineno} sets {t.id}" for s in node.body if isinstance(s, ast.Assign)
                          for t in s.targets if isinstance(t, ast.Name) and t.id in DECLARATIONS.values()]
    assert wrong == []


def test_the_class_keywords_and_the_class_attributes_declare_alike():
    """The keywords set the attributes the drivers read; a family written
    with the attributes (the form before the keywords) registers the same."""
    from dataclasses import dataclass

    from ehist import ExponentialHistogram
    from udaf import Count
    from udaf import family as registry
    from udaf.eh_spec import _Histogram

    assert (Count.family, Count.sketch_type, Count.one_step, Count.frame_type) == (
        "eh", ExponentialHistogram, "sliding_count", "bigint")
    saved = {k: list(v) for k, v in registry.FAMILIES.items()}, dict(registry._BY_SKETCH)
    try:
        @dataclass(frozen=True)
        class Counted(_Histogram):
            window: object
            family = "eh_attributes"
            one_step = "sliding_counted"
            frame_type = "double"

        @dataclass(frozen=True)
        class Keyed(_Histogram, family="eh_keywords", one_step="sliding_keyed", frame_type="double"):
            window: object

        for cls, family, one_step in ((Counted, "eh_attributes", "sliding_counted"),
                                      (Keyed, "eh_keywords", "sliding_keyed")):
            assert registry.FAMILIES[family] == [cls]
            assert (cls.family, cls.sketch_type, cls.one_step, cls.frame_type) == (
                family, ExponentialHistogram, one_step, "double")
    finally:
        registry.FAMILIES.clear()
        registry.FAMILIES.update(saved[0])
        registry._BY_SKETCH.clear()
        registry._BY_SKETCH.update(saved[1])


def test_other_packages_use_only_public_names_of_the_core():
    """What the family packages and the Spark layer take from ``ehist`` is
    public: no name with a leading underscore imported from it (a private
    helper is free to change; one another package needs is made public)."""
    wrong = []
    for name, path in modules().items():
        if name.split(".")[0] == "ehist":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "ehist":
                wrong += [f"{name}:{node.lineno} imports {node.module}.{a.name}" for a in node.names
                          if a.name.startswith("_")]
    assert wrong == []
