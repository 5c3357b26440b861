"""Structured outputs: a grammar (JSON schema, regex, choice list or Lark) constrains which tokens each row may draw.

The grammar library is llguidance, picked over xgrammar after `scripts/bench_grammar.py` on this CPU (docs/api.md,
Structured outputs): it compiles a schema lazily in milliseconds where xgrammar takes half a second before the first
token, and it is a 3 MB wheel where xgrammar brings 1 GB of triton; xgrammar's masks were faster by about 0.7 ms a
step for 8 rows. Each of a request's rows keeps its own matcher, fed its own tokens, so a row's mask depends only
on what it has drawn: choice i of (seed s, n) still equals (seed s + i, n = 1) under a schema. The mask is applied
to the logits before penalties, temperature, top-k/p and the row's seeded noise (as vLLM does); logprobs stay the
model's own. A row whose grammar allows nothing more after its token stops there (finish_reason "stop"); one whose
grammar may go on or end may also draw the end-of-text token; max_tokens reached first ends it mid-grammar with
finish_reason "length", as at OpenAI.
"""
import functools
import json
import threading

import torch

from nsample.errors import InvalidRequest

FORMATS = {"json_schema": "json_schema", "regex": "regex", "choice": "choice", "grammar": "lark"}  # llguidance's


JSON_LAYOUT = {"whitespace_flexible": False}  # ", " and ": " between items: a small model cannot pad with blanks


def grammar_text(kind: str, value) -> str:
    """llguidance's grammar definition for one constraint."""
    import llguidance

    if kind == "json_schema":
        return llguidance.LLMatcher.grammar_from_json_schema(json.dumps(value), defaults=JSON_LAYOUT)
    return llguidance.grammar_from(FORMATS[kind], json.dumps(value) if kind == "choice" else value)


class Grammars:
    """One engine's grammar side: llguidance's view of its tokenizer (built at the first constrained request),
    compiled grammars (cached by their text), and each request's matchers."""

    def __init__(self, tokenizer, vocab: int, eos_ids: set[int]):
        self.tokenizer, self.vocab, self.eos_ids = tokenizer, vocab, eos_ids
        self._view, self._view_lock = None, threading.Lock()

    @property
    def view(self):
        """Built once (about 1.5 s for a 49k vocabulary), by whichever of the concurrent first requests comes first;
        the others wait for it rather than build their own."""
        with self._view_lock:
            if self._view is None:
                import llguidance.hf

                self._view = llguidance.hf.from_tokenizer(self.tokenizer, n_vocab=self.vocab)
            return self._view

    @functools.lru_cache(maxsize=64)
    def compiled(self, kind: str, key: str) -> str:
        """The grammar of a constraint (given as its JSON text), checked; a 400 naming the field if it is invalid."""
        import llguidance

        try:
            text = grammar_text(kind, json.loads(key))
        except ValueError as e:
            raise InvalidRequest(f"Invalid {kind.replace('_', ' ')}: {e}", param=kind, code="invalid_value") from None
        ok, error = self._validate(llguidance, text)
        if not ok:
            raise InvalidRequest(f"The {kind.replace('_', ' ')} cannot be compiled into a grammar: {error}",
                                 param=kind, code="invalid_value")
        return text

    def _validate(self, llguidance, text: str) -> tuple[bool, str]:
        matcher = llguidance.LLMatcher(self.view, text)
        return (not matcher.is_error(), matcher.get_error())

    def check(self, p) -> None:
        """Compile the request's grammar now, so that one that cannot be compiled is refused before it queues."""
        if (c := p.constraint) is not None:
            self.compiled(c[0], json.dumps(c[1]))

    def matchers(self, p, rows: int) -> "RowMatchers | None":
        if (c := p.constraint) is None:
            return None
        import llguidance

        text = self.compiled(c[0], json.dumps(c[1]))
        return RowMatchers([llguidance.LLMatcher(self.view, text) for _ in range(rows)], self.vocab,
                           sorted(self.eos_ids))


class RowMatchers:
    """The matchers of one request's live rows, in row order."""

    def __init__(self, matchers: list, vocab: int, eos_ids: list[int]):
        self.matchers, self.vocab, self.eos_ids = matchers, vocab, eos_ids

    def allowed(self, device) -> torch.Tensor:
        """(R, V) bool: the tokens each row's grammar allows next (a row whose grammar failed: end of text only)."""
        import llguidance.torch

        bits = llguidance.torch.allocate_token_bitmask(len(self.matchers), self.vocab)  # (R, ceil(V / 32)) int32
        for row, m in enumerate(self.matchers):
            llguidance.torch.fill_next_token_bitmask(m, bits, row)
        allowed = unpack_bitmask(bits, self.vocab)  # (R, V)
        stuck = ~allowed.any(-1)
        if bool(stuck.any()):
            allowed[stuck.nonzero()[:, 0][:, None], torch.tensor(self.eos_ids)[None, :]] = True
        return allowed.to(device)

    def accept(self, tokens: list[int]) -> list[bool]:
        """Feed each row its token; whether each row's grammar is now complete (nothing may follow)."""
        for m, tok in zip(self.matchers, tokens):
            m.consume_token(tok)
        return [m.is_stopped() for m in self.matchers]

    def keep(self, rows: list[int]) -> None:
        self.matchers = [self.matchers[i] for i in rows]


def unpack_bitmask(bits: torch.Tensor, vocab: int) -> torch.Tensor:
    # bits (R, W) int32, token t allowed iff bit t % 32 of word t // 32 -> (R, V) bool
    shifts = torch.arange(32, dtype=torch.int32)
    return ((bits[:, :, None] >> shifts) & 1).flatten(1)[:, :vocab].bool()
