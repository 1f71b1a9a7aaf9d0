"""The speculative loop (draft a tree, verify it in one target forward, accept, keep the path) and
the target-only loop it must reproduce. Loading, dumping and printing live elsewhere."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from replay.core.acceptance import Acceptance
from replay.core.config import TreeConfig
from replay.core.tree import Tree

from .clock import synchronize, timed_call
from .draft import DraftedTree, draft_keep_indices, draft_tree
from .forward import causal_visible, forward_hidden, forward_tokens, keep_cache_entries, new_cache, to_device
from .kvcache import release_cache, static_capacity
from .models.load import LiveModel
from .sampling import accept_sampled, sample_token, target_probs
from .scores import greedy_token
from .verify import Verification, accept_verified_greedy, target_keep_indices, verify_tree

AcceptRule = Callable[[Tree, Verification], Acceptance]
RoundHook = Callable[["LiveRound", DraftedTree, Verification], None]


@dataclass(frozen=True)
class DecodeOptions:
    max_new_tokens: int
    temperature: float = 0.0  # 0 = greedy
    seed: int = 0  # with the sequence index, seeds the sampling draws (temperature > 0): see sequence_rng
    record_k: int | None = None  # candidate columns recorded per row; None = the config's widest
    eos_token_id: int | None = None  # stop after committing it


@dataclass(frozen=True)
class LiveRound:
    root_pos: int  # position of the root token in its sequence (prompt included)
    root_token: int
    num_nodes: int  # draft nodes verified, root excluded
    draft_steps: int
    accepted_nodes: tuple[int, ...]
    bonus_token: int | None
    committed_tokens: tuple[int, ...]
    draft_time_s: float
    verify_time_s: float  # target forward + acceptance + target cache trim

    @property
    def accepted_length(self) -> int:
        return len(self.accepted_nodes)


@dataclass(frozen=True)
class Generation:
    prompt_ids: tuple[int, ...]
    output_ids: tuple[int, ...]  # without the prompt, cut at max_new_tokens / after EOS
    rounds: tuple[LiveRound, ...]  # empty for target-only decoding
    target_forwards: int  # decoding forwards (prefill excluded)
    prefill_s: float
    total_s: float  # prefill and decoding; time spent in on_round hooks (dump writing) excluded


SEED_RULE = "sequence i samples with numpy default_rng(SeedSequence([seed, i]))"


def sequence_rng(seed: int, sequence: int) -> np.random.Generator:
    """The generator of sequence ``sequence``'s sampling draws: derived from (seed, sequence), so
    two sequences of one run draw independently (a prompt repeated n times gives n samples) and
    the same seed gives the same outputs. ``seed`` and ``sequence`` must be >= 0."""
    if seed < 0 or sequence < 0:
        raise ValueError(f"seed ({seed}) and sequence index ({sequence}) must be >= 0")
    return np.random.default_rng(np.random.SeedSequence([seed, sequence]))


def acceptance_rule(temperature: float, rng: np.random.Generator) -> AcceptRule:
    """Greedy from the validate matrix at temperature 0, the lossless sampling walk otherwise."""
    if temperature <= 0:
        return accept_verified_greedy
    return lambda tree, ver: accept_sampled(tree, ver.target, temperature, rng)


def speculative_generate(
    draft: LiveModel,
    target: LiveModel,
    prompt_ids: Sequence[int],
    config: TreeConfig,
    options: DecodeOptions,
    on_round: RoundHook | None = None,
    accept: AcceptRule | None = None,
    sequence: int = 0,
    record: bool = True,
) -> Generation:
    """Tree speculative decoding of one prompt, the ``sequence``-th of its run (it picks the sampling
    draws: ``sequence_rng``); ``accept`` overrides the rule (tests only).

    ``record``: every round carries the validate matrix (all rows of the target's output layer),
    as a dump needs; False computes only the rows acceptance reads (``verify.first_rows``).
    """
    accept = accept or acceptance_rule(options.temperature, sequence_rng(options.seed, sequence))
    record_k = options.record_k or config.max_width
    start = _now(target.device)
    # Committed tokens can overshoot max_new_tokens by one round; a round adds at most its tree.
    capacity = len(prompt_ids) + options.max_new_tokens + 2 * (config.num_nodes + 1)
    tcache, dcache = _cache(target, capacity), _cache(draft, capacity)
    prefill_s = _prefill(target, tcache, prompt_ids)
    tokens = list(prompt_ids)
    rounds: list[LiveRound] = []
    hook_s = 0.0  # dump writing is not decoding: keep it out of tokens/s
    while not _finished(tokens, len(prompt_ids), options):
        rnd, drafted, ver = _round(draft, target, dcache, tcache, tokens, config, accept, record_k, record)
        tokens.extend(rnd.committed_tokens)
        rounds.append(rnd)
        if on_round is not None:
            hook_s += timed_call(target.device, lambda: on_round(rnd, drafted, ver))[1]
    release_cache(tcache)  # a pooled static cache serves the next generation
    release_cache(dcache)
    output = _cut(tokens[len(prompt_ids) :], options)
    return Generation(
        tuple(prompt_ids), output, tuple(rounds), len(rounds), prefill_s, _now(target.device) - start - hook_s
    )


def _round(
    draft, target, dcache, tcache, tokens, config, accept, record_k, record
) -> tuple[LiveRound, DraftedTree, Verification]:
    root_pos = len(tokens) - 1
    drafted, draft_s = timed_call(draft.device, lambda: draft_tree(draft, dcache, tokens, config, record_k))

    def verify_and_accept() -> tuple[Verification, Acceptance]:
        ver = verify_tree(target, tcache, drafted.tree, root_pos, record_k, record)
        acc = accept(drafted.tree, ver)
        keep_cache_entries(tcache, target_keep_indices(root_pos, acc.accepted_nodes))
        return ver, acc

    (ver, acc), verify_s = timed_call(target.device, verify_and_accept)
    keep_cache_entries(dcache, draft_keep_indices(drafted, root_pos, acc.accepted_nodes))
    rnd = LiveRound(
        root_pos,
        tokens[-1],
        drafted.tree.num_nodes,
        len(drafted.steps),
        acc.accepted_nodes,
        acc.bonus_token,
        acc.committed_tokens,
        draft_s,
        verify_s,
    )
    return rnd, drafted, ver


def target_generate(
    target: LiveModel, prompt_ids: Sequence[int], options: DecodeOptions, sequence: int = 0
) -> Generation:
    """Target-only decoding, one token per forward: the reference the speculative loop must match.
    ``sequence`` picks the sampling draws as in ``speculative_generate``."""
    rng = sequence_rng(options.seed, sequence)
    start = _now(target.device)
    cache = _cache(target, len(prompt_ids) + options.max_new_tokens)
    prefill_s = _prefill(target, cache, prompt_ids)
    tokens = list(prompt_ids)
    forwards = 0
    while not _finished(tokens, len(prompt_ids), options):
        pos = len(tokens) - 1
        tok = to_device(np.array([tokens[-1]], dtype=np.int64), target.device)
        where = to_device(np.array([pos], dtype=np.int64), target.device)
        logits = forward_tokens(target, cache, tok, where, causal_visible(pos, 1, target.device))[0]
        tokens.append(_next_token(logits, options.temperature, rng))
        forwards += 1
    release_cache(cache)
    output = _cut(tokens[len(prompt_ids) :], options)
    return Generation(tuple(prompt_ids), output, (), forwards, prefill_s, _now(target.device) - start)


def _next_token(logits: torch.Tensor, temperature: float, rng: np.random.Generator) -> int:
    if temperature <= 0:
        return greedy_token(logits)
    return sample_token(target_probs(logits[None], temperature)[0], rng)


def _cache(model: LiveModel, capacity: int):
    """A dynamic cache, or a static one of at least ``capacity`` entries for a model on the fast path."""
    return new_cache(model, static_capacity(capacity) if model.static_kv else None)


def _prefill(model: LiveModel, cache: Any, prompt_ids: Sequence[int]) -> float:
    """Cache every prompt token but the last (the first round's root); returns seconds.
    No logits: nothing reads them (the root's come from the first round's forward)."""
    if len(prompt_ids) < 1:
        raise ValueError("a prompt needs at least one token")
    n = len(prompt_ids) - 1
    if n == 0:
        return 0.0
    tokens = to_device(np.asarray(prompt_ids[:-1], dtype=np.int64), model.device)
    positions = torch.arange(n, dtype=torch.int64, device=model.device)
    _, seconds = timed_call(
        model.device, lambda: forward_hidden(model, cache, tokens, positions, causal_visible(0, n, model.device))
    )
    return seconds


def _finished(tokens: list[int], prompt_len: int, options: DecodeOptions) -> bool:
    new = tokens[prompt_len:]
    return len(new) >= options.max_new_tokens or (options.eos_token_id is not None and options.eos_token_id in new)


def _cut(new_tokens: list[int], options: DecodeOptions) -> tuple[int, ...]:
    out = new_tokens[: options.max_new_tokens]
    if options.eos_token_id is not None and options.eos_token_id in out:
        out = out[: out.index(options.eos_token_id) + 1]
    return tuple(out)


def _now(device: torch.device) -> float:
    synchronize(device)
    return time.perf_counter()
