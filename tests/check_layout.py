#!/usr/bin/env python3
"""Checks the source layout rules of issue 37 over the `#include "..."` lines.

Usage: python3 tests/check_layout.py [--root DIR]   (default: this script's ../..)
Exits 1 and lists every violation with file:line when a rule is broken; prints a
one-line summary and exits 0 when all hold.

Rules:
1. Which files: every `*.h` and `*.cc` present under the root, excluding build*/
   folders, node_modules, `.git`, and `fuzz/` (fuzzers are test code). Includes
   are resolved relative to the root ("folder/file.h"); includes that do not
   resolve to one of those files (system, absl, generated proto/ringlm.pb.h)
   are ignored.
2. Units: foo.h and foo.cc in the same folder are one unit; foo_test.cc is a
   test file (see 5c).
3. Folders: a unit's folder is its directory relative to the root, EXCEPT that a
   folder named `internal` counts as its parent folder (`chat/jinja/internal/x.h`
   belongs to `chat/jinja`). Folder graph: A -> B when a non-test file in A
   includes a file in B (A != B). Any cycle is a violation, printed as a path
   (a -> b -> a) with one example include per edge. A subfolder is a distinct
   folder from its parent, so daemon -> daemon/stage -> daemon is a cycle.
4. Within the daemon (all units under `daemon/` and its subfolders): no cycle in
   the unit graph (unit A -> unit B when A's .h or .cc includes B's .h). Each
   strongly connected component of more than one unit is printed.
5. Named rules:
   a. No file under `inference/` (tests included) includes anything under
      `chat/`, or any path containing `/synth/` or `jinja/`.
   b. No file includes `daemon/node.h` except the daemon's wiring:
      `daemon/node.cc`, `daemon/model_host.{h,cc}` (a Node per model) and
      `daemon/ringlmd_main.cc`. Every other part gets
      what it uses from Node (NodeServiceParts, ClusterBackendParts), never
      Node itself.
   c. Test files (`*_test.cc`, `*_test_util*`, `test_*.h/.cc`, `*_for_test*`,
      `fake_*`) are left out of the folder graph of rule 3 (tests may depend on
      what they test and below), but rules 5a and 5b apply to them.
"""
import argparse
import collections
import os
import posixpath
import re
import sys
from pathlib import Path

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SKIP_DIRS = {"node_modules", ".git", "fuzz"}
TEST_NAME = re.compile(r'(_test\.cc$|_test_util|^test_.*\.(h|cc)$|_for_test|^fake_)')
NODE_H = "daemon/node.h"
NODE_WIRING = {"daemon/node.cc", "daemon/model_host.h", "daemon/model_host.cc",
               "daemon/ringlmd_main.cc"}


def source_files(root):
    """Rule 1: relative paths of the .h/.cc files to check."""
    found = set()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames
                       if d not in SKIP_DIRS and not d.startswith("build")]
        for name in filenames:
            if name.endswith((".h", ".cc")):
                found.add(Path(dirpath, name).relative_to(root).as_posix())
    return found


def includes(root, files):
    """Yields (file, line number, included file) for includes that resolve."""
    for path in sorted(files):
        try:
            text = (root / path).read_text(encoding="utf-8", errors="replace")
        except OSError:  # moved away while we were looking
            continue
        for number, line in enumerate(text.splitlines(), 1):
            match = INCLUDE.match(line)
            if match and match.group(1) in files and match.group(1) != path:
                yield path, number, match.group(1)


def unit_of(path):
    return path.rsplit(".", 1)[0]  # foo.h, foo.cc -> foo (rule 2)


def folder_of(path):
    parts = path.split("/")[:-1]
    if parts and parts[-1] == "internal":  # rule 3
        parts = parts[:-1]
    return "/".join(parts) or "."


def is_test(path):
    return bool(TEST_NAME.search(path.rsplit("/", 1)[-1]))


def reachable(graph, start):
    seen, todo = set(), [start]
    while todo:
        for child in graph.get(todo.pop(), ()):
            if child not in seen:
                seen.add(child)
                todo.append(child)
    return seen


def strongly_connected(graph):
    """Groups of more than one node that all reach each other (the graphs are small)."""
    reach = {node: reachable(graph, node) for node in graph}
    groups = {tuple(sorted(n for n in reach[a] if a in reach.get(n, ())))
              for a in graph if a in reach[a]}
    return sorted(list(group) for group in groups if len(group) > 1)


def shortest_path(graph, start, goal, members):
    """Shortest path start -> ... -> goal that stays inside `members` (BFS)."""
    previous, queue = {start: None}, collections.deque([start])
    while queue:
        node = queue.popleft()
        if node == goal:
            path = [node]
            while previous[path[-1]] is not None:
                path.append(previous[path[-1]])
            return path[::-1]
        for child in sorted(graph.get(node, ())):
            if child in members and child not in previous:
                previous[child] = node
                queue.append(child)
    return []


def describe_cycles(graph, kind):
    """Per component: its members, then a shortest cycle through each of its edges."""
    lines, cycles = [], 0
    for members in strongly_connected(graph):
        lines.append(f"{kind} cycle among {len(members)}: {', '.join(members)}")
        seen = set()
        for a in members:
            for b in sorted(set(graph[a]) & set(members)):
                path = [a] + shortest_path(graph, b, a, set(members))
                ring = path[:-1]
                rotation = min(tuple(ring[i:] + ring[:i]) for i in range(len(ring)))
                if rotation in seen:
                    continue
                seen.add(rotation)
                cycles += 1
                lines.append("  " + " -> ".join(path))
                for x, y in zip(path, path[1:]):
                    file, number, target = graph[x][y]
                    lines.append(f"    {x} -> {y}: {file}:{number} includes \"{target}\"")
    return lines, cycles


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    root = parser.parse_args().root.resolve()
    files = source_files(root)
    # Graphs map node -> {neighbour: (file, line, included file)}, one example per edge.
    folders = {folder_of(f): {} for f in files if not is_test(f)}
    units = {unit_of(f): {} for f in files if f.startswith("daemon/")}
    violations = []
    for path, number, target in includes(root, files):
        where = f"{path}:{number}: includes \"{target}\""
        if path.startswith("inference/") and (
                target.startswith("chat/") or "/synth/" in target or "jinja/" in target):
            violations.append(f"{where} [5a: inference/ must not use chat/, synth or jinja]")
        if target == NODE_H and path not in NODE_WIRING:
            violations.append(f"{where} [5b: only {' and '.join(sorted(NODE_WIRING))} may include it]")
        if not is_test(path) and folder_of(path) != folder_of(target):
            folders[folder_of(path)].setdefault(folder_of(target), (path, number, target))
        if (path.startswith("daemon/") and target.startswith("daemon/")
                and target.endswith(".h") and unit_of(path) != unit_of(target)):
            units[unit_of(path)].setdefault(unit_of(target), (path, number, target))
    rule_count = len(violations)
    folder_lines, folder_cycles = describe_cycles(folders, "folder")
    unit_lines, unit_cycles = describe_cycles(units, "daemon unit")
    violations += folder_lines + unit_lines
    if violations:
        print("\n".join(violations))
        print(f"layout: FAILED: {rule_count} include rule violation(s), "
              f"{folder_cycles} folder cycle(s), {unit_cycles} daemon unit cycle(s)")
        return 1
    print(f"layout: {len({unit_of(f) for f in files})} units, {len(folders)} folders, "
          f"{len(units)} daemon units, no cycles")
    return 0


if __name__ == "__main__":
    sys.exit(main())
