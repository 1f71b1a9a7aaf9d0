"""Run the harness over a list of prompts: speculative (with dumps) and target-only, and the
numbers a run is judged by. Shared by ``specreplay generate`` and ``specreplay sweep``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from ..config import TreeConfig
from ..errors import ConfigError
from .dumps import round_writer, run_manifest, write_run_manifest
from .errors import PromptError
from .generate import DecodeOptions, Generation, RoundHook, speculative_generate, target_generate
from .models import LiveModel

Progress = Callable[[int], None]  # called with the number of new tokens just produced


@dataclass(frozen=True)
class RunSummary:
    sequences: int
    rounds: int  # target forwards after prefill (= decoded tokens for target-only)
    new_tokens: int  # output tokens (cut at max_new_tokens)
    mean_accepted_length: float  # draft tokens accepted per round, bonus excluded
    block_efficiency: float  # committed tokens per target forward (1.0 for target-only)
    total_s: float  # wall time of all sequences, prefill included
    tokens_per_s: float
    draft_s_per_round: float
    verify_s_per_round: float
    prefill_s: float


@dataclass(frozen=True)
class Comparison:
    baseline: RunSummary
    speedup: float  # tokens/s speculative over tokens/s target-only
    identical: bool | None  # outputs equal token for token; None when sampling (not comparable)


def check_prompts(prompts: Sequence[Sequence[int]], draft: LiveModel, target: LiveModel) -> None:
    if draft.vocab_size > target.vocab_size:
        raise PromptError(f"draft vocabulary ({draft.vocab_size}) is larger than the target's ({target.vocab_size})")
    for i, p in enumerate(prompts):
        if p and max(p) >= draft.vocab_size:
            raise PromptError(f"prompt {i + 1}: token id {max(p)} is outside the draft vocabulary ({draft.vocab_size})")


def check_record_k(config: TreeConfig, options: DecodeOptions, target: LiveModel) -> None:
    k = options.record_k
    if k is not None and not config.max_width <= k <= target.vocab_size:
        raise ConfigError(None, "record_k", f"= {k}: must lie between the widest topKSpec entry ({config.max_width}) and the vocabulary size ({target.vocab_size})")


def run_speculative(
    draft: LiveModel,
    target: LiveModel,
    prompts: Sequence[Sequence[int]],
    config: TreeConfig,
    options: DecodeOptions,
    dump_dir: str | Path | None = None,
    progress: Progress | None = None,
) -> list[Generation]:
    """One speculative generation per prompt; each round's files go to ``dump_dir`` when given."""
    check_prompts(prompts, draft, target)
    check_record_k(config, options, target)
    record = dump_dir is not None  # without a dump, the target's output layer runs only on the rows acceptance reads
    return [speculative_generate(draft, target, p, config, options, _hook(dump_dir, s, progress), record=record) for s, p in enumerate(prompts)]


def _hook(dump_dir: str | Path | None, sequence_index: int, progress: Progress | None) -> RoundHook | None:
    writer = round_writer(dump_dir, sequence_index) if dump_dir is not None else None
    if writer is None and progress is None:
        return None

    def hook(rnd, drafted, ver) -> None:
        if writer is not None:
            writer(rnd, drafted, ver)
        if progress is not None:
            progress(len(rnd.committed_tokens))

    return hook


def run_baseline(target: LiveModel, prompts: Sequence[Sequence[int]], options: DecodeOptions, progress: Progress | None = None) -> list[Generation]:
    """Target-only decoding of the same prompts."""
    out = []
    for p in prompts:
        out.append(target_generate(target, p, options))
        if progress is not None:
            progress(len(out[-1].output_ids))
    return out


def summarize(generations: Sequence[Generation]) -> RunSummary:
    rounds = [r for g in generations for r in g.rounds]
    forwards = sum(g.target_forwards for g in generations)
    new_tokens = sum(len(g.output_ids) for g in generations)
    total_s = sum(g.total_s for g in generations)
    n = max(len(rounds), 1)
    committed = sum(len(r.committed_tokens) for r in rounds) if rounds else new_tokens
    return RunSummary(
        sequences=len(generations),
        rounds=forwards,
        new_tokens=new_tokens,
        mean_accepted_length=sum(r.accepted_length for r in rounds) / n,
        block_efficiency=committed / max(forwards, 1),
        total_s=total_s,
        tokens_per_s=new_tokens / total_s if total_s > 0 else 0.0,
        draft_s_per_round=sum(r.draft_time_s for r in rounds) / n,
        verify_s_per_round=sum(r.verify_time_s for r in rounds) / n,
        prefill_s=sum(g.prefill_s for g in generations),
    )


def compare(speculative: Sequence[Generation], baseline: Sequence[Generation], temperature: float) -> Comparison:
    spec, base = summarize(speculative), summarize(baseline)
    identical = None if temperature > 0 else all(a.output_ids == b.output_ids for a, b in zip(speculative, baseline))
    speedup = spec.tokens_per_s / base.tokens_per_s if base.tokens_per_s > 0 else 0.0
    return Comparison(base, speedup, identical)


def save_run_manifest(
    out: str | Path,
    config: TreeConfig,
    draft: LiveModel,
    target: LiveModel,
    options: DecodeOptions,
    generations: Sequence[Generation],
    comparison: Comparison | None = None,
) -> Path:
    """Write the manifest of one speculative run (its rounds are already in ``out``)."""
    from dataclasses import asdict

    totals = asdict(summarize(generations))
    if comparison is not None:
        totals["baseline"] = asdict(comparison.baseline)
        totals["speedup"] = comparison.speedup
        totals["identical_to_baseline"] = comparison.identical
    models = {"draft": {"path": draft.name, "dtype": draft.dtype_name}, "target": {"path": target.name, "dtype": target.dtype_name}}
    run = {
        "tokenizer": target.name if target.tokenizer is not None else None,
        "dtype": target.dtype_name,
        "device": str(target.device),
        "temperature": options.temperature,
        "seed": options.seed,
        "max_new_tokens": options.max_new_tokens,
    }
    return write_run_manifest(out, run_manifest(config, models, run, generations, totals))
