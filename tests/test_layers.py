"""No module imports one that imports it back, at any distance, lazy (function-level) imports
included. The import-linter contracts (pyproject.toml, CI's `lint-imports`) check the layers and
the cycles between the siblings of each package; a package's __init__ and its own modules are not
siblings, so this walk of the whole module graph covers that case too (issue 49: matcher <->
constrain/__init__ was one)."""

import pytest

grimp = pytest.importorskip("grimp")  # import-linter's graph builder (test extra)


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's components of more than one module (iterative: the graph is ~170 deep at most)."""
    index, low, on_stack, stack, found, counter = {}, {}, set(), [], [], [0]
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
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
                    found.append(sorted(component))
    return found


def test_the_tarjan_walk_finds_a_known_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _strongly_connected(graph) == [["a", "b", "c"]]
    assert _strongly_connected({"a": {"b"}, "b": set()}) == []


def test_no_module_level_import_cycle():
    g = grimp.build_graph("inferlab", include_external_packages=False)
    graph = {m: set(g.find_modules_directly_imported_by(m)) for m in g.modules}
    assert _strongly_connected(graph) == []
