"""The import paths users' code has from before the folder move (issue 21) keep working.

replay/util/old_paths.py holds them: those docs/api.md named (``from analysis import api, plots``,
``analysis.tables.build_tables``, ``replay.packed.pack_directory``, ...) give the same module objects
as the new paths; every other old path fails with a line that names the new one.
"""

from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from replay.util.old_paths import FORWARD, MOVED, PUBLIC

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("old", sorted(PUBLIC))
def test_an_old_public_path_is_the_new_module(old):
    assert importlib.import_module(old) is importlib.import_module(MOVED[old])


@pytest.mark.parametrize("package", sorted(FORWARD))
def test_a_package_that_replaced_a_module_answers_its_names(package):
    home = importlib.import_module(FORWARD[package])
    public = [
        n
        for n in vars(home)
        if not n.startswith("_")
        and getattr(home, n).__class__.__name__ != "module"
        and importlib.util.find_spec(f"{package}.{n}") is None  # a submodule's name is the submodule
    ]
    assert public
    pkg = importlib.import_module(package)
    for name in public:
        assert getattr(pkg, name) is getattr(home, name), name
    with pytest.raises(AttributeError, match="no attribute"):
        pkg.no_such_name  # noqa: B018


@pytest.mark.slow
def test_the_notebook_spelling_from_before_the_move_runs():
    """What docs/api.md's example said before the move, in a fresh interpreter."""
    code = (
        "from analysis import api, plots, treeplot\n"
        "from analysis.tables import build_tables\n"
        "from analysis.compare import compare_configs\n"
        "from replay.packed import pack_directory\n"
        "from replay.replayer import replay_directory\n"
        "import replay.cli.api, analysis.report.plots\n"
        "assert api is replay.cli.api and plots is analysis.report.plots\n"
        "run = api.load('sample_dumps/article_round')[0]\n"
        "print(len(run.results), callable(pack_directory), callable(build_tables), callable(compare_configs))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["1", "True", "True", "True"]


def test_any_other_old_path_names_the_new_one():
    old = next(o for o in sorted(MOVED) if o not in PUBLIC and o not in FORWARD and o.startswith("replay."))
    with pytest.raises(ModuleNotFoundError, match=f"it is {MOVED[old]}"):
        importlib.import_module(old)
