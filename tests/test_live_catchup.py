"""The draft forwards of the live loop, as analysis.cost.model ``live_round_cost`` prices them: a
round's first draft forward (the catch-up) covers the whole prompt in a generation's first round,
then 1 token, or 2 when the previous round's accepted path ended at a leaf (a node without
children in that round's tree); each later step is one forward over its topHead[i] heads."""

from __future__ import annotations

import numpy as np
import pytest

from replay.core.config_grammar import parse_spec
from replay.live.generate import DecodeOptions, speculative_generate
from tests.live_fixtures import live_qwen_pair  # noqa: F401

PROMPTS = ([3, 14, 15, 9, 2, 6], [5, 35, 8, 9, 7, 9, 3, 2, 38, 4, 6, 26])


def ends_at_leaf(parents: np.ndarray, accepted: tuple[int, ...]) -> bool:
    """The accepted path is non-empty and its last node is nobody's parent (tree parents [n + 1] int64)."""
    return bool(accepted) and accepted[-1] not in set(int(p) for p in parents)


@pytest.mark.parametrize("spec", ["1,1", "1,1,1", "4,1x1"])
def test_each_draft_forward_covers_the_tokens_the_cost_model_charges(live_qwen_pair, spec):
    draft, target = live_qwen_pair
    config = parse_spec(spec, "test").tree
    sizes: list[int] = []  # input tokens of every draft decoder call, in order
    hook = draft.decoder.register_forward_pre_hook(
        lambda _m, _a, kw: sizes.append(int(kw["input_ids"].shape[1])), with_kwargs=True
    )
    kinds = set()
    try:
        for prompt in PROMPTS:
            rounds: list[tuple[np.ndarray, tuple[int, ...], int]] = []
            sizes.clear()
            speculative_generate(
                draft,
                target,
                prompt,
                config,
                DecodeOptions(24),
                record=False,
                on_round=lambda rnd, drafted, _v: rounds.append(
                    (drafted.tree.parents.copy(), rnd.accepted_nodes, rnd.draft_steps)
                ),
            )
            assert all(steps == config.gamma for _, _, steps in rounds) and len(sizes) == config.gamma * len(rounds)
            for r in range(len(rounds)):
                catch_up, expansions = sizes[r * config.gamma], sizes[r * config.gamma + 1 : (r + 1) * config.gamma]
                assert expansions == list(config.top_head[1:])
                if r == 0:
                    assert catch_up == len(prompt)  # the draft's prefill: the target's happens before round 1
                    continue
                parents, accepted, _ = rounds[r - 1]
                leaf = ends_at_leaf(parents, accepted)
                assert catch_up == 1 + leaf
                kinds.add(leaf)
    finally:
        hook.remove()
    assert kinds == {True, False}  # both kinds of round occurred
