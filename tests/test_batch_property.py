"""Batch replay and the round-by-round reference agree on every round of random dumps.

Each example is a small run: one random tree config (static or dynamic), several rounds that share
matrix shapes or vary them round by round and step by step (recorded columns, padding rows,
validate columns: batches pad them, replay.io.roundbatch), with or without scores and parents, a
stated or detected validate layout, early stops, and deliberate defects (padding in kept columns,
bad parents, wrong validate row counts, missing column-0 tokens, matrices smaller than the tree
needs) that the reference rejects.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from replay.core.config import TREE_DYNAMIC, TREE_STATIC, TreeConfig
from replay.engine.batch import ERR_OK, replay_batch
from replay.engine.batch.rejections import rejection_reasons
from replay.io.rounds import Round
from replay.testing.in_memory import batch_from_rounds, replay_batches, round_at
from replay.testing.replayer import replay_round
from replay.util.errors import RoundError
from tests.strategies import tree_configs

# Few distinct values so that equal path probabilities (ties) happen often; -0.0 and -inf too.
LOGS = [0.0, -0.0, math.log(0.5), math.log(0.25), math.log(0.125), -math.inf]


@st.composite
def runs(draw):
    """(cfg, rounds): up to 16 rounds of one config with shared per-run matrix choices."""
    cfg = draw(
        tree_configs(st.sampled_from([1, 2, 3, 3, 4, 4, 5]), st.sampled_from([TREE_STATIC, TREE_STATIC, TREE_DYNAMIC]))
    )
    vocab = draw(st.integers(2, 5))
    with_logp = draw(st.booleans())
    with_parents = draw(st.booleans())
    layout = draw(st.sampled_from([None, "all", "parents"]))
    extra_cols = draw(st.integers(0, 2))
    extra_rows = draw(st.integers(0, 1))  # padding rows beyond topHead in draft matrices
    vcols = draw(st.integers(1, 2))
    varied = draw(st.booleans())  # matrix sizes drawn anew per round and step (real engines trim buffers)
    defect_rate = draw(st.sampled_from([0.0, 0.0, 0.0, 0.1, 0.3]))
    n_rounds = draw(st.integers(1, 16))
    step_choices = sorted({cfg.gamma, draw(st.integers(1, cfg.gamma))})  # full rounds and one early stop
    tok = st.integers(0, vocab - 1)

    def defect() -> bool:
        return defect_rate > 0 and draw(st.floats(0, 1)) < defect_rate

    rounds = []
    for k in range(n_rounds):
        steps_run = draw(st.sampled_from(step_choices))
        if varied:
            extra_cols, vcols = draw(st.integers(0, 3)), draw(st.integers(1, 3))
        ids, logp, parents = [], [], []
        level_start, level_size, num_nodes, num_expanded = 1, 1, 0, 0
        for i in range(steps_run):
            h = cfg.top_head[i]
            cols = max(cfg.top_k_spec[i]) + extra_cols
            rows = h + (draw(st.integers(0, 2)) if varied else extra_rows)
            m = [[draw(tok) for _ in range(cols)] for _ in range(rows)]
            for j in range(h, rows):
                m[j] = [-1] * cols  # padding rows
            if cfg.tree_type == TREE_DYNAMIC:
                # A dynamic engine may expand fewer nodes or keep fewer children: pad them out.
                for j in range(1 if i == 0 else 0, h):
                    if draw(st.integers(0, 3)) == 0:
                        cut = draw(st.integers(1, cols))
                        m[j][cut:] = [-1] * (cols - cut)
                if i and h > 1 and draw(st.integers(0, 3)) == 0:
                    for j in range(draw(st.integers(1, h - 1)), rows):
                        m[j] = [-1] * cols
            if defect():
                j, r = draw(st.integers(0, h - 1)), draw(st.integers(0, max(cfg.top_k_spec[i]) - 1))
                m[j][r] = draw(st.sampled_from([-1, -7]))
            ids.append(m)
            logp.append([[draw(st.sampled_from(LOGS)) for _ in range(cols)] for _ in range(rows)])
            if i == 0:
                p = [0] + [-1] * (rows - 1)
                if defect():
                    p[0] = draw(st.integers(-1, 2))
            else:
                level_nodes = list(range(level_start, level_start + level_size))
                chosen = draw(st.permutations(level_nodes))[:h]
                p = list(chosen) + [-1] * (rows - len(chosen))
                if defect():
                    p[draw(st.integers(0, h - 1))] = draw(st.sampled_from([-1, 0, level_start + level_size, p[0]]))
                level_start += level_size
            if varied and defect():  # a matrix smaller than the tree needs: rejected for its shape
                if h > 1 and draw(st.booleans()):
                    rows = h - 1
                    m, logp[-1], p = m[:rows], logp[-1][:rows], p[:rows]
                elif max(cfg.top_k_spec[i]) > 1:
                    cols = max(cfg.top_k_spec[i]) - 1
                    m, logp[-1] = [r[:cols] for r in m], [r[:cols] for r in logp[-1]]
                ids[-1] = m
            parents.append(p)
            level_size = sum(cfg.top_k_spec[i])
            num_nodes += level_size
            num_expanded += h
        want = layout or draw(st.sampled_from(["all", "parents"]))
        vrows = num_nodes + 1 if want == "all" else num_expanded
        vrows += draw(st.sampled_from([0, 0, 0, 1, 2]))  # extra rows: padding or real
        if defect():
            vrows = max(1, vrows + draw(st.sampled_from([-2, -1, 1])))
        val = [[draw(tok) for _ in range(vcols)] for _ in range(vrows)]
        if vrows > 1 and draw(st.booleans()):
            val[-1] = [-1] * vcols  # a trailing padding row
        if defect():
            val[draw(st.integers(0, vrows - 1))][0] = -1
        rounds.append(
            Round.from_lists(
                ids,
                val,
                key=(100 + 8 * k, 116 + 8 * k),
                step_logp=logp if with_logp else None,
                step_parents=parents if with_parents else None,
                root_token=draw(st.sampled_from([-1, 7])),
                layout=layout,
            )
        )
    return cfg, rounds


def reference(rnd: Round, cfg: TreeConfig) -> dict | None:
    try:
        return replay_round(rnd, cfg).to_json()
    except RoundError:
        return None


def reference_rejection(rnd: Round, cfg: TreeConfig) -> tuple[str | None, str]:
    """(the file, the reason) of the reference's RoundError for a round it rejects."""
    with pytest.raises(RoundError) as caught:
        replay_round(rnd, cfg)
    return caught.value.path, caught.value.reason


def check_agree(cfg: TreeConfig, rounds: list[Round], chunk_rounds: int = 16384) -> list[str]:
    """Assert batch and reference agree on every round; per input round "rejected" or "replayed"."""
    verdicts: dict[int, str] = {}
    for batch in batch_from_rounds(rounds):
        res = replay_batch(batch, cfg, workers=1, chunk_rounds=chunk_rounds)
        worded = rejection_reasons(batch, res, cfg)
        for i in range(len(batch)):
            ordinal = int(batch.ordinals[i])
            assert ordinal not in verdicts, f"round {ordinal} is in two batches"
            back, orig = round_at(batch, i), rounds[ordinal]  # what rejection messages are built from
            for a, b in zip((*back.steps, back.validate), (*orig.steps, orig.validate)):
                np.testing.assert_array_equal(a.ids, b.ids)
                assert (a.logp is None) == (b.logp is None) and (a.parents is None) == (b.parents is None)
                if a.logp is not None:
                    np.testing.assert_array_equal(a.logp, b.logp)
                if a.parents is not None:
                    np.testing.assert_array_equal(a.parents, b.parents)
            ref = reference(rounds[ordinal], cfg)
            if ref is None:
                assert res.error[i] != ERR_OK, f"batch accepted round {i} that the reference rejects"
                path, message = worded[i]  # the engine's words, from its own record of the fault
                assert (path, f"{path}: {message}") == reference_rejection(rounds[ordinal], cfg)
                verdicts[ordinal] = "rejected"
            else:
                assert res.error[i] == ERR_OK, f"batch rejected round {i} (code {res.error[i]}); reference: {ref}"
                assert res.round_json(i) == ref
                _check_kept_tree(res, i, replay_round(rounds[ordinal], cfg).tree.expanded_order)
                verdicts[ordinal] = "replayed"
    assert sorted(verdicts) == list(range(len(rounds))), "batch_from_rounds dropped rounds"
    return [verdicts[k] for k in range(len(rounds))]


def _check_kept_tree(res, i: int, expanded_order: np.ndarray) -> None:
    """The expanded slots the batch result keeps (BatchResult.expanded, what the sampling replay
    reads instead of rebuilding) are the reference's expanded nodes, step by step, slot by slot."""
    assert res.expanded is not None
    shape = res.shapes[int(res.shape_index[i])]
    nodes = [
        shape.starts[s] + int(res.expanded[shape.head_offsets[s] + j, i])
        for s in range(shape.num_steps)
        for j in range(shape.heads[s])
    ]
    assert nodes == expanded_order.tolist()
    assert (res.expanded[shape.num_expanded :, i] == -1).all()


@pytest.mark.slow
@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(runs())
def test_batch_matches_reference(case):
    cfg, rounds = case
    check_agree(cfg, rounds)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(runs())
def test_rejections_are_worded_as_the_reference_words_them(case):
    """The fast loop's share of test_batch_matches_reference: check_agree compares the engine's
    words for each rejected round (replay.engine.batch.rejections, from the kernel's record) with
    the reference's, file and reason, besides the replayed rounds' records."""
    cfg, rounds = case
    check_agree(cfg, rounds)


@pytest.mark.slow
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(runs())
def test_matrix_sizes_do_not_split_batches(case):
    """One batch per (draft steps, optional arrays, layout), whatever the matrix sizes."""
    _, rounds = case
    groups = {(len(r.steps), r.steps[0].logp is not None, r.steps[0].parents is not None, r.layout) for r in rounds}
    assert len(batch_from_rounds(rounds)) == len(groups)


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(runs(), st.integers(1, 3))
def test_chunking_and_threads_do_not_change_results(case, chunk):
    """Tiny chunks on two threads give the same arrays as one chunk on one thread."""
    cfg, rounds = case
    one = replay_batches(batch_from_rounds(rounds), cfg, workers=1)
    many = replay_batches(batch_from_rounds(rounds), cfg, workers=2, chunk_rounds=chunk)
    for name in (
        "error",
        "accepted_nodes",
        "accepted_tokens",
        "bonus_token",
        "stop",
        "selection",
        "layout",
        "expanded",
    ):
        np.testing.assert_array_equal(getattr(one, name), getattr(many, name), err_msg=name)
    assert [one.notes(i) for i in range(len(one))] == [many.notes(i) for i in range(len(many))]


def test_dynamic_step_without_valid_rows_is_rejected_by_both():
    """A dynamic round whose step 1 is all padding is an input error (RoundError, one line), not a ValueError."""
    cfg = TreeConfig.from_lists([[2], [1]], [1, 1], tree_type=TREE_DYNAMIC)
    rnd = Round.from_lists([[[5, 6]], [[-1, -1]]], [[5], [6], [7]], layout="all")
    assert reference(rnd, cfg) is None
    res = replay_batch(batch_from_rounds([rnd])[0], cfg)
    assert res.error[0] != ERR_OK
    ok = Round.from_lists(
        [[[5, 6]], [[7, -1]]], [[5], [6], [7], [8]], key=(1, 17), layout="all"
    )  # step 1 keeps one row
    assert check_agree(cfg, [rnd, ok]) == ["rejected", "replayed"]
