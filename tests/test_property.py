"""Random dumps replay identically through replay/ and the simple implementation."""

import math

import pytest
from hypothesis import given, settings, strategies as st

from replay.io.rounds import Round
from replay.testing.replayer import replay_round
from tests.simple_replay import simple_replay
from tests.strategies import tree_configs

LOGS = [math.log(p) for p in (0.5, 0.25, 0.125, 0.0625)]  # few values: ties happen often


@st.composite
def random_round(draw):
    cfg = draw(tree_configs())
    gamma, spec, heads = cfg.gamma, cfg.top_k_spec, cfg.top_head
    steps_run = draw(st.integers(1, gamma))  # early stop
    extra_cols = draw(st.integers(0, 2))
    vocab = draw(st.integers(2, 6))  # small vocabulary: frequent hits and duplicates
    with_logp = draw(st.booleans())
    with_parents = draw(st.booleans())
    tok = st.integers(0, vocab - 1)
    steps, logp, parents = [], [], []
    level_start, level_size, num_nodes = 1, 1, 0
    for i in range(steps_run):
        cols = max(spec[i]) + extra_cols
        steps.append([[draw(tok) for _ in range(cols)] for _ in range(heads[i])])
        logp.append([[draw(st.sampled_from(LOGS)) for _ in range(cols)] for _ in range(heads[i])])
        if i == 0:
            parents.append([0])
        else:
            level_nodes = list(range(level_start, level_start + level_size))
            parents.append(draw(st.permutations(level_nodes))[: heads[i]])
            level_start += level_size
        level_size = sum(spec[i])
        num_nodes += level_size
    layout = draw(st.sampled_from(["all", "parents"]))
    rows = num_nodes + 1 if layout == "all" else sum(heads[:steps_run])
    validate = [[draw(tok)] for _ in range(rows)]
    return cfg, steps, validate, (logp if with_logp else None), (parents if with_parents else None), layout


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(random_round())
def test_replay_matches_simple_implementation(case):
    cfg, steps, validate, logp, parents, layout = case
    rnd = Round.from_lists(steps, validate, step_logp=logp, step_parents=parents, layout=layout)
    res = replay_round(rnd, cfg)
    nodes, tokens, bonus, kind, stop = simple_replay(
        steps, validate, cfg.top_k_spec, cfg.top_head, logp, parents, layout
    )
    assert list(res.acceptance.accepted_nodes) == nodes
    assert list(res.acceptance.accepted_tokens) == tokens
    assert res.acceptance.bonus_token == bonus
    assert res.acceptance.bonus_kind == kind
    assert res.acceptance.stop == stop
