#!/usr/bin/env python3
"""run_oracle.py - greedy `particle run` against llama.cpp's greedy tokens (oracle.mjs generate).

usage: run_oracle.py PARTICLE ORACLE MODEL N raw TEXT
       run_oracle.py PARTICLE ORACLE MODEL N chat MESSAGES.json
       run_oracle.py PARTICLE ORACLE --cases CASES.tsv
           many comparisons, llama.cpp's side in one `oracle.mjs batch` (one node process):
           CASES lines NAME<TAB>MODEL<TAB>N<TAB>raw|chat<TAB>TEXT-or-MESSAGES; prints per
           case `ok NAME: LINE` or `bad NAME: LINE`; exit 0 when all agree

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


def prepare(p, model, n, mode, arg, tmp):
    """particle's side of one comparison: (its --stats-json, the oracle's generate args)."""
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
    return d, ["generate", model, text, str(n)] + special


def judge(o, d):
    """One line on llama.cpp's answer o against particle's d; (agree, line)."""
    if o["prompt"] != d["prompt_ids"]:
        return False, "PROMPT DIFFERS: llama.cpp %s... particle %s..." % (o["prompt"][:12], d["prompt_ids"][:12])
    a, b = o["tokens"], d["ids"]
    for i in range(min(len(a), len(b))):
        if a[i] != b[i]:
            return False, "MISMATCH at token %d of %d: llama.cpp %d, particle %d" % (i, len(a), a[i], b[i])
    if len(a) != len(b):
        return False, "LENGTH DIFFERS: llama.cpp %d tokens, particle %d (stop %s)" % (len(a), len(b), d["stop_reason"])
    return True, "identical: %d tokens (stop %s), prompt %d tokens" % (len(a), d["stop_reason"], len(o["prompt"]))


def main_cases(p, oracle, cases_file):
    cases = [l.rstrip("\n").split("\t", 4) for l in open(cases_file, encoding="utf-8") if l.strip()]
    all_ok = True
    with tempfile.TemporaryDirectory() as tmp:
        prepared, jobs = [], []
        for i, (name, model, n, mode, arg) in enumerate(cases):
            try:
                d, job = prepare(p, model, n, mode, arg, tmp)
                prepared.append((name, d, len(jobs) + 1))
                jobs.append(job)
            except SystemExit as e:
                prepared.append((name, str(e), None))
        jf = os.path.join(tmp, "jobs")
        with open(jf, "w", encoding="utf-8") as f:
            for j in jobs:
                f.write(json.dumps(j, ensure_ascii=False) + "\n")
        out = os.path.join(tmp, "ob")
        os.mkdir(out)
        r = subprocess.run(["node", oracle, "batch", jf, out], capture_output=True, text=True)
        for name, d, job in prepared:
            if job is None:
                ok, line = False, d
            else:
                try:
                    rc = open(os.path.join(out, "%d.rc" % job)).read().strip()
                    if rc != "0":
                        raise FileNotFoundError
                    ok, line = judge(json.load(open(os.path.join(out, "%d.out" % job))), d)
                except (FileNotFoundError, ValueError):
                    err = ""
                    if os.path.exists(os.path.join(out, "%d.err" % job)):
                        err = open(os.path.join(out, "%d.err" % job)).read()
                    ok, line = False, "oracle failed: " + (err or r.stderr)[-300:]
            all_ok &= ok
            print("%s %s: %s" % ("ok" if ok else "bad", name, line.replace("\n", " ")))
            sys.stdout.flush()
    return 0 if all_ok else 1


def main():
    if len(sys.argv) == 5 and sys.argv[3] == "--cases":
        return main_cases(sys.argv[1], sys.argv[2], sys.argv[4])
    p, oracle, model, n, mode, arg = sys.argv[1:7]
    with tempfile.TemporaryDirectory() as tmp:
        d, job = prepare(p, model, n, mode, arg, tmp)
        r = subprocess.run(["node", oracle] + job, capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit("oracle failed: " + r.stderr[-300:])
        o = json.loads(r.stdout)
    ok, line = judge(o, d)
    print(line)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
