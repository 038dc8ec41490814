#!/usr/bin/env python3
"""klcmp.py REF TEST LIMIT [POSITIONS]: mean/max KL(ref || test) and top-1 agreement of two float32
probability files [positions][n_vocab] (particle eval --probs-out, oracle.mjs eval), as
src/model/compare.c computes them; prints one line ending in PASS or FAIL (mean KL <= LIMIT,
top-1 >= 0.98)."""
import sys
import numpy as np

ref = np.fromfile(sys.argv[1], dtype=np.float32).astype(np.float64)
tst = np.fromfile(sys.argv[2], dtype=np.float32).astype(np.float64)
lim = float(sys.argv[3])
if ref.size != tst.size or ref.size == 0:
    print("size mismatch %d vs %d FAIL" % (ref.size, tst.size))
    sys.exit(0)
n = int(sys.argv[4]) if len(sys.argv) > 4 else (200 if ref.size % 200 == 0 else 1)
ref = ref.reshape(n, -1)
tst = tst.reshape(n, -1)
eps = 1e-10
kl = np.sum(np.where(ref > 0, ref * (np.log(np.maximum(ref, eps)) - np.log(np.maximum(tst, eps))), 0.0), axis=1)
top1 = np.mean(np.argmax(ref, axis=1) == np.argmax(tst, axis=1))
ok = kl.mean() <= lim and top1 >= 0.98
print("positions %d mean_kl %.3e max_kl %.3e top1 %.4f %s" % (n, kl.mean(), kl.max(), top1, "PASS" if ok else "FAIL"))
