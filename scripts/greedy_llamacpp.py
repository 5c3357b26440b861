"""llama.cpp's greedy continuations of given prompt token ids, for scripts/quality.py: JSON in, JSON out.

Reads {"gguf": path, "prompts": [[ids]], "max_tokens": n, "eos": [ids], "threads": t} on stdin and prints
[[token ids, the chosen tokens' logprobs], ...]: the argmax of llama.cpp's logits after each token, stopping at an
eos id (left out, as nsample leaves it out), as its own CPU backend computes them (activations rounded to Q8_0 /
Q8_K for the quantized weights).
Runs without torch in its process (a second OpenMP runtime slows both), so quality.py spawns it.
"""
import json
import sys

import numpy as np
from llama_cpp import Llama


def main():
    job = json.load(sys.stdin)
    llm = Llama(model_path=job["gguf"], n_ctx=1024, n_threads=job["threads"], n_threads_batch=job["threads"],
                verbose=False)
    eos, out = set(job["eos"]), []
    for ids in job["prompts"]:
        llm.reset()
        llm.eval(ids)
        got, logprobs = [], []
        for _ in range(job["max_tokens"]):
            last = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),))  # the last token's logits
            logits = last.astype(np.float64)
            top = int(logits.argmax())
            if top in eos:
                break
            logprobs.append(float(logits[top] - logits.max() - np.log(np.exp(logits - logits.max()).sum())))
            got.append(top)
            llm.eval([top])
        out.append([got, logprobs])
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
