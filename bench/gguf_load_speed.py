"""What loading one GGUF model costs on this machine: load time, resident memory, a prefill, a
1-token decode and a 16-token verify forward (medians and minima over --repeats), as JSON.

    python bench/gguf_load_speed.py qwen2.5-coder-1.5b --dir /work/models

Loads a real model (GiBs of memory): run it by hand, one model per process (docs/models.md).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script from a checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from replay.live.models.gguf_load import load_gguf_live  # noqa: E402
from replay.live.models.names import resolve_model  # noqa: E402
from replay.live.models.tokenizer_check import MEASURE_TEXT  # noqa: E402


@dataclass(frozen=True)
class Measurement:
    model: str
    dtype: str
    threads: int
    parameters: int
    load_s: float
    rss_gib: float  # resident after load
    peak_rss_gib: float  # high-water mark of the process (load included)
    prefill_s: float  # decoder forward of `prefix` tokens, empty cache (no output layer, as the harness prefills)
    decode_1_s: float  # one token after the prefix, with KV cache (median)
    forward_16_s: float  # 16 tokens at once after the prefix, with KV cache (median)
    # Minima beside the medians: a shared 2-core VM has bursts of slowness several times the
    # normal cost, and the minimum shows what the code itself costs.
    decode_1_min_s: float
    forward_16_min_s: float
    prefix: int
    repeats: int


def read_rss_gib() -> tuple[float, float]:
    """(current, peak) resident set of this process, from /proc (Linux)."""
    fields = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            key, _, value = line.partition(":")
            fields[key] = value
    to_gib = lambda key: int(fields[key].split()[0]) / (1 << 20)  # noqa: E731 - kB -> GiB
    return to_gib("VmRSS"), to_gib("VmHWM")


def time_forward(model, cache, tokens, prefix: int) -> float:
    """Seconds for one forward of ``tokens`` ([n] int64) after a ``prefix``-token cache, then crop
    the cache back to the prefix. The harness's own forward (replay.live.forward)."""
    import torch

    from replay.live.clock import timed_call
    from replay.live.forward import causal_visible, crop_cache, forward_tokens

    n = tokens.shape[0]
    positions = torch.arange(prefix, prefix + n, dtype=torch.int64, device=model.device)
    tokens = tokens.to(model.device)
    # timed_call synchronises a GPU on both sides: kernel launches return before the work is done.
    _, elapsed = timed_call(
        model.device, lambda: forward_tokens(model, cache, tokens, positions, causal_visible(prefix, n, model.device))
    )
    crop_cache(cache, prefix)
    return elapsed


def measure_model(
    path: str | Path, dtype: Any = "float32", prefix: int = 64, repeats: int = 9, cache_dir: str | Path | None = None
) -> Measurement:
    import torch

    from replay.live.clock import timed_call
    from replay.live.forward import causal_visible, forward_hidden, new_cache

    t0 = time.perf_counter()
    live = load_gguf_live(path, dtype, cache_dir)
    load_s = time.perf_counter() - t0
    rss, peak = read_rss_gib()
    ids = live.tokenizer(MEASURE_TEXT, return_tensors="pt").input_ids[0, : prefix + 16]
    if ids.shape[0] < prefix + 16:
        raise ValueError(f"measure text gives {ids.shape[0]} tokens, need {prefix + 16}")
    with torch.inference_mode():
        cache = new_cache(live)
        # The harness's prefill: the decoder only, no logits (nothing reads them).
        _, prefill_s = timed_call(
            live.device,
            lambda: forward_hidden(
                live,
                cache,
                ids[:prefix],
                torch.arange(prefix, dtype=torch.int64),
                causal_visible(0, prefix, live.device),
            ),
        )
        time_forward(live, cache, ids[prefix : prefix + 1], prefix)  # warm-up
        decode = [time_forward(live, cache, ids[prefix : prefix + 1], prefix) for _ in range(repeats)]
        verify = [time_forward(live, cache, ids[prefix : prefix + 16], prefix) for _ in range(repeats)]
    return Measurement(
        model=str(resolve_model(path, cache_dir)),
        dtype=live.dtype_name,
        threads=torch.get_num_threads(),
        parameters=sum(p.numel() for p in live.module.parameters()),
        load_s=round(load_s, 2),
        rss_gib=round(rss, 2),
        peak_rss_gib=round(peak, 2),
        prefill_s=round(prefill_s, 3),
        decode_1_s=round(statistics.median(decode), 3),
        forward_16_s=round(statistics.median(verify), 3),
        decode_1_min_s=round(min(decode), 3),
        forward_16_min_s=round(min(verify), 3),
        prefix=prefix,
        repeats=repeats,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python bench/gguf_load_speed.py",
        description="Load one GGUF model and measure load time, memory, 1-token decode and 16-token forward.",
        epilog="example: python bench/gguf_load_speed.py qwen2.5-coder-1.5b --dir /work/models",
    )
    parser.add_argument("model", help="a .gguf path or a short name (qwen2.5-coder-0.5b, qwen2.5-coder-1.5b)")
    parser.add_argument("--dir", default=None, help="model cache directory for short names")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--prefix", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    args = parser.parse_args(argv)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    result = measure_model(args.model, args.dtype, args.prefix, args.repeats, args.dir)
    print(json.dumps(asdict(result), indent=1))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
