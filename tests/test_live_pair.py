"""A draft/target pair is checked when it is loaded: token ids cross both ways (committed target
tokens feed the draft, drafted tokens feed the target), so both models must embed every id the
other can output, and two tokenizers that both exist must agree. A bad pair is refused with one
line (exit 2) before anything is generated, not with an IndexError mid-run."""

import json

import pytest

from replay.cli import main
from replay.core.config import TreeConfig
from replay.live.draft import draft_tree
from replay.live.errors import ModelLoadError
from replay.live.forward import new_cache
from replay.live.generate import DecodeOptions
from replay.live.models.load import check_pair
from replay.live.models.random_weights import build_model
from replay.live.run import run_speculative
from replay.testing.tiny import build_word_tokenizer, save_hf_dir, tiny_config
from tests.live_fixtures import make_pair, torch

VOCAB = 64
CONFIG = TreeConfig.from_lists([[6], [2, 2], [1, 1]])
PROMPTS = [[1, 2, 3, 4], [50, 7]]


@pytest.fixture(scope="module")
def pair():
    return make_pair("qwen2", vocab_size=VOCAB)


def other_vocab_draft(size):
    return build_model(tiny_config("qwen2", size), seed=4, name=f"draft-vocab{size}")


def test_smaller_draft_vocabulary_is_refused_before_any_round(pair):
    _, target = pair
    small = other_vocab_draft(48)
    with pytest.raises(
        ModelLoadError, match=r"target .* outputs token ids 0\.\.63 but draft .* embeds only ids 0\.\.47"
    ):
        check_pair(small, target)
    rounds = []
    with pytest.raises(ModelLoadError):  # was: IndexError once the target committed an id >= 48
        run_speculative(small, target, PROMPTS, CONFIG, DecodeOptions(40, temperature=2.0), progress=rounds.append)
    assert rounds == []


def test_larger_draft_vocabulary_is_refused_too(pair):
    """Not only the target's ids must fit the draft: a larger draft drafts ids the target cannot
    embed in its verification forward (shown here), so it is refused as well."""
    _, target = pair
    large = other_vocab_draft(96)
    drafted = draft_tree(large, new_cache(large), [1, 2, 3, 4, 5, 6, 7, 8], TreeConfig.from_lists([[96]]), record_k=96)
    assert int(drafted.tree.tokens.max()) >= VOCAB  # every id is a child at full width
    with pytest.raises(
        ModelLoadError, match=r"draft .* outputs token ids 0\.\.95 but target .* embeds only ids 0\.\.63"
    ):
        check_pair(large, target)


def test_equal_vocabularies_pass(pair):
    draft, target = pair
    check_pair(draft, target, build_word_tokenizer(VOCAB))  # target has no tokenizer: sizes only
    assert draft.vocab_size == draft.input_vocab_size == target.vocab_size == target.input_vocab_size == VOCAB


def renamed_word_tokenizer(size):
    """Same size as build_word_tokenizer(size), other words: ids mean different text."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel({f"w{i}": i for i in range(size)}, unk_token="w0"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="w0")


@pytest.fixture(scope="module")
def pair_dirs(pair, tmp_path_factory):
    draft, target = pair
    d = tmp_path_factory.mktemp("pairs")
    tok = build_word_tokenizer(VOCAB)
    save_hf_dir(target, d / "target", tok)
    save_hf_dir(other_vocab_draft(48), d / "small_draft", build_word_tokenizer(48))
    save_hf_dir(draft, d / "renamed_draft", renamed_word_tokenizer(VOCAB))
    (d / "prompts.jsonl").write_text("[1, 2, 3, 4]\n")
    (d / "tree.json").write_text(json.dumps({"gamma": 3, "topKSpec": [[6], [2, 2], [1, 1]], "topHead": [1, 2, 2]}))
    return d


@pytest.mark.parametrize(
    ("draft", "message"), [("small_draft", "embeds only ids 0..47"), ("renamed_draft", "different tokenizers")]
)
def test_cli_refuses_a_mismatched_pair_with_one_line(pair_dirs, tmp_path, capsys, draft, message):
    d = pair_dirs
    rc = main(
        [
            "generate",
            "--draft",
            str(d / draft),
            "--target",
            str(d / "target"),
            "--config",
            str(d / "tree.json"),
            "--prompts",
            str(d / "prompts.jsonl"),
            "--max-new-tokens",
            "40",
            "--temperature",
            "2",
            "--out",
            str(tmp_path / "run"),
        ]
    )
    err = capsys.readouterr().err  # also holds transformers' "Loading weights" bars
    assert rc == 2 and "Traceback" not in err
    assert [line for line in err.splitlines() if "error" in line] == [err.splitlines()[-1]]
    assert err.splitlines()[-1].startswith("specreplay: error:") and message in err.splitlines()[-1]
    assert list(tmp_path.iterdir()) == []  # nothing written, no half run left behind


def test_draft_cannot_embed_what_the_target_outputs_without_the_check(pair):
    """Why the check exists: the target does produce ids a 48-token draft cannot embed."""
    _, target = pair
    with torch.no_grad():
        logits = target.module(input_ids=torch.tensor([PROMPTS[0]])).logits[0, -1]
    assert int(torch.topk(logits, VOCAB - 48).indices.max()) >= 48
