#!/usr/bin/env python3
"""check_dist.py LIST - test_mkmodel.sh's distribution check over many llama.cpp outputs in one
process (one python start-up instead of one per file).  LIST: lines OUT<TAB>INFO<TAB>LABEL,
OUT the raw float32 [positions][n_vocab] of `oracle.mjs eval`, INFO its stdout
({"positions", "n_vocab"}).  Prints per line `ok` or `bad LABEL: why`, in order.

Every row finite, in [0, 1], summing to 1, entropy inside (0.01, log V - 0.05); the mean
entropy inside (0.5, log V - 0.5); more than P/4 distinct top-1 tokens."""
import json
import math
import struct
import sys


def check(out, info_file):
    info = json.load(open(info_file))
    P, V = info["positions"], info["n_vocab"]
    data = open(out, "rb").read()
    assert len(data) == 4 * P * V, "size %d != 4*%d*%d" % (len(data), P, V)
    x = struct.unpack("<%df" % (P * V), data)
    # Every row: neither one-hot nor flat; on average well inside (0, log V).
    lo, hi = 0.01, math.log(V) - 0.05
    tops, total = set(), 0.0
    for i in range(P):
        r = x[i * V:(i + 1) * V]
        assert all(math.isfinite(p) and 0 <= p <= 1 for p in r), "non-finite at %d" % i
        s = sum(r)
        # node-llama-cpp normalises in float32 (one running sum over the vocabulary): over
        # Qwen3's 151669 entries that sum drifts by ~1e-3 (measured 1.0011), hence V * 3e-8.
        assert abs(s - 1) < max(1e-3, V * 3e-8), "row %d sums to %f" % (i, s)
        h = -sum(p * math.log(p) for p in r if p > 0)
        assert lo < h < hi, "row %d entropy %.3f outside (%.2f, %.2f)" % (i, h, lo, hi)
        total += h
        tops.add(max(range(V), key=lambda k: r[k]))
    mean = total / P
    assert 0.5 < mean < math.log(V) - 0.5, "mean entropy %.3f, log V %.3f" % (mean, math.log(V))
    assert len(tops) > P // 4, "only %d distinct top-1 tokens over %d positions" % (len(tops), P)


for line in open(sys.argv[1], encoding="utf-8"):
    line = line.rstrip("\n")
    if not line:
        continue
    out, info, label = line.split("\t", 2)
    try:
        check(out, info)
        print("ok")
    except Exception as e:  # an assertion, a short file, unreadable JSON: all a failed check
        print("bad %s: %s" % (label, (str(e) or type(e).__name__).replace("\n", " ")[:300]))
    sys.stdout.flush()
