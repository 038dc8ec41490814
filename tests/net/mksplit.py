#!/usr/bin/env python3
"""mksplit.py OUTDIR STEM N [--bad-part K] - writes a split GGUF model by hand, llama.cpp's
gguf-split convention: STEM-0000K-of-0000N.gguf, each part with split.no (0-based, u16),
split.count (u16) and split.tensors.count (i32); part 1 also carries the general metadata.
Each part holds two F32 tensors of deterministic bytes (~300 KiB per part).  --bad-part K
writes part K with split.no claiming to be part 1 (a mismatched part)."""
import struct
import sys


def s(x):
    b = x.encode()
    return struct.pack('<Q', len(b)) + b


def kv_u16(k, v):
    return s(k) + struct.pack('<IH', 2, v)


def kv_i32(k, v):
    return s(k) + struct.pack('<Ii', 5, v)


def kv_str(k, v):
    return s(k) + struct.pack('<I', 8) + s(v)


def part(path, no, count, bad):
    kvs = [kv_u16("split.no", 0 if bad else no), kv_u16("split.count", count),
           kv_i32("split.tensors.count", 2 * count)]
    if no == 0:
        kvs = [kv_str("general.architecture", "qwen3moe"), kv_str("general.name", "split-test")] + kvs
    ts = [("blk.%d.a.weight" % no, [256, 150]), ("blk.%d.b.weight" % no, [128, 3])]
    hdr = b'GGUF' + struct.pack('<IQQ', 3, len(ts), len(kvs)) + b''.join(kvs)
    off, infos, sizes = 0, b'', []
    for name, ne in ts:
        n = 4 * ne[0] * ne[1]
        infos += s(name) + struct.pack('<I', 2) + b''.join(struct.pack('<Q', d) for d in ne)
        infos += struct.pack('<IQ', 0, off)
        sizes.append(n)
        off += (n + 31) // 32 * 32
    head = hdr + infos
    head += b'\0' * ((32 - len(head) % 32) % 32)
    data = bytearray()
    for n in sizes:
        data += bytes((no * 131 + len(data) + i) * 7 % 251 for i in range(n))
        data += b'\0' * ((32 - len(data) % 32) % 32)
    with open(path, 'wb') as f:
        f.write(head + data)


def main():
    out, stem, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    bad = int(sys.argv[5]) if len(sys.argv) > 5 and sys.argv[4] == '--bad-part' else 0
    for k in range(1, n + 1):
        part("%s/%s-%05d-of-%05d.gguf" % (out, stem, k, n), k - 1, n, k == bad)


main()
