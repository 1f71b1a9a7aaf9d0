"""Where each module was before the folder move of issue 21, and the old import paths that still work.

MOVED maps every old dotted path to its new one. The paths in PUBLIC are those users' code imports
(the modules docs/api.md named before the move, the notebook API ``analysis.api`` among them):
importing one gives the module at its new home, the same module object. A package that replaced
a module of the same name (``analysis.tables``) still answers that module's names (``forward``).
Any other old path fails with a line that names the new one. Nothing in this repository imports
an old path (tests/test_layers.py checks it); new code imports the new ones.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys

MOVED = {
    "analysis.api": "replay.cli.api",
    "analysis.batch_tables": "analysis.tables.batch",
    "analysis.compare": "analysis.compare.configs",
    "analysis.compare_batch": "analysis.compare.batch",
    "analysis.costmodel": "analysis.cost.model",
    "analysis.costsource": "analysis.cost.source",
    "analysis.dask_tables": "analysis.tables.dask_tables",
    "analysis.definitions": "analysis.tables.definitions",
    "analysis.example_round": "analysis.report.example_round",
    "analysis.gamma_strategies": "analysis.compare.gamma_strategies",
    "analysis.intervals": "analysis.tables.intervals",
    "analysis.metrics": "analysis.tables.metrics",
    "analysis.plots": "analysis.report.plots",
    "analysis.recommend": "analysis.shapes.recommend",
    "analysis.recommend_render": "analysis.shapes.recommend_render",
    "analysis.report": "analysis.report.html",
    "analysis.runs": "analysis.tables.runs",
    "analysis.shape_counts": "analysis.shapes.counts",
    "analysis.shape_dumps": "analysis.shapes.dumps",
    "analysis.shape_model": "analysis.shapes.model",
    "analysis.shape_paths": "analysis.shapes.paths",
    "analysis.shape_search": "analysis.shapes.search",
    "analysis.shape_stats": "analysis.shapes.stats",
    "analysis.speedpredict": "analysis.shapes.speedpredict",
    "analysis.subtree": "analysis.compare.subtree",
    "analysis.subtree_batch": "analysis.compare.subtree_batch",
    "analysis.sweep_plots": "analysis.report.sweep_plots",
    "analysis.tables": "analysis.tables.build",
    "analysis.timings": "analysis.cost.timings",
    "analysis.treeplot": "analysis.report.treeplot",
    "replay.acceptance": "replay.core.acceptance",
    "replay.atomic": "replay.util.atomic",
    "replay.batch": "replay.engine.batch",
    "replay.batch.codes": "replay.engine.batch.codes",
    "replay.batch.driver": "replay.engine.batch.driver",
    "replay.batch.frames": "replay.engine.batch.frames",
    "replay.batch.kernel": "replay.engine.batch.kernel",
    "replay.batch.result": "replay.engine.batch.result",
    "replay.batch.shapes": "replay.engine.batch.shapes",
    "replay.batch_synth": "replay.testing.batch_synth",
    "replay.bounded": "replay.util.bounded",
    "replay.config": "replay.core.config",
    "replay.config_grammar": "replay.core.config_grammar",
    "replay.dumpwrite": "replay.io.dumpwrite",
    "replay.errors": "replay.util.errors",
    "replay.fastread": "replay.io.fastread",
    "replay.grouping": "replay.io.grouping",
    "replay.headline": "replay.core.headline",
    "replay.live.cluster": "replay.live.sweep.cluster",
    "replay.live.commit": "replay.live.sweep.commit",
    "replay.live.gguf_load": "replay.live.models.gguf_load",
    "replay.live.grid": "replay.live.sweep.grid",
    "replay.live.model_cache": "replay.live.models.cache",
    "replay.live.model_catalogue": "replay.live.models.catalogue",
    "replay.live.model_download": "replay.live.models.download",
    "replay.live.model_progress": "replay.live.models.progress",
    "replay.live.models": "replay.live.models.load",
    "replay.live.names": "replay.live.models.names",
    "replay.live.sweep": "replay.live.sweep.runner",
    "replay.live.sweepdir": "replay.live.sweep.directory",
    "replay.live.tiny": "replay.testing.tiny",
    "replay.live.tokenizer_check": "replay.live.models.tokenizer_check",
    "replay.manifest": "replay.io.manifest",
    "replay.matrix_io": "replay.io.formats.matrix_io",
    "replay.npyfile": "replay.io.formats.npyfile",
    "replay.packed": "replay.io.packed.pack",
    "replay.packed_blocks": "replay.io.packed.blocks",
    "replay.packed_format": "replay.io.packed.format",
    "replay.packed_meta": "replay.io.packed.meta",
    "replay.packed_read": "replay.io.packed.read",
    "replay.packed_write": "replay.io.packed.write",
    "replay.parallel": "replay.util.parallel",
    "replay.pathcheck": "replay.util.pathcheck",
    "replay.progress": "replay.util.progress",
    "replay.ptfile": "replay.io.formats.ptfile",
    "replay.rebuild": "replay.engine.rebuild",
    "replay.records": "replay.core.records",
    "replay.render": "replay.engine.render",
    "replay.replayer": "replay.engine.replayer",
    "replay.roundbatch": "replay.io.roundbatch",
    "replay.rounds": "replay.io.rounds",
    "replay.runs": "replay.engine.runs",
    "replay.selection": "replay.core.selection",
    "replay.sources": "replay.io.sources",
    "replay.synth": "replay.testing.synth",
    "replay.textbatch": "replay.io.formats.textbatch",
    "replay.tree": "replay.core.tree",
    "replay.version": "replay.util.version",
    "replay.vocab": "replay.core.vocab",
}
PUBLIC = frozenset(
    {
        "analysis.api",
        "analysis.batch_tables",
        "analysis.compare_batch",
        "analysis.costsource",
        "analysis.example_round",
        "analysis.metrics",
        "analysis.plots",
        "analysis.runs",
        "analysis.timings",
        "analysis.treeplot",
        "replay.packed",
        "replay.replayer",
    }
)
FORWARD = {
    "analysis.compare": "analysis.compare.configs",
    "analysis.tables": "analysis.tables.build",
}


class _OldPaths(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Consulted after the real finders, so only for a name no file answers any more."""

    def find_spec(self, fullname, path=None, target=None):
        new = MOVED.get(fullname)
        if new is None:
            return None
        if fullname not in PUBLIC:
            raise ModuleNotFoundError(
                f"No module named {fullname!r}: it is {new} since the folder move (issue 21)", name=fullname
            )
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        # The import statement takes what sys.modules holds once this returns: the real module.
        sys.modules[module.__name__] = importlib.import_module(MOVED[module.__name__])


def install() -> None:
    """Serve the old paths (replay/__init__.py and analysis/__init__.py call this): right after the
    finder of files on sys.path, so that the checkout's own files win, and before any other finder
    (an editable install of another checkout would otherwise serve its old files)."""
    if any(isinstance(f, _OldPaths) for f in sys.meta_path):
        return
    after = [i for i, f in enumerate(sys.meta_path) if f is importlib.machinery.PathFinder]
    sys.meta_path.insert(after[0] + 1 if after else len(sys.meta_path), _OldPaths())


def forward(package: str):
    """``__getattr__`` for a package that replaced a module of the same name: that module's public
    names, found in its new home, unless a submodule of the package has the name."""
    home = FORWARD[package]

    def __getattr__(name: str):
        if not name.startswith("_") and importlib.util.find_spec(f"{package}.{name}") is None:
            module = importlib.import_module(home)
            if hasattr(module, name):
                return getattr(module, name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
