"""The layers run one way (docs/architecture.md): every import of every module, read with ``ast``.

Each module of replay/ and analysis/ belongs to one layer in LAYERS below (docs/architecture.md
draws the same table). A module may import its own layer and the layers ALLOWED names for it;
the imports read include those inside functions (the project imports lazily) and inside
``if TYPE_CHECKING`` (an annotation is a dependency too); only the cycle check leaves the
latter out, since they never run. tests/test_analysis_cli.py and tests/test_cli_replay.py check
the torch rule at run time in a fresh interpreter; this checks every import statement.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("replay", "analysis")

CORE, READING, REPLAY, ANALYSIS, LIVE, CLI = "core", "reading", "replay", "analysis", "live", "cli"

# Which layers a layer may import besides itself.
ALLOWED = {
    CORE: set(),
    READING: {CORE},
    REPLAY: {CORE, READING},
    ANALYSIS: {CORE, READING, REPLAY},
    LIVE: {CORE, READING},
    CLI: {CORE, READING, REPLAY, ANALYSIS, LIVE},
}

# Names of modules still on other branches (config_grammar, records, compiled, kvcache) are listed
# ahead of their merge; a name with no file is never checked.
_LAYER_MODULES = {
    CORE: """replay replay.version replay.errors replay.atomic replay.progress replay.parallel replay.pathcheck replay.bounded
        replay.vocab replay.config replay.config_grammar replay.tree replay.selection
        replay.acceptance replay.records replay.headline""",
    READING: """replay.npyfile replay.ptfile replay.matrix_io replay.grouping replay.rounds
        replay.roundbatch replay.manifest replay.dumpwrite replay.packed_format replay.packed_meta
        replay.packed_blocks replay.packed_write replay.packed_read replay.packed
        replay.fastread replay.textbatch replay.sources replay.synth""",
    REPLAY: """replay.rebuild replay.replayer replay.batch replay.batch.codes replay.batch.shapes
        replay.batch.result replay.batch.frames replay.batch.kernel replay.batch.driver replay.batch_synth
        replay.runs replay.render""",
    ANALYSIS: """analysis analysis.tables analysis.batch_tables analysis.definitions analysis.intervals analysis.metrics analysis.plots
        analysis.treeplot analysis.example_round analysis.runs analysis.dask_tables
        analysis.timings analysis.costmodel analysis.costsource analysis.compare analysis.compare_batch
        analysis.gamma_strategies analysis.subtree analysis.subtree_batch analysis.shape_counts analysis.shape_model
        analysis.shape_stats analysis.shape_dumps analysis.shape_paths analysis.shape_search analysis.recommend
        analysis.recommend_render
        analysis.report analysis.sweep_plots analysis.speedpredict""",
    LIVE: """replay.live replay.live.checks replay.live.clock replay.live.costs replay.live.draft
        replay.live.dumps replay.live.errors replay.live.extras replay.live.forward
        replay.live.generate replay.live.gguf_load replay.live.grid replay.live.model_cache
        replay.live.model_catalogue replay.live.model_download replay.live.model_progress
        replay.live.models replay.live.names replay.live.prompts replay.live.report
        replay.live.run replay.live.sampling replay.live.scores replay.live.stdprompts
        replay.live.sweep replay.live.tiny replay.live.tokenizer_check replay.live.verify
        replay.live.cluster replay.live.commit replay.live.compiled replay.live.kvcache
        replay.live.sweepdir replay.live.timing""",
    # Glue: argument parsing, dispatch, printing; the notebook API is a front end like the CLI.
    CLI: """replay.cli replay.cli.__main__ replay.cli.parser replay.cli.options replay.cli.cmd_replay replay.cli.cmd_scale
        replay.cli.cmd_analysis replay.cli.cmd_compare replay.cli.cmd_recommend analysis.api
        replay.cli.cmd_live replay.cli.cmd_sweep replay.cli.cmd_models replay.cli.live_auto""",
}
LAYERS = {mod: layer for layer, mods in _LAYER_MODULES.items() for mod in mods.split()}

TORCH_FAMILY = {"torch", "transformers", "safetensors", "gguf", "accelerate"}


def module_files() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            out[name] = path
    return out


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


def test_every_module_has_a_layer():
    missing = sorted(KNOWN - set(LAYERS))
    assert not missing, (
        f"modules without a layer: {missing}; add each to _LAYER_MODULES in tests/test_layers.py "
        "and to the picture in docs/architecture.md"
    )


def test_the_architecture_page_draws_every_module():
    page = (ROOT / "docs" / "architecture.md").read_text()
    words = set(page.replace("/", " ").replace(".py", " ").split())
    missing = sorted(n for n in KNOWN if "." in n and n.rpartition(".")[2] not in words)
    assert not missing, f"docs/architecture.md's picture lacks {missing}"


@pytest.mark.parametrize("name", sorted(KNOWN & set(LAYERS)))
def test_imports_go_to_the_same_or_a_lower_layer(name):
    layer = LAYERS[name]
    bad = set()
    for target, _ in IMPORTS[name]:
        mod = internal(target, KNOWN)
        if mod is None or mod not in LAYERS:
            continue
        if LAYERS[mod] != layer and LAYERS[mod] not in ALLOWED[layer]:
            bad.add(f"{mod} ({LAYERS[mod]})")
    assert not bad, f"{name} ({layer}) may import only {sorted(ALLOWED[layer] | {layer})}, but imports {sorted(bad)} (docs/architecture.md)"


@pytest.mark.parametrize("name", sorted(n for n in KNOWN if not n.startswith("replay.live")))
def test_offline_side_never_imports_torch(name):
    heavy = sorted({t for t, _ in IMPORTS[name] if t.split(".")[0] in TORCH_FAMILY})
    assert not heavy, f"{name} imports {heavy}: only replay/live/ may"


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
