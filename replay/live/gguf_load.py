"""Load a GGUF model and its tokenizer with transformers, and measure what it costs on this machine.

transformers reads GGUF through the ``gguf`` package (``accelerate`` is needed too) and fully
dequantizes the weights on load: a Q4_K_M file of 1.1 GB becomes a float32 model of ~6 GB. The
tokenizer is rebuilt from the GGUF metadata, so a draft and a target from the same family can be
checked for an identical vocabulary without any hub access.

Run as a module to measure a model (load time, resident memory, decode and verify forwards):

    PYTHONPATH=. python -m replay.live.gguf_load qwen2.5-coder-1.5b --dir /work/models
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
from typing import TYPE_CHECKING, Any

from .names import resolve_model
from .tokenizer_check import MEASURE_TEXT, compare_tokenizers  # noqa: F401  (compare_tokenizers re-exported)

if TYPE_CHECKING:  # torch/transformers load lazily: importing this module stays cheap
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


def dtype_label(dtype: Any) -> str:
    """"float32" for "float32" or torch.float32: the harness loader takes names."""
    return str(dtype).removeprefix("torch.")


def load_gguf_tokenizer(path: str | Path, cache_dir: str | Path | None = None) -> PreTrainedTokenizerBase:
    """The tokenizer stored in a GGUF file; ``path`` may be a short model name (see model_catalogue.MODELS)."""
    from .models import load_tokenizer

    file = resolve_model(path, cache_dir)
    return load_tokenizer(file.parent, file.name)


def load_gguf_model(
    path: str | Path, dtype: Any = "float32", cache_dir: str | Path | None = None
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load ``path`` (a .gguf file or a short model name) -> (model in eval mode, tokenizer).

    The weights are dequantized to ``dtype``; the quantization of the file is not kept. The same
    loader as the harness (replay.live.models.load_model).
    """
    live = load_gguf_live(path, dtype, cache_dir)
    return live.module, live.tokenizer


def load_gguf_live(path: str | Path, dtype: Any = "float32", cache_dir: str | Path | None = None):
    """The harness's LiveModel for a .gguf file or short name (replay.live.models.load_model)."""
    from .models import load_model

    return load_model(resolve_model(path, cache_dir), dtype=dtype_label(dtype))


# ----------------------------------------------------------------------------------- measurement


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

    from .clock import timed_call
    from .forward import causal_visible, crop_cache, forward_tokens

    n = tokens.shape[0]
    positions = torch.arange(prefix, prefix + n, dtype=torch.int64, device=model.device)
    tokens = tokens.to(model.device)
    # timed_call synchronises a GPU on both sides: kernel launches return before the work is done.
    _, elapsed = timed_call(model.device, lambda: forward_tokens(model, cache, tokens, positions, causal_visible(prefix, n, model.device)))
    crop_cache(cache, prefix)
    return elapsed


def measure_model(
    path: str | Path, dtype: Any = "float32", prefix: int = 64, repeats: int = 9, cache_dir: str | Path | None = None
) -> Measurement:
    import torch

    from .clock import timed_call
    from .forward import causal_visible, forward_hidden, new_cache

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
            live.device, lambda: forward_hidden(live, cache, ids[:prefix], torch.arange(prefix, dtype=torch.int64), causal_visible(0, prefix, live.device))
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
        prog="python -m replay.live.gguf_load",
        description="Load one GGUF model and measure load time, memory, 1-token decode and 16-token forward.",
        epilog="example: PYTHONPATH=. python -m replay.live.gguf_load qwen2.5-coder-1.5b --dir /work/models",
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
