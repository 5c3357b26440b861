"""Side by side on this CPU: xgrammar and llguidance constraining the embedded model's vocabulary to a JSON schema.

For each library: the time to build its tokenizer view, to compile the schema, and per decode step for n rows the
time to compute the n token bitmasks and apply them to (n, V) logits (unpacked as the engine does,
`structured.unpack_bitmask`), walking each row through the same valid JSON text token by token (what a running
request does); the first step apart, as it includes lazy set-up. Each library in its own process, in turn.
"""
import argparse
import json
import statistics
import subprocess
import sys
import time

SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 40},
                                           "age": {"type": "integer", "minimum": 0},
                                           "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 4},
                                           "city": {"enum": ["Paris", "Berlin", "Madrid"]}},
          "required": ["name", "age", "city"], "additionalProperties": False}
TEXT = '{"name": "Ada Lovelace", "age": 36, "tags": ["math", "engines"], "city": "Paris"}'


def run(library: str, n: int) -> dict:
    import torch

    from nsample.engine import sampler
    from nsample.engine.structured import unpack_bitmask
    from nsample.models.tiny_model import tiny_model

    tokenizer = tiny_model()[1]
    vocab = len(tokenizer)
    ids = tokenizer(TEXT, add_special_tokens=False)["input_ids"]
    t0 = time.perf_counter()
    if library == "xgrammar":
        import xgrammar as xgr

        info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab)
        t1 = time.perf_counter()
        compiled = xgr.GrammarCompiler(info, max_threads=1).compile_json_schema(json.dumps(SCHEMA))
        t2 = time.perf_counter()
        matchers = [xgr.GrammarMatcher(compiled) for _ in range(n)]
        mask = xgr.allocate_token_bitmask(n, vocab)
        fill = lambda i, m: m.fill_next_token_bitmask(mask, i)  # noqa: E731
        accept = lambda m, t: m.accept_token(t)  # noqa: E731
    else:
        import llguidance
        import llguidance.hf
        import llguidance.torch

        info = llguidance.hf.from_tokenizer(tokenizer, n_vocab=vocab)
        t1 = time.perf_counter()
        grammar = llguidance.LLMatcher.grammar_from_json_schema(json.dumps(SCHEMA))
        matchers = [llguidance.LLMatcher(info, grammar) for _ in range(n)]
        t2 = time.perf_counter()
        mask = llguidance.torch.allocate_token_bitmask(n, vocab)
        fill = lambda i, m: llguidance.torch.fill_next_token_bitmask(m, mask, i)  # noqa: E731
        accept = lambda m, t: m.consume_token(t)  # noqa: E731
    apply = lambda logits: sampler.apply_allowed(logits, unpack_bitmask(mask, vocab))  # noqa: E731
    steps = []
    for tok in ids:
        logits = torch.randn(n, vocab)
        s0 = time.perf_counter()
        for i, m in enumerate(matchers):
            fill(i, m)
        logits = apply(logits)
        steps.append(time.perf_counter() - s0)
        assert torch.isfinite(logits[:, tok]).all(), "the valid text's token was masked"
        for m in matchers:
            assert accept(m, tok) is not False
    return {"library": library, "tokenizer_s": t1 - t0, "compile_s": t2 - t1, "tokens": len(ids),
            "first_ms": 1e3 * steps[0], "step_ms_median": 1e3 * statistics.median(steps[1:]),
            "step_ms_max": 1e3 * max(steps[1:])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--one", choices=["xgrammar", "llguidance"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(run(args.one, args.n)))
        return
    print(f"JSON schema mask per decode step, n={args.n} rows, vocabulary of the embedded model")
    print(f"{'library':>11} | {'tokenizer s':>11} | {'compile s':>9} | {'first step ms':>13} | "
          f"{'step ms (median)':>16} | {'step ms (max)':>13}")
    for library in ("xgrammar", "llguidance"):
        out = subprocess.run([sys.executable, __file__, "--one", library, "--n", str(args.n)], capture_output=True,
                             text=True, check=True).stdout.strip().splitlines()[-1]
        r = json.loads(out)
        print(f"{library:>11} | {r['tokenizer_s']:11.2f} | {r['compile_s']:9.3f} | {r['first_ms']:13.2f} | "
              f"{r['step_ms_median']:16.2f} | {r['step_ms_max']:13.2f}")


if __name__ == "__main__":
    main()
