"""The words specreplay uses, defined once (docs/vocabulary.md repeats them for readers).

Round
    One speculation step of the engine: a draft tree built in ``gamma`` (or fewer) draft steps and
    one target forward that verifies it. Keyed by the two position counters ``(a, b)`` of its
    ``validate_{a}_{b}`` file.
Root
    Node 0 of the tree: the last committed token; the draft's step 0 runs there.
Depth
    A node's level in the tree: the root is depth 0, draft step 0's children depth 1, and so on;
    depth d is the d-th draft token of a path. Every command numbers depths this way
    (``DEPTH_RULE``, the words its headers print).
Accepted tokens
    The draft tokens on the single root-to-leaf path that greedy acceptance walks. The root is
    not counted.
Accepted length
    ``len(accepted tokens)``. It **excludes** the bonus token (vLLM's "acceptance length" metric
    counts it: vLLM acceptance length = our accepted length + 1).
Bonus token
    The one token the target contributes at the last accepted node: a *correction* when that
    node had children and none matched, a *leaf bonus* when the path reached a leaf. Known only
    when the dump holds the target's row for that node (always in the ``all`` layout; in the
    ``parents`` layout not after a leaf).
Committed tokens
    Accepted tokens followed by the bonus token when it is known.
Block efficiency
    The engine's word (``block_efficiency``) for committed tokens per target forward: accepted
    length + 1, as every round commits one target token. Printed once, as the mean acceptance
    length (vLLM's word; replay.core.headline), "derived" when the dump lacks the bonus token.
Selection
    Which level-i nodes draft step i expands (``topHead[i]`` of them); rule in replay.core.selection.
Path probability
    Product of draft probabilities from the root (summed as log-probabilities). A step expands
    the level's most probable nodes, equal ones in tree order.
Rank-major fallback
    Without scores and parents: level nodes by (draft rank, parent's selection slot), every
    rank-0 child first (the article: A1, A2, then B11, B21). Always reported as a warning.
Explicit parents
    Node ids the dump records for the rows of a draft step; they replace the rule.
Recorded order
    Analysis only: with parents but no scores, the recorded expanded nodes rank in their
    selection order above every other node of their level; nothing else is known.
"""

from __future__ import annotations

from typing import Any

import numpy as np

# Padding and "absent" markers. Token ids are never negative, so -1 cannot collide with a token.
PAD_TOKEN = -1  # padding cell / padding row in an id matrix; also "no target row" for a node
NO_PARENT = -1  # parent of the root
NO_RANK = -1  # draft rank of the root


def not_token_ids(ids: np.ndarray) -> np.ndarray:
    """The cells of an id matrix below 0 that are not PAD_TOKEN (bool, ids' shape). Token ids are never
    negative and padding is PAD_TOKEN alone, so such a cell is corrupt input wherever it sits: the
    replay rejects its round, and every command, greedy or at T, reads the rounds it kept."""
    out: np.ndarray = (ids < 0) & (ids != PAD_TOKEN)
    return out


def any_not_token_ids(ids: np.ndarray) -> bool:
    """Whether not_token_ids finds a cell, in one pass (below_padding of the least cell)."""
    return bool(ids.size) and below_padding(int(ids.min()))


def below_padding(least: int) -> bool:
    """Whether an id matrix whose least cell is ``least`` holds a cell not_token_ids finds: PAD_TOKEN is
    -1, so any other negative value is below it."""
    return least < PAD_TOKEN


def first_not_token_id(row: np.ndarray) -> tuple[int, int]:
    """(column, value) of the first cell of ``row`` that not_token_ids finds (the row holds one)."""
    col = int(np.flatnonzero(not_token_ids(row))[0])
    return col, int(row[col])


# A score cell the dump does not hold (no scores file, a rank past the recorded columns) is NaN.
# A recorded probability 0 is the log-prob -inf: a value like any other (fp16 and bf16 engines write
# exact zeros for low-ranked candidates), so selection, determinedness and bounds all use it.


def score_known(logp: Any) -> Any:
    """Whether each log-prob cell is recorded (``logp``: a float or an array of them): every value
    but NaN, -inf included."""
    return np.logical_not(np.isnan(logp))


STOP_LEAF = "leaf"  # the walk reached a node without children
STOP_MISMATCH = "mismatch"  # the target's token matched none of the current node's children
STOP_NO_ROW = "no_target_row"  # the dump holds no target row for the current node

BONUS_CORRECTION = "correction"
BONUS_LEAF = "leaf_bonus"

# How a draft step chose its expanded nodes (the `selection` column).
SELECT_ROOT = "root"  # step 0: the root
SELECT_PARENTS = "parents"  # explicit parents in the dump
SELECT_PATH_PROB = "path_probability"  # recomputed from the scores
SELECT_FALLBACK = "rank_major_fallback"  # neither: the rank-major fallback
SELECT_RECORDED_ORDER = "recorded_order"  # analysis.compare.subtree: parents without scores

# Layouts of the validate matrix (DESIGN.md): row r = the r-th expanded node, or row r = node r.
LAYOUT_PARENTS, LAYOUT_ALL = "parents", "all"
LAYOUTS = (LAYOUT_PARENTS, LAYOUT_ALL)  # in this order: the batch arrays' layout codes 0, 1

# A round's `selection` summary: the methods of its draft steps 1.. in first-use order, joined.
SELECTION_JOIN = "+"

# Rounds the batch kernel replays in one go (~2 MB of temporaries per array for the article
# config: cache-sized); a packed block holds as many, so that one block is replayed in one go.
CHUNK_ROUNDS = 16384

# How every command numbers depths, in the words its headers print (DESIGN.md: the root is level 0).
DEPTH_RULE = "depth d = the d-th draft token: 1 = the root's children, 0 = the root"
