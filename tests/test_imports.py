"""The import structure: no import circle among the project's modules, and every module-level
import goes down the layers of docs/architecture.md (or stays in its layer), never up.

Reads the source with ``ast`` and imports nothing. Module-level imports are the ``import`` and
``from`` statements that run when a module is imported: at the top, and inside module-level
``if``/``try``/``with`` blocks and class bodies; not those inside functions (they run on use),
nor those under ``if TYPE_CHECKING:`` (annotations only) or ``if __name__ == "__main__":`` (they
run when the file is the program, not when it is imported). An import names the module it loads:
``from pipeline.records import files`` is an import of ``pipeline.records.files``, while
``from pipeline.replay import Replay`` is one of the package ``pipeline.replay``. The parent
packages Python initializes on the way are not counted: a package's ``__init__`` importing its
own submodules is not a circle.

The circle check counts every import, those inside functions too: an import that runs on use
still ties two modules together, and a circle closed inside a function is a circle. Only a
script's block (``if __name__ == "__main__":`` at module level) is not its module's: it runs when
the file is the program, as the module ``__main__``, which nothing imports, so an import there
cannot lead back to it (``python config_optimized.py`` imports the show, which imports a fresh
``config_optimized``). Going up the layers inside a function is allowed only where
``LAZY_ALLOWED`` names the import and why; it never excuses a circle.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOP_MODULES = ("config_optimized", "mario_rl_optimized", "benchmark_performance")
PACKAGES = ("pipeline", "wrappers", "models", "presets", "bench", "tests")

# The layers, low to high, by folder: pipeline/ is a folder per role, and a module takes the layer
# of the folder it sits in (the longest entry that is it or a package above it). A module may
# import its own layer and the ones below at module level, never one above. Only the two modules
# every layer uses, importing nothing of the project, sit in pipeline/ itself.
LAYERS = {
    # 0: settings and what every layer uses, importing nothing of the project's code above them
    "config_optimized": 0,
    "presets": 0,
    "wrappers.options": 0,
    "pipeline.errors": 0,      # UserError and its kinds: every layer raises them
    "pipeline.quick_exit": 0,  # the end of a script or a spawned child
    # 1: environments and networks
    "wrappers": 1,
    "models": 1,
    # 2: the data path, in the order a transition travels, and the agent it feeds
    "pipeline.transport": 2,   # the record, the rings, the control block, shared memory, whole games
    "pipeline.actors": 2,      # collectors, their rollout and supervisor; what the data path holds of Ray's
    "pipeline.replay": 2,      # consolidation, storage/writer/sampler, prefetch, the replay ratio
    "pipeline.agent": 2,       # the rules and the learner's one update step
    # 3: what runs the agent on this machine, run records, evaluation, configuration
    "pipeline.engine": 3,      # compile and CUDA graph around the update; bf16 probe; the learner's threads
    "pipeline.records": 3,
    "pipeline.evaluation": 3,
    "pipeline.settings": 3,
    # 4: the learner process (its parts wired, its loop, a run) and the Ray collectors
    "pipeline.runtime": 4,
    "pipeline.distributed": 4,
    # 5: entry points and benchmarks
    "mario_rl_optimized": 5,
    "benchmark_performance": 5,
    "bench": 5,
    # 6: the tests
    "tests": 6,
}
# The modules that may sit in pipeline/ itself, outside a role's folder.
PIPELINE_LEAVES = {"pipeline.errors", "pipeline.quick_exit"}


def project_modules() -> dict[str, Path]:
    """Every module of the project by dotted name (a package by its ``__init__``)."""
    mods = {name: ROOT / f"{name}.py" for name in TOP_MODULES}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            mods[".".join(parts)] = path
    return mods


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def module_level_imports(tree: ast.Module):
    """The import statements that run when the module is imported."""
    todo = list(tree.body)
    while todo:
        node = todo.pop(0)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If) and _is_script_block(node):  # runs as the program, not on import
            todo += node.orelse
        elif isinstance(node, ast.If):
            todo += node.orelse if _is_type_checking(node.test) else node.body + node.orelse
        elif isinstance(node, ast.Try | ast.TryStar):
            todo += node.body + [s for h in node.handlers for s in h.body] + node.orelse + node.finalbody
        elif isinstance(node, ast.With | ast.ClassDef):
            todo += node.body


def _is_script_block(node: ast.stmt) -> bool:
    """``if __name__ == "__main__":``: what runs when the file is the program."""
    test = getattr(node, "test", None)
    return (isinstance(node, ast.If) and isinstance(test, ast.Compare) and isinstance(test.left, ast.Name)
            and test.left.id == "__name__" and len(test.comparators) == 1
            and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value == "__main__")


def all_imports(tree: ast.Module, script: bool = True):
    """Every import statement, in functions too (they run on use, and still tie the modules
    together), but not those under ``if TYPE_CHECKING:`` (annotations only); with ``script``
    False, not those of the module's script block either (they are ``__main__``'s)."""
    todo = [n for n in ast.iter_child_nodes(tree) if script or not _is_script_block(n)]
    while todo:
        node = todo.pop(0)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            todo += node.orelse
        else:
            todo += list(ast.iter_child_nodes(node))


def module_imports(tree: ast.Module):
    """The imports that tie a module to others, for the circle check: every one (in functions
    too) but its script block's."""
    return all_imports(tree, script=False)


# Imports that go up the layers inside functions (or a script block), on purpose: each named with
# why. The entry points load what they run only when asked (``python config_optimized.py`` shows
# the resolved config through pipeline.settings.layers). None of them may close a circle: the
# circle check counts them all.
LAZY_ALLOWED = {
    ("config_optimized", "pipeline.settings.layers"): "the entry point `python config_optimized.py` (show)",
}


def import_graph(mods: dict[str, Path], imports=module_level_imports) -> dict[str, set[str]]:
    """module -> the project modules it imports (``imports``: at module level, or all)."""
    graph = {}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges = set()
        for node in imports(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                if node.level:
                    base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module
                targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in mods else source for a in node.names]
            for target in targets:
                while target and target not in mods:  # ``import a.b.c`` of a package-less name: its module
                    target = target.rpartition(".")[0]
                if target and target != name:
                    edges.add(target)
        graph[name] = edges
    return graph


def layer_of(name: str) -> int | None:
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        if ".".join(parts[:i]) in LAYERS:
            return LAYERS[".".join(parts[:i])]
    return None


def circle_groups(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected groups of more than one module: each module of a group reaches
    every other through imports, around one circle or several."""
    index, low, on_stack, stack, groups = {}, {}, set(), [], []

    def visit(v):  # Tarjan's algorithm
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
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(set(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return groups


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (as a path that returns to its start) per strongly connected group of modules."""
    cycles = []
    for group in circle_groups(graph):  # a path from the group's first module back to it, inside the group
        start = min(group)
        prev, todo = {start: None}, [start]
        while todo:
            v = todo.pop(0)
            for w in sorted(graph[v] & group):
                if w == start:
                    path = [v]
                    while prev[path[-1]] is not None:
                        path.append(prev[path[-1]])
                    cycles.append([*reversed(path), start])
                    todo = []
                    break
                if w not in prev:
                    prev[w] = v
                    todo.append(w)
    return cycles


def test_no_import_circle():
    cycles = find_cycles(import_graph(project_modules()))
    assert not cycles, "import circles:\n" + "\n".join("  " + " -> ".join(c) for c in cycles)


def test_every_module_has_a_layer():
    missing = sorted(m for m in project_modules() if layer_of(m) is None)
    assert not missing, f"modules with no layer in LAYERS (add each to its layer): {missing}"


def test_pipeline_is_folders_and_the_layers_name_folders():
    """pipeline/ holds its roles' folders and the two shared leaves; every other entry of LAYERS
    under pipeline/ is a folder (a package), so a module's layer is where it sits."""
    mods = project_modules()
    flat = sorted(m for m in mods if m.startswith("pipeline.") and m.count(".") == 1
                  and mods[m].name != "__init__.py")
    assert flat == sorted(PIPELINE_LEAVES), f"modules in pipeline/ outside a role's folder: {flat}"
    for entry in LAYERS:
        if entry.startswith("pipeline.") and entry not in PIPELINE_LEAVES:
            assert (ROOT / entry.replace(".", "/") / "__init__.py").exists(), f"{entry} is not a folder"


def test_module_level_imports_go_down_the_layers():
    graph = import_graph(project_modules())
    upward = sorted(f"{m} (layer {layer_of(m)}) imports {t} (layer {layer_of(t)})"
                    for m, targets in graph.items() for t in targets
                    if None not in (layer_of(m), layer_of(t)) and layer_of(t) > layer_of(m))
    assert not upward, "imports from a lower layer to a higher one:\n  " + "\n  ".join(upward)


def test_the_config_imports_only_layer_0():
    """``import config_optimized`` loads the schema alone: nothing of the pipeline but its user
    errors, in functions neither (its script block, the show, apart)."""
    graph = import_graph(project_modules(), module_imports)
    assert {t for t in graph["config_optimized"] if layer_of(t) != 0} == set()
    assert {t for t in graph["config_optimized"] if t.startswith("pipeline")} == {"pipeline.errors"}


def test_the_cycle_check_finds_a_planted_cycle():
    """The checker itself: a circle of three and one of two are found, a chain is not."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"f"}, "f": {"e"}, "g": {"d"}}
    assert sorted(find_cycles(graph)) == [["a", "b", "c", "a"], ["e", "f", "e"]]
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_relative_imports_resolve_to_the_modules_they_load():
    graph = import_graph(project_modules())
    assert "pipeline.replay.storage" in graph["pipeline.replay.sampler"]
    assert "pipeline.transport.transition" in graph["pipeline.replay.sampler"]  # from ..transport.transition import LAST
    assert "pipeline.records.checkpoint" in graph["pipeline.runtime.run"]      # from ..records import checkpoint as ckpt
    assert "pipeline.transport.shm" in graph["pipeline.runtime.run"]           # from ..transport import shm
    assert "pipeline.agent.rules" in graph["pipeline.agent.learner"]            # from . import rules


def upward(graph: dict[str, set[str]], allowed=()) -> list[str]:
    return sorted(f"{m} (layer {layer_of(m)}) imports {t} (layer {layer_of(t)})"
                  for m, targets in graph.items() for t in targets
                  if None not in (layer_of(m), layer_of(t)) and layer_of(t) > layer_of(m) and (m, t) not in allowed)


def function_level_graph(mods: dict[str, Path]) -> dict[str, set[str]]:
    """Every import, functions included, less the named lazy loads."""
    graph = import_graph(mods, all_imports)
    return {m: {t for t in targets if (m, t) not in LAZY_ALLOWED} for m, targets in graph.items()}


def test_imports_inside_functions_go_down_the_layers_too():
    bad = upward(function_level_graph(project_modules()))
    assert not bad, "imports (in functions too) from a lower layer to a higher one:\n  " + "\n  ".join(bad)


def test_no_import_circle_inside_functions_either():
    """Every import counts, the lazy loads that LAZY_ALLOWED lets go up the layers included."""
    graph = import_graph(project_modules(), module_imports)
    groups = circle_groups(graph)
    assert not groups, "import circles (in functions too), each group of modules tied together, and one circle in it:\n" + \
        "\n".join(f"  {len(g)} modules {sorted(g)}: " + " -> ".join(c) for g, c in zip(groups, find_cycles(graph)))


def test_every_allowed_lazy_import_is_still_there():
    """An allow-list entry whose import has gone is removed, so the list stays what it says."""
    graph = import_graph(project_modules(), all_imports)
    gone = [pair for pair in LAZY_ALLOWED if pair[1] not in graph.get(pair[0], set())]
    assert not gone, f"allowed lazy imports that no longer exist (drop them from LAZY_ALLOWED): {gone}"


def test_the_checks_find_each_kind_of_fault(tmp_path):
    """A module-level and a function-level upward import, and a circle closed inside a function,
    in a made-up tree: each check must name it."""
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "__init__.py").write_text("")
    (tmp_path / "models" / "top.py").write_text("import pipeline.runtime.run\n")                  # 1 -> 4, module level
    (tmp_path / "models" / "lazy.py").write_text("def f():\n    import pipeline.runtime.run\n")    # 1 -> 4, in a function
    (tmp_path / "models" / "a.py").write_text("import models.b\n")
    (tmp_path / "models" / "b.py").write_text("def g():\n    import models.a\n")          # a -> b -> a
    (tmp_path / "models" / "typed.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pipeline.runtime.run\n")  # annotations: fine
    (tmp_path / "pipeline").mkdir()
    (tmp_path / "pipeline" / "run.py").write_text("")
    mods = {"models": tmp_path / "models" / "__init__.py", "pipeline.runtime.run": tmp_path / "pipeline" / "run.py",
            **{f"models.{n}": tmp_path / "models" / f"{n}.py" for n in ("top", "lazy", "a", "b", "typed")}}
    assert upward(import_graph(mods)) == ["models.top (layer 1) imports pipeline.runtime.run (layer 4)"]
    assert upward(import_graph(mods, all_imports)) == ["models.lazy (layer 1) imports pipeline.runtime.run (layer 4)",
                                                       "models.top (layer 1) imports pipeline.runtime.run (layer 4)"]
    assert find_cycles(import_graph(mods)) == []
    assert find_cycles(import_graph(mods, all_imports)) == [["models.a", "models.b", "models.a"]]
    assert find_cycles(import_graph(mods, module_imports)) == [["models.a", "models.b", "models.a"]]


def test_a_script_block_closes_no_circle_but_a_function_does(tmp_path):
    """``if __name__ == "__main__":`` imports are the program's, not the module's: the module that
    imports this one back gets a fresh copy whose script block never runs. The same import in a
    function is a circle."""
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "show.py").write_text("import models.config\n")
    (tmp_path / "models" / "config.py").write_text(
        "X = 1\nif __name__ == '__main__':\n    import models.show\n")
    (tmp_path / "models" / "config2.py").write_text("def main():\n    import models.show2\n")
    (tmp_path / "models" / "show2.py").write_text("import models.config2\n")
    mods = {f"models.{n}": tmp_path / "models" / f"{n}.py" for n in ("show", "config", "config2", "show2")}
    assert find_cycles(import_graph(mods, module_imports)) == [["models.config2", "models.show2", "models.config2"]]
    assert "models.show" not in import_graph(mods)["models.config"]  # nor is it run on import
    assert "models.show" in import_graph(mods, all_imports)["models.config"]  # the layer check still sees it
