"""The sampling rule's kernel on column-major arrays: rounds of one tree or of trees that differ per
round (TreeLayout, shared or not), the round axis last as in the greedy batch kernel, so
every operation runs on contiguous vectors over rounds.

The rounds are taken a chunk at a time (_Chunk: its rows, node tokens, and what the rule needs
from them at any T, found on first use): at T the edge probabilities (_edge_probs), the walk's
reach bounds (_walk), whether the dump determines the round (_exact_of), and per depth P(L >= d),
E[L] and Var[L] (_aggregate_chunk). column_bounds reads, uses and drops each chunk;
prepare_columns keeps them for many T; chunk_bounds takes chunks its caller makes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property, lru_cache

import numpy as np

from .sampling_problems import PROBLEM_NONE, vocab_too_small
from .sampling_rows import RowStats, row_scale, row_stats
from .temperature import check_temperature
from .vocab import PAD_TOKEN

# Rounds per chunk of the kernel: one chunk's rows ([E, K, C] float64: 5 x 16 x 4096 x 8 B = 2.6 MB
# for the article tree) stay in cache across the kernel's passes; far fewer rounds and numpy's
# per-call cost dominates (about 300 calls per chunk).
CHUNK_ROUNDS = 4096


_NO_REPEAT = np.zeros((0, 0))  # edge_probs_loop's repeat argument for a chunk where no child repeats


_NO_ROWS, _NO_OFFSETS = np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.int64)  # its unused tree form


# Below this many rounds (one round of the per-round replay) numpy's per-call cost dominates:
# the child lookup then takes one [g, K, C] comparison instead of one call per column.
SMALL_CHUNK = 64


# One row's node id: the same for every round (an int), or per round ([R] int).
RowNode = int | np.ndarray


# rows(lo, hi) -> (ids [E, K, C], logp [E, K, C], has [E, C]) of rounds lo..hi: column_bounds' row reader.
RowReader = Callable[[int, int], tuple[np.ndarray, np.ndarray, np.ndarray]]


_NAN_UNLESS = np.array([np.nan, 0.0])  # indexed by a bool: NaN for False, 0 for True


# A row's top-1 where the row cannot be read (no row, PAD): no token equals it.
_NO_TOKEN = np.iinfo(np.int64).min


@dataclass(frozen=True, eq=False)
class TreeLayout:
    """The trees of R rounds as the column-major kernel reads them: each node's parent row and depth,
    the same in every round (``shared``: the rounds of one tree shape) or per round.

    Rows are validate rows, E of them, row 0 the root's. With one tree for every round only the
    expanded nodes have rows (Z_T is computed for them alone: 5 of the article tree's 13), and every
    other row's node is a child of an earlier row (tree order of the expanded nodes, or the batch's
    step-by-step slots), so the kernel visits the rows in order, each one's reach known by then. With
    trees that differ per round every node has a row (row u is node u; has False where a node is not
    expanded), and each edge's parent row is gathered per round.
    """

    node_row: np.ndarray  # [N+1] or [N+1, R] int64: the row of node u's parent (node 0: row 0, unused)
    depths: np.ndarray  # [N+1] or [N+1, R] int64, as node_row

    def __post_init__(self) -> None:
        if self.node_row.ndim not in (1, 2) or self.depths.shape != self.node_row.shape:
            raise ValueError(
                f"node_row {self.node_row.shape}, depths {self.depths.shape}: expected one [N+1] or [N+1, R]"
            )
        if self.node_row.dtype != np.int64 or self.depths.dtype != np.int64:
            raise ValueError(f"node_row {self.node_row.dtype}, depths {self.depths.dtype}: expected int64")

    @classmethod
    def per_round(cls, parents: np.ndarray, depths: np.ndarray) -> TreeLayout:
        """Trees that differ per round, every node its own row: parents, depths [N+1, R] int64
        (parents[0] = NO_PARENT, parents[u] < u)."""
        return cls(np.ascontiguousarray(np.maximum(parents, 0)), np.ascontiguousarray(depths))

    @property
    def shared(self) -> bool:
        """One tree for every round (node_row and depths [N+1])."""
        return self.node_row.ndim == 1

    @property
    def num_rows(self) -> int:
        """E of a shared tree: its expanded nodes."""
        return int(self.node_row[1:].max()) + 1 if self.node_row.shape[0] > 1 else 0

    @cached_property
    def num_depths(self) -> int:
        return int(self.depths.max()) + 1 if self.depths.size else 1

    @cached_property
    def children(self) -> tuple[np.ndarray | slice, ...]:
        """Per row of a shared tree, its children's node ids in tree order (a slice where they are
        contiguous, as in a batch)."""
        out: list[np.ndarray | slice] = []
        for e in range(self.num_rows):
            kids = np.flatnonzero(self.node_row[1:] == e) + 1
            contiguous = kids.shape[0] and kids[-1] - kids[0] + 1 == kids.shape[0]
            out.append(slice(int(kids[0]), int(kids[-1]) + 1) if contiguous else kids)
        return tuple(out)

    @cached_property
    def depth_slices(self) -> tuple[np.ndarray | slice, ...]:
        """Per depth of a shared tree, its nodes: a slice where they are contiguous (tree order: a
        view, no copy)."""
        at_depth = (np.flatnonzero(self.depths == d) for d in range(self.num_depths))
        return tuple(slice(int(i[0]), int(i[-1]) + 1) if i[-1] - i[0] + 1 == i.shape[0] else i for i in at_depth)


@dataclass(frozen=True, eq=False)
class ColumnBounds:
    """SamplingBounds' numbers with the round axis last ([..., R]), as the kernel writes them."""

    reach_lo: np.ndarray | None  # [N+1, R], only when asked for (keep_reach)
    reach_hi: np.ndarray | None
    length_ge_lo: np.ndarray  # [D+1, R]
    length_ge_hi: np.ndarray
    expected_lo: np.ndarray  # [R]
    expected_hi: np.ndarray
    exact: np.ndarray  # [R] bool
    variance: np.ndarray  # [R]
    problem: np.ndarray  # [R] int8
    needs_vocab: bool


def _first_cells(ids: np.ndarray, d: np.ndarray, tok: np.ndarray) -> np.ndarray:
    """[g, C] the value d of the first cell of a row (ids, d [K, C]) carrying each child's token,
    else 1.0 (no sound cell has a log-prob > 0: the caller tells the missing ones by it).

    One comparison per (column, child) on vectors over rounds; walking the columns from the last
    to the first leaves the first match (the scalar reference's rule for a row naming a token twice).
    """
    if tok.shape[1] < SMALL_CHUNK:  # few rounds: one broadcast comparison, fewer numpy calls
        hit = tok[:, None, :] == ids[None]  # [g, K, C]
        first = np.argmax(hit, axis=1)[:, None, :]  # the first True, 0 when none
        cell = np.take_along_axis(np.broadcast_to(d[None], hit.shape), first, axis=1)[:, 0]
        # float64 whatever d's dtype: a float32 result would take its exponential in float32 at T = 1
        return np.where(hit.any(axis=1), cell.astype(np.float64), 1.0)
    out = np.ones(tok.shape)
    hit = np.empty(tok.shape, dtype=bool)
    for c in range(ids.shape[0] - 1, -1, -1):
        np.equal(tok, ids[c], out=hit)
        np.copyto(out, d[c], where=hit)
    return out


def _as_ids_type(tokens: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """The tokens in the rows' integer type when they fit: comparing int32 with int32 runs about a
    third faster than int64 with int32 (measured), and an int32 dump's rows are int32."""
    if ids.dtype == tokens.dtype or ids.dtype.kind not in "iu" or not tokens.size:
        return tokens
    info = np.iinfo(ids.dtype)
    if tokens.min() < info.min or tokens.max() > info.max:  # would wrap: compare in int64
        return tokens
    return tokens.astype(ids.dtype)


class _Chunk:
    """One chunk of rounds of one tree layout: its rows and node tokens, and what the rule needs from
    them at any T, found on first use and kept (the temperature curve reads the same rows at 16 T;
    T = 0 reads only each row's top-1): the rows' statistics and each child's cell in its parent's row."""

    def __init__(
        self,
        tree: TreeLayout,
        lo: int,
        hi: int,
        rows: tuple[np.ndarray, np.ndarray, np.ndarray],
        tokens: np.ndarray,
        nodes: list[RowNode],
        vocab: int | None,
    ) -> None:
        """tokens [N+1, C] and nodes (an int, or [C] per round): the chunk's own, rounds lo..hi."""
        self.tree, self.lo, self.hi = tree, lo, hi
        # contiguous rows (a copy of the parents layout's views): the compiled loops run vectorised
        # over rounds only on unit strides (replay.core.loops)
        self.ids, self.lp, self.has = np.ascontiguousarray(rows[0]), np.ascontiguousarray(rows[1]), rows[2]
        self.tok = _as_ids_type(np.ascontiguousarray(tokens), self.ids)
        self.nodes: list[RowNode] = [int(v) if isinstance(v, (int, np.integer)) else v for v in nodes]
        self.vocab_size = vocab
        if not tree.shared:  # each node's parent row, per round: offsets into [E, C] arrays
            c = hi - lo
            self.parent_row = tree.node_row[:, lo:hi]
            self.pidx = self.parent_row * c + np.arange(c)

    def per_edge(self, x: np.ndarray) -> np.ndarray:
        """[N+1, C] a per-row array ([E, C]) at each node's parent row (node 0: row 0, unused)."""
        if self.tree.shared:
            out: np.ndarray = np.take(x, self.tree.node_row, axis=0)
        else:
            out = np.take(np.ascontiguousarray(x).reshape(-1), self.pidx)
        return out

    @cached_property
    def stats(self) -> RowStats:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
            return row_stats(self.ids, self.lp, self.has, self.vocab_size)

    @cached_property
    def child_cells(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """[N+1, C] each node's log-prob in its parent's row minus the row's lmax, the log-prob itself
        (T = 1), and 1.0 where the child is there, else 0.0.

        A child missing from the row, in a dead row, or at a cell of log-prob -inf (weight 0: the
        same [0, 0] or missing-child bound) is "not there" with value 0: the rule multiplies exp(a
        * value) by the mask (arithmetic, no select: replay.core.loops.edge_probs_loop).
        """
        rs, tok = self.stats, self.tok
        if self.tree.shared:
            return self._compiled_child_cells(rs)
        out = np.ones(tok.shape)  # trees per round: the parent's row gathered per round, [K, C]
        k, c = self.ids.shape[1], tok.shape[1]
        ids, lp = self.ids.reshape(-1), rs.lp.reshape(-1)
        for u in range(1, tok.shape[0]):
            cells = (self.pidx[u] // c * k)[None, :] * c + np.arange(k)[:, None] * c + np.arange(c)[None, :]
            out[u] = _first_cells(np.take(ids, cells), np.take(lp, cells), tok[u : u + 1])[0]
        if rs.dead is not None:
            out[self.per_edge(rs.dead)] = 1.0
        np.maximum(out, -1e300, out=out)  # -inf -> finite, so that 0 * it is 0
        d = out - self.per_edge(rs.lmax)  # the cell's l - lmax, to the bit (the same subtraction)
        there = (out <= 0.0) & (out > -1e300)
        d *= there
        out *= there
        return d, out, there.astype(np.float64)

    def _compiled_child_cells(self, rs: RowStats) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """child_cells for a shared tree (one parent row per node in every round), in one compiled
        pass over the chunk's contiguous rows (replay.core.loops.child_cells_loop).

        The values are those of the per-round lookup above, bit for bit (copies of cells, the same
        subtraction): a lane that is not there (no match, a dead row, a cell NaN, > 0 or -inf) gets
        a finite value and weight 0.
        """
        from .loops import child_cells_loop

        assert self.tree.shared
        n1, c = self.tok.shape
        d, v, there = np.empty((n1, c)), np.empty((n1, c)), np.empty((n1, c))
        dead = rs.dead if rs.dead is not None else np.zeros(rs.lmax.shape, dtype=bool)
        child_cells_loop(self.ids, rs.lp, self.tok, self.tree.node_row, rs.lmax, dead, d, v, there)
        return d, v, there

    @cached_property
    def repeat(self) -> np.ndarray | None:
        """[N+1, C] 0.0 for a child with an earlier sibling's token, never reached (the walk moves to
        the first), 1.0 elsewhere: the edges' p are multiplied by it; None where no child repeats."""
        tok = self.tok
        out = np.zeros(tok.shape, dtype=bool)
        if self.tree.shared:
            for kids in self.tree.children:
                kt = tok[kids]
                if kt.shape[0] > 1:  # every pair of siblings at once; child j repeats one of 0..j-1
                    same = kt[:, None, :] == kt[None, :, :]
                    same &= _earlier(kt.shape[0])
                    out[kids] = same.any(axis=0)
        else:
            par = self.parent_row  # a node's row is the node itself: siblings share it
            for u in range(1, tok.shape[0]):
                out[u] = ((par[1:u] == par[u]) & (tok[1:u] == tok[u])).any(axis=0)
        return (~out).astype(np.float64) if out.any() else None

    @cached_property
    def reach_index(self) -> list[int | np.ndarray]:
        """Per row of a shared tree, its node: an id, or [C] offsets into the chunk's [N+1, C] reach."""
        c = self.tok.shape[1]
        return [int(v) if isinstance(v, (int, np.integer)) else v * c + np.arange(c) for v in self.nodes]

    def top1(self) -> np.ndarray:
        """[E, C] each row's first column (T = 0); _NO_TOKEN without a row or for PAD."""
        first = self.ids[:, 0]
        return np.where(self.has & (first != PAD_TOKEN), first.astype(np.int64), _NO_TOKEN)


@lru_cache(maxsize=64)
def _earlier(n: int) -> np.ndarray:
    """[n, n, 1] bool: sibling i comes before sibling j."""
    out = np.triu(np.ones((n, n), dtype=bool), 1)[:, :, None]
    out.flags.writeable = False
    return out


_Terms = tuple[np.ndarray, np.ndarray, np.ndarray]  # row_scale's (1 / Z_lo, 1 / Z_hi, missing p_hi) [E, C]


def _edge_probs(ch: _Chunk, t: float, terms: _Terms | None) -> tuple[np.ndarray, np.ndarray]:
    """(p_lo, p_hi) [N+1, C] of every edge into node u (row 0: unused) at T, all edges at once, each
    with its parent row's 1/Z and missing-child bound (replay.core.loops.edge_probs_loop).

    A recorded child has weight > 0 or is recorded with q^a = 0; in the second case x_max <= its
    weight is 0 as well, so taking it for missing gives the same [0, 0]: "weight > 0" is the test.
    """
    if terms is None:  # T = 0: the child carrying the row's top-1
        p_lo = (ch.tok == ch.per_edge(ch.top1())).astype(np.float64)
        return (p_lo, p_lo) if ch.repeat is None else (p_lo * ch.repeat, p_lo * ch.repeat)
    from .loops import edge_probs_loop

    cells, logp, there = ch.child_cells
    inv_zlo, inv_zhi, miss = (np.ascontiguousarray(v).reshape(-1) for v in terms)
    p_lo, p_hi = np.empty(cells.shape), np.empty(cells.shape)
    repeat = _NO_REPEAT if ch.repeat is None else ch.repeat
    # at T = 1 the cell itself (its row's sum is of exp(l) too), else shifted as the row's cells are
    x, a = (logp, 1.0) if t == 1.0 else (cells, 1.0 / t)
    node_row, at = (ch.tree.node_row, _NO_OFFSETS) if ch.tree.shared else (_NO_ROWS, ch.pidx)
    edge_probs_loop(x, a, there, node_row, at, inv_zlo, inv_zhi, miss, repeat, t != 1.0, p_lo, p_hi)
    return p_lo, p_hi


def _walk(ch: _Chunk, p_lo: np.ndarray, p_hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(reach_lo, reach_hi [N+1, C]) of one chunk: rows in order (a shared tree: each row's children
    at once) or nodes in order (trees per round: each node's parent reach gathered per round)."""
    n1, c = p_lo.shape
    reach_lo, reach_hi = np.empty((n1, c)), np.empty((n1, c))
    reach_lo[0] = reach_hi[0] = 1.0
    if ch.tree.shared:
        for e, kids in enumerate(ch.tree.children):
            at = ch.reach_index[e]
            lo, hi = (
                (reach_lo[at], reach_hi[at]) if isinstance(at, int) else (np.take(reach_lo, at), np.take(reach_hi, at))
            )
            if isinstance(kids, slice):  # views: no temporaries
                np.multiply(p_lo[kids], lo, out=reach_lo[kids])
                np.multiply(p_hi[kids], hi, out=reach_hi[kids])
            else:
                reach_lo[kids], reach_hi[kids] = p_lo[kids] * lo, p_hi[kids] * hi
    else:
        for u in range(1, n1):
            reach_lo[u] = np.take(reach_lo, ch.pidx[u]) * p_lo[u]
            reach_hi[u] = np.take(reach_hi, ch.pidx[u]) * p_hi[u]
    return reach_lo, reach_hi


def _exact_of(ch: _Chunk, t: float) -> np.ndarray:
    """[C] bool: the round is exact, decided by the dump's structure, never by lo == hi (docs/analysis.md
    "exact"): no edge of _blind_edges. T = 0: always (the greedy replay reads each row's top-1)."""
    n1, c = ch.tok.shape
    if t == 0.0 or n1 < 2:
        return np.ones(c, dtype=bool)
    if t != 1.0 and not ch.stats.z_known.any():  # top-K rows of a larger vocabulary: the usual case
        return np.zeros(c, dtype=bool)  # the edge into the root's first child (never a repeat) is blind
    blind = np.empty(c, dtype=bool)
    np.any(_blind_edges(ch, t), axis=0, out=blind)
    out: np.ndarray = ~blind
    return out


def _blind_edges(ch: _Chunk, t: float) -> np.ndarray:
    """[N+1, C] bool: the edges into node u that the walk can reach and whose probability the rows do
    not determine (row 0: False); a round is exact where it has none (_exact_of).

    T > 0, an edge u is known when u repeats an earlier sibling's token (p = 0), when its parent's row
    has an empty tail (empty_tail: Z_T is the recorded sum, a missing child has p = 0), or when u's token
    is in the row and Z_T is known: at T = 1 (the recorded log-probs are a full softmax's, Z = 1: p = q),
    or where z_known. The walk can reach a node when every edge to it is known with p > 0 (a recorded
    child at a finite log-prob: p > 0 even where float64 underflows). Each edge's flag depends only on
    the edges above it and its own parent's row and earlier siblings, so a sub-tree that keeps each
    node's first children has the flags of the recorded tree on its edges (analysis.compare.sampling_reach).
    The masks are child_cells' and repeat's, which the bounds use: a walk of booleans, no arithmetic.
    """
    n1, c = ch.tok.shape
    blind = np.zeros((n1, c), dtype=bool)
    if t == 0.0 or n1 < 2:
        return blind
    there = ch.child_cells[2] > 0.0  # [N+1, C]: the child's token at a finite cell of its parent's row
    known = ch.per_edge(ch.stats.empty_tail)
    known |= there if t == 1.0 else there & ch.per_edge(ch.stats.z_known)
    if ch.repeat is not None:
        rep = ch.repeat == 0.0
        known |= rep
        there &= ~rep
    if known[1:].all():  # every edge known (T = 1, every child recorded): no walk needed
        return blind
    reach = np.empty(there.shape, dtype=bool)  # the walk can reach the node (row 0: the root)
    reach[0] = True
    if ch.tree.shared:
        for e, kids in enumerate(ch.tree.children):
            at = ch.reach_index[e]
            par = reach[at] if isinstance(at, int) else np.take(reach, at)
            blind[kids] = par & ~known[kids]
            reach[kids] = par & there[kids]
    else:
        for u in range(1, there.shape[0]):
            par = np.take(reach, ch.pidx[u])
            blind[u] = par & ~known[u]
            reach[u] = par & there[u]
    return blind


def _depth_sums(tree: TreeLayout, lo: int, hi: int, reach: np.ndarray) -> np.ndarray:
    """[D+1, C] sum of the reach bounds at each depth: P(L >= d) before the tightening."""
    if tree.shared:
        return np.stack([_sum_rows(reach[idx]) for idx in tree.depth_slices])
    depths = tree.depths[:, lo:hi]
    return np.stack([_sum_rows(reach * (depths == d)) for d in range(tree.num_depths)])


def _sum_rows(x: np.ndarray) -> np.ndarray:
    """[C] float64: the rows of x ([n, C] float64) added in row order. numpy adds an [n, C > 1] array
    row by row, but regroups a single column pairwise (8 partial sums from n = 8 on): a round alone
    would then differ from the same round in a batch in the last bit."""
    if x.shape[1] != 1:
        out: np.ndarray = x.sum(axis=0)
        return out
    out = np.zeros(1)
    for v in x[:, 0]:
        out += v
    return out


def _aggregate_chunk(sums_lo: np.ndarray, sums_hi: np.ndarray, exact: np.ndarray, out: tuple[np.ndarray, ...]) -> None:
    """Into out = (ge_lo, ge_hi [D+1, C], E lo, E hi, variance [C]), the chunk's columns of the
    outputs, from the per-depth sums of the reach bounds."""
    ge_lo, ge_hi, exp_lo, exp_hi, variance = out
    weights = 2.0 * np.arange(sums_lo.shape[0]) - 1.0  # E[L^2] = sum_n P(reach n) (2 depth(n) - 1)
    second = (sums_lo[1:] * weights[1:, None]).sum(axis=0)
    # Valid tightening: a probability is <= 1 and P(L >= d) does not grow with d.
    np.minimum(sums_hi, 1.0, out=sums_hi)
    ge_hi[0] = sums_hi[0]  # a running minimum over the few depths (minimum.accumulate on axis 0 runs slower)
    for d in range(1, sums_hi.shape[0]):
        np.minimum(ge_hi[d - 1], sums_hi[d], out=ge_hi[d])
    np.minimum(sums_lo, 1.0, out=sums_lo)
    np.minimum(sums_lo, ge_hi, out=ge_lo)
    np.sum(ge_lo[1:], axis=0, out=exp_lo)
    np.sum(ge_hi[1:], axis=0, out=exp_hi)
    second -= exp_lo**2
    np.maximum(second, 0.0, out=variance)
    variance += _NAN_UNLESS.take(exact.view(np.uint8))  # NaN where not exact, without a branch per round


def _chunks(
    tree: TreeLayout,
    rows: RowReader,
    tokens: np.ndarray,
    row_node: list[RowNode],
    vocab_size: int | None,
    chunk_rounds: int,
) -> Iterator[_Chunk]:
    for lo in range(0, tokens.shape[1], chunk_rounds):
        hi = min(lo + chunk_rounds, tokens.shape[1])
        nodes = [v if isinstance(v, (int, np.integer)) else v[lo:hi] for v in row_node]
        yield _Chunk(tree, lo, hi, rows(lo, hi), tokens[:, lo:hi], nodes, vocab_size)


def _bounds_of(
    tree: TreeLayout,
    chunks: Iterable[_Chunk],
    shape: tuple[int, int],
    t: float,
    vocab_size: int | None,
    keep_reach: bool,
) -> ColumnBounds:
    """ColumnBounds of R rounds at T from their chunks (prepared, or read one at a time)."""
    n1, r = shape
    dplus = tree.num_depths
    out = {name: np.empty((n1, r)) for name in ("reach_lo", "reach_hi")} if keep_reach else {}
    ge_lo, ge_hi = np.empty((dplus, r)), np.empty((dplus, r))
    exp_lo, exp_hi, variance = np.empty(r), np.empty(r), np.empty(r)
    exact, problem = np.empty(r, dtype=bool), np.empty(r, dtype=np.int8)
    for ch in chunks:
        lo, hi = ch.lo, ch.hi
        code = _chunk_problem(ch, t, vocab_size)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
            terms = None if t == 0.0 else row_scale(ch.stats, t)
            reach_lo, reach_hi = _walk(ch, *_edge_probs(ch, t, terms))
            ex = _exact_of(ch, t)
            if ex.any():  # one number: the two bounds' sums of the same terms differ only by rounding
                reach_hi[:, ex] = reach_lo[:, ex]
            sums = _depth_sums(tree, lo, hi, reach_lo), _depth_sums(tree, lo, hi, reach_hi)
            _aggregate_chunk(
                *sums, ex, (ge_lo[:, lo:hi], ge_hi[:, lo:hi], exp_lo[lo:hi], exp_hi[lo:hi], variance[lo:hi])
            )
        bad = code != PROBLEM_NONE  # rounds with a problem hold NaN everywhere
        exact[lo:hi], problem[lo:hi] = ex & ~bad, code
        if keep_reach:
            out["reach_lo"][:, lo:hi], out["reach_hi"][:, lo:hi] = reach_lo, reach_hi
        if bad.any():
            for arr in (ge_lo, ge_hi, exp_lo, exp_hi, variance, *out.values()):
                arr[..., lo:hi][..., bad] = np.nan
    needs_vocab = lower_bounds_refused(t, vocab_size, exact, problem)
    return ColumnBounds(
        out.get("reach_lo"), out.get("reach_hi"), ge_lo, ge_hi, exp_lo, exp_hi, exact, variance, problem, needs_vocab
    )


def _chunk_problem(ch: _Chunk, t: float, vocab_size: int | None) -> np.ndarray:
    """[C] int8 each round's PROBLEM_* at T (T = 0: scores not judged, docs/sampling.md); a vocabulary
    smaller than a row's candidates raises."""
    if t > 0.0 and vocab_size is not None and int(vocab_size) < ch.ids.shape[1]:
        raise vocab_too_small(vocab_size, ch.ids.shape[1])
    return ch.stats.problem if t > 0.0 else np.zeros(ch.hi - ch.lo, dtype=np.int8)


def lower_bounds_refused(t: float, vocab_size: int | None, exact: np.ndarray, problem: np.ndarray) -> bool:
    """Whether some usable round's lower bound at T > 1 was refused for want of the vocabulary size:
    a round whose walk reads no tail mass (every row names its whole distribution) is exact without it."""
    return t > 1.0 and vocab_size is None and bool((~exact & (problem == PROBLEM_NONE)).any())


@dataclass(frozen=True, eq=False)
class PreparedColumns:
    """R rounds of one tree layout read and prepared for ``bounds(T)`` at any number of T: the rows,
    chunk by chunk, with their T-independent statistics and each child's cell, found at the first T
    that needs them and kept (about 2.5 KB a round for the article tree at K = 16, the rows read included;
    column_bounds keeps nothing)."""

    tree: TreeLayout
    shape: tuple[int, int]  # (N+1, R)
    chunks: tuple[_Chunk, ...]
    vocab_size: int | None

    def bounds(self, temperature: float, keep_reach: bool = False) -> ColumnBounds:
        t = check_temperature(temperature)
        return _bounds_of(self.tree, self.chunks, self.shape, t, self.vocab_size, keep_reach)

    def blind_edges(self, temperature: float) -> np.ndarray:
        """[N+1, R] bool: each round's edges that the walk at T can reach and the rows do not determine
        (_blind_edges), from the chunks' statistics as bounds(T) found them."""
        t = check_temperature(temperature)
        out = np.zeros(self.shape, dtype=bool)
        for ch in self.chunks:
            with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
                out[:, ch.lo : ch.hi] = _blind_edges(ch, t)
        return out


def prepare_columns(
    tree: TreeLayout,
    rows: RowReader,
    tokens: np.ndarray,
    row_node: list[RowNode],
    vocab_size: int | None = None,
    chunk_rounds: int = CHUNK_ROUNDS,
) -> PreparedColumns:
    """column_bounds' rounds, read once for many temperatures (column_bounds' arguments)."""
    chunks = tuple(_chunks(tree, rows, tokens, row_node, vocab_size, chunk_rounds))
    return PreparedColumns(tree, (tokens.shape[0], tokens.shape[1]), chunks, vocab_size)


def column_bounds(
    tree: TreeLayout,
    rows: RowReader,
    tokens: np.ndarray,
    row_node: list[RowNode],
    temperature: float,
    vocab_size: int | None = None,
) -> ColumnBounds:
    """The rule on column-major arrays of R rounds of one tree layout at one T, chunk by chunk (a
    chunk is read, used and dropped; prepare_columns keeps them for many T).

    rows(lo, hi) -> (ids [E, K, C], logp [E, K, C], has [E, C]): the expanded nodes' validate rows
      of rounds lo..hi, in the layout's row order (natural-log probabilities at T = 1)
    tokens: [N+1, R] int node tokens; row_node: per row, its node id (an int, or [R] per round)
    """
    t = check_temperature(temperature)
    chunks = _chunks(tree, rows, tokens, row_node, vocab_size, CHUNK_ROUNDS)
    return _bounds_of(tree, chunks, (tokens.shape[0], tokens.shape[1]), t, vocab_size, False)


# One chunk of rounds lo..hi of one tree layout, as its maker has it: (lo, hi, (ids [E, K, C], logp
# [E, K, C], has [E, C]), tokens [N+1, C], per row its node: an int, or [C]).
ChunkInput = tuple[int, int, tuple[np.ndarray, np.ndarray, np.ndarray], np.ndarray, list[RowNode]]


def chunk_bounds(
    tree: TreeLayout,
    chunks: Iterable[ChunkInput],
    n1: int,
    rounds: int,
    temperature: float,
    vocab_size: int | None = None,
) -> ColumnBounds:
    """column_bounds on chunks its caller makes one at a time (the batch replay rebuilds each
    chunk's trees and reads its rows just before the rule needs them, in cache); chunks cover rounds
    0..rounds in order. Each chunk is used and dropped, as in column_bounds."""
    t = check_temperature(temperature)
    made = (_Chunk(tree, lo, hi, rows, tok, nodes, vocab_size) for lo, hi, rows, tok, nodes in chunks)
    return _bounds_of(tree, made, (n1, rounds), t, vocab_size, False)


def chunk_problems(
    tree: TreeLayout, chunks: Iterable[ChunkInput], rounds: int, temperature: float, vocab_size: int | None = None
) -> np.ndarray:
    """[R] int8 chunk_bounds' ``problem`` alone: each chunk's rows judged, no walk."""
    t, problem = check_temperature(temperature), np.empty(rounds, dtype=np.int8)
    for lo, hi, rows, tok, nodes in chunks:
        problem[lo:hi] = _chunk_problem(_Chunk(tree, lo, hi, rows, tok, nodes, vocab_size), t, vocab_size)
    return problem
