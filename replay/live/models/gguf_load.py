"""Load a GGUF model and its tokenizer with transformers.

transformers reads GGUF through the ``gguf`` package (``accelerate`` is needed too) and fully
dequantizes the weights on load: a Q4_K_M file of 1.1 GB becomes a float32 model of ~6 GB. The
tokenizer is rebuilt from the GGUF metadata, so a draft and a target from the same family can be
checked for an identical vocabulary without any hub access.

What loading costs on this machine (time, resident memory, decode and verify forwards) is measured
by bench/gguf_load_speed.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from .names import resolve_model
from .tokenizer_check import compare_tokenizers  # noqa: F401  (compare_tokenizers re-exported)

if TYPE_CHECKING:  # torch/transformers load lazily: importing this module stays cheap
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


def dtype_label(dtype: Any) -> str:
    """ "float32" for "float32" or torch.float32: the harness loader takes names."""
    return str(dtype).removeprefix("torch.")


def load_gguf_tokenizer(path: str | Path, cache_dir: str | Path | None = None) -> PreTrainedTokenizerBase:
    """The tokenizer stored in a GGUF file; ``path`` may be a short model name (see replay.live.models.catalogue.MODELS)."""
    from .load import load_tokenizer

    file = resolve_model(path, cache_dir)
    return load_tokenizer(file.parent, file.name)


def load_gguf_model(
    path: str | Path, dtype: Any = "float32", cache_dir: str | Path | None = None
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load ``path`` (a .gguf file or a short model name) -> (model in eval mode, tokenizer).

    The weights are dequantized to ``dtype``; the quantization of the file is not kept. The same
    loader as the harness (replay.live.models.load.load_model).
    """
    live = load_gguf_live(path, dtype, cache_dir)
    return live.module, live.tokenizer


def load_gguf_live(path: str | Path, dtype: Any = "float32", cache_dir: str | Path | None = None):
    """The harness's LiveModel for a .gguf file or short name (replay.live.models.load.load_model)."""
    from .load import load_model

    return load_model(resolve_model(path, cache_dir), dtype=dtype_label(dtype))


# ----------------------------------------------------------------------------------- measurement
