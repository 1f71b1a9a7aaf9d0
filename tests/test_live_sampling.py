"""Sampling (temperature > 0) is lossless: committed tokens follow the target's distribution.

Proved statistically (tests/live_stats.py: a total-variation bound with false-alarm rate ALPHA),
and the same check must reject deliberately wrong acceptance rules.
"""

import numpy as np
import pytest
import torch
from tests.live_fixtures import make_pair
from tests.live_stats import tv_check

from replay.acceptance import Acceptance
from replay.config import TreeConfig
from replay.live.draft import draft_tree
from replay.live.forward import new_cache
from replay.live.generate import DecodeOptions, speculative_generate
from replay.live.sampling import accept_sampled, sample_token, target_probs
from replay.live.verify import verify_tree
from replay.vocab import BONUS_CORRECTION, STOP_MISMATCH

ALPHA = 1e-4  # a correct sampler fails a check with probability at most this
VOCAB = 16
TEMPERATURE = 0.8
CONFIG = TreeConfig.from_lists([[4], [2, 2], [1, 1]])
PROMPT = [3, 1, 4, 1, 5]


@pytest.fixture(scope="module")
def small_vocab_pair():
    return make_pair("qwen2", vocab_size=VOCAB, seed=3, noise=0.2)


@pytest.fixture(scope="module")
def one_round(small_vocab_pair):
    """A real drafted tree and the target's real probabilities at every node (one forward)."""
    draft, target = small_vocab_pair
    d = draft_tree(draft, new_cache(draft), PROMPT, CONFIG, record_k=4)
    tcache = new_cache(target)
    from replay.live.generate import _prefill

    _prefill(target, tcache, PROMPT)
    ver = verify_tree(target, tcache, d.tree, len(PROMPT) - 1, 4)
    return d.tree, ver.logits


def exact_round_outcomes(tree, probs):
    """P(committed tokens of the round) if every token is a target draw: path to u, then x at u
    with x not a child of u (a child would continue the walk)."""
    out = {}
    reach = np.zeros(tree.tokens.shape[0])
    reach[0] = 1.0
    for u in range(tree.tokens.shape[0]):
        if u:
            reach[u] = reach[tree.parents[u]] * probs[tree.parents[u], tree.tokens[u]]
        path = tuple(int(tree.tokens[v]) for v in tree.path_to(u)[1:])
        kids = set(tree.tokens[tree.children(u)].tolist())
        for x in range(probs.shape[1]):
            if x not in kids:
                out[path + (x,)] = reach[u] * probs[u, x]
    return out


def always_rank0(tree, logits, rng):
    """WRONG: trust the draft's top choice all the way down, then draw the bonus."""
    probs = target_probs(logits, TEMPERATURE)
    node, path = 0, []
    while tree.children(node).shape[0]:
        node = int(tree.children(node)[0])
        path.append(node)
    bonus = sample_token(probs[node], rng)
    return Acceptance(tuple(path), tuple(int(tree.tokens[u]) for u in path), bonus, BONUS_CORRECTION, STOP_MISMATCH)


def accept_if_in_target_top3(tree, logits, rng):
    """WRONG: accept the first child the target ranks in its top 3, else draw a correction."""
    probs = target_probs(logits, TEMPERATURE)
    node, path = 0, []
    while True:
        top3 = set(np.argsort(-probs[node])[:3].tolist())
        hit = [int(c) for c in tree.children(node) if int(tree.tokens[c]) in top3]
        if not hit:
            bonus = sample_token(probs[node], rng)
            return Acceptance(tuple(path), tuple(int(tree.tokens[u]) for u in path), bonus, BONUS_CORRECTION, STOP_MISMATCH)
        node = hit[0]
        path.append(node)


def second_chance(tree, logits, rng):
    """WRONG, subtly: when the draw matches no child, draw once more before giving up (a retry
    inflates acceptance: each child gets p_c * (2 - sum of children's p) instead of p_c)."""
    probs = target_probs(logits, TEMPERATURE)
    node, path = 0, []
    while True:
        kids = tree.children(node)
        draw = sample_token(probs[node], rng)
        hit = kids[tree.tokens[kids] == draw]
        if hit.shape[0] == 0 and kids.shape[0]:
            draw = sample_token(probs[node], rng)
            hit = kids[tree.tokens[kids] == draw]
        if hit.shape[0] == 0:
            return Acceptance(tuple(path), tuple(int(tree.tokens[u]) for u in path), draw, BONUS_CORRECTION, STOP_MISMATCH)
        node = int(hit[0])
        path.append(node)


def correct_rule(tree, logits, rng):
    """The harness's rule."""
    return accept_sampled(tree, logits, TEMPERATURE, rng)


def round_draws(rule, tree, logits, n, seed):
    rng = np.random.default_rng(seed)
    return [rule(tree, logits, rng).committed_tokens for _ in range(n)]


def test_exact_outcome_table_is_a_distribution(one_round):
    tree, logits = one_round
    probs = target_probs(logits, TEMPERATURE)
    assert abs(sum(exact_round_outcomes(tree, probs).values()) - 1.0) < 1e-9


def test_round_acceptance_is_lossless(one_round):
    tree, logits = one_round
    probs = target_probs(logits, TEMPERATURE)
    check = tv_check(round_draws(correct_rule, tree, logits, 20000, seed=11), exact_round_outcomes(tree, probs), ALPHA)
    print(check)
    assert check.passed, check


@pytest.mark.parametrize("wrong_rule", [always_rank0, accept_if_in_target_top3, second_chance])
def test_wrong_round_rules_fail_the_same_check(one_round, wrong_rule):
    tree, logits = one_round
    probs = target_probs(logits, TEMPERATURE)
    check = tv_check(round_draws(wrong_rule, tree, logits, 20000, seed=11), exact_round_outcomes(tree, probs), ALPHA)
    print(check)
    assert not check.passed, check


def exact_first_two(target, prompt):
    """P(x1, x2) of target-only sampling at TEMPERATURE, from plain transformers forwards."""
    with torch.no_grad():
        p1 = torch.softmax(target.module(input_ids=torch.tensor([prompt])).logits[0, -1].double() / TEMPERATURE, -1)
        seqs = torch.tensor([prompt + [x] for x in range(VOCAB)])
        p2 = torch.softmax(target.module(input_ids=seqs).logits[:, -1].double() / TEMPERATURE, -1)
    return {(a, b): float(p1[a] * p2[a, b]) for a in range(VOCAB) for b in range(VOCAB)}


def generated_first_two(draft, target, n, accept=None):
    out = []
    for seed in range(n):
        opts = DecodeOptions(max_new_tokens=2, temperature=TEMPERATURE, seed=seed)
        rule = None if accept is None else _bind(accept, np.random.default_rng(seed))
        out.append(speculative_generate(draft, target, PROMPT, CONFIG, opts, accept=rule).output_ids)
    return out


def _bind(rule, rng):
    return lambda tree, ver: rule(tree, ver.logits, rng)


def test_generated_tokens_follow_the_target_distribution_end_to_end(small_vocab_pair):
    """The whole loop (drafting, one-forward verification, cache trimming across rounds)."""
    draft, target = small_vocab_pair
    check = tv_check(generated_first_two(draft, target, 1200), exact_first_two(target, PROMPT), ALPHA)
    print(check)
    assert check.passed, check


def test_wrong_rule_fails_end_to_end(small_vocab_pair):
    draft, target = small_vocab_pair
    # Fewer draws suffice: the wrong rule is far off, and fewer draws only widen the threshold.
    check = tv_check(generated_first_two(draft, target, 300, always_rank0), exact_first_two(target, PROMPT), ALPHA)
    print(check)
    assert not check.passed, check
