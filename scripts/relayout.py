#!/usr/bin/env python3
"""Issue 21, item 1: move every module into the folder of its layer, in one mechanical step.

    python scripts/relayout.py --dry-run    # the plan: the tree after the move, what stays, what is new
    python scripts/relayout.py --commit     # do it on a clean checkout: two commits, the move then ruff
    python scripts/relayout.py              # the same, uncommitted (review with git status / git diff)

Everything follows from the tables below (MOVES, STAYS, SPLITS, FOLDERS), not from a list of
places, so a tree with more commits than the one this was written on moves the same way:

1. ``git mv`` every module named in MOVES (a package key moves the whole package, modules added
   since included); SPLITS cuts one module in two by its top-level names. A module in neither
   MOVES nor STAYS stays where it is and is listed: add it to MOVES, reset, and run again.
2. Rewrites every mention of a moved module in the tracked text files (replay/, analysis/, tests/,
   bench/, scripts/, docs/, README.md, pyproject.toml, .ci/): import statements read with ``ast``
   (relative ones resolved from the file's old place, written relative only within one package,
   absolute otherwise; names that now live in different modules split into one statement each),
   dotted names anywhere (``replay.x.attr`` in monkeypatch targets, prose, strings, ``python -m``),
   ``from replay import x`` in prose, paths (``replay/x.py``, ``replay/batch/``), and
   ``Path(__file__).parent`` chains of files that move deeper.
3. Writes each new folder's ``__init__.py`` (its docstring says what lives there), installs
   scripts/relayout_files/ (tests/test_layers.py: a map from folder to layer; tests/test_old_paths.py;
   the head of docs/architecture.md and the README's Layout section, which draw the folders),
   applies PATCHES (.ci/run's ruff step, a few prose fixes), and writes replay/util/old_paths.py:
   where each module was, and the old import paths users' code has that keep working (the modules
   docs/api.md named before the move, the notebook API ``analysis.api`` among them).
4. Runs ``ruff check --fix`` and ``ruff format`` with pyproject.toml's configuration, and checks
   that both pass.
5. Prints a summary: what moved, what stayed, and what to look at by hand.

It refuses a dirty tree (commit or stash first) and a tree it has already moved. It takes seconds;
then run tests/test_layers.py, tests/test_old_paths.py, tests/test_docs_paths.py and the suite, and
scripts/check_outputs_identical.py before and after (``--diff``).
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FILES = Path(__file__).with_name("relayout_files")
PACKAGES = ("replay", "analysis")

# ---------------------------------------------------------------------------------------------
# The mapping: old dotted module -> new dotted module. A key that is a package moves the package
# and every module under it (today's and any added later).
MOVES: dict[str, str] = {
    # util: plumbing that knows nothing of speculative decoding; imports nothing of the project
    "replay.errors": "replay.util.errors",
    "replay.atomic": "replay.util.atomic",
    "replay.bounded": "replay.util.bounded",
    "replay.parallel": "replay.util.parallel",
    "replay.pathcheck": "replay.util.pathcheck",
    "replay.progress": "replay.util.progress",
    "replay.version": "replay.util.version",
    # core: the words and rules of the domain
    "replay.vocab": "replay.core.vocab",
    "replay.headline": "replay.core.headline",
    "replay.tree": "replay.core.tree",
    "replay.selection": "replay.core.selection",
    "replay.acceptance": "replay.core.acceptance",
    "replay.config": "replay.core.config",
    "replay.config_grammar": "replay.core.config_grammar",
    "replay.records": "replay.core.records",
    # io: one way in (and out) for rounds
    "replay.grouping": "replay.io.grouping",
    "replay.rounds": "replay.io.rounds",
    "replay.roundbatch": "replay.io.roundbatch",
    "replay.manifest": "replay.io.manifest",
    "replay.sources": "replay.io.sources",
    "replay.dumpwrite": "replay.io.dumpwrite",
    "replay.fastread": "replay.io.fastread",  # a whole directory on every core, not one file's encoding
    "replay.npyfile": "replay.io.formats.npyfile",
    "replay.ptfile": "replay.io.formats.ptfile",
    "replay.matrix_io": "replay.io.formats.matrix_io",
    "replay.textbatch": "replay.io.formats.textbatch",
    "replay.packed": "replay.io.packed.pack",
    "replay.packed_format": "replay.io.packed.format",
    "replay.packed_meta": "replay.io.packed.meta",
    "replay.packed_blocks": "replay.io.packed.blocks",
    "replay.packed_write": "replay.io.packed.write",
    "replay.packed_read": "replay.io.packed.read",
    # engine: replaying rounds, the scalar reference and the batch kernel side by side
    "replay.rebuild": "replay.engine.rebuild",
    "replay.replayer": "replay.engine.replayer",
    "replay.runs": "replay.engine.runs",
    "replay.render": "replay.engine.render",
    "replay.batch": "replay.engine.batch",  # the package, as it is
    # live: model files and sweeps get their own rooms; the decoding loop stays at the top
    "replay.live.models": "replay.live.models.load",
    "replay.live.model_catalogue": "replay.live.models.catalogue",
    "replay.live.model_cache": "replay.live.models.cache",
    "replay.live.model_download": "replay.live.models.download",
    "replay.live.model_progress": "replay.live.models.progress",
    "replay.live.names": "replay.live.models.names",
    "replay.live.gguf_load": "replay.live.models.gguf_load",
    "replay.live.tokenizer_check": "replay.live.models.tokenizer_check",
    "replay.live.sweep": "replay.live.sweep.runner",
    "replay.live.sweepdir": "replay.live.sweep.directory",
    "replay.live.cluster": "replay.live.sweep.cluster",
    "replay.live.commit": "replay.live.sweep.commit",
    "replay.live.grid": "replay.live.sweep.grid",
    # testing: generators that tests and benches use; no library module imports them
    "replay.synth": "replay.testing.synth",
    "replay.batch_synth": "replay.testing.batch_synth",
    "replay.live.tiny": "replay.testing.tiny",  # its run-time half is split off: SPLITS
    # the notebook API is a front end, like the command
    "analysis.api": "replay.cli.api",
    # analysis: one folder per question
    "analysis.runs": "analysis.tables.runs",
    "analysis.tables": "analysis.tables.build",
    "analysis.batch_tables": "analysis.tables.batch",
    "analysis.dask_tables": "analysis.tables.dask_tables",
    "analysis.definitions": "analysis.tables.definitions",
    "analysis.metrics": "analysis.tables.metrics",
    "analysis.intervals": "analysis.tables.intervals",
    "analysis.costmodel": "analysis.cost.model",
    "analysis.costsource": "analysis.cost.source",
    "analysis.timings": "analysis.cost.timings",
    "analysis.compare": "analysis.compare.configs",
    "analysis.compare_batch": "analysis.compare.batch",
    "analysis.subtree": "analysis.compare.subtree",
    "analysis.subtree_batch": "analysis.compare.subtree_batch",
    "analysis.gamma_strategies": "analysis.compare.gamma_strategies",
    "analysis.shape_counts": "analysis.shapes.counts",
    "analysis.shape_model": "analysis.shapes.model",
    "analysis.shape_stats": "analysis.shapes.stats",
    "analysis.shape_dumps": "analysis.shapes.dumps",
    "analysis.shape_paths": "analysis.shapes.paths",
    "analysis.shape_search": "analysis.shapes.search",
    "analysis.recommend": "analysis.shapes.recommend",
    "analysis.recommend_render": "analysis.shapes.recommend_render",
    "analysis.speedpredict": "analysis.shapes.speedpredict",
    "analysis.report": "analysis.report.html",
    "analysis.plots": "analysis.report.plots",
    "analysis.treeplot": "analysis.report.treeplot",
    "analysis.sweep_plots": "analysis.report.sweep_plots",
    "analysis.example_round": "analysis.report.example_round",
}

# Modules that stay where they are (a package key: everything under it that MOVES does not name).
# A module in neither table is new since this script was written: it stays and is listed.
STAYS = {
    "replay",
    "analysis",
    "replay.cli",
    "replay.cli.__main__",
    "replay.cli.parser",
    "replay.cli.options",
    "replay.cli.cmd_replay",
    "replay.cli.cmd_scale",
    "replay.cli.cmd_analysis",
    "replay.cli.cmd_compare",
    "replay.cli.cmd_recommend",
    "replay.cli.cmd_live",
    "replay.cli.cmd_sweep",
    "replay.cli.cmd_models",
    "replay.cli.live_auto",
    "replay.live",
    *(
        f"replay.live.{m}"
        for m in "checks clock compiled costs draft dumps errors extras forward generate kvcache prompts "
        "report run sampling scores stdprompts timing verify".split()
    ),
}


@dataclass(frozen=True)
class Split:
    """A module cut in two by its top-level names: ``names`` (and what they need) go to ``to``."""

    to: str
    names: frozenset[str]
    docstring: str  # of the new module ``to``
    rest_docstring: str  # of what stays, at the module's MOVES place


SPLITS = {
    # cost-curve --shape builds real-shaped random models at run time: that half is library code;
    # the tiny models, the noisy and damped drafts and their writers are test and bench fixtures.
    "replay.live.tiny": Split(
        to="replay.live.models.random_weights",
        names=frozenset({"QWEN25_05B", "QWEN25_15B", "REAL_SHAPES", "_classes", "build_model"}),
        docstring=(
            "Models with random weights built from an architecture config: real-shaped Qwen2.5 ones for\n"
            "``cost-curve --shape`` on a GPU (real weights never reach the test machines), and the builder the\n"
            "test models of replay.testing.tiny use.\n"
        ),
        rest_docstring=(
            "Tiny random-weight models for tests and benches (built by replay.live.models.random_weights),\n"
            "drafts made from them (noisy, damped, truncated), writers that save them the way ``load_model``\n"
            "reads them (Hugging Face directory, GGUF file) and a word-level test tokenizer.\n"
        ),
    ),
}

# Every folder the move creates, with the docstring of its __init__.py: what a newcomer finds there.
FOLDERS = {
    "replay/util": (
        "Plumbing every layer uses and that knows nothing of speculative decoding: errors that tell\n"
        "the user what to fix, atomic writes, bounded reads of untrusted files, the one parallel map,\n"
        "progress bars, path checks, the version, and where each module was before the folder move."
    ),
    "replay/core": (
        "The words and rules of the domain, each written once: the vocabulary, draft trees, tree\n"
        "configs and their grammar, which nodes a draft step expands, greedy acceptance, the per-round\n"
        "record. No dump formats, no kernels over many rounds."
    ),
    "replay/io": (
        "One way in for any source of rounds, and the way out: dump directories grouped into rounds\n"
        "(grouping, rounds, manifest, fastread), RoundBatch stacks, writing dumps; formats/ reads one\n"
        "file in any encoding, packed/ is the packed run format."
    ),
    "replay/io/formats": (
        "One dump matrix from one file, in any encoding: .npy/.npz, .pt without torch, text (one file at\n"
        "a time in matrix_io, many at once in textbatch)."
    ),
    "replay/io/packed": (
        "Packed runs: a whole dump directory as a few column-major arrays per matrix signature\n"
        "(docs/packed-format.md). ``pack`` packs and opens them; format, meta, blocks, write and read are\n"
        "the layout, packed.json, checked blocks, the writer and the reader."
    ),
    "replay/engine": (
        "Replaying rounds: rebuild each round's tree and walk acceptance. ``replayer`` (with ``rebuild``) is\n"
        "the scalar reference, one round at a time; ``batch/`` is the vectorised kernel with the same\n"
        "results as arrays; ``runs`` opens either source in batches; ``render`` prints a replay as text."
    ),
    "replay/live/models": (
        "The models of the live harness: loading a Hugging Face directory or a GGUF file, the catalogue\n"
        "of official pairs, the model cache and its fetch, model names, tokenizer checks, random-weight\n"
        "models of a real shape. Importing this package (not its ``load`` module) needs no torch."
    ),
    "replay/live/sweep": (
        "Sweeps: many tree configs live on the same prompts and models, on this machine (``runner``) or\n"
        "on a Dask cluster (``cluster``); the sweep directory, atomic commits of results, config grids."
    ),
    "replay/testing": (
        "Generators that tests and benches use: synthetic dumps from a known acceptance model (synth),\n"
        "the same as arrays (batch_synth), tiny random-weight models (tiny). No library module imports\n"
        "this package (tests/test_layers.py)."
    ),
    "analysis/tables": (
        "The tables every number comes from: labelled runs, one row per round and per tree node (built\n"
        "round by round or from the batch arrays, with Dask over many runs), every metric's definition\n"
        "and the metric tables."
    ),
    "analysis/cost": (
        "What speculation costs and what a run measured: the cost model, which cost model a run's\n"
        "speedups use (and the words that say so), and the timings a dump carries."
    ),
    "analysis/compare": (
        "Other tree configs replayed exactly on a recorded run: the comparison (round by round and from\n"
        "the batch arrays), the sub-tree replay it rests on, dynamic-gamma strategies."
    ),
    "analysis/shapes": (
        "Tree-shape search: the acceptance model estimated from dumps, the exact search over shapes,\n"
        "``recommend`` and its output, and predicted speedups for ``generate --config auto``."
    ),
    "analysis/report": (
        "What a person looks at: acceptance plots, tree drawings, sweep plots, the example round, and the\n"
        "self-contained HTML report."
    ),
}

# Files installed as they are (source in scripts/relayout_files/ -> place in the tree).
INSTALL = {
    "test_layers.py": "tests/test_layers.py",
    "test_old_paths.py": "tests/test_old_paths.py",
}

# Sections replaced by a file of scripts/relayout_files/: (path, first line, the line that ends it
# or None for the next "## " heading, file, sha256 of the section the file was written against: when
# the section has changed since, the summary says so, to carry the change over by hand). The rest
# of the page is rewritten like any text.
SECTIONS = [
    (
        "docs/architecture.md",
        "# Architecture",
        "## Where each rule lives",
        "architecture_head.md",
        "9eeeebe6001da5a4938c3c07106e90ec88946005f37143e9e4dd6d5edfd33ddf",
    ),
    (
        "README.md",
        "## Layout",
        None,
        "readme_layout.md",
        "7ed13a9d0cef8d079da72c0d5f7fee7baee3411a8353b6e0a50d6a783a5bdab5",
    ),
]

# Edits no mapping can make: (path, old text, new text, why). Each is reported if its old text is
# not found, so that the lead makes it by hand.
PATCHES = [
    (
        ".ci/run",
        "# The real-model tests (marked real_models)",
        "# Formatting and lint (pyproject.toml's [tool.ruff]): fail on any violation, before the model\n"
        "# fetch and the tests.\n"
        ".venv/bin/ruff format --check .\n"
        ".venv/bin/ruff check .\n"
        "\n"
        "# The real-model tests (marked real_models)",
        "CI runs ruff (issue 21, item 5) once the tree is formatted",
    ),
    (
        "README.md",
        "the layers (core ← reading ← replay ← analysis ←\n  CLI; live on core and reading)",
        "the layers, one folder each (util ← core ← reading ←\n  replay ← analysis ← CLI; live on util, core and reading)",
        "the README's list of pages names the layers",
    ),
    (
        "docs/models.md",
        "code in `replay/live/`: `model_catalogue.py`\nthe known files and their wheels, `model_cache.py` the cache layout "
        "and sidecars,\n`model_download.py` the steps below, `model_progress.py` the progress/log callbacks,\n",
        "code in `replay/live/models/`: `catalogue.py`\nthe known files and their wheels, `cache.py` the cache layout "
        "and sidecars,\n`download.py` the steps below, `progress.py` the progress/log callbacks,\n",
        "module names without their folder",
    ),
    (
        "replay/live/models/names.py",
        "(see model_catalogue.MODELS)",
        "(see replay.live.models.catalogue.MODELS)",
        "a module name without its folder",
    ),
    (
        "replay/live/models/gguf_load.py",
        "(see model_catalogue.MODELS)",
        "(see replay.live.models.catalogue.MODELS)",
        "a module name without its folder",
    ),
    (
        "replay/live/sweep/runner.py",
        "Directory layout: ``sweepdir.py``.",
        "Directory layout: ``directory.py``.",
        "a module name without its folder",
    ),
    (
        "bench/recommend_speed.py",
        '            module, names = line[len("from "):].split(" import ", 1)\n',
        '            module, names = line[len("from "):].split(" import ", 1)\n'
        "            module = MOVED.get(module, module)  # the baseline predates the folder move (issue 21)\n"
        '            line = f"from {module} import {names}"\n',
        "the baseline's analysis modules import replay modules by their old paths",
    ),
    (
        "bench/recommend_speed.py",
        "import numpy as np  # noqa: E402\n",
        "import numpy as np  # noqa: E402\n\nfrom replay.util.old_paths import MOVED  # noqa: E402\n",
        "the baseline's analysis modules import replay modules by their old paths",
    ),
]

# Text files rewritten (tracked files only): these suffixes, anywhere but EXCLUDE.
TEXT_SUFFIXES = {".py", ".md", ".toml", ".sh", ".cfg", ".txt", ".yaml", ".yml", ".ini"}
TEXT_NAMES = {".ci/run"}
EXCLUDE = ("sample_dumps/", "bench/results/", "scripts/relayout.py", "scripts/relayout_files/")


# ---------------------------------------------------------------------------------------------
class Refused(Exception):
    pass


def git(*args: str, capture: bool = True) -> str:
    proc = subprocess.run(["git", "-C", str(REPO), *args], capture_output=capture, text=True)
    if proc.returncode != 0:
        raise Refused(f"git {' '.join(args)}: {(proc.stderr or '').strip()}")
    return proc.stdout if capture else ""


def module_name(path: str) -> tuple[str, bool]:
    """``replay/io/x.py`` -> (``replay.io.x``, False); ``replay/io/__init__.py`` -> (``replay.io``, True)."""
    parts = Path(path).with_suffix("").parts
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def module_path(name: str, is_pkg: bool) -> str:
    base = name.replace(".", "/")
    return f"{base}/__init__.py" if is_pkg else f"{base}.py"


def covered(name: str, table) -> str | None:
    """The key of ``table`` that names ``name`` itself or a package above it (the longest)."""
    parts = name.split(".")
    for k in range(len(parts), 0, -1):
        key = ".".join(parts[:k])
        if key in table:
            return key
    return None


@dataclass
class Plan:
    files: list[str]  # tracked files
    modules: dict[str, tuple[str, bool]] = field(default_factory=dict)  # old name -> (old path, is_pkg)
    modmap: dict[str, str] = field(default_factory=dict)  # every old module -> its new name
    moves: dict[str, str] = field(default_factory=dict)  # old path -> new path (moved files only)
    symbols: dict[str, dict[str, str]] = field(default_factory=dict)  # split module -> name -> module
    unmapped: list[str] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)  # MOVES keys with no module in this tree
    new_inits: dict[str, str] = field(default_factory=dict)  # path -> docstring
    packages_new: set[str] = field(default_factory=set)  # every package name after the move
    public: list[str] = field(default_factory=list)  # old paths users import (docs/api.md)
    notes: list[str] = field(default_factory=list)  # for the summary: look at these by hand
    rewritten: dict[str, int] = field(default_factory=dict)  # file -> mentions rewritten
    originals: dict[str, str] = field(default_factory=dict)  # text before the move, of SECTIONS' files


def make_plan() -> Plan:
    files = git("ls-files").splitlines()
    plan = Plan(files=files)
    for f in files:
        if f.endswith(".py") and f.split("/")[0] in PACKAGES:
            name, is_pkg = module_name(f)
            plan.modules[name] = (f, is_pkg)
    for name, (path, is_pkg) in sorted(plan.modules.items()):
        key = covered(name, MOVES)
        if key is not None:
            new = MOVES[key] + name[len(key) :]
        else:
            new = name
            if name not in STAYS:
                plan.unmapped.append(name)
        plan.modmap[name] = new
        if new != name:
            plan.moves[path] = module_path(new, is_pkg)
    plan.gone = sorted(k for k in MOVES if not any(n == k or n.startswith(k + ".") for n in plan.modules))
    for old, split in SPLITS.items():
        if old in plan.modules:
            plan.symbols[old] = {n: split.to for n in split.names}
            plan.modmap[split.to] = split.to  # a new module: known to the rewrite as itself
    # Collisions: two modules to one place, or onto a file that stays.
    targets: dict[str, str] = {}
    staying = {p for p in files if p not in plan.moves}
    for old_path, new_path in plan.moves.items():
        if new_path in targets:
            raise Refused(f"{old_path} and {targets[new_path]} would both move to {new_path}: fix MOVES")
        if new_path in staying:
            raise Refused(f"{old_path} would move onto {new_path}, which exists and stays: fix MOVES")
        targets[new_path] = old_path
    # Every package after the move, and the folders that need a new __init__.py.
    after = {(plan.modmap[n], is_pkg) for n, (_, is_pkg) in plan.modules.items()}
    after |= {(s.to, False) for o, s in SPLITS.items() if o in plan.modules}
    have_init = {n for n, is_pkg in after if is_pkg}
    for name, _ in after:
        parts = name.split(".")
        for k in range(1, len(parts)):
            plan.packages_new.add(".".join(parts[:k]))
    plan.packages_new |= have_init
    for pkg in sorted(plan.packages_new - have_init):
        folder = pkg.replace(".", "/")
        if folder not in FOLDERS:
            raise Refused(f"folder {folder}/ has no docstring: add it to FOLDERS in scripts/relayout.py")
        plan.new_inits[f"{folder}/__init__.py"] = FOLDERS[folder]
    for folder in FOLDERS:
        if f"{folder}/__init__.py" not in plan.new_inits:
            plan.notes.append(f"FOLDERS names {folder}/, which no module moves into: nothing written for it")
    plan.public = public_paths(plan)
    for path, *_ in SECTIONS:
        if (REPO / path).exists():
            plan.originals[path] = (REPO / path).read_text(encoding="utf-8")
    return plan


def public_paths(plan: Plan) -> list[str]:
    """The old module paths docs/api.md names (the names users import today), and analysis.api."""
    found = {"analysis.api"}
    page = REPO / "docs" / "api.md"
    text = page.read_text(encoding="utf-8") if page.exists() else ""
    for m in re.finditer(r"(?<![\w.])((?:replay|analysis)(?:\.\w+)+)", text):
        key = covered(m.group(1), plan.modules)
        if key is not None and "." in key:
            found.add(key)
    for m in re.finditer(r"from ((?:replay|analysis)(?:\.\w+)*) import ([\w, ]+)", text):
        for name in (n.strip() for n in m.group(2).split(",")):
            full = f"{m.group(1)}.{name}"
            key = covered(full, plan.modules)
            if key is not None and "." in key:
                found.add(key)
    return sorted(n for n in found if n in plan.modules and plan.modmap[n] != n)


# ---------------------------------------------------------------------------------------------
# Rewriting mentions.
class Rewriter:
    def __init__(self, plan: Plan):
        self.plan = plan
        self.modmap = plan.modmap
        # Old packages and modules, for path mentions: dotted -> (new dotted, is_pkg)
        self.kinds = {n: is_pkg for n, (_, is_pkg) in plan.modules.items()}
        self.count = 0
        self.warnings: list[str] = []

    # --- names --------------------------------------------------------------------------------
    def new_dotted(self, name: str) -> str:
        """``replay.packed_read.PackedRun`` -> ``replay.io.packed.read.PackedRun``; unknown: as it is."""
        key = covered(name, self.modmap)
        if key is None:
            return name
        rest = name[len(key) :].lstrip(".")
        new = self.modmap[key]
        if key in self.plan.symbols and rest:
            new = self.plan.symbols[key].get(rest.split(".")[0], new)
        return new + ("." + rest if rest else "")

    def new_path(self, parts: list[str], suffix: str) -> str | None:
        dotted = ".".join(parts)
        if suffix == ".py":
            if parts[-1] == "__init__":
                pkg = ".".join(parts[:-1])
                if self.kinds.get(pkg) is True:
                    return module_path(self.modmap[pkg], True)
                return None
            if self.kinds.get(dotted) is False:
                return module_path(self.modmap[dotted], False)
            return None
        if self.kinds.get(dotted) is True:  # a folder
            return self.modmap[dotted].replace(".", "/") + suffix
        if self.kinds.get(dotted) is False and suffix == "":  # a module named without .py
            return self.modmap[dotted].replace(".", "/")
        return None

    # --- import statements -------------------------------------------------------------------
    def resolve_from(self, node: ast.ImportFrom, importer: tuple[str, bool] | None) -> str | None:
        if not node.level:
            return node.module
        if importer is None:
            return None
        name, is_pkg = importer
        pkg = name if is_pkg else name.rpartition(".")[0]
        parts = pkg.split(".")
        if node.level > 1:
            parts = parts[: len(parts) - (node.level - 1)]
        return ".".join(parts + ([node.module] if node.module else []))

    def express(self, module: str, relative: bool, importer_new: tuple[str, bool] | None) -> str:
        """How a file at its new place names ``module``: ``.x`` within its own package, else absolute."""
        if relative and importer_new is not None:
            name, is_pkg = importer_new
            pkg = name if is_pkg else name.rpartition(".")[0]
            if module == pkg:
                return "."
            if module.startswith(pkg + "."):
                return "." + module[len(pkg) + 1 :]
        return module

    def import_from(self, node, segment, importer_old, importer_new) -> str | None:
        base = self.resolve_from(node, importer_old)
        if base is None or base.split(".")[0] not in PACKAGES:
            return None
        relative = node.level > 0
        groups: dict[str, list[str]] = {}
        changed_names = False
        for alias in node.names:
            full = f"{base}.{alias.name}"
            if alias.name != "*" and full in self.modmap and self.kinds.get(full) is not None:
                new_parent, _, leaf = self.modmap[full].rpartition(".")
                asname = alias.asname or (alias.name if leaf != alias.name else None)
                changed_names |= leaf != alias.name
                text = leaf + (f" as {asname}" if asname else "")
                groups.setdefault(new_parent, []).append(text)
            else:
                if base in self.plan.symbols and alias.name in self.plan.symbols[base]:
                    new_base = self.plan.symbols[base][alias.name]
                else:
                    new_base = self.new_dotted(base)
                text = alias.name + (f" as {alias.asname}" if alias.asname else "")
                groups.setdefault(new_base, []).append(text)
        old_text = "." * node.level + (node.module or "")
        exprs = {new_base: self.express(new_base, relative, importer_new) for new_base in groups}
        if len(groups) == 1 and not changed_names:
            (expr,) = exprs.values()
            if expr == old_text:
                return None
            m = re.match(r"(from\s+)(\.*[\w.]*)(\s+import\b)", segment)
            if not m or m.group(2) != old_text:
                self.warnings.append(f"unexpected import form, left alone: {segment[:80]!r}")
                return None
            return segment[: m.start(2)] + expr + segment[m.end(2) :]
        # Names go to several modules (or submodules were renamed): one statement per module.
        if "#" in segment:
            self.warnings.append(f"comment inside a split import, check it: {segment[:80]!r}")
        lines = [f"from {exprs[b]} import {', '.join(names)}" for b, names in groups.items()]
        return lines

    def import_plain(self, segment: str) -> str | None:
        new = self.sub_dotted_only(segment)
        return None if new == segment else new

    # --- text -------------------------------------------------------------------------------------
    TOKEN = re.compile(
        r"(?P<from>\bfrom (?P<fmod>(?:replay|analysis)(?:\.\w+)*) import (?P<fnames>\w+(?:, \w+)*))"
        r"|(?P<dotted>(?<![\w.])(?:replay|analysis)(?:\.[A-Za-z_]\w*)+)"
        r"|(?P<path>(?<![\w.~-])(?:replay|analysis)(?:/[A-Za-z_]\w*)+)(?P<suffix>\.py\b|/)?"
    )

    def sub_text(self, text: str) -> str:
        def one(m: re.Match) -> str:
            if m.group("from"):
                stmt = ast.parse(m.group("from")).body[0]
                out = self.import_from(stmt, m.group("from"), None, None)
                if out is None:
                    return m.group(0)
                self.count += 1
                return out if isinstance(out, str) else "; ".join(out)
            if m.group("dotted"):
                new = self.new_dotted(m.group("dotted"))
                self.count += new != m.group("dotted")
                return new
            parts = m.group("path").split("/")
            suffix = m.group("suffix") or ""
            new = self.new_path(parts, suffix)
            if new is None:
                return m.group(0)
            self.count += new != m.group(0)
            return new

        return self.TOKEN.sub(one, text)

    def sub_dotted_only(self, text: str) -> str:
        def one(m: re.Match) -> str:
            if not m.group("dotted"):
                return m.group(0)
            new = self.new_dotted(m.group("dotted"))
            self.count += new != m.group("dotted")
            return new

        return self.TOKEN.sub(one, text)

    def python(self, src: str, importer_old=None, importer_new=None, where: str = "") -> str:
        try:
            tree = ast.parse(src)
        except SyntaxError as exc:
            self.warnings.append(f"{where}: not Python ({exc.msg}, line {exc.lineno}); rewritten as text")
            return self.sub_text(src)
        starts = [0]
        for line in src.split("\n"):  # ast counts lines by newline only (not by form feed etc.)
            starts.append(starts[-1] + len(line) + 1)

        def offset(line: int, col: int) -> int:  # ast columns count UTF-8 bytes
            text = src[starts[line - 1] : starts[line]] if line <= len(starts) - 1 else ""
            return starts[line - 1] + len(text.encode("utf-8")[:col].decode("utf-8", "replace"))

        edits = []
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            a, b = offset(node.lineno, node.col_offset), offset(node.end_lineno, node.end_col_offset)
            segment = src[a:b]
            if isinstance(node, ast.Import):
                new = self.import_plain(segment)
            else:
                new = self.import_from(node, segment, importer_old, importer_new)
            if isinstance(new, list):
                line_start = src.rfind("\n", 0, a) + 1
                indent = src[line_start:a]
                line_end = src.find("\n", b)
                trailing = src[b : len(src) if line_end < 0 else line_end]
                noqa = re.search(r"# noqa\b[^#]*", trailing)
                if indent.strip():
                    self.warnings.append(f"{where}:{node.lineno}: import not at a line start, left alone")
                    new = None
                else:
                    # a trailing noqa for E402 covered the one statement: it covers each of them
                    tag = f"  {noqa.group(0).rstrip()}" if noqa else ""
                    new = ("\n" + indent).join([line + tag for line in new[:-1]] + new[-1:])
            edits.append((a, b, new))
        edits.sort()
        out, pos = [], 0
        for a, b, new in edits:
            out.append(self.sub_text(src[pos:a]))
            if new is None:
                out.append(src[a:b])
            else:
                self.count += 1
                out.append(new)
            pos = b
        out.append(self.sub_text(src[pos:]))
        return "".join(out)

    def markdown(self, text: str, where: str) -> str:
        parts = re.split(r"(```python\n.*?```)", text, flags=re.S)
        out = []
        for part in parts:
            if part.startswith("```python\n"):
                body = part[len("```python\n") : -3]
                out.append("```python\n" + self.python(body, where=where) + "```")
            else:
                out.append(self.sub_text(part))
        return "".join(out)


def split_module(src: str, split: Split) -> tuple[str, str, list[str]]:
    """(the part for ``split.to``, the rest, notes): top-level statements by name; imports go to both
    (ruff removes the unused ones); the rest imports from the new module what it uses of it."""
    tree = ast.parse(src)
    lines = src.splitlines(keepends=True)
    notes = []
    body = tree.body
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
        body = body[1:]  # the docstring: each part gets its own
    imports, lib, rest = [], [], []
    prev_end = body[0].lineno - 1 if body else 0
    for node in body:
        # what precedes a statement (blank lines, its comments) goes with it
        text = "".join(lines[prev_end : node.end_lineno])
        prev_end = node.end_lineno
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            imports.append(text.lstrip("\n"))
            continue
        names = set()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
        if names and names <= split.names:
            lib.append(text)
        else:
            if names & split.names:
                notes.append(f"{split.to}: a statement defines {sorted(names)}, only some split off; kept in the rest")
            rest.append(text)
    defined = set()
    for text in lib:
        for node in ast.parse(text).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                defined.add(node.name)
            elif isinstance(node, ast.Assign):
                defined |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    missing = sorted(split.names - defined)
    if missing:
        notes.append(f"{split.to}: names of SPLITS not found in the module: {missing}")
    used = {n.id for text in rest for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Name)}
    needed = sorted(n for n in defined & used if not n.startswith("_"))
    private = sorted(n for n in defined & used if n.startswith("_"))
    if private:
        notes.append(f"{split.to}: the rest uses private names of the split-off part: {private}")
    future = [i for i in imports if "__future__" in i]
    others = [i for i in imports if "__future__" not in i]

    def module(doc: str, parts: list[str], extra: list[str]) -> str:
        top = '"""' + doc + '"""\n\n' + "".join(future) + ("\n" if future else "")
        code = "".join(parts).lstrip("\n")
        return top + "".join(others) + "".join(extra) + "\n\n" + code

    lib_src = module(split.docstring, lib, [])
    # the rest imports from the split-off module through its old name: the rewrite maps it
    extra = [f"from {split.to} import {', '.join(needed + private)}\n"] if needed or private else []
    rest_src = module(split.rest_docstring, rest, extra)
    return lib_src, rest_src, notes


# ---------------------------------------------------------------------------------------------
OLD_PATHS_DOC = '''"""Where each module was before the folder move of issue 21, and the old import paths that still work.

MOVED maps every old dotted path to its new one. The paths in PUBLIC are those users' code imports
(the modules docs/api.md named before the move, the notebook API ``analysis.api`` among them):
importing one gives the module at its new home, the same module object. A package that replaced
a module of the same name (``analysis.tables``) still answers that module's names (``forward``).
Any other old path fails with a line that names the new one. Nothing in this repository imports
an old path (tests/test_layers.py checks it); new code imports the new ones.
"""
'''

OLD_PATHS_IMPORTS = """
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
"""

OLD_PATHS_CODE = '''

class _OldPaths(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Consulted after the real finders, so only for a name no file answers any more."""

    def find_spec(self, fullname, path=None, target=None):
        new = MOVED.get(fullname)
        if new is None:
            return None
        if fullname not in PUBLIC:
            raise ModuleNotFoundError(f"No module named {fullname!r}: it is {new} since the folder move (issue 21)",
                                      name=fullname)
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
'''

INSTALL_HOOK = (
    "# Old import paths (before issue 21's folder move) that users' code imports keep working.\n"
    "from replay.util.old_paths import install as _install_old_paths\n"
    "\n"
    "_install_old_paths()\n"
)

FORWARD_HOOK = (
    "from replay.util.old_paths import forward as _forward\n"
    "\n"
    "__getattr__ = _forward(__name__)  # {old} was one module before issue 21: its names still import from here\n"
)


def after_docstring(src: str, addition: str) -> str:
    """``src`` with ``addition`` after its docstring and ``from __future__`` imports."""
    tree = ast.parse(src)
    end = 0
    for node in tree.body:
        is_doc = (
            isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
        )
        if (is_doc and end == 0) or (isinstance(node, ast.ImportFrom) and node.module == "__future__"):
            end = node.end_lineno
        else:
            break
    lines = src.split("\n")
    head, tail = "\n".join(lines[:end]).rstrip("\n"), "\n".join(lines[end:]).lstrip("\n")
    return head + "\n\n" + addition + ("\n\n" + tail if tail.strip() else "")


def old_paths_source(plan: Plan) -> str:
    moved = {o: n for o, n in sorted(plan.modmap.items()) if o != n and o in plan.modules}
    forward = {p: plan.modmap[p] for p in plan.public if p in plan.packages_new}
    lines = [OLD_PATHS_DOC, "\nfrom __future__ import annotations\n", OLD_PATHS_IMPORTS]
    lines.append("\nMOVED = {\n" + "".join(f"    {o!r}: {n!r},\n" for o, n in moved.items()) + "}\n")
    public = [p for p in plan.public if p not in plan.packages_new]
    lines.append("PUBLIC = frozenset({\n" + "".join(f"    {p!r},\n" for p in public) + "})\n")
    lines.append("FORWARD = {\n" + "".join(f"    {p!r}: {n!r},\n" for p, n in forward.items()) + "}\n")
    lines.append(OLD_PATHS_CODE)
    return "".join(lines)


# ---------------------------------------------------------------------------------------------
def in_scope(path: str) -> bool:
    if path.startswith(EXCLUDE):
        return False
    return Path(path).suffix in TEXT_SUFFIXES or path in TEXT_NAMES


def find_section(text: str, first: str, end: str | None) -> tuple[int, int] | None:
    """Line numbers [a, b) of the section that starts with ``first``."""
    lines = text.splitlines(keepends=True)
    a = next((i for i, line in enumerate(lines) if line.startswith(first)), None)
    if a is None:
        return None
    b = len(lines)
    for i in range(a + 1, len(lines)):
        if (end is not None and lines[i].startswith(end)) or (end is None and lines[i].startswith("## ")):
            b = i
            break
    return a, b


def section_sha(text: str, first: str, end: str | None) -> str | None:
    span = find_section(text, first, end)
    if span is None:
        return None
    return hashlib.sha256("".join(text.splitlines(keepends=True)[span[0] : span[1]]).encode()).hexdigest()


def replace_section(text: str, first: str, end: str | None, new: str) -> tuple[str, bool]:
    span = find_section(text, first, end)
    if span is None:
        return text, False
    lines = text.splitlines(keepends=True)
    a, b = span
    body = new if new.endswith("\n") else new + "\n"
    if b < len(lines) and not body.endswith("\n\n"):
        body += "\n"
    return "".join(lines[:a]) + body + "".join(lines[b:]), True


def find_ruff(given: str | None) -> list[str]:
    if given:
        return [given]
    beside = Path(sys.executable).with_name("ruff")
    if beside.exists():
        return [str(beside)]
    if shutil.which("ruff"):
        return ["ruff"]
    raise Refused("ruff not found: install the dev extra (pip install -e '.[dev]') or pass --ruff PATH")


def run_ruff(ruff: list[str]) -> tuple[bool, str]:
    """Fix, format, and say whether the tree now passes ``ruff format --check`` and ``ruff check``."""

    def call(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*ruff, *args], cwd=REPO, capture_output=True, text=True)

    call("check", "--fix", "--quiet", ".")
    # Dead assignments: the unsafe fix renames them to _name, which is all it does.
    call("check", "--fix", "--unsafe-fixes", "--select", "F841", "--quiet", ".")
    call("format", "--quiet", ".")
    moved = normalise_noqa()
    call("format", "--quiet", ".")
    fmt, chk = call("format", "--check", "."), call("check", ".")
    report = []
    if moved:
        report.append(f"noqa comments moved to the first line of their statement: {', '.join(moved)}")
    ok = fmt.returncode == 0 and chk.returncode == 0
    if not ok:
        report.append("ruff does not pass yet:\n" + (fmt.stdout + fmt.stderr + chk.stdout + chk.stderr).strip())
    return ok, "\n".join(report)


def normalise_noqa() -> list[str]:
    """``ruff format`` leaves a statement's trailing ``# noqa`` on its last line once it wraps it, where
    it no longer covers the first: move it to the end of the statement's first line."""
    touched = []
    for path in git("ls-files", "*.py").splitlines() + [p for p in untracked_py()]:
        full = REPO / path
        if not full.exists() or path.startswith(EXCLUDE):
            continue
        src = full.read_text(encoding="utf-8")
        if "# noqa" not in src:
            continue
        lines = src.splitlines(keepends=True)
        try:
            tree = ast.parse(src)
        except SyntaxError:
            continue
        changed = False
        for node in ast.walk(tree):
            if not isinstance(node, ast.stmt) or node.end_lineno == node.lineno:
                continue
            if isinstance(
                node,
                (
                    ast.FunctionDef,
                    ast.AsyncFunctionDef,
                    ast.ClassDef,
                    ast.If,
                    ast.For,
                    ast.While,
                    ast.With,
                    ast.Try,
                    ast.AsyncFor,
                    ast.AsyncWith,
                ),
            ):
                continue
            last = lines[node.end_lineno - 1]
            m = re.search(r"\s+(# noqa\b.*)$", last.rstrip("\n"))
            if not m or not re.match(r"^\s*[)\]}]", last):
                continue
            first = lines[node.lineno - 1].rstrip("\n")
            if "#" in first:
                continue
            lines[node.lineno - 1] = first + "  " + m.group(1) + "\n"
            lines[node.end_lineno - 1] = last[: m.start()] + "\n"
            changed = True
        if changed:
            full.write_text("".join(lines), encoding="utf-8")
            touched.append(path)
    return touched


def untracked_py() -> list[str]:
    out = git("ls-files", "--others", "--exclude-standard")
    return [p for p in out.splitlines() if p.endswith(".py")]


def tree_picture(plan: Plan) -> str:
    """The folders after the move, each with its modules."""
    by_dir: dict[str, list[str]] = {}
    for name, (_, is_pkg) in plan.modules.items():
        new = plan.modmap[name]
        folder = new if is_pkg else new.rpartition(".")[0]
        if not is_pkg:
            by_dir.setdefault(folder, []).append(new.rpartition(".")[2])
        else:
            by_dir.setdefault(folder, [])
    for old, split in SPLITS.items():
        if old in plan.modules:
            by_dir.setdefault(split.to.rpartition(".")[0], []).append(split.to.rpartition(".")[2])
    for path in plan.new_inits:
        by_dir.setdefault(module_name(path)[0], [])
    by_dir.setdefault("replay.util", []).append("old_paths")
    out = []
    for folder in sorted(by_dir):
        out.append(f"  {folder.replace('.', '/')}/: {' '.join(sorted(by_dir[folder])) or '(folders only)'}")
    return "\n".join(out)


def check_clean() -> None:
    status = git("status", "--porcelain", "--untracked-files=normal")
    if status.strip():
        raise Refused("the working tree is not clean (commit or stash first):\n" + status.rstrip())


def check_not_applied(plan: Plan) -> None:
    if (REPO / "replay" / "util" / "old_paths.py").exists():
        raise Refused("replay/util/old_paths.py exists: this tree has been moved already")
    if not plan.moves:
        raise Refused("no module of MOVES is at its old place: this tree has been moved already")


def bare_mentions(plan: Plan, texts: dict[str, str]) -> list[str]:
    """Old module names that changed their last part and still appear bare (``packed_read``)."""
    renamed = {}
    for old, new in plan.modmap.items():
        ob, nb = old.rpartition(".")[2], new.rpartition(".")[2]
        if ob != nb and ("_" in ob or ob in ("costmodel", "costsource", "sweepdir")):
            renamed[ob] = new
    if not renamed:
        return []
    pat = re.compile(r"(?<![\w./])(" + "|".join(map(re.escape, sorted(renamed, key=len, reverse=True))) + r")(?![\w])")
    out = []
    for path, text in sorted(texts.items()):
        for i, line in enumerate(text.splitlines(), 1):
            if "BASELINE_MODULES =" in line:
                continue  # bench/recommend_speed.py: file names of an old revision, on purpose
            for m in pat.finditer(line):
                # the name as a variable or a parameter is no mention
                if path.endswith(".py") and not re.search(r"(#|\"|'|`).*" + re.escape(m.group(1)), line):
                    continue
                out.append(f"{path}:{i}: {m.group(1)} (now {renamed[m.group(1)]})")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    ap.add_argument("--commit", action="store_true", help="commit the move, then the formatting, as two commits")
    ap.add_argument("--no-ruff", action="store_true", help="move and rewrite only")
    ap.add_argument("--ruff", help="the ruff executable (default: beside this Python, else on PATH)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    try:
        plan = make_plan()
        check_not_applied(plan)
        if not args.dry_run:
            check_clean()
            ruff = None if args.no_ruff else find_ruff(args.ruff)
        print_plan(plan)
        if args.dry_run:
            return 0
        texts, rw = rewrite_all(plan)
        apply(plan, texts)
        notes = list(plan.notes) + rw.warnings
        if args.commit:
            git("add", "-A")
            git(
                "commit",
                "-q",
                "-m",
                "relayout (issue 21): every module in the folder of its layer\n\n"
                "Made by scripts/relayout.py: git mv by its MOVES table, every mention rewritten, folder\n"
                "docstrings, tests/test_layers.py as a map from folder to layer, replay/util/old_paths.py.",
            )
        ruff_ok, ruff_report = (True, "skipped (--no-ruff)") if ruff is None else run_ruff(ruff)
        if args.commit and ruff is not None:
            git("add", "-A")
            git(
                "commit",
                "-q",
                "-m",
                "ruff format + ruff check --fix over the whole tree (issue 21, item 5)\n\n"
                "Made by scripts/relayout.py with pyproject.toml's [tool.ruff]; no behaviour changes.",
            )
        after = {p: (REPO / p).read_text(encoding="utf-8") for p in texts if (REPO / p).is_file()}
        notes += [f"bare mention: {m}" for m in bare_mentions(plan, after)]
        summary(plan, rw, notes, ruff_ok, ruff_report, time.perf_counter() - t0)
        return 0 if ruff_ok else 1
    except Refused as exc:
        print(f"relayout: refused: {exc}", file=sys.stderr)
        return 2


FILE_PARENTS = re.compile(r"(Path\(__file__\)(?:\.resolve\(\))?)((?:\.parent\b(?!s))+|\.parents\[(\d+)\])")


def file_relative(src: str, deeper: int, where: str, plan: Plan) -> str:
    """``Path(__file__).parent.parent`` names a folder by its distance from the file: a file that
    moves ``deeper`` levels down needs as many more steps up."""
    if not deeper:
        return src

    def one(m: re.Match) -> str:
        up = int(m.group(3)) + 1 if m.group(3) is not None else m.group(2).count(".parent")
        new = m.group(1) + ".parent" * (up + deeper) if up + deeper <= 2 else f"{m.group(1)}.parents[{up + deeper - 1}]"
        plan.notes.append(f"{where}: {m.group(0)} -> {new} (the file is {deeper} folder(s) deeper)")
        return new

    return FILE_PARENTS.sub(one, src)


def rewrite_all(plan: Plan) -> tuple[dict[str, str], Rewriter]:
    """New text of every file in scope, keyed by its path AFTER the move."""
    rw = Rewriter(plan)
    texts: dict[str, str] = {}
    for path in plan.files:
        if not in_scope(path) or not (REPO / path).is_file():
            continue
        src = (REPO / path).read_text(encoding="utf-8")
        before = rw.count
        new_path = plan.moves.get(path, path)
        if path.endswith(".py"):
            importer_old = importer_new = None
            if path in {p for p, _ in plan.modules.values()}:
                importer_old = module_name(path)
                importer_new = module_name(new_path)
            old_name = importer_old[0] if importer_old else None
            if old_name in SPLITS:
                split = SPLITS[old_name]
                lib_src, rest_src, notes = split_module(src, split)
                plan.notes.extend(notes)
                texts[module_path(split.to, False)] = rw.python(lib_src, importer_old, (split.to, False), path)
                new = rw.python(rest_src, importer_old, importer_new, path)
            else:
                new = rw.python(src, importer_old, importer_new, path)
            if new_path != path:
                new = file_relative(new, len(Path(new_path).parts) - len(Path(path).parts), path, plan)
        elif path.endswith(".md"):
            new = rw.markdown(src, path)
        else:
            new = rw.sub_text(src)
        if new != src or new_path != path:
            texts[new_path] = new
            plan.rewritten[new_path] = rw.count - before
    return texts, rw


def apply(plan: Plan, texts: dict[str, str]) -> None:
    for old, new in sorted(plan.moves.items()):
        (REPO / new).parent.mkdir(parents=True, exist_ok=True)
        git("mv", old, new)
    for path, text in texts.items():
        (REPO / path).parent.mkdir(parents=True, exist_ok=True)
        (REPO / path).write_text(text, encoding="utf-8")
    for path, doc in plan.new_inits.items():
        body = f'"""{doc}\n"""\n'
        pkg = module_name(path)[0]
        if pkg in plan.public:
            body = after_docstring(body, FORWARD_HOOK.format(old=pkg))
        (REPO / path).write_text(body, encoding="utf-8")
    (REPO / "replay/util/old_paths.py").write_text(old_paths_source(plan), encoding="utf-8")
    for root in PACKAGES:
        init = REPO / root / "__init__.py"
        init.write_text(after_docstring(init.read_text(encoding="utf-8"), INSTALL_HOOK), encoding="utf-8")
    for src, dst in INSTALL.items():
        shutil.copyfile(FILES / src, REPO / dst)
    for path, first, end, src, sha in SECTIONS:
        full = REPO / path
        if section_sha(plan.originals.get(path, ""), first, end) not in (sha, None):
            plan.notes.append(
                f"{path}: the section {first!r} has changed since relayout_files/{src} was written, and was "
                f"replaced: carry the change over by hand (git log -p -- {path} shows it)"
            )
        text, done = replace_section(
            full.read_text(encoding="utf-8"), first, end, (FILES / src).read_text(encoding="utf-8")
        )
        if done:
            full.write_text(text, encoding="utf-8")
        else:
            plan.notes.append(
                f"{path}: no line starting {first!r}: section not replaced, do it from relayout_files/{src}"
            )
    for path, old, new, why in PATCHES:
        full = REPO / path
        text = full.read_text(encoding="utf-8") if full.exists() else ""
        if old in text:
            full.write_text(text.replace(old, new, 1), encoding="utf-8")
        else:
            plan.notes.append(f"{path}: patch not applied ({why}); make it by hand: {old.strip()[:70]!r}")
    # Old folders left with nothing tracked: drop them (a __pycache__ alone would make a namespace package).
    for old in sorted({str(Path(o).parent) for o in plan.moves}, key=len, reverse=True):
        folder = REPO / old
        if folder.is_dir() and not any(p.suffix != ".pyc" and p.is_file() for p in folder.rglob("*")):
            shutil.rmtree(folder)
    git("add", "-A", "--", *PACKAGES, "tests", "docs")


def print_plan(plan: Plan) -> None:
    print(f"relayout: {len(plan.moves)} module files move, {len(plan.new_inits)} new folders")
    print("the tree after the move:")
    print(tree_picture(plan))
    if plan.unmapped:
        print("modules in neither MOVES nor STAYS (they stay where they are; add them to MOVES):")
        for name in plan.unmapped:
            print(f"  {plan.modules[name][0]}")
    if plan.gone:
        print(f"MOVES keys with no module in this tree (nothing to move): {', '.join(plan.gone)}")
    print(f"old import paths kept for users (docs/api.md): {', '.join(plan.public)}")


def summary(plan: Plan, rw: Rewriter, notes: list[str], ruff_ok: bool, ruff_report: str, seconds: float) -> None:
    files = sum(1 for n in plan.rewritten.values() if n)
    print(f"relayout: moved {len(plan.moves)} files, rewrote {rw.count} mentions in {files} files, {seconds:.1f} s")
    print("ruff: " + ("passes" if ruff_ok else "DOES NOT PASS") + (f"\n{ruff_report}" if ruff_report else ""))
    if plan.unmapped:
        print(f"stayed, in no table: {' '.join(plan.unmapped)} (tests/test_layers.py fails on a stray module)")
    if notes:
        print(f"look at these by hand ({len(notes)}):")
        for n in notes:
            print(f"  {n}")
    print(
        "next: python -m pytest -q tests/test_layers.py tests/test_old_paths.py tests/test_docs_paths.py, "
        "then the suite; scripts/check_outputs_identical.py before/after"
    )


if __name__ == "__main__":
    sys.exit(main())
