"""Speed duel: target-only decoding vs Hugging Face assisted generation vs the tree harness - same
models, dtype, prompts and process, timed by ``replay.live.timing`` (warm-up; every prompt runs
every method, the order rotated; ``--repeats`` passes; median and spread; machine load recorded).
A benchmark, not a test.

Real pair (CPU), both models in each dtype in turn:
    PYTHONPATH=. python bench/duel.py --pair qwen2.5-coder --dtypes float32,bfloat16 \\
        --prompts 3 --max-new-tokens 32 --repeats 3 --out bench/results/duel_livespeed.json
Real architectures with random weights (GPU, run by scripts/gpu_check.sh):
    PYTHONPATH=. python bench/duel.py --shapes qwen2.5 --device cuda --dtypes bfloat16 --out duel_gpu.json

Per dtype:
1. Short sweeps on prompts the duel does not use (one pass, target-only in it): the harness's tree
   shapes (``--grid``) and HF assisted settings (``HF_GRID``: assistant tokens per round,
   confidence stop); the best tokens/s of each goes into the duel.
2. ``generate --config auto``'s calibration on the same prompts (cost curve, a short run of the
   calibration tree, every shape predicted: replay.cli.live_auto over replay.live.calibration and
   analysis.shapes.auto_choice); its pick goes into the duel as ``harness auto`` and every harness
   row gets its predicted speedup beside the measured one.
3. The duel on the first ``--prompts`` prompts.
4. Where the time goes: target decode per token, draft per round and per step, verify per round,
   tokens committed per round, and the ceilings these measured costs allow.

``--render JSON`` prints the markdown tables of a finished run (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from analysis.shapes.auto_choice import choice_json
from replay.core.config import TreeConfig
from replay.live.clock import device_clock, synchronize
from replay.live.generate import DecodeOptions, Generation, speculative_generate, target_generate
from replay.live.models.load import LiveModel, wrap_model
from replay.live.sweep.grid import config_name, parse_grid
from replay.live.timing import Timing, machine_load, time_methods

ARTICLE = "6,2x2,1x1"
# CPU: depth is expensive (every draft step is a 0.5B forward) and every verified token costs
# target time, so chains and narrow trees; the '@0.4' chain stops drafting below path probability 0.4.
SWEEP_GRID = "1,1,1;1,1,1,1;2,1x1;2,1x1,1;1,1,1,1,1,1@0.4"
# HF assisted generation: (assistant tokens per round, confidence threshold); (20, 0.4) = its defaults.
HF_DEFAULT = (20, 0.4)
HF_GRID = ((3, 0.0), (4, 0.0), (6, 0.4))
DUEL_PROMPTS = (0, 1, 2, 3)  # indices into std_prompts(): code, code, prose, prose
SWEEP_PROMPTS = (4, 5)  # disjoint from the duel's: the best settings are not tuned on them

TARGET_HARNESS = "target-only (harness loop)"
TARGET_HF = "target-only (HF generate)"


@dataclass(frozen=True)
class DuelRun:
    method: str
    prompt: int
    repeat: int
    output_ids: tuple[int, ...]
    seconds: float  # the method's own clock (timing.time_methods times the call from outside too)
    prefill_s: float = 0.0
    rounds: int = 0  # target forwards after prefill (speculative); 0 = target-only
    accepted: int = 0  # draft tokens accepted, summed over rounds
    draft_s: float = 0.0  # summed over rounds
    verify_s: float = 0.0
    draft_steps: int = 0  # draft forwards (step 0 + expansion steps), summed over rounds
    nodes: int = 0  # tree nodes verified, summed over rounds
    target_forwards: int = 0  # HF: counted forward calls of the target (assisted: one per round)
    draft_forwards: int = 0


def generation_run(method: str, prompt: int, repeat: int, g: Generation) -> DuelRun:
    r = g.rounds
    return DuelRun(
        method,
        prompt,
        repeat,
        g.output_ids,
        g.total_s,
        g.prefill_s,
        len(r),
        sum(x.accepted_length for x in r),
        sum(x.draft_time_s for x in r),
        sum(x.verify_time_s for x in r),
        sum(x.draft_steps for x in r),
        sum(x.num_nodes for x in r),
        g.target_forwards,
    )


class Bench:
    """The methods of one dtype's session; every call's DuelRun is kept by (method, prompt, repeat)."""

    def __init__(
        self, draft: LiveModel, target: LiveModel, prompts: Sequence[Sequence[int]], max_new_tokens: int, log=None
    ):
        self.draft, self.target, self.prompts, self.n = draft, target, [list(p) for p in prompts], max_new_tokens
        self.runs: dict[tuple[str, int, int], DuelRun] = {}
        self.log = log

    def _keep(self, run: DuelRun) -> int:
        self.runs[(run.method, run.prompt, run.repeat)] = run
        if self.log is not None:
            self.log(
                f"    pass {run.repeat} prompt {run.prompt} {run.method}: {len(run.output_ids)} tokens in {run.seconds:.1f} s"
            )
        return len(run.output_ids)

    def target_only(self, name: str = TARGET_HARNESS, target: LiveModel | None = None) -> Callable[[int, int], int]:
        t = target or self.target
        return lambda i, rep: self._keep(
            generation_run(name, i, rep, target_generate(t, self.prompts[i], DecodeOptions(self.n)))
        )

    def tree(
        self, name: str, config: TreeConfig, draft: LiveModel | None = None, target: LiveModel | None = None
    ) -> Callable[[int, int], int]:
        d, t = draft or self.draft, target or self.target

        def run(i: int, rep: int) -> int:
            g = speculative_generate(d, t, self.prompts[i], config, DecodeOptions(self.n), record=False)
            return self._keep(generation_run(name, i, rep, g))

        return run

    def hf(self, name: str, assisted: tuple[int, float] | None) -> Callable[[int, int], int]:
        """``model.generate`` greedy; with ``assisted`` = (tokens, threshold) HF's assisted generation
        with the same draft model as assistant (a chain per round, schedule "constant")."""
        target, draft = self.target.module, self.draft.module

        def run(i: int, rep: int) -> int:
            x = torch.tensor([self.prompts[i]], device=self.target.device)
            kwargs = {}
            if assisted is not None:
                # transformers 5.24 reads these from the assistant's own generation config (passing
                # them to generate() does not reach the candidate generator).
                cfg = draft.generation_config
                cfg.num_assistant_tokens, cfg.assistant_confidence_threshold = assisted
                cfg.num_assistant_tokens_schedule = "constant"
                kwargs = {"assistant_model": draft}
            calls = {"target": 0, "draft": 0}
            hooks = [count_calls(target, calls, "target")] + ([count_calls(draft, calls, "draft")] if assisted else [])
            synchronize(self.target.device)
            t0 = time.perf_counter()
            try:
                with torch.inference_mode():
                    out = target.generate(
                        x,
                        attention_mask=torch.ones_like(x),
                        max_new_tokens=self.n,
                        do_sample=False,
                        pad_token_id=pad_id(target),
                        **kwargs,
                    )
                synchronize(self.target.device)
            finally:
                seconds = time.perf_counter() - t0
                for h in hooks:
                    h.remove()
            output = tuple(out[0, x.shape[1] :].tolist())
            if assisted is None:
                return self._keep(DuelRun(name, i, rep, output, seconds, target_forwards=calls["target"]))
            # Assisted generation has no separate prefill: every target forward verifies one chain
            # and commits accepted + 1 tokens, so accepted = tokens - forwards.
            f = calls["target"]
            return self._keep(
                DuelRun(
                    name,
                    i,
                    rep,
                    output,
                    seconds,
                    rounds=f,
                    accepted=len(output) - f,
                    target_forwards=f,
                    draft_forwards=calls["draft"],
                )
            )

        return run


def pad_id(module) -> int:
    cfg = module.generation_config
    eos = cfg.eos_token_id[0] if isinstance(cfg.eos_token_id, list) else cfg.eos_token_id
    return cfg.pad_token_id if cfg.pad_token_id is not None else (eos if eos is not None else 0)


def count_calls(module, calls: dict[str, int], key: str):
    def hook(*_):
        calls[key] += 1

    return module.register_forward_hook(hook)


def hf_name(setting: tuple[int, float]) -> str:
    return f"HF assisted {setting[0]} tok, stop<{setting[1]:g}" + (" (defaults)" if setting == HF_DEFAULT else "")


def auto_choice(args, draft: LiveModel, target: LiveModel, prompts: list[list[int]], shapes: Sequence[TreeConfig], log):
    """``generate --config auto``'s calibration (cost curve + a short run of the wide calibration
    tree) on the sweep's prompts; every swept shape and the article's are predicted as well."""
    from replay.cli.live_auto import calibrate, choice_lines

    where = Path(args.out).with_suffix("") / f"calibration_{target.dtype_name}"
    if where.exists():
        shutil.rmtree(where)  # a rerun's calibration replaces the last one
    t0 = time.perf_counter()
    tokens = args.calibration_tokens
    choice = calibrate(draft, target, prompts, DecodeOptions(tokens), where, tokens=tokens, extra=shapes)
    for line in choice_lines(choice):
        log(f"  {line}")
    log(f"  auto calibration took {time.perf_counter() - t0:.0f} s")
    return choice


def harness_shape(method: str) -> str | None:
    """The config name of a harness duel row ('harness article 6_2x2_1x1' -> '6_2x2_1x1')."""
    if not method.startswith("harness ") or "fast path" in method:
        return None
    return method.split()[-1]


def best_by_rate(timing: Timing, names: Sequence[str]) -> str:
    return max(names, key=lambda m: timing.method(m).rate.median)


# ------------------------------------------------------------------------------------------ report


def identical(runs: dict, method: str) -> bool:
    """Every run's output equals target-only greedy (the harness loop, same dtype, same prompt);
    HF stops at EOS where the loop does not, so a shorter output must be a prefix."""
    ref = {k[1]: r.output_ids for k, r in runs.items() if k[0] == TARGET_HARNESS}
    mine = [r for k, r in runs.items() if k[0] == method]
    return bool(mine) and all(r.output_ids == ref[r.prompt][: len(r.output_ids)] and r.output_ids for r in mine)


def method_row(timing: Timing, runs: dict, method: str, hf_best: str) -> dict:
    mine = [r for k, r in runs.items() if k[0] == method and k[2] >= 0]
    rounds = sum(r.rounds for r in mine)
    tokens = sum(len(r.output_ids) for r in mine)
    row = {
        "method": method,
        "tokens_per_s": asdict(timing.method(method).rate),
        "speedup_vs_target_only": asdict(timing.ratio(method, TARGET_HARNESS)),
        "speedup_vs_hf_greedy": asdict(timing.ratio(method, TARGET_HF)),
        "vs_hf_assisted_best": asdict(timing.ratio(method, hf_best)),
        "identical": identical(runs, method),
        "tokens": tokens,
        "passes": timing.repeats,
    }
    if rounds:
        row.update(
            rounds=rounds / timing.repeats,  # per pass
            mean_accepted_length=sum(r.accepted for r in mine) / rounds,
            committed_per_round=tokens / rounds,  # output tokens (cut at max_new_tokens) per target forward
        )
    if any(r.draft_s for r in mine):
        steps = sum(r.draft_steps for r in mine)
        row.update(
            draft_ms_per_round=1e3 * sum(r.draft_s for r in mine) / rounds,
            draft_ms_per_step=1e3 * sum(r.draft_s for r in mine) / steps,
            verify_ms_per_round=1e3 * sum(r.verify_s for r in mine) / rounds,
            nodes_per_round=sum(r.nodes for r in mine) / rounds,
            other_ms_per_round=1e3 * sum(r.seconds - r.prefill_s - r.draft_s - r.verify_s for r in mine) / rounds,
            prefill_ms=1e3 * sum(r.prefill_s for r in mine) / len(mine),
        )
    if any(r.draft_forwards for r in mine):
        row["draft_forwards_per_round"] = sum(r.draft_forwards for r in mine) / rounds
    return row


def decode_ms_per_token(runs: dict) -> float:
    """Target-only (harness loop): decoding time per token, prefill excluded."""
    mine = [r for k, r in runs.items() if k[0] == TARGET_HARNESS and k[2] >= 0]
    return 1e3 * sum(r.seconds - r.prefill_s for r in mine) / sum(len(r.output_ids) for r in mine)


def ceilings(row: dict, decode_ms: float) -> dict:
    """What the measured costs allow for a harness row: speedup over target-only decoding
    (prefill left out on both sides) with the costs as measured, with a free draft (verification
    only), and the round cost that 1.4x would need at the measured acceptance."""
    c = row["committed_per_round"]
    round_ms = row["draft_ms_per_round"] + row["verify_ms_per_round"] + row["other_ms_per_round"]
    return {
        "decode_ms_per_token": decode_ms,
        "round_ms": round_ms,
        "modelled_speedup": c * decode_ms / round_ms,
        "free_draft_ceiling": c * decode_ms / (row["verify_ms_per_round"] + row["other_ms_per_round"]),
        "round_ms_for_1_4x": c * decode_ms / 1.4,
    }


def auto_summary(auto: dict) -> str:
    """auto's pick (predicted vs measured) and the ceiling, as the duel prints them."""
    c = auto["ceiling"]
    return (
        f"auto: {auto['chosen']} ({auto['method']}) predicted {auto['predicted_speedup']:.2f}x, measured "
        f"{auto.get('measured_speedup_wall', auto.get('measured_speedup')):.2f}x; ceiling: best searched shape {c['best_shape']} {c['best_predicted']:.2f}x, "
        f"every drafted token accepted {c['all_accepted_bound']:.2f}x (depth {c['all_accepted_depth']})"
    )


def sweep_table(rows: list[dict]) -> str:
    """The sweep's harness shapes: measured (one pass, against target-only in the same pass) beside predicted."""
    lines = [
        "| swept shape | tokens/s | mean accepted length | measured vs target-only (1 pass) | predicted |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        if r["method"].startswith("harness "):
            pred = f"{r['predicted_speedup']:.2f}x" if r.get("predicted_speedup") is not None else "– (not predicted)"
            measured = (
                f"{r['speedup_vs_target_only']:.2f}x"
                if "speedup_vs_target_only" in r
                else "– (no baseline in this sweep)"
            )
            lines.append(
                f"| {r['method'].removeprefix('harness ')} | {r['tokens_per_s']:.2f} | {r['mean_accepted_length']:.2f} | {measured} | {pred} |"
            )
    return "\n".join(lines)


def cost_lines(auto: dict) -> str:
    """The measured cost curve auto used: decode, draft step, verify by tokens, each against one decode."""
    cost = auto["cost"]
    t1 = cost["verify_s"][0]
    verify = ", ".join(f"{k:g}: {v * 1e3:.0f} ms ({v / t1:.2f}x)" for k, v in zip(cost["tokens"], cost["verify_s"]))
    line = (
        f"cost curve: target forward over 1 token {t1 * 1e3:.0f} ms; draft step {cost['draft_step_s'] * 1e3:.0f} ms "
        f"({cost['draft_step_s'] / t1:.2f}x); target forward by tokens: {verify}"
    )
    if cost.get("draft_s"):  # runs since the live round's pricing (analysis.cost.model.live_round_cost)
        line += "; draft forward by tokens: " + ", ".join(
            f"{k:g}: {v * 1e3:.0f} ms" for k, v in zip(cost["tokens"], cost["draft_s"])
        )
    return line


def render(path: str) -> str:
    """Markdown of a duel's JSON, per dtype: the duel table, the swept shapes, auto and the ceiling, the costs."""
    result = json.loads(Path(path).read_text())
    out = []
    for dtype, body in result["dtypes"].items():
        out += [f"### both models in {dtype}", "", markdown_table(body["duel"]), "", sweep_table(body["sweep"]), ""]
        if "auto" in body:
            out += [auto_summary(body["auto"]), "", cost_lines(body["auto"]), ""]
    return "\n".join(out)


def fmt_spread(s: dict, unit: str = "") -> str:
    return f"{s['median']:.2f}{unit} [{s['min']:.2f}-{s['max']:.2f}]"


def markdown_table(rows: list[dict]) -> str:
    lines = [
        "| method | tokens/s | vs target-only | predicted | vs HF assisted (best) | target forwards per pass | mean accepted length | draft ms/round (ms/step) | verify ms/round (nodes) | identical to greedy |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        acc = f"{r['mean_accepted_length']:.2f}" if "mean_accepted_length" in r else "–"
        draft = f"{r['draft_ms_per_round']:.0f} ({r['draft_ms_per_step']:.0f})" if "draft_ms_per_round" in r else "–"
        verify = (
            f"{r['verify_ms_per_round']:.0f} ({r['nodes_per_round'] + 1:.0f})" if "verify_ms_per_round" in r else "–"
        )
        pred = f"{r['predicted_speedup']:.2f}x" if r.get("predicted_speedup") is not None else "–"
        lines.append(
            f"| {r['method']} | {fmt_spread(r['tokens_per_s'])} | {fmt_spread(r['speedup_vs_target_only'], 'x')} | {pred} | "
            f"{fmt_spread(r['vs_hf_assisted_best'], 'x')} | {r.get('rounds', r['tokens'] / r['passes']):.0f} | {acc} | {draft} | {verify} | {'yes' if r['identical'] else 'NO'} |"
        )
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ models


def load_models(args) -> tuple[LiveModel, LiveModel, list[list[int]], list[str]]:
    """(draft, target) in float32 on the device, the prompts as ids and their names."""
    if args.shapes:
        from replay.live.models.random_weights import QWEN25_15B
        from replay.testing.tiny import damped_pair, tiny_config

        config = tiny_config("qwen2", vocab_size=512, layers=4, hidden=64) if args.shapes == "tiny" else QWEN25_15B
        draft, target = damped_pair(
            config, args.draft_layers, args.damp, seed=0, device=args.device, name=f"random:{args.shapes}"
        )
        gen = torch.Generator().manual_seed(1)
        count = max(DUEL_PROMPTS + SWEEP_PROMPTS) + 1
        prompts = [
            torch.randint(0, config["vocab_size"], (args.prompt_tokens,), generator=gen).tolist() for _ in range(count)
        ]
        return draft, target, prompts, [f"random ids #{i}" for i in range(count)]
    from replay.live.models.load import load_pair
    from replay.live.models.names import resolve_model_args
    from replay.live.stdprompts import std_prompts

    paths = resolve_model_args(None, None, args.pair, args.models_dir)
    draft, target = load_pair(paths.draft, paths.target, args.device, "float32", "float32")
    texts = std_prompts()
    return draft, target, [list(target.tokenizer.encode(p.text)) for p in texts], [p.name for p in texts]


def in_dtype(model: LiveModel, dtype: str) -> LiveModel:
    """The model cast in place to ``dtype`` (float32 first, then bfloat16: one load serves both)."""
    from replay.live.models.load import parse_dtype

    model.module.to(parse_dtype(dtype))
    return wrap_model(model.module, model.name, model.tokenizer)


def machine() -> dict:
    cpu = next(
        (ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")),
        platform.processor(),
    )
    import transformers

    info = {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
    }
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


# ------------------------------------------------------------------------------------------ session


def run_dtype(args, draft: LiveModel, target: LiveModel, prompts: list[list[int]], log) -> dict:
    clock = device_clock(target.device)
    sweep = Bench(draft, target, [prompts[i] for i in SWEEP_PROMPTS], args.sweep_tokens, log)
    configs = {config_name(c): c for c in parse_grid(args.grid)[0]}
    hf_settings = {hf_name(s): s for s in (HF_DEFAULT, *HF_GRID)}
    sweep_methods = {TARGET_HARNESS: sweep.target_only()}  # the baseline of the swept shapes' measured speedups
    sweep_methods.update({f"harness {name}": sweep.tree(f"harness {name}", c) for name, c in configs.items()})
    sweep_methods.update({name: sweep.hf(name, s) for name, s in hf_settings.items()})
    log(f"  sweep: {len(sweep_methods)} methods x {len(SWEEP_PROMPTS)} prompts x {args.sweep_tokens} tokens")
    # One pass, no per-method warm-up (that would double the sweep): one harness and one HF call
    # first, so that the first timed calls do not pay for allocations and kernel choices.
    Bench(draft, target, [prompts[SWEEP_PROMPTS[0]]], 4).tree("warm-up", next(iter(configs.values())))(0, -1)
    Bench(draft, target, [prompts[SWEEP_PROMPTS[0]]], 4).hf("warm-up", HF_DEFAULT)(0, -1)
    sweep_timing = time_methods(sweep_methods, len(SWEEP_PROMPTS), 1, clock, warmup=False)
    best_tree = best_by_rate(sweep_timing, [f"harness {n}" for n in configs]).removeprefix("harness ")
    best_hf = best_by_rate(sweep_timing, list(hf_settings))
    log(f"  swept best: harness {best_tree}, {best_hf}")
    article = parse_grid(ARTICLE)[0][0]
    choice = auto_choice(args, draft, target, [prompts[i] for i in SWEEP_PROMPTS], [*configs.values(), article], log)
    auto = config_name(choice.config)

    duel = Bench(draft, target, [prompts[i] for i in DUEL_PROMPTS[: args.prompts]], args.max_new_tokens, log)
    hf_best_name = f"{best_hf} [swept best]" if hf_settings[best_hf] != HF_DEFAULT else best_hf
    methods = {
        TARGET_HARNESS: duel.target_only(),
        TARGET_HF: duel.hf(TARGET_HF, None),
        hf_name(HF_DEFAULT): duel.hf(hf_name(HF_DEFAULT), HF_DEFAULT),
    }
    if hf_best_name != hf_name(HF_DEFAULT):
        methods[hf_best_name] = duel.hf(hf_best_name, hf_settings[best_hf])
    methods[f"harness article {config_name(article)}"] = duel.tree(f"harness article {config_name(article)}", article)
    if best_tree != config_name(article):
        methods[f"harness swept best {best_tree}"] = duel.tree(f"harness swept best {best_tree}", configs[best_tree])
    # auto's pick runs as its own method unless it is a shape already in the duel (same calls twice)
    shapes = {
        config_name(article): f"harness article {config_name(article)}",
        best_tree: f"harness swept best {best_tree}",
    }
    auto_method = shapes.get(auto, f"harness auto {auto}")
    if auto not in shapes:
        methods[auto_method] = duel.tree(auto_method, choice.config)
    fast_error = None
    if args.fast_path:
        from replay.live.compiled import fast_path

        fd, ft = fast_path(draft), fast_path(target)
        try:  # a fast path that cannot run is reported, and the duel goes on without it
            speculative_generate(fd, ft, duel.prompts[0], configs[best_tree], DecodeOptions(4), record=False)
            methods["target-only (harness fast path)"] = duel.target_only("target-only (harness fast path)", ft)
            methods[f"harness fast path {best_tree}"] = duel.tree(
                f"harness fast path {best_tree}", configs[best_tree], fd, ft
            )
        except Exception as exc:  # noqa: BLE001 - any failure of the optional path is data, not a crash
            fast_error = f"{type(exc).__name__}: {exc}"
            log(f"  fast path failed, left out: {fast_error}")
    log(
        f"  duel: {len(methods)} methods x {len(duel.prompts)} prompts x {args.max_new_tokens} tokens x {args.repeats} passes"
    )
    timing = time_methods(methods, len(duel.prompts), args.repeats, clock)
    # Warm-up calls are kept under repeat -1 by Bench; the table reads the timed passes.
    rows = [method_row(timing, duel.runs, m, hf_best_name) for m in methods]
    decode_ms = decode_ms_per_token(duel.runs)
    for r in rows:
        if "draft_ms_per_round" in r:
            r["ceilings"] = ceilings(r, decode_ms)
    predicted = {config_name(p.config): p.speedup for p in choice.predictions}
    for r in rows:
        shape = harness_shape(r["method"])
        if shape is not None:
            r["predicted_speedup"] = predicted.get(shape)
    sweep_rows = [
        {
            "method": m,
            "tokens_per_s": sweep_timing.method(m).rate.median,
            "speedup_vs_target_only": sweep_timing.ratio(m, TARGET_HARNESS).median,
            "mean_accepted_length": (
                sum(r.accepted for k, r in sweep.runs.items() if k[0] == m)
                / max(1, sum(r.rounds for k, r in sweep.runs.items() if k[0] == m))
            ),
        }
        for m in sweep_methods
    ]
    for r in sweep_rows:
        if r["method"].startswith("harness "):
            r["predicted_speedup"] = predicted.get(r["method"].removeprefix("harness "))
    return {
        "draft_dtype": draft.dtype_name,
        "target_dtype": target.dtype_name,
        "best_tree": best_tree,
        "best_hf": best_hf,
        "decode_ms_per_token": decode_ms,
        "fast_path_error": fast_error,
        "auto": {**choice_json(choice, timing.ratio(auto_method, TARGET_HARNESS).median), "method": auto_method},
        "duel": rows,
        "sweep": sweep_rows,
        "timing": timing.to_json(),
        "sweep_timing": sweep_timing.to_json(),
        "runs": [asdict(r) for r in duel.runs.values()],
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pair", default="qwen2.5-coder")
    p.add_argument("--models-dir")
    p.add_argument(
        "--shapes",
        choices=["qwen2.5", "tiny"],
        help="random weights: Qwen2.5-1.5B's architecture (or a tiny one for smoke tests)",
    )
    p.add_argument(
        "--draft-layers",
        type=int,
        default=4,
        help="--shapes: the draft is the target's first N layers (default %(default)s)",
    )
    p.add_argument(
        "--damp",
        type=float,
        default=0.5,
        help="--shapes: scale of the target's later layers' outputs (default %(default)s)",
    )
    p.add_argument("--prompt-tokens", type=int, default=64, help="--shapes: random prompt length (default %(default)s)")
    p.add_argument("--device", default="cpu")
    p.add_argument(
        "--dtypes",
        default="float32,bfloat16",
        help="both models in each, in turn (float32 first: one load serves both)",
    )
    p.add_argument(
        "--prompts", type=int, default=3, help=f"duel prompts, at most {len(DUEL_PROMPTS)} (default %(default)s)"
    )
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--sweep-tokens", type=int, default=24)
    p.add_argument("--grid", default=SWEEP_GRID)
    p.add_argument(
        "--calibration-tokens",
        type=int,
        default=32,
        help="auto's calibration run: new tokens per sweep prompt (default %(default)s; ~5 tokens a round)",
    )
    p.add_argument(
        "--fast-path",
        action="store_true",
        help="also the harness on static caches + torch.compile (CUDA graphs on a GPU)",
    )
    p.add_argument("--threads", type=int, help="torch CPU threads")
    p.add_argument("--out", default="bench/results/duel_livespeed.json")
    p.add_argument("--render", metavar="JSON", help="print the markdown tables of a finished duel's JSON and exit")
    args = p.parse_args(argv)
    if args.render:
        print(render(args.render))
        return 0
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    if args.threads:
        torch.set_num_threads(args.threads)

    t0 = time.perf_counter()
    draft, target, prompts, names = load_models(args)
    log(f"loaded in {time.perf_counter() - t0:.0f} s")
    result = {
        "command": "PYTHONPATH=. python bench/duel.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "machine": machine(),
        "load_at_start": asdict(machine_load()),
        "device": args.device,
        "models": {"draft": draft.name, "target": target.name},
        "max_new_tokens": args.max_new_tokens,
        "duel_prompts": [names[i] for i in DUEL_PROMPTS[: args.prompts]],
        "sweep_prompts": [names[i] for i in SWEEP_PROMPTS],
        "repeats": args.repeats,
        "sweep_tokens": args.sweep_tokens,
        "dtypes": {},
    }
    for dtype in args.dtypes.split(","):
        draft, target = in_dtype(draft, dtype), in_dtype(target, dtype)
        gc.collect()
        log(f"dtype {dtype}:")
        result["dtypes"][dtype] = run_dtype(args, draft, target, prompts, log)
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=1))  # after each dtype: a later crash keeps the first
        print(f"\n### both models in {dtype} (decode {result['dtypes'][dtype]['decode_ms_per_token']:.0f} ms/token)\n")
        print(markdown_table(result["dtypes"][dtype]["duel"]))
        print("\n" + auto_summary(result["dtypes"][dtype]["auto"]))
    result["load_at_end"] = asdict(machine_load())
    Path(args.out).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
