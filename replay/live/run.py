"""Run the harness over a list of prompts: speculative (with dumps) and target-only, and the
numbers a run is judged by. Shared by ``specreplay generate`` and ``specreplay sweep``.

``run_timed`` is how the commands run: both methods timed together by ``timing.time_methods``; the
dump and the per-round numbers are the first timed pass's (every pass decodes the same tokens)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from replay.core.config import TreeConfig
from replay.core.headline import greedy_rounds, summary_row
from replay.util.errors import ConfigError, SpecReplayError

from .clock import device_clock
from .dumps import RoundBuffer, round_writer, run_manifest, write_run_manifest
from .errors import PromptError
from .generate import DecodeOptions, Generation, RoundHook, speculative_generate, target_generate
from .models.load import LiveModel, check_pair
from .timing import Clock, Timing, time_methods
from .verify import node_logprob_temperatures

Progress = Callable[[int], None]  # called with the number of new tokens just produced
SPECULATIVE, TARGET_ONLY = "speculative", "target-only"  # method names in a run's timing


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
    # With a timing session: total_s and tokens_per_s are the median pass, these its extremes.
    tokens_per_s_min: float | None = None
    tokens_per_s_max: float | None = None
    timed_passes: int = 0  # 0: one run, timed by the generation loop itself


@dataclass(frozen=True)
class BaselineComparison:
    baseline: RunSummary
    speedup: float  # tokens/s speculative over tokens/s target-only (median of per-pass ratios)
    identical: bool | None  # outputs equal token for token; None when sampling (not comparable)
    speedup_min: float | None = None  # lowest and highest per-pass ratio (timed runs)
    speedup_max: float | None = None


@dataclass(frozen=True)
class TimedRun:
    generations: tuple[Generation, ...]  # speculative, first timed pass (the one the dump holds)
    baseline: tuple[Generation, ...] | None  # target-only, first timed pass; None without baseline
    timing: Timing

    @property
    def summary(self) -> RunSummary:
        return summarize(self.generations, self.timing, SPECULATIVE)

    def comparison(self, temperature: float) -> BaselineComparison | None:
        if self.baseline is None:
            return None
        return compare_with_baseline(self.generations, self.baseline, temperature, self.timing)


def check_prompts(prompts: Sequence[Sequence[int]], draft: LiveModel, target: LiveModel) -> None:
    check_pair(draft, target)  # again for models built in Python, not through load_pair
    size = min(draft.input_vocab_size, target.input_vocab_size)
    for i, p in enumerate(prompts):
        if p and max(p) >= size:
            raise PromptError(f"prompt {i + 1}: token id {max(p)} is outside the vocabulary ({size})")


def check_record_k(config: TreeConfig, options: DecodeOptions, target: LiveModel) -> None:
    """The config's widths and --record-k against the vocabulary, as soon as the models are loaded:
    a draft top-k wider than the vocabulary has no k candidates to keep."""
    if config.max_width > target.vocab_size:
        raise SpecReplayError(
            f"--config {config.short()}: a topKSpec width of {config.max_width} is larger than the vocabulary "
            f"size {target.vocab_size} of these models; use widths of at most {target.vocab_size}"
        )
    k = options.record_k
    if k is not None and not config.max_width <= k <= target.vocab_size:
        raise SpecReplayError(
            f"--record-k {k}: candidate columns per dump row must lie between the config's widest topKSpec entry "
            f"({config.max_width}) and the vocabulary size ({target.vocab_size})"
        )


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
    return [
        speculative_generate(
            draft,
            target,
            p,
            config,
            options,
            _hook(round_writer(dump_dir, s) if dump_dir is not None else None, progress),
            sequence=s,
            record=record,
        )
        for s, p in enumerate(prompts)
    ]


def run_timed(
    draft: LiveModel,
    target: LiveModel,
    prompts: Sequence[Sequence[int]],
    config: TreeConfig,
    options: DecodeOptions,
    repeats: int = 3,
    baseline: bool = True,
    dump_dir: str | Path | None = None,
    progress: Progress | None = None,
    clock: Clock | None = None,
) -> TimedRun:
    """Speculative decoding (and target-only with ``baseline``) of every prompt, timed together;
    the first timed pass's rounds are written to ``dump_dir`` after the timing ends."""
    check_prompts(prompts, draft, target)
    check_record_k(config, options, target)
    if repeats < 1:
        raise ConfigError(None, "repeats", f"= {repeats}: at least one timed pass is needed")
    kept: dict[str, dict[int, Generation]] = {SPECULATIVE: {}, TARGET_ONLY: {}}
    rounds = RoundBuffer()

    def speculative(i: int, repeat: int) -> int:
        first = repeat == 0
        hook = _hook(rounds.hook(i) if first and dump_dir is not None else None, progress if first else None)
        # Every pass computes what the dump needs (all rows) when there is one, so passes cost alike.
        # sequence=i: prompt i draws from its own generator (sequence_rng), the same in every pass.
        g = speculative_generate(
            draft, target, prompts[i], config, options, hook, sequence=i, record=dump_dir is not None
        )
        return _keep(kept[SPECULATIVE], i, first, g)

    def target_only(i: int, repeat: int) -> int:
        g = target_generate(target, prompts[i], options, sequence=i)
        if repeat == 0 and progress is not None:
            progress(len(g.output_ids))
        return _keep(kept[TARGET_ONLY], i, repeat == 0, g)

    methods = {SPECULATIVE: speculative, **({TARGET_ONLY: target_only} if baseline else {})}
    timing = time_methods(methods, len(prompts), repeats, clock or device_clock(draft.device, target.device))
    if dump_dir is not None:
        rounds.write(dump_dir)
    ordered = {m: tuple(kept[m][i] for i in range(len(prompts))) for m in methods}
    return TimedRun(ordered[SPECULATIVE], ordered.get(TARGET_ONLY), timing)


def _keep(store: dict[int, Generation], index: int, first: bool, generation: Generation) -> int:
    if first:
        store[index] = generation
    return len(generation.output_ids)


def _hook(writer: RoundHook | None, progress: Progress | None) -> RoundHook | None:
    if writer is None and progress is None:
        return None

    def hook(rnd, drafted, ver) -> None:
        if writer is not None:
            writer(rnd, drafted, ver)
        if progress is not None:
            progress(len(rnd.committed_tokens))

    return hook


def run_baseline(
    target: LiveModel, prompts: Sequence[Sequence[int]], options: DecodeOptions, progress: Progress | None = None
) -> list[Generation]:
    """Target-only decoding of the same prompts."""
    out = []
    for s, p in enumerate(prompts):
        out.append(target_generate(target, p, options, sequence=s))
        if progress is not None:
            progress(len(out[-1].output_ids))
    return out


def summarize(generations: Sequence[Generation], timing: Timing | None = None, method: str = SPECULATIVE) -> RunSummary:
    """Counts and per-round times from ``generations``; with ``timing``, wall time and tokens/s
    are ``method``'s median pass (and its lowest and highest) instead of the generations' own."""
    rounds = [r for g in generations for r in g.rounds]
    forwards = sum(g.target_forwards for g in generations)
    new_tokens = sum(len(g.output_ids) for g in generations)
    total_s = sum(g.total_s for g in generations)
    n = max(len(rounds), 1)
    committed = sum(len(r.committed_tokens) for r in rounds) if rounds else new_tokens
    accepted = np.array([r.accepted_length for r in rounds], dtype=np.int64)  # [R]
    # by its formula as every command's; 0 for a target-only run (no round)
    mean_accepted = summary_row(greedy_rounds(accepted, {}), names=("mean_accepted_length",))["mean_accepted_length"]
    timed = {}
    if timing is not None:
        rate = timing.method(method).rate
        total_s = timing.method(method).time.median
        timed = {"tokens_per_s_min": rate.min, "tokens_per_s_max": rate.max, "timed_passes": timing.repeats}
    return RunSummary(
        sequences=len(generations),
        rounds=forwards,
        new_tokens=new_tokens,
        mean_accepted_length=mean_accepted if rounds else 0.0,
        block_efficiency=committed / max(forwards, 1),
        total_s=total_s,
        tokens_per_s=(timing.method(method).rate.median if timing else new_tokens / total_s) if total_s > 0 else 0.0,
        draft_s_per_round=sum(r.draft_time_s for r in rounds) / n,
        verify_s_per_round=sum(r.verify_time_s for r in rounds) / n,
        prefill_s=sum(g.prefill_s for g in generations),
        **timed,
    )


def compare_with_baseline(
    speculative: Sequence[Generation], baseline: Sequence[Generation], temperature: float, timing: Timing | None = None
) -> BaselineComparison:
    """Speedup and identity; with ``timing`` the speedup is the median of per-pass ratios."""
    identical = None if temperature > 0 else all(a.output_ids == b.output_ids for a, b in zip(speculative, baseline))
    if timing is not None:
        ratio = timing.ratio(SPECULATIVE, TARGET_ONLY)
        return BaselineComparison(
            summarize(baseline, timing, TARGET_ONLY), ratio.median, identical, ratio.min, ratio.max
        )
    spec, base = summarize(speculative), summarize(baseline)
    speedup = spec.tokens_per_s / base.tokens_per_s if base.tokens_per_s > 0 else 0.0
    return BaselineComparison(base, speedup, identical)


def save_run_manifest(
    out: str | Path,
    config: TreeConfig,
    draft: LiveModel,
    target: LiveModel,
    options: DecodeOptions,
    generations: Sequence[Generation],
    comparison: BaselineComparison | None = None,
    timing: Timing | None = None,
    extra: dict | None = None,
) -> Path:
    """Write the manifest of one speculative run (its rounds are already in ``out``); ``timing``
    adds the session's passes and machine load, ``extra`` more run fields (e.g. the sweep's worker)."""
    from dataclasses import asdict

    totals = asdict(summarize(generations, timing))
    if timing is not None:
        totals["timing"] = timing.to_json()
    if comparison is not None:
        totals["baseline"] = asdict(comparison.baseline)
        totals["speedup"] = comparison.speedup
        totals["identical_to_baseline"] = comparison.identical
    models = {
        "draft": {"path": draft.name, "dtype": draft.dtype_name},
        "target": {"path": target.name, "dtype": target.dtype_name},
    }
    run = {
        "tokenizer": target.name if target.tokenizer is not None else None,
        "dtype": target.dtype_name,
        "device": str(target.device),
        "temperature": options.temperature,
        "seed": options.seed,
        "vocab_size": target.vocab_size,  # the target's softmax width (bounds on Z_T above T = 1 need it)
        # validate_*.npz's node_logprobs columns (docs/dump-format.md "Node log-probabilities")
        "node_logprob_temperatures": list(node_logprob_temperatures(options.temperature)),
        "max_new_tokens": options.max_new_tokens,
        **(extra or {}),
    }
    return write_run_manifest(out, run_manifest(config, models, run, generations, totals))
