"""Load causal LMs fully offline: a Hugging Face directory (config + safetensors) or a GGUF file.

The harness drives the model through transformers with an explicit 4D attention bias and explicit
position ids (replay.live.forward), so any decoder-only architecture transformers loads works;
Llama and Qwen2 are the tested ones.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from replay.live.errors import ModelLoadError
from replay.util.progress import progress_enabled

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass(frozen=True, eq=False)
class LiveModel:
    """A loaded model plus what the harness needs to call it."""

    module: Any  # transformers PreTrainedModel, eval mode
    name: str  # path or label, recorded in the manifest
    dtype: torch.dtype
    device: torch.device
    tokenizer: Any | None  # transformers tokenizer, None when the checkpoint has none
    cache_kwarg: str  # "cache" (transformers >= 5.2x) or "past_key_values" (older spelling)
    # Fast path (replay.live.compiled): caches are static, and runner(n) is the decoder callable
    # for a forward over n tokens (compiled for the small n of decode, draft and verify steps).
    static_kv: bool = False
    runner: Callable[[int], Any] | None = None
    cache_pool: Any = None  # kvcache.CachePool: static caches reused across generations

    @property
    def decoder(self) -> Any:
        """The model without its output layer: tokens -> last hidden states (final norm included)."""
        return self.module.base_model

    @property
    def head(self) -> Any:
        """The output layer (lm_head): hidden states -> logits, applied only to the rows a caller uses."""
        return self.module.get_output_embeddings()

    @property
    def vocab_size(self) -> int:
        """Token ids the model can output: rows of its output head."""
        return int(self.head.weight.shape[0])

    @property
    def input_vocab_size(self) -> int:
        """Token ids the model can take in: rows of its input embedding."""
        return int(self.module.get_input_embeddings().weight.shape[0])

    @property
    def dtype_name(self) -> str:
        return dtype_name(self.dtype)


def parse_dtype(name: str) -> torch.dtype:
    if name not in DTYPES:
        raise ModelLoadError(f"unknown dtype {name!r}: expected one of {', '.join(DTYPES)}")
    return DTYPES[name]


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def fast_bfloat16(device: torch.device | str) -> bool:
    """Whether ``device`` computes bfloat16 matmuls natively: CUDA, or a CPU with avx512_bf16 or AMX.

    Other CPUs (plain AVX-512 or AVX2) convert bfloat16 to float32 inside every matmul, so there
    bfloat16 is slower than float32.
    torch.backends.cpu.get_cpu_capability() says only "AVX512" for both kinds, so read the flags.
    """
    device = torch.device(device)
    if device.type == "cuda":
        return True
    if device.type != "cpu":
        return False
    return bool(cpu_flags() & {"avx512_bf16", "amx_bf16"})


def cpu_flags() -> set[str]:
    """The CPU's feature flags from /proc/cpuinfo (empty where there is none, e.g. macOS)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def default_draft_dtype(device: torch.device | str, dtype: str) -> str:
    """The draft's dtype when none is given: bfloat16 under a float32 target where bfloat16 is fast.

    The target decides every committed token, so a cheaper draft never changes the output, only
    how often its guesses are right.
    """
    return "bfloat16" if dtype == "float32" and fast_bfloat16(device) else dtype


def prepare_device(device: str, threads: int | None, what: str, where: str) -> None:
    """Refuse a missing GPU before any model is built, and apply a CPU thread count; the error
    names the option (``what``) and the machine (``where``)."""
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ModelLoadError(f"{what}: CUDA is not available on {where}")
    if threads is not None:
        torch.set_num_threads(max(1, threads))


def cache_kwarg_of(module: Any) -> str:
    """The keyword the model's forward takes its KV cache under; transformers renamed it in 5.x."""
    params = inspect.signature(module.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def wrap_model(module: Any, name: str, tokenizer: Any | None = None) -> LiveModel:
    """Put an already built transformers model into eval mode and describe it."""
    module.eval()
    _check_plain_head(module, name)
    param = next(module.parameters())
    return LiveModel(module, name, param.dtype, param.device, tokenizer, cache_kwarg_of(module.base_model))


def _check_plain_head(module: Any, name: str) -> None:
    """The harness computes logits as ``head(decoder(...))`` on the rows it needs; refuse models
    whose forward does more than that between the two (e.g. Gemma 2's logit soft-capping)."""
    if module.base_model is module or module.get_output_embeddings() is None:
        raise ModelLoadError(f"{name}: not a causal LM with a separate output layer")
    if getattr(module.config, "final_logit_softcapping", None):
        raise ModelLoadError(
            f"{name}: logits are soft-capped after the output layer; the harness does not support that"
        )


_OWN_TOKENIZER = object()  # sentinel: load the checkpoint's own tokenizer


def load_model(
    path: str | Path,
    device: str = "cpu",
    dtype: str = "float32",
    tokenizer: Any = _OWN_TOKENIZER,
    progress: bool | None = None,
) -> LiveModel:
    """Load from a Hugging Face directory (``config.json`` + weights) or a ``.gguf`` file, offline.

    GGUF weights are dequantized on load (transformers needs the ``gguf`` package). Pass
    ``tokenizer`` (or None) to skip loading the checkpoint's own: a GGUF tokenizer takes ~12 s
    to rebuild from metadata, and a draft shares its target's.
    ``progress``: draw transformers' loading bars; None = the CLI's rule (replay.util.progress:
    only when stderr is a terminal).
    """
    from transformers import AutoModelForCausalLM

    path = Path(path)
    torch_dtype = parse_dtype(dtype)
    kwargs: dict[str, Any] = {"dtype": torch_dtype, "local_files_only": True, "attn_implementation": "sdpa"}
    if path.is_dir() and (path / "config.json").is_file():
        source, extra = path, {}
    elif path.is_file() and path.suffix == ".gguf":
        source, extra = path.parent, {"gguf_file": path.name}
    else:
        raise ModelLoadError(f"{path}: not a Hugging Face model directory (no config.json) nor a .gguf file")
    try:
        with loading_bars(progress_enabled() if progress is None else progress, gguf="gguf_file" in extra):
            module = AutoModelForCausalLM.from_pretrained(source, **kwargs, **extra)
    except (OSError, ValueError, KeyError) as exc:
        raise ModelLoadError(f"{path}: cannot load model: {exc}") from None
    module.to(torch.device(device))
    if tokenizer is _OWN_TOKENIZER:
        tokenizer = load_tokenizer(source, extra.get("gguf_file"))
    return wrap_model(module, str(path), tokenizer)


@contextmanager
def loading_bars(enabled: bool, gguf: bool = False) -> Iterator[None]:
    """transformers draws its own bars while it loads ("Loading weights", and for a GGUF file
    "Converting and de-quantizing"), whatever stderr is: a log would get one redraw per update. Off
    unless ``enabled``; restored afterwards, so a caller's own setting survives."""
    if enabled:
        yield
        return
    from transformers.utils import logging as hf_logging

    was_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # transformers' tqdm wrapper, and huggingface_hub's bars
    # The GGUF reader calls tqdm.auto directly, past that switch: lend it a disabled one.
    reader: Any = _gguf_reader() if gguf else None
    reader_tqdm = getattr(reader, "tqdm", None)
    if reader_tqdm is not None:
        import functools

        reader.tqdm = functools.partial(reader_tqdm, disable=True)
    try:
        yield
    finally:
        if reader_tqdm is not None:
            reader.tqdm = reader_tqdm
        if was_on:
            hf_logging.enable_progress_bar()


def _gguf_reader() -> Any:
    try:
        import transformers.modeling_gguf_pytorch_utils as reader
    except ImportError:  # the load itself reports what is missing
        return None
    return reader


def load_pair(
    draft: str | Path,
    target: str | Path,
    device: str = "cpu",
    dtype: str = "float32",
    draft_dtype: str | None = None,
    progress: bool | None = None,
) -> tuple[LiveModel, LiveModel]:
    """(draft, target), each loaded once, the target first, then checked as a pair (``check_pair``).
    The draft reuses the target's tokenizer (speculation needs one vocabulary anyway); a draft
    directory's own tokenizer is read for the check, a GGUF draft's is not (see load_model).
    ``draft_dtype`` None = ``default_draft_dtype(device, dtype)``; ``progress``: as in load_model."""
    target_model = load_model(target, device, dtype, progress=progress)
    draft_dtype = draft_dtype or default_draft_dtype(device, dtype)
    draft_model = load_model(draft, device, draft_dtype, tokenizer=target_model.tokenizer, progress=progress)
    draft_path = Path(draft)
    own = load_tokenizer(draft_path) if draft_path.is_dir() else None
    check_pair(draft_model, target_model, own)
    return draft_model, target_model


def check_pair(draft: LiveModel, target: LiveModel, draft_tokenizer: Any | None = None) -> None:
    """Refuse a draft/target pair that cannot speculate together, before any decoding.

    Token ids cross between the models both ways: every id the target can commit (any row of its
    output head) is fed to the draft in the next round, and every id the draft proposes (any row
    of its head) is fed to the target in the verification forward. So each model must embed every
    id the other can output, or a forward fails mid-run with IndexError: a draft with a smaller
    vocabulary than the target's, but also a larger one (its extra ids can be drafted). In
    practice: the same embedding sizes (Qwen2.5 0.5B/1.5B: 151,936 both).
    ``draft_tokenizer``: the draft checkpoint's own, compared with the target's when both exist.
    """
    _check_embeds("target", target, "draft", draft)
    _check_embeds("draft", draft, "target", target)
    if draft_tokenizer is not None and target.tokenizer is not None:
        from .tokenizer_check import compare_tokenizers

        diffs = compare_tokenizers(draft_tokenizer, target.tokenizer)
        if diffs:
            raise ModelLoadError(
                f"draft {draft.name} and target {target.name} have different tokenizers ({diffs[0]}): "
                "speculation needs one vocabulary"
            )


def _check_embeds(producer_role: str, producer: LiveModel, consumer_role: str, consumer: LiveModel) -> None:
    if producer.vocab_size > consumer.input_vocab_size:
        raise ModelLoadError(
            f"{producer_role} {producer.name} outputs token ids 0..{producer.vocab_size - 1} but {consumer_role} "
            f"{consumer.name} embeds only ids 0..{consumer.input_vocab_size - 1}: a draft/target pair needs one "
            f"vocabulary (the same embedding size)"
        )


def load_tokenizer(source: Path, gguf_file: str | None = None) -> Any | None:
    """The checkpoint's tokenizer, or None when it ships none (prompts are then token ids)."""
    from transformers import AutoTokenizer

    has_files = any((source / f).is_file() for f in ("tokenizer.json", "tokenizer_config.json", "tokenizer.model"))
    if gguf_file is None and not has_files:
        return None
    try:
        if gguf_file is not None:
            return AutoTokenizer.from_pretrained(source, gguf_file=gguf_file, local_files_only=True)
        if _declares_generic_tokenizer(source):
            from transformers import PreTrainedTokenizerFast

            return PreTrainedTokenizerFast(tokenizer_file=str(source / "tokenizer.json"), **_special_tokens(source))
        return AutoTokenizer.from_pretrained(source, local_files_only=True)
    except Exception:  # a GGUF without tokenizer metadata, or a half tokenizer: run on ids
        return None


def _declares_generic_tokenizer(source: Path) -> bool:
    """True for a plain ``tokenizer.json`` saved without a model-specific class; AutoTokenizer
    would otherwise pick the class from the model type (e.g. Qwen2Tokenizer) and mangle it."""
    import json

    cfg_path = source / "tokenizer_config.json"
    if not (cfg_path.is_file() and (source / "tokenizer.json").is_file()):
        return False
    cls = json.loads(cfg_path.read_text(encoding="utf-8")).get("tokenizer_class")
    return cls in ("TokenizersBackend", "PreTrainedTokenizerFast")


SPECIAL_TOKENS = ("bos_token", "eos_token", "unk_token", "pad_token")


def _special_tokens(source: Path) -> dict[str, str]:
    """The special tokens ``tokenizer_config.json`` names (eos_token, ...): tokenizer.json alone
    does not say which token is EOS, and without it ``--stop-at-eos`` has nothing to stop at."""
    import json

    cfg = json.loads((source / "tokenizer_config.json").read_text(encoding="utf-8"))
    out = {}
    for key in SPECIAL_TOKENS:
        value = cfg.get(key)
        if isinstance(value, dict):  # {"content": "<|endoftext|>", ...} in some saves
            value = value.get("content")
        if isinstance(value, str):
            out[key] = value
    return out
