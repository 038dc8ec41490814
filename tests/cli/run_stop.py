#!/usr/bin/env python3
"""run_stop.py - stop strings, including one split across two tokens.

usage: run_stop.py PARTICLE MODEL PROMPT

Generates 48 greedy tokens, finds a stop string made of the last two bytes of one token's
text and the first two of the next (so it spans a token boundary), reruns with --stop and
checks: stdout is exactly the text before the string's first occurrence, the string itself is
never printed, the stop reason is "stop".  A second stop string that never occurs must not
change the output.  Prints one line per check; exit 1 if any failed."""
import json
import os
import subprocess
import sys
import tempfile

P, MODEL, PROMPT = sys.argv[1:4]
failed = 0


def check(cond, what):
    global failed
    print(("ok " if cond else "FAIL ") + what)
    if not cond:
        failed += 1


def run(extra, stats):
    r = subprocess.run([P, "run", "-m", MODEL, "--prompt", PROMPT, "-n", "48", "--temperature",
                        "0", "--quiet", "--stats-json", stats] + extra, capture_output=True)
    if r.returncode != 0:
        raise SystemExit("FAIL particle run exit %d: %s" % (r.returncode, r.stderr[-300:]))
    with open(stats) as f:
        return r.stdout, json.load(f)


with tempfile.TemporaryDirectory() as tmp:
    st = os.path.join(tmp, "s.json")
    full, d = run([], st)
    pieces = []
    for i in d["ids"]:
        r = subprocess.run([P, "detokenize", "-m", MODEL, str(i)], capture_output=True)
        pieces.append(r.stdout)
    stop = None
    for k in list(range(len(pieces) // 2, len(pieces) - 1)) + list(range(len(pieces) // 2)):
        a, b = pieces[k], pieces[k + 1]
        cand = a[-2:] + b[:2]
        try:
            cand.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if len(a) >= 2 and len(b) >= 2 and b"\0" not in cand and not cand.startswith(b"-") \
                and cand.strip() == cand:
            stop = cand
            break
    if stop is None:
        raise SystemExit("FAIL no two-token stop string candidate in %r" % full)
    cut = full.index(stop)
    out, d2 = run(["--stop", "\x01never\x01", "--stop", stop.decode()], st)
    check(out == full[:cut], "--stop %r split across tokens: output is the %d bytes before it"
          % (stop, cut))
    check(stop not in out, "the stop string is not printed")
    check(d2["stop_reason"] == "stop", "stop reason %s" % d2["stop_reason"])
    out3, d3 = run(["--stop", "\x01never\x01"], st)
    check(out3 == full and d3["stop_reason"] == "max-new", "a stop string that never occurs changes nothing")
sys.exit(1 if failed else 0)
