"""Each folder is one layer, and the layers run one way (docs/architecture.md draws them).

FOLDERS below maps each folder of replay/ and analysis/ to its layer; a module belongs to the layer
of the folder that holds it. A module may import its own layer and the layers ALLOWED names for
it. Every import statement is read with ``ast``, those inside functions (the project imports
lazily) and under ``if TYPE_CHECKING`` (an annotation is a dependency too) included; only the cycle
check leaves the latter out, since they never run. tests/test_analysis_cli.py and
tests/test_cli_replay.py check the torch rule at run time in a fresh interpreter; this checks
every import statement.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("replay", "analysis")

UTIL, CORE, READING, REPLAY, ANALYSIS, LIVE, CLI, TESTING = (
    "util", "core", "reading", "replay", "analysis", "live", "cli", "testing"
)  # fmt: skip

# Which layers a layer may import besides itself.
ALLOWED = {
    UTIL: set(),
    CORE: {UTIL},
    READING: {UTIL, CORE},
    REPLAY: {UTIL, CORE, READING},
    ANALYSIS: {UTIL, CORE, READING, REPLAY},
    LIVE: {UTIL, CORE, READING},
    CLI: {UTIL, CORE, READING, REPLAY, ANALYSIS, LIVE},
    # Generators and per-round references for tests and benches: they may use any layer but the CLI;
    # no layer imports them.
    TESTING: {UTIL, CORE, READING, REPLAY, ANALYSIS, LIVE},
}

# The folder -> layer map; a subfolder has its parent's layer (replay/io/packed is reading).
FOLDERS = {
    "replay/util": UTIL,
    "replay/core": CORE,
    "replay/io": READING,
    "replay/engine": REPLAY,
    "analysis": ANALYSIS,
    "replay/live": LIVE,
    "replay/cli": CLI,
    "replay/testing": TESTING,
}
# The package roots hold nothing but their __init__.py and folders: replay's gives __version__.
ROOTS = {"replay": UTIL, "analysis": ANALYSIS}
# torch and its family: the live harness, and the test generators of live models (replay/testing/tiny.py;
# no library module imports replay/testing, so the offline side stays torch-free).
TORCH_LAYERS = {LIVE, TESTING}
TORCH_FAMILY = {"torch", "transformers", "safetensors", "gguf", "accelerate"}


def module_files() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            out[name] = path
    return out


def layer_of(name: str, path: Path) -> str | None:
    if name in ROOTS:
        return ROOTS[name]
    folder = path.relative_to(ROOT).parent.as_posix()
    while folder not in FOLDERS and "/" in folder:
        folder = folder.rpartition("/")[0]
    return FOLDERS.get(folder)


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """ids of import nodes inside ``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``)."""
    inside = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = node.test
            name = test.id if isinstance(test, ast.Name) else test.attr if isinstance(test, ast.Attribute) else None
            if name == "TYPE_CHECKING":
                for stmt in node.body:
                    inside.update(id(n) for n in ast.walk(stmt))
    return inside


def imports_of(name: str, path: Path, known: set[str]) -> list[tuple[str, bool]]:
    """(imported module, only under TYPE_CHECKING) for every import statement, wherever it is."""
    tree = ast.parse(path.read_text(), str(path))
    typing_only = _type_checking_nodes(tree)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            # `from pkg import sub` imports the submodule sub; `from mod import name` imports mod.
            targets = [f"{module}.{a.name}" if f"{module}.{a.name}" in known else module for a in node.names]
        else:
            continue
        out += [(t, id(node) in typing_only) for t in targets]
    return out


def internal(target: str, known: set[str]) -> str | None:
    """The project module an import names (its longest known prefix), or None for a library."""
    parts = target.split(".")
    for k in range(len(parts), 0, -1):
        if ".".join(parts[:k]) in known:
            return ".".join(parts[:k])
    return None


FILES = module_files()
KNOWN = set(FILES)
IMPORTS = {name: imports_of(name, path, KNOWN) for name, path in FILES.items()}
LAYERS = {name: layer_of(name, path) for name, path in FILES.items()}


def test_every_module_is_in_the_folder_of_a_layer():
    stray = sorted(
        str(path.relative_to(ROOT))
        for name, path in FILES.items()
        if LAYERS[name] is None or (path.parent.name in ROOTS and path.parent.parent == ROOT and name not in ROOTS)
    )
    assert not stray, (
        f"modules outside the layer folders: {stray}; replay/ and analysis/ hold only their __init__.py and "
        "folders: put each into the folder of its layer (FOLDERS in tests/test_layers.py, docs/architecture.md)"
    )


def test_every_folder_is_a_package_with_a_docstring():
    """A folder says what lives there (its __init__.py's docstring), and is a package: a folder
    without __init__.py would be a namespace package that setuptools does not ship."""
    for root in PACKAGES:
        for folder in sorted(p for p in (ROOT / root).rglob("*") if p.is_dir() and p.name != "__pycache__"):
            if not any(folder.glob("*.py")):
                continue
            init = folder / "__init__.py"
            where = folder.relative_to(ROOT)
            assert init.exists(), f"{where}/ holds modules but no __init__.py"
            assert ast.get_docstring(ast.parse(init.read_text())), (
                f"{where}/__init__.py: no docstring saying what lives there"
            )


def test_the_architecture_page_draws_every_folder():
    page = (ROOT / "docs" / "architecture.md").read_text()
    folders = {
        f"{p.relative_to(ROOT).parent.as_posix()}/"
        for root in PACKAGES
        for p in (ROOT / root).rglob("__init__.py")
        if p.parent != ROOT / root
    }
    missing = sorted(f for f in folders if f not in page)
    assert not missing, f"docs/architecture.md's picture lacks the folders {missing}"


@pytest.mark.parametrize("name", sorted(n for n in KNOWN if LAYERS[n] is not None))
def test_imports_go_to_the_same_or_a_lower_layer(name):
    layer = LAYERS[name]
    bad = set()
    for target, _ in IMPORTS[name]:
        mod = internal(target, KNOWN)
        if mod is None or LAYERS.get(mod) is None:
            continue
        if LAYERS[mod] != layer and LAYERS[mod] not in ALLOWED[layer]:
            bad.add(f"{mod} ({LAYERS[mod]})")
    assert not bad, (
        f"{name} ({layer}) may import only {sorted(ALLOWED[layer] | {layer})}, but imports {sorted(bad)} "
        "(docs/architecture.md)"
    )


def test_no_library_module_imports_the_test_generators():
    users = sorted(
        f"{name} -> {internal(t, KNOWN)}"
        for name, imports in IMPORTS.items()
        if LAYERS[name] != TESTING
        for t, _ in imports
        if internal(t, KNOWN) is not None and LAYERS.get(internal(t, KNOWN)) == TESTING
    )
    assert not users, f"library modules import replay/testing (generators for tests and benches only): {users}"


@pytest.mark.parametrize("name", sorted(n for n in KNOWN if LAYERS[n] not in TORCH_LAYERS))
def test_offline_side_never_imports_torch(name):
    heavy = sorted({t for t, _ in IMPORTS[name] if t.split(".")[0] in TORCH_FAMILY})
    assert not heavy, f"{name} imports {heavy}: only replay/live/ (and replay/testing/'s model generators) may"


def test_no_import_cycles():
    graph = nx.DiGraph()
    graph.add_nodes_from(KNOWN)
    for name, imports in IMPORTS.items():
        for target, typing_only in imports:
            mod = internal(target, KNOWN)
            # A package's __init__ is imported with any of its modules: only a real import counts.
            if mod is not None and mod != name and not typing_only and not name.startswith(mod + "."):
                graph.add_edge(name, mod)
    cycles = list(nx.simple_cycles(graph))
    assert not cycles, f"import cycles: {[' -> '.join(c + c[:1]) for c in cycles[:5]]}"


def _all_imports(path: Path) -> list[tuple[int, str]]:
    """(line, module or module.name) of every absolute import of the project in a file."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            out += [(node.lineno, node.module)] + [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
    return out


def test_the_checker_sees_lazy_relative_and_typing_imports(tmp_path):
    """The reader itself: a function-local relative import and a TYPE_CHECKING import are found."""
    src = tmp_path / "mod.py"
    src.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    import torch\n"
        "def f():\n    from ..analysis import plots\n    from .batch import replay_batch\n"
    )
    known = {"replay.live.mod", "replay.live", "replay.batch", "replay", "analysis", "analysis.plots"}
    found = imports_of("replay.live.mod", src, known)
    assert ("torch", True) in found
    assert ("replay.analysis", False) in found  # `..` from replay.live is replay: no such module
    assert ("replay.live.batch", False) in found
    assert internal("replay.live.batch", known) == "replay.live"
    assert internal("numpy.linalg", known) is None


# --- the per-round references live in replay/testing ------------------------------------------

# The per-round references (test oracles) and the helpers only tests and benches call: each defined
# in its replay/testing module and nowhere under replay/ or analysis/. No library module imports replay/testing
# (test_no_library_module_imports_the_test_generators), so no command can run one. Names that
# run-time modules also use for other things (round_table, round_paths, sampling_summary) are left out.
TESTING_REFERENCES = {
    "replay.testing.replayer": ("RoundResult", "replay_round", "replay_directory", "replay_packed", "iter_rounds"),
    "replay.testing.rebuild": ("rebuild_tree", "parents_are_valid"),
    "replay.testing.round_sampling": ("round_sampling", "node_logprob_gaps"),
    "replay.testing.round_summaries": ("figures_of", "render_summary"),
    "replay.testing.table_rows": ("node_table", "node_facts", "level_ranks"),
    "replay.testing.stats_reference": ("dump_stats_from_results", "collect_visits", "estimate_model"),
    "replay.testing.subtree_walk": ("replay_subconfig", "replay_subconfig_all", "simulate_subconfig"),
    "replay.testing.compare_at_t": ("compare_sampling", "sub_tree_round", "subtree_sampling"),
    "replay.testing.compare_reference": (
        "compare_configs",
        "outcomes_by_gamma",
        "simulate_strategies",
        "simulate_strategy",
    ),
    "replay.testing.records_reference": ("write_json_lines", "write_table"),
    "replay.testing.frame_counts": ("metric_parts_by_frame", "node_metric_counts", "metrics_by_frame"),
    "replay.testing.in_memory": ("read_directory", "batch_from_rounds", "replay_batches", "round_at"),
    "replay.testing.path_grouping": ("group_paths", "group_entries", "group_complete"),
    "replay.testing.synth": ("write_text_matrix",),
    "replay.testing.batch_synth": ("exact_parts",),
    "replay.testing.packed_rounds": ("packed_rounds",),
}


def _top_level_names(path: Path) -> set[str]:
    """The functions and classes a module defines at its top level."""
    tree = ast.parse(path.read_text(), str(path))
    return {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}


def test_the_per_round_references_live_in_replay_testing():
    """The round-by-round oracles are defined in their replay/testing modules, and no run-time module
    defines one again."""
    every = set()
    for module, names in TESTING_REFERENCES.items():
        assert LAYERS[module] == TESTING, f"{module} is not in replay/testing"
        missing = set(names) - _top_level_names(FILES[module])
        assert not missing, f"{module} no longer defines {sorted(missing)}: update TESTING_REFERENCES"
        every |= set(names)
    copies = sorted(
        f"{name}.{ref}"
        for name, path in FILES.items()
        if LAYERS[name] != TESTING
        for ref in _top_level_names(path) & every
    )
    assert not copies, f"per-round references defined in run-time modules: {copies} (they belong in replay/testing)"
