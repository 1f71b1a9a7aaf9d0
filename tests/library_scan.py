"""The walk the "one rule, one place" tests share: every library module but the rule's home, each
finding of a scan there that no listed exception explains."""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIBRARY = ("replay", "analysis")


def findings_outside(
    home: str,
    find: Callable[[Path], list[str]],
    allowed: Iterable[tuple[str, str]] = (),
    folders: Iterable[str] = LIBRARY,
) -> list[str]:
    """ "module: text" of each of ``find``'s findings (source texts) in the modules under ``folders``
    (replay/testing, the references, left out) other than ``home``, unless ``allowed`` holds
    (module, a start of that text)."""
    allowed = list(allowed)
    found = []
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel == home or rel.startswith("replay/testing/"):
                continue
            found += [
                f"{rel}: {text}" for text in find(path) if not any(rel == m and text.startswith(s) for m, s in allowed)
            ]
    return found


def stale_exceptions(find: Callable[[Path], list[str]], allowed: Iterable[tuple[str, str]]) -> list[str]:
    """Each (module, a start of a finding's text) of ``allowed`` that ``find`` no longer finds there:
    an exception that explains nothing any more, to drop from the list."""
    return [f"{rel}: {start}" for rel, start in allowed if not any(t.startswith(start) for t in find(ROOT / rel))]


def assert_one_place(
    home: str,
    find: Callable[[Path], list[str]],
    what: str,
    use: str,
    allowed: Iterable[tuple[str, str]] = (),
    folders: Iterable[str] = LIBRARY,
) -> None:
    """The rule ``find`` recognises lives in ``home`` only: nowhere else under ``folders`` (but for
    ``allowed``), still in ``home`` (else the scan has gone blind), and every exception still explains
    a finding."""
    allowed = list(allowed)
    found = findings_outside(home, find, allowed, folders)
    assert not found, f"{what} outside {home} (use {use}): {found}"
    assert find(ROOT / home), f"the scan for {what} finds nothing in {home} any more: update this test"
    stale = stale_exceptions(find, allowed)
    assert not stale, f"exceptions that explain nothing any more, drop them: {stale}"


def docstring_ids(tree: ast.Module) -> set[int]:
    """id() of each docstring node of ``tree`` (module, class and function): scans of a module's
    strings leave them out, as words about the code are not messages it prints."""
    return {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
