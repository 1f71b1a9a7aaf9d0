"""Can a draft and a target share one vocabulary? Their tokenizers compared, without loading models.

Apart from replay.live.models.gguf_load (which loads models) so that replay.live.models.load can check a pair
without importing the loader that builds on it (tests/test_layers.py: no import cycles).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # transformers loads lazily: importing this module stays cheap
    from transformers import PreTrainedTokenizerBase

# A fixed, code-like text: two tokenizers must encode it alike, and gguf_load's measured prefixes
# are the same from run to run.
MEASURE_TEXT = (
    "def fibonacci(n: int) -> int:\n"
    '    """Return the n-th Fibonacci number."""\n'
    "    a, b = 0, 1\n"
    "    for _ in range(n):\n"
    "        a, b = b, a + b\n"
    "    return a\n\n\n"
    "def main() -> None:\n"
    "    for i in range(20):\n"
    "        print(i, fibonacci(i))\n"
) * 4


def compare_tokenizers(a: PreTrainedTokenizerBase, b: PreTrainedTokenizerBase) -> list[str]:
    """Differences that would break draft/target speculation (empty list: interchangeable)."""
    diffs = []
    if len(a) != len(b):
        diffs.append(f"length {len(a)} != {len(b)}")
    vocab_a, vocab_b = a.get_vocab(), b.get_vocab()
    if vocab_a != vocab_b:
        only_a = sorted(set(vocab_a.items()) - set(vocab_b.items()))[:5]
        only_b = sorted(set(vocab_b.items()) - set(vocab_a.items()))[:5]
        diffs.append(f"vocab differs: first only in a {only_a}, only in b {only_b}")
    for attr in ("bos_token_id", "eos_token_id", "pad_token_id", "unk_token_id"):
        if getattr(a, attr, None) != getattr(b, attr, None):
            diffs.append(f"{attr} {getattr(a, attr, None)} != {getattr(b, attr, None)}")
    # Same vocabulary but different merges or pre-tokenizer would still split text differently.
    ids_a, ids_b = a(MEASURE_TEXT).input_ids, b(MEASURE_TEXT).input_ids
    if ids_a != ids_b:
        diffs.append(f"encoding of a sample text differs ({len(ids_a)} vs {len(ids_b)} tokens)")
    return diffs
