"""From logits to what is recorded and compared: log-probabilities and sorted top-k candidates.

Draft selection, the validate matrix, greedy verification and the target-only baseline all go
through ``top_candidates``, so "top-1" means the same thing everywhere (tie order included).
"""

from __future__ import annotations

from collections.abc import Sequence

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


def node_logprobs(
    logits: torch.Tensor, parents: np.ndarray, tokens: np.ndarray, temperatures: Sequence[float]
) -> np.ndarray:
    """[n, len(temperatures)] float64: each node's log-probability under its parent's row of the
    target, log softmax(logits[parent] / T)[token], per temperature; row 0 (the root) is 0.

    What a dump records beside the top-K rows (array ``node_logprobs``, docs/dump-format.md) so
    that the expected acceptance at the run's temperature and at T = 1 is exact, whatever K.
    Computed here from the logits on its own (not through ``sampling.target_probs``): a sampler
    that mishandles T must disagree with this record. T = 0 is the greedy limit: 0 where the
    node's token is its parent's top-1 (``top_candidates``, ties included), -inf elsewhere.

    logits: [n, V] target logits in tree order (root first); parents, tokens: [n] int64.
    """
    check_shape("logits", logits, (parents.shape[0], None))
    out = np.zeros((parents.shape[0], len(temperatures)), dtype=np.float64)
    if parents.shape[0] < 2:
        return out
    rows = logits[torch.from_numpy(np.asarray(parents[1:], dtype=np.int64)).to(logits.device)].double()
    toks = torch.from_numpy(np.asarray(tokens[1:], dtype=np.int64)).to(logits.device)
    for j, t in enumerate(temperatures):
        if t > 0:
            lp = torch.log_softmax(rows / t, dim=-1).gather(1, toks[:, None])[:, 0]
            out[1:, j] = np.minimum(lp.cpu().numpy(), 0.0)  # log-softmax may round a hair above 0
        else:
            top1, _ = top_candidates(log_probs(rows.float()), 1)
            out[1:, j] = np.where(top1[:, 0] == np.asarray(tokens[1:]), 0.0, -np.inf)
    return out
