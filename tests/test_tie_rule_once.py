"""The selection tie rule ("equal keys in tree order") lives in one place: replay.core.selection.rank_ties.

Three checks: no module that applies the selection rule sorts anything itself except the sorts listed
here with their reason (a sort of selection keys would be a second copy of the tie rule); no oracle in
tests/ or replay/testing/ sorts highest-first itself (a negated sort key, an argsort of a negated
array, a lexsort) except replay.testing.selection_ref, the one test-side form of the rule, and the
sorts listed with their reason; and every form in replay.core.selection follows rank_ties when it
changes (a reversed rule, patched in).
"""

from __future__ import annotations

import ast
import math
from pathlib import Path

import numpy as np
import pytest

from replay.core import selection
from replay.core.config import TreeConfig
from replay.engine.batch import replay_batch
from replay.engine.batch.view import round_view
from replay.io.rounds import Round
from replay.testing.in_memory import batch_from_rounds
from replay.testing.selection_ref import selection_order_ref

ROOT = Path(__file__).resolve().parent.parent

# Modules named by the review that found copies of the tie rule; scanned even if they stop
# importing replay.core.selection.
NAMED = (
    "analysis/tables/batch.py",
    "analysis/compare/subtree_select.py",
    "analysis/compare/subtree_levels.py",
    "analysis/shapes/search.py",
    "replay/engine/batch/shapes.py",
)

SORTS = {"sorted", "argsort", "lexsort", "sort", "sort_values", "insort", "argpartition", "partition"}

# (module, the call's source text starts with) → why it orders something other than selection keys.
ALLOWED = {
    ("analysis/shapes/search.py", "bisect.insort(self.items"): "configs by their objective's sort key",
    ("analysis/shapes/search.py", "sorted(\n"): "searched configs by expected accepted length",
    ("replay/engine/runs.py", "blocks.sort("): "blocks by first ordinal",
    ("replay/engine/runs.py", "sorted(k for k in res.selection_notes"): "note rounds by index",
    ("replay/engine/runs.py", "sorted(groups"): "note groups by first round",
    ("replay/engine/runs.py", "sorted(later"): "skipped rounds by ordinal",
    ("replay/engine/batch/result.py", "sorted(depths)"): "an error message's depths",
    ("replay/engine/render.py", "sorted(zip(first"): "distinct selection columns in first-use order",
    ("replay/engine/batch/result.py", "np.argsort(self.ordinals"): "rounds by ordinal",
    ("replay/engine/batch/result.py", "sorted(gammas)"): "an error message's gammas",
    ("replay/testing/synth.py", "np.sort(rng.dirichlet"): "generated probabilities, descending by rank",
}


# The test side's one form of the rule: every oracle orders a level through it.
ORACLE_RULE = "replay/testing/selection_ref.py"

# (module, the call's source text starts with) → why a highest-first sort in tests/ or
# replay/testing/ orders something other than a level's selection keys.
ORACLE_ALLOWED = {
    ("tests/test_compare_sampling.py", "sorted(rows[1:], key=lambda r: -r[key])"): "output rows by a metric",
    ("tests/test_live_sampling.py", "np.argsort(-probs[node])"): "a target distribution's top tokens",
    ("tests/test_sampling.py", "np.argsort(-full"): "a target distribution's top-K rows",
    ("tests/test_shape_nonmonotone.py", "sorted(\n"): "configs by their true value",
}


def _highest_first(call: ast.Call) -> bool:
    """A sort by descending key: a lambda key (or its first tuple element) negated, an argsort of a
    negated array, or a lexsort (columns of keys)."""
    f = call.func
    name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
    if name == "lexsort":
        return True
    if name == "argsort" and call.args:
        return isinstance(call.args[0], ast.UnaryOp) and isinstance(call.args[0].op, ast.USub)
    for kw in call.keywords:
        if name in SORTS and kw.arg == "key" and isinstance(kw.value, ast.Lambda):
            body = kw.value.body
            first = body.elts[0] if isinstance(body, ast.Tuple) and body.elts else body
            return isinstance(first, ast.UnaryOp) and isinstance(first.op, ast.USub)
    return False


def _oracle_sorts() -> list[tuple[str, str]]:
    """(module, source text) of every highest-first sort in tests/ and replay/testing/."""
    out = []
    for path in sorted([*ROOT.glob("tests/**/*.py"), *ROOT.glob("replay/testing/**/*.py")]):
        rel = path.relative_to(ROOT).as_posix()
        if rel == ORACLE_RULE:
            continue
        text = path.read_text()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Call) and _highest_first(node):
                out.append((rel, ast.get_source_segment(text, node) or ""))
    return out


def _assert_each_allowed(found: list[tuple[str, str]], allowed: dict, name: str, advice: str) -> None:
    """Every (module, sort call) of ``found`` is listed in ``allowed`` (whose name the message gives),
    and every entry of it still matches a call."""
    unexplained, used = [], set()
    for rel, call in found:
        hit = [k for k in allowed if k[0] == rel and call.startswith(k[1])]
        used.update(hit)
        if not hit:
            unexplained.append(f"{rel}: {call.splitlines()[0]}")
    assert not unexplained, f"{advice}, or add it to {name} with its reason: {unexplained}"
    assert used == set(allowed), f"{name} entries that match nothing any more: {set(allowed) - used}"


def test_oracles_order_levels_through_the_one_reference():
    advice = (
        "a highest-first sort in an oracle: order a level with replay.testing.selection_ref "
        "(selection_order_ref, select_ref, ranks_before)"
    )
    _assert_each_allowed(_oracle_sorts(), ORACLE_ALLOWED, "ORACLE_ALLOWED", advice)


def test_the_oracle_scan_finds_a_copy_of_the_rule():
    """The scan sees the copies the oracles used to carry (and would carry again)."""
    for copy in (
        "sorted(level, key=lambda u: (-logp[u], u))",
        "sorted(range(len(level)), key=lambda j: (-level[j][1], j))",
        "np.argsort(-lp, axis=0, kind='stable')",
        "np.lexsort((rank, -key))",
    ):
        assert _highest_first(ast.parse(copy).body[0].value), copy
    assert not _highest_first(ast.parse("sorted(level, key=lambda n: (n[-1], slot[n]))").body[0].value)


def _uses_selection(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.endswith("selection"):
            return True
    return False


def _sorts(path: Path) -> list[str]:
    """Source text of every sorting call in a module."""
    text = path.read_text()
    out = []
    for node in ast.walk(ast.parse(text)):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
        if name in SORTS:
            out.append(ast.get_source_segment(text, node) or name)
    return out


def _scanned() -> list[str]:
    found = set(NAMED)
    for path in [*ROOT.glob("replay/**/*.py"), *ROOT.glob("analysis/**/*.py")]:
        rel = path.relative_to(ROOT).as_posix()
        if rel != "replay/core/selection.py" and _uses_selection(ast.parse(path.read_text())):
            found.add(rel)
    return sorted(found)


def test_modules_applying_the_selection_rule_sort_no_keys_themselves():
    found = [(rel, call) for rel in _scanned() for call in _sorts(ROOT / rel)]
    advice = "a sort in a module that applies the selection rule: order selection keys with replay.core.selection (rank_ties)"
    _assert_each_allowed(found, ALLOWED, "ALLOWED", advice)


@pytest.fixture
def reversed_ties(monkeypatch):
    """rank_ties patched to put equal keys in reverse tree order."""
    monkeypatch.setattr(selection, "rank_ties", lambda position: -position)


def _levels(seed: int):
    rng = np.random.default_rng(seed)
    for _ in range(200):
        n, c = int(rng.integers(1, 24)), int(rng.integers(1, 5))
        yield rng.integers(0, 3, size=(n, c)).astype(np.float64)  # few values: many ties


@pytest.mark.parametrize("patched", [False, True])
def test_every_form_follows_rank_ties(request, patched):
    if patched:
        request.getfixturevalue("reversed_ties")
    # the scalar form, then every vectorised one against it
    assert selection.selection_order([1.0, 2.0, 1.0, 1.0]) == ([1, 3, 2, 0] if patched else [1, 0, 2, 3])
    assert selection.selection_order([0.0, 0.0], ties=[(0, 1), (0, 0)]) == ([0, 1] if patched else [1, 0])
    for keys in _levels(1):
        n, c = keys.shape
        order = [selection.selection_order(keys[:, j].tolist()) for j in range(c)]
        place = np.empty((n, c), dtype=np.int64)
        for j, o in enumerate(order):
            place[o, j] = np.arange(n)
        np.testing.assert_array_equal(selection.selection_positions(keys), place)
        k = int(np.random.default_rng(n).integers(0, n + 1))
        top = selection.top_k_columns(keys, k, np.arange(c, dtype=np.int64))
        np.testing.assert_array_equal(top, np.array([o[:k] for o in order], dtype=np.int64).reshape(c, k).T)
        assert order == [selection_order_ref(keys[:, j].tolist()) for j in range(c)]
        shuffled = np.random.default_rng(n).permutation(n)  # rows out of tree order: positions given
        top = selection.top_k_columns(keys[shuffled], k, positions=np.broadcast_to(shuffled[:, None], (n, c)))
        np.testing.assert_array_equal(shuffled[top], np.array([o[:k] for o in order], dtype=np.int64).reshape(c, k).T)
        a, b = np.arange(n)[:, None, None], np.arange(n)[None, :, None]
        before = selection.precedes(keys[:, None, :], a, keys[None, :, :], b)  # [a, b, C]
        np.testing.assert_array_equal(before.sum(axis=0), place)


def test_the_batch_engine_expands_the_first_of_two_equal_nodes():
    """The root's two children have equal path probabilities and one head: the engine expands the
    first in tree order (token 5), so the step-1 child (token 7) hangs under node 1 and is accepted."""
    cfg = TreeConfig(gamma=2, top_k_spec=((2,), (1,)), top_head=(1, 1))
    half = math.log(0.5)
    rnd = Round.from_lists(
        [[[5, 6]], [[7]]], [[5], [7], [9], [8]], step_logp=[[[half, half]], [[half]]], root_token=4, layout="all"
    )
    batch = batch_from_rounds([rnd])[0]
    view = round_view(batch, replay_batch(batch, cfg, workers=1), 0)
    assert view.tree.parents.tolist() == [-1, 0, 0, 1]
    assert view.acceptance.accepted_tokens == (5, 7)


@pytest.mark.parametrize("patched", [False, True])
def test_the_compiled_in_order_check_follows_rank_ties(request, patched):
    """subtree_select's compiled check that a column's nodes already come in selection order takes
    columns that the scalar form put in order as in order, and the same column with two tied
    neighbours' positions swapped as not: under the rule and under a reversed one."""
    from tests.test_subtree_batch import slots_in_order

    if patched:
        request.getfixturevalue("reversed_ties")
    rng = np.random.default_rng(3)
    swapped_seen = 0
    for keys in _levels(2):
        n, c = keys.shape
        pos = np.stack([rng.permutation(n) for _ in range(c)], axis=1).astype(np.int64)  # [n, c]
        order = [selection.selection_order(keys[:, j].tolist(), ties=pos[:, j].tolist()) for j in range(c)]
        key = np.stack([keys[o, j] for j, o in enumerate(order)], axis=1)
        at = np.stack([pos[o, j] for j, o in enumerate(order)], axis=1)
        valid = np.ones((n, c), dtype=bool)
        slot, in_order = slots_in_order(key, at, valid, n)
        assert in_order.all()
        np.testing.assert_array_equal(slot, np.broadcast_to(np.arange(n)[:, None], (n, c)))
        for j in range(c):
            tied = np.flatnonzero(key[1:, j] == key[:-1, j])
            if tied.shape[0]:
                u = int(tied[0])
                at[[u, u + 1], j] = at[[u + 1, u], j]
                swapped_seen += 1
                assert not slots_in_order(key[:, j : j + 1], at[:, j : j + 1], valid[:, :1], n)[1][0]
    assert swapped_seen > 100


@pytest.mark.parametrize("patched", [False, True])
def test_the_compiled_selection_places_follow_rank_ties(request, patched):
    """subtree_select's compiled places (the order of a column of known, ordered keys, in order or
    not) put every node where the one test-side form of the rule puts it, tied keys and tied
    positions included: under the rule and under a reversed one."""
    from analysis.compare import subtree_select

    if patched:
        request.getfixturevalue("reversed_ties")
    rng = np.random.default_rng(4)
    out_of_order = 0
    for keys in _levels(5):
        n, c = keys.shape
        pos = rng.integers(0, max(2, n // 2), (n, c)).astype(np.int64)  # some positions tie too
        true = np.ones((n, c), dtype=bool)
        _, in_order, place = subtree_select._places((true, true, true, true, keys), pos)
        out_of_order += int((~in_order).sum())
        for j in range(c):
            order = selection_order_ref(keys[:, j].tolist(), pos[:, j].tolist())
            np.testing.assert_array_equal(place[order, j], np.arange(n))
    assert out_of_order > 100
