#!/usr/bin/env python3
"""run_oracle.py - greedy `particle run` against llama.cpp's greedy tokens (oracle.mjs generate).

usage: run_oracle.py PARTICLE ORACLE MODEL N raw TEXT
       run_oracle.py PARTICLE ORACLE MODEL N chat MESSAGES.json

raw: particle completes TEXT as given (BOS per the tokenizer); llama.cpp gets the same text,
preceded by the BOS token's text parsed as special when particle's prompt starts with BOS
(the oracle adds nothing itself).  chat: particle renders the conversation through the
model's template; llama.cpp gets `particle template`'s rendering (checked separately against
Python jinja2 by test_template.sh), special tokens parsed.  Both prompts must tokenize to the
same ids; then the generated ids must be identical (N tokens, or up to and including an
end-of-generation token).  Prints one line; exit 0 on agreement, 1 otherwise."""
import json
import os
import subprocess
import sys
import tempfile


def particle_run(p, model, n, args, stats):
    cmd = [p, "run", "-m", model, "-n", str(n), "--temperature", "0", "--quiet",
           "--stats-json", stats] + args
    r = subprocess.run(cmd, capture_output=True)
    if r.returncode != 0:
        raise SystemExit("particle run failed (%d): %s" % (r.returncode, r.stderr[-300:]))
    with open(stats) as f:
        return json.load(f)


def main():
    p, oracle, model, n, mode, arg = sys.argv[1:7]
    with tempfile.TemporaryDirectory() as tmp:
        stats = os.path.join(tmp, "stats.json")
        if mode == "raw":
            d = particle_run(p, model, n, ["--prompt", arg], stats)
            text, special = arg, []
            first = str(d["prompt_ids"][0]) if d["prompt_ids"] else ""
            bos = subprocess.run([p, "detokenize", "-m", model, first], capture_output=True,
                                 text=True).stdout
            # the prompt starts with a BOS the tokenizer added when the text itself does not
            if first and bos.startswith("<") and not arg.startswith(bos):
                text, special = bos + arg, ["--special"]
        else:
            d = particle_run(p, model, n, ["--messages", arg], stats)
            r = subprocess.run([p, "template", "-m", model, "--messages", arg],
                               capture_output=True, text=True)
            if r.returncode != 0:
                raise SystemExit("particle template failed: " + r.stderr[-300:])
            text, special = r.stdout, ["--special"]
        r = subprocess.run(["node", oracle, "generate", model, text, n] + special,
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit("oracle failed: " + r.stderr[-300:])
        o = json.loads(r.stdout)
    if o["prompt"] != d["prompt_ids"]:
        print("PROMPT DIFFERS: llama.cpp %s... particle %s..." % (o["prompt"][:12], d["prompt_ids"][:12]))
        return 1
    a, b = o["tokens"], d["ids"]
    for i in range(min(len(a), len(b))):
        if a[i] != b[i]:
            print("MISMATCH at token %d of %d: llama.cpp %d, particle %d" % (i, len(a), a[i], b[i]))
            return 1
    if len(a) != len(b):
        print("LENGTH DIFFERS: llama.cpp %d tokens, particle %d (stop %s)" % (len(a), len(b), d["stop_reason"]))
        return 1
    print("identical: %d tokens (stop %s), prompt %d tokens" % (len(a), d["stop_reason"], len(o["prompt"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
