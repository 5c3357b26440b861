"""Each token's own bytes, from its vocabulary piece: they join into the text even where a character is split."""
import pytest
from tokenizers import Tokenizer, decoders, models, normalizers
from transformers import PreTrainedTokenizerFast

from nsample.models.token_bytes import TokenBytes, gpt2_byte_table, legacy_token, token_text

TEXT = "Repeat exactly this text: 日本語 😀 🌍 café\n"


@pytest.fixture(scope="module")
def smol_tokenizer():
    from nsample.models.tiny_model import tiny_model

    return tiny_model()[1]


def test_byte_level_pieces_join_into_the_text(smol_tokenizer):
    ids = smol_tokenizer(TEXT, add_special_tokens=False)["input_ids"]
    own = TokenBytes(smol_tokenizer)
    pieces = [own(i) for i in ids]
    assert b"".join(pieces) == TEXT.encode()
    split = [p for p in pieces if token_text(p) != p.decode("utf-8", errors="ignore")]
    assert split, "the emoji should be split across tokens, or this test checks nothing"
    assert all(smol_tokenizer.decode([i]) == "\ufffd" for i, p in zip(ids, pieces) if p in split and len(p) == 1)


def test_added_tokens_are_their_text(smol_tokenizer):
    assert TokenBytes(smol_tokenizer)(smol_tokenizer.eos_token_id) == smol_tokenizer.eos_token.encode()


def test_the_byte_table_is_a_bijection():
    table = gpt2_byte_table()
    assert sorted(table.values()) == list(range(256)) and table["Ġ"] == ord(" ")


def sentencepiece_tokenizer() -> PreTrainedTokenizerFast:
    """A SentencePiece-style BPE (Llama 2's decoder: U+2581 for spaces, `<0xNN>` byte fallback), built in-process."""
    vocab = {"<unk>": 0, **{f"<0x{b:02X}>": 1 + b for b in range(256)}, "▁": 257, "▁caf": 258, "é": 259, "▁a": 260}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>", byte_fallback=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>")


def test_sentencepiece_spaces_and_byte_fallback():
    tok = sentencepiece_tokenizer()
    own = TokenBytes(tok)
    assert own(258) == b" caf" and own(259) == "é".encode() and own(260) == b" a"
    assert own(1 + 0xF0) == b"\xf0"
    ids = tok("a 😀", add_special_tokens=False)["input_ids"]
    assert b"".join(own(i) for i in ids) == " a 😀".encode()  # the first piece keeps its space: its own bytes


def test_legacy_names_keep_partial_tokens_apart():
    assert legacy_token("é".encode()) == "é"
    assert legacy_token(b"\xf0\x9f") == "bytes:\\xf0\\x9f" and legacy_token(b"\x98\x80") == "bytes:\\x98\\x80"
    assert token_text(b"\xf0\x9f") == "\ufffd"
