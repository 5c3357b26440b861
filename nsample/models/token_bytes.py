"""A token's own bytes, read from the tokenizer's vocabulary piece, so that a choice's tokens' bytes join into its
text even where one character spans several tokens (OpenAI's logprob `bytes`).

Decoding one token alone (`tokenizer.decode([id])`) cannot give them: a token that holds part of a UTF-8 character
decodes to U+FFFD. The piece itself can. Byte-level BPE (GPT-2, SmolLM2, Llama 3, Qwen) writes each byte as one
printable character of GPT-2's table; SentencePiece models (Llama 2, Mistral, Gemma) write a space as U+2581 and
bytes they cannot spell as `<0xNN>` pieces (byte fallback). Added tokens (`<|im_end|>`) are their own text. For any
other decoder (WordPiece, Unigram without fallback) the one-token decode is the best there is.
"""
import json
import re

BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")
SPM_SPACE = "\u2581"


def gpt2_byte_table() -> dict[str, int]:
    """GPT-2's map from the printable character standing for a byte to the byte (byte-level BPE vocabularies)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = {}, 0
    for b in range(256):
        if b in printable:
            chars[chr(b)] = b
        else:
            chars[chr(256 + extra)] = b
            extra += 1
    return chars


def decoder_kinds(backend) -> set[str]:
    """The `type`s of a `tokenizers.Tokenizer`'s decoder and of the decoders inside a Sequence."""
    decoder = json.loads(backend.to_str()).get("decoder") or {}
    parts = decoder.get("decoders") or [decoder]
    return {part.get("type") for part in parts if isinstance(part, dict)}


class TokenBytes:
    """token id -> its bytes, for one tokenizer (a transformers tokenizer with a fast backend); cached per id."""

    def __init__(self, tokenizer):
        self.tokenizer, self.backend = tokenizer, tokenizer.backend_tokenizer
        kinds = decoder_kinds(self.backend)
        self.byte_level = "ByteLevel" in kinds
        self.byte_fallback = "ByteFallback" in kinds
        self.spm_space = bool(kinds & {"Metaspace", "Replace"})
        self.table = gpt2_byte_table() if self.byte_level else {}
        self.added = {i: t.content for i, t in self.backend.get_added_tokens_decoder().items()}
        self.cache: dict[int, bytes] = {}

    def __call__(self, token_id: int) -> bytes:
        if (hit := self.cache.get(token_id)) is None:
            hit = self.cache[token_id] = self._bytes(token_id)
        return hit

    def _bytes(self, token_id: int) -> bytes:
        if token_id in self.added:
            return self.added[token_id].encode()
        piece = self.backend.id_to_token(token_id)
        if piece is None:
            return b""
        if self.byte_level:
            return b"".join(bytes([self.table[c]]) if c in self.table else c.encode() for c in piece)
        if self.byte_fallback and (m := BYTE_PIECE.fullmatch(piece)):
            return bytes([int(m.group(1), 16)])
        if self.spm_space:
            return piece.replace(SPM_SPACE, " ").encode()
        return self.tokenizer.decode([token_id]).encode()


def token_text(data: bytes) -> str:
    """A token's text as OpenAI shows it: its bytes decoded, a partial character replaced by U+FFFD."""
    return data.decode("utf-8", errors="replace")


def legacy_token(data: bytes) -> str:
    """A token as the legacy completions `tokens` list names it: its text, or for bytes that are not whole UTF-8
    characters `bytes:\\xe6\\x97` (OpenAI's form), so that distinct partial tokens keep distinct names."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return "bytes:" + "".join(f"\\x{b:02x}" for b in data)
