"""List the functions over 80 lines outside tests (the rule: no function over 80 lines, unless it is
one loop that reads top to bottom; docs/architecture.md lists the ones that remain and why).

    python scripts/long_functions.py [--max 80] [PATH ...]     (default: replay analysis scripts bench)

Prints ``lines  path:line  name`` longest first; a function's lines run from its ``def`` (decorators
excluded) to its last line, nested functions counted in their parent and listed on their own.
Exit 0 always: it is a list for the reader, not a gate.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

DEFAULT_ROOTS = ("replay", "analysis", "scripts", "bench")


def long_functions(paths: list[Path], limit: int) -> list[tuple[int, str, int, str]]:
    """(lines, file, first line, qualified name) of every function longer than ``limit`` lines."""
    out = []
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        stack: list[tuple[ast.AST, str]] = [(tree, "")]
        while stack:
            node, prefix = stack.pop()
            for child in ast.iter_child_nodes(node):
                name = prefix
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    name = f"{prefix}{child.name}"
                    if not isinstance(child, ast.ClassDef):
                        lines = child.end_lineno - child.lineno + 1
                        if lines > limit:
                            out.append((lines, str(path), child.lineno, name))
                    name += "."
                stack.append((child, name))
    return sorted(out, key=lambda r: (-r[0], r[1], r[2]))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("paths", nargs="*", default=list(DEFAULT_ROOTS))
    p.add_argument("--max", type=int, default=80, help="longest allowed function, in lines (default 80)")
    args = p.parse_args(argv)
    files = sorted(f for root in map(Path, args.paths) for f in ([root] if root.is_file() else root.rglob("*.py")))
    for lines, path, line, name in long_functions(files, args.max):
        print(f"{lines:4d}  {path}:{line}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
