"""Sampling (temperature > 0) is lossless: committed tokens follow the target's distribution.

Proved statistically (tests/live_stats.py: a total-variation bound with false-alarm rate ALPHA)
against a reference the harness has no hand in: softmax(logits / T) computed here with plain
torch from the model's logits, at temperatures other than 1 (so a harness that mishandles T is
visible). The same checks must reject deliberately wrong rules and a wrong ``target_probs``
(temperature ignored, or applied twice); the draw counts are chosen so that
``live_stats.miss_bound`` proves each wrong distribution fails with probability >= 1 - MISS.
"""

import numpy as np
import pytest

from replay.core.acceptance import Acceptance
from replay.core.config import TreeConfig
from replay.core.vocab import BONUS_CORRECTION, STOP_MISMATCH
from replay.live import generate, sampling
from replay.live.draft import draft_tree
from replay.live.forward import new_cache
from replay.live.generate import DecodeOptions, _prefill, sequence_rng, speculative_generate, target_generate
from replay.live.run import run_baseline, run_speculative
from replay.live.sampling import accept_sampled
from replay.live.verify import verify_tree
from tests.live_fixtures import make_pair, torch
from tests.live_stats import miss_bound, tv_check

ALPHA = 1e-4  # a correct sampler fails a check with probability at most this
MISS = 1e-6  # each wrong distribution below passes a check with probability at most this (proved)
VOCAB = 16
CONFIG = TreeConfig.from_lists([[4], [2, 2], [1, 1]])
PROMPT = [3, 1, 4, 1, 5]
SEED = 2024

# One round on fixed logits: draws are cheap, so many of them and a temperature above 1.
ROUND_T = 1.6
ROUND_DRAWS = 10000
# The whole loop (~25 ms a draw): a temperature below 1, where the first two tokens concentrate on
# few outcomes (small E[TV]) while T = 1 and T^2 move them far (tests/live_stats.py, miss_bound).
E2E_T = 0.4
E2E_DRAWS = 600


def reference_probs(logits, temperature):
    """[n, V] float64 softmax(logits / T): the test's own, independent of replay.live.sampling."""
    return torch.softmax(logits.double() / temperature, dim=-1).cpu().numpy()


def ignores_temperature(logits, temperature):
    """WRONG target_probs: T = 1 whatever is asked."""
    return torch.softmax(logits.double(), dim=-1).cpu().numpy()


def applies_temperature_twice(logits, temperature):
    """WRONG target_probs: logits / T / T."""
    return torch.softmax(logits.double() / temperature / temperature, dim=-1).cpu().numpy()


# The temperature each wrong target_probs actually samples at, given the requested one.
WRONG_PROBS = {ignores_temperature: lambda t: 1.0, applies_temperature_twice: lambda t: t * t}


@pytest.fixture
def patch_target_probs(monkeypatch):
    def patch(wrong):
        monkeypatch.setattr(sampling, "target_probs", wrong)  # the acceptance walk's
        monkeypatch.setattr(generate, "target_probs", wrong)  # target-only sampling's

    return patch


@pytest.fixture(scope="module")
def small_vocab_pair():
    return make_pair("qwen2", vocab_size=VOCAB, seed=3, noise=0.2)


@pytest.fixture(scope="module")
def one_round(small_vocab_pair):
    """A real drafted tree and the target's real logits at every node (one forward)."""
    draft, target = small_vocab_pair
    d = draft_tree(draft, new_cache(draft), PROMPT, CONFIG, record_k=4)
    tcache = new_cache(target)
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


def draw(probs, rng):
    return int(rng.choice(probs.shape[0], p=probs))


def always_rank0(tree, logits, temperature, rng):
    """WRONG: trust the draft's top choice all the way down, then draw the bonus."""
    probs = reference_probs(logits, temperature)
    node, path = 0, []
    while tree.children(node).shape[0]:
        node = int(tree.children(node)[0])
        path.append(node)
    bonus = draw(probs[node], rng)
    return Acceptance(tuple(path), tuple(int(tree.tokens[u]) for u in path), bonus, BONUS_CORRECTION, STOP_MISMATCH)


def accept_if_in_target_top3(tree, logits, temperature, rng):
    """WRONG: accept the first child the target ranks in its top 3, else draw a correction."""
    probs = reference_probs(logits, temperature)
    node, path = 0, []
    while True:
        top3 = set(np.argsort(-probs[node])[:3].tolist())
        hit = [int(c) for c in tree.children(node) if int(tree.tokens[c]) in top3]
        if not hit:
            bonus = draw(probs[node], rng)
            return Acceptance(
                tuple(path), tuple(int(tree.tokens[u]) for u in path), bonus, BONUS_CORRECTION, STOP_MISMATCH
            )
        node = hit[0]
        path.append(node)


def second_chance(tree, logits, temperature, rng):
    """WRONG, subtly: when the draw matches no child, draw once more before giving up (a retry
    inflates acceptance: each child gets p_c * (2 - sum of children's p) instead of p_c)."""
    probs = reference_probs(logits, temperature)
    node, path = 0, []
    while True:
        kids = tree.children(node)
        x = draw(probs[node], rng)
        hit = kids[tree.tokens[kids] == x]
        if hit.shape[0] == 0 and kids.shape[0]:
            x = draw(probs[node], rng)
            hit = kids[tree.tokens[kids] == x]
        if hit.shape[0] == 0:
            return Acceptance(tuple(path), tuple(int(tree.tokens[u]) for u in path), x, BONUS_CORRECTION, STOP_MISMATCH)
        node = int(hit[0])
        path.append(node)


def round_draws(rule, tree, logits, n, seed=11):
    rng = np.random.default_rng(seed)
    return [rule(tree, logits, ROUND_T, rng).committed_tokens for _ in range(n)]


def round_reference(tree, logits, temperature=ROUND_T):
    return exact_round_outcomes(tree, reference_probs(logits, temperature))


def test_exact_outcome_table_is_a_distribution(one_round):
    tree, logits = one_round
    assert abs(sum(round_reference(tree, logits).values()) - 1.0) < 1e-9


def test_round_acceptance_is_lossless(one_round):
    tree, logits = one_round
    check = tv_check(round_draws(accept_sampled, tree, logits, ROUND_DRAWS), round_reference(tree, logits), ALPHA)
    print(check)
    assert check.passed, check


@pytest.mark.parametrize("wrong_rule", [always_rank0, accept_if_in_target_top3, second_chance])
def test_wrong_round_rules_fail_the_same_check(one_round, wrong_rule):
    tree, logits = one_round
    check = tv_check(round_draws(wrong_rule, tree, logits, ROUND_DRAWS), round_reference(tree, logits), ALPHA)
    print(check)
    assert not check.passed, check


@pytest.mark.parametrize("wrong_probs", list(WRONG_PROBS), ids=lambda f: f.__name__)
def test_wrong_target_probs_fail_the_round_check(one_round, patch_target_probs, wrong_probs):
    tree, logits = one_round
    patch_target_probs(wrong_probs)
    check = tv_check(round_draws(accept_sampled, tree, logits, ROUND_DRAWS), round_reference(tree, logits), ALPHA)
    print(check)
    assert not check.passed, check


def exact_first_two(target, prompt, temperature):
    """P(x1, x2) of target-only sampling at ``temperature``, from plain transformers forwards."""
    with torch.no_grad():
        p1 = reference_probs(target.module(input_ids=torch.tensor([prompt])).logits[0, -1:], temperature)[0]
        seqs = torch.tensor([prompt + [x] for x in range(VOCAB)])
        p2 = reference_probs(target.module(input_ids=seqs).logits[:, -1], temperature)
    return {(a, b): float(p1[a] * p2[a, b]) for a in range(VOCAB) for b in range(VOCAB)}


def test_draw_counts_make_every_wrong_temperature_fail_surely(one_round, small_vocab_pair):
    """The design, from exact distributions alone: with these draw counts the checks catch a
    target_probs that ignores T or applies it twice, except with probability < MISS."""
    tree, logits = one_round
    _, target = small_vocab_pair
    for effective in WRONG_PROBS.values():
        wrong_round = round_reference(tree, logits, effective(ROUND_T))
        assert miss_bound(round_reference(tree, logits), wrong_round, ROUND_DRAWS, ALPHA) < MISS
        wrong_e2e = exact_first_two(target, PROMPT, effective(E2E_T))
        assert miss_bound(exact_first_two(target, PROMPT, E2E_T), wrong_e2e, E2E_DRAWS, ALPHA) < MISS


def generated_first_two(draft, target, n, accept=None):
    """The first two output tokens of n sequences of one run: one prompt repeated n times, each
    sequence drawing independently (sequence_rng)."""
    options = DecodeOptions(max_new_tokens=2, temperature=E2E_T, seed=SEED)
    if accept is None:
        return [g.output_ids for g in run_speculative(draft, target, [PROMPT] * n, CONFIG, options)]
    out = []
    for i in range(n):
        rng = sequence_rng(SEED, i)
        rule = lambda tree, ver, rng=rng: accept(tree, ver.logits, E2E_T, rng)  # noqa: E731
        out.append(speculative_generate(draft, target, PROMPT, CONFIG, options, accept=rule, sequence=i).output_ids)
    return out


@pytest.mark.slow
def test_generated_tokens_follow_the_target_distribution_end_to_end(small_vocab_pair):
    """The whole loop (drafting, one-forward verification, cache trimming across rounds)."""
    draft, target = small_vocab_pair
    check = tv_check(generated_first_two(draft, target, E2E_DRAWS), exact_first_two(target, PROMPT, E2E_T), ALPHA)
    print(check)
    assert check.passed, check


@pytest.mark.slow
@pytest.mark.parametrize("wrong_probs", list(WRONG_PROBS), ids=lambda f: f.__name__)
def test_wrong_target_probs_fail_end_to_end(small_vocab_pair, patch_target_probs, wrong_probs):
    draft, target = small_vocab_pair
    patch_target_probs(wrong_probs)
    check = tv_check(generated_first_two(draft, target, E2E_DRAWS), exact_first_two(target, PROMPT, E2E_T), ALPHA)
    print(check)
    assert not check.passed, check


def test_wrong_rule_fails_end_to_end(small_vocab_pair):
    draft, target = small_vocab_pair
    # Fewer draws suffice: with 2 new tokens this rule always commits the draft's rank-0 pair (a
    # point mass, TV = 1 - P(that pair)), and fewer draws only widen the threshold.
    check = tv_check(
        generated_first_two(draft, target, 100, always_rank0), exact_first_two(target, PROMPT, E2E_T), ALPHA
    )
    print(check)
    assert not check.passed, check


# ---- seeding: one seed per run, independent draws per sequence


def test_a_repeated_prompt_gives_independent_samples_reproducibly(small_vocab_pair):
    """Each sequence draws from (seed, sequence index): the same prompt three times is three
    samples (it was one sample three times: every sequence reseeded with the run's seed), and the
    same seed gives the same three again."""
    draft, target = small_vocab_pair
    options = DecodeOptions(max_new_tokens=12, temperature=ROUND_T, seed=SEED)
    first = [g.output_ids for g in run_speculative(draft, target, [PROMPT] * 3, CONFIG, options)]
    assert len(set(first)) == 3, first
    assert [g.output_ids for g in run_speculative(draft, target, [PROMPT] * 3, CONFIG, options)] == first
    other_seed = DecodeOptions(max_new_tokens=12, temperature=ROUND_T, seed=SEED + 1)
    assert [g.output_ids for g in run_speculative(draft, target, [PROMPT] * 3, CONFIG, other_seed)] != first
    # A sequence's draws depend on its index only, not on the other prompts of the run.
    assert run_speculative(draft, target, [[7, 7], PROMPT], CONFIG, options)[1].output_ids == first[1]
    baseline = [g.output_ids for g in run_baseline(target, [PROMPT] * 3, options)]
    assert len(set(baseline)) == 3 and baseline[2] == target_generate(target, PROMPT, options, sequence=2).output_ids
