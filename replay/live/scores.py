"""From logits to what is recorded and compared: log-probabilities and sorted top-k candidates.

Draft selection, the validate matrix, greedy verification and the target-only baseline all go
through ``top_candidates``, so "top-1" means the same thing everywhere (tie order included).
"""

from __future__ import annotations

import numpy as np
import torch

from .checks import check_shape


def log_probs(logits: torch.Tensor) -> torch.Tensor:
    """[n, V] float32 log-softmax at temperature 1 (the scores a dump records)."""
    check_shape("logits", logits, (None, None))
    return torch.log_softmax(logits.float(), dim=-1)


def top_candidates(logprobs: torch.Tensor, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` per row, by descending probability.

    logprobs: [n, V] float32
    Returns ids [n, k] int64 and scores [n, k] float32 (log-probabilities), as numpy arrays.
    """
    check_shape("logprobs", logprobs, (None, None), torch.float32)
    if not 1 <= k <= logprobs.shape[1]:
        raise ValueError(f"k = {k}: must be between 1 and the vocabulary size {logprobs.shape[1]}")
    values, ids = torch.topk(logprobs, k, dim=-1, largest=True, sorted=True)  # [m, k] float32, [m, k] int64
    return ids.cpu().numpy().astype(np.int64), values.cpu().numpy().astype(np.float32)


def greedy_token(logits: torch.Tensor) -> int:
    """The target's greedy choice for one row ([V] logits), as the validate matrix's column 0 has it."""
    check_shape("logits", logits, (None,))
    ids, _ = top_candidates(log_probs(logits[None]), 1)
    return int(ids[0, 0])
