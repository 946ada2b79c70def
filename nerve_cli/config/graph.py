"""Loops in a directed graph of names: the strongly connected components, and one shortest loop through each."""

from __future__ import annotations


def components(edges: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components of two or more nodes (Tarjan's algorithm, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[set[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        out.append(component)
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(edges.get(child, ())))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return sorted(out, key=min)


def loop_through(start: str, component: set[str], edges: dict[str, set[str]]) -> list[str]:
    """A shortest loop from `start` back to itself inside its component (breadth first)."""
    parent: dict[str, str] = {}
    queue = [start]
    for node in queue:
        for nxt in sorted(edges.get(node, ())):
            if nxt == start:
                path = [node]
                while path[-1] != start:
                    path.append(parent[path[-1]])
                return path[::-1]
            if nxt in component and nxt not in parent:
                parent[nxt] = node
                queue.append(nxt)
    return [start]  # unreachable: every member of a component reaches back to it
