"""No import cycle anywhere in the package: the modules and their imports form a DAG.

Every import counts, wherever it stands: at the top, inside a function (a lazy import still ties
the two modules together: ``bench/gateway.py`` <-> ``bench/pipeline.py`` was such a cycle) and
under ``TYPE_CHECKING`` (a cycle of types is a cycle of design). ``from package import name``
counts as an import of ``package.name`` when that is a module, else of ``package``. The cycles
are found as the strongly connected components of the graph (Tarjan), each reported with one
cycle through it, so the message says which import to move.
"""

from __future__ import annotations

from .imports import all_modules, imported_modules


def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports (itself left out)."""
    modules = all_modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = set()
        for _, imported in imported_modules(path):
            if imported in modules:
                targets.add(imported)
            elif imported.rpartition(".")[0] in modules:  # ``from package import name``
                targets.add(imported.rpartition(".")[0])
        targets.discard(name)
        graph[name] = targets
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module, each given as one cycle
    (a shortest path from its first member back to it). O(modules + imports)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(start: str) -> None:  # iterative Tarjan: no recursion limit to meet
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
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
                    found.append(_cycle_through(sorted(component), graph))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def _cycle_through(component: list[str], graph: dict[str, set[str]]) -> list[str]:
    """A shortest path from the component's first member back to itself, inside the component."""
    members = set(component)
    first = component[0]
    paths = {first: [first]}
    queue = [first]
    while queue:
        node = queue.pop(0)
        for target in sorted(graph[node] & members):
            if target == first:
                return [*paths[node], first]
            if target not in paths:
                paths[target] = [*paths[node], target]
                queue.append(target)
    return component


def test_no_module_imports_itself_through_others() -> None:
    found = cycles(import_graph())
    assert found == [], "import cycles: " + "; ".join(" -> ".join(cycle) for cycle in found)


def test_the_cycle_finder_finds_planted_cycles_and_sees_every_import() -> None:
    # the finder is only as good as its graph: a planted two-module and three-module cycle
    graph = {"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"e"}, "e": {"c", "a"}, "f": set()}
    assert cycles(graph) == [["a", "b", "a"], ["c", "d", "e", "c"]]
    # and the graph sees imports inside functions and under TYPE_CHECKING
    modules = import_graph()
    assert "upsertmat.sinks" in modules["upsertmat.spark.pipeline"]
    assert "upsertmat.sinks" in modules["upsertmat.jobs.embedded"]  # imported inside a method
    assert "upsertmat.spark.config" in modules["upsertmat.jobs.runner"]  # under TYPE_CHECKING
