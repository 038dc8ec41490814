#!/bin/sh
# test_pack.sh - `particle pack` (write, verify, corruption, model changed) and
# `particle cachesim` on a hand-made trace with known hit rates.
. "$(dirname "$0")/lib.sh"

# A small GGUF with routed-expert tensors (blk.1 gate/up/down, 4 experts), written by a
# minimal GGUF v3 writer so this test does not depend on particle to make its input.
python3 - "$TMP/m.gguf" <<'PY'
import struct, sys
def s(x): b = x.encode(); return struct.pack('<Q', len(b)) + b
ts = [("token_embd.weight", [16, 4]), ("blk.1.ffn_gate_exps.weight", [16, 5, 4]),
      ("blk.1.ffn_up_exps.weight", [16, 5, 4]), ("blk.1.ffn_down_exps.weight", [5, 16, 4])]
hdr = b'GGUF' + struct.pack('<IQQ', 3, len(ts), 1)
hdr += s("general.architecture") + struct.pack('<I', 8) + s("qwen3moe")
off = 0; infos = b''; sizes = []
for name, ne in ts:
    n = 4
    for d in ne: n *= d
    infos += s(name) + struct.pack('<I', len(ne)) + b''.join(struct.pack('<Q', d) for d in ne)
    infos += struct.pack('<IQ', 0, off)
    sizes.append(n); off += (n + 31) // 32 * 32
head = hdr + infos
head += b'\0' * ((32 - len(head) % 32) % 32)
data = bytearray()
for n in sizes:
    data += bytes((len(head) + len(data) + i) * 7 % 251 for i in range(n))
    data += b'\0' * ((32 - len(data) % 32) % 32)
open(sys.argv[1], 'wb').write(head + data)
PY

expect_exit 0 "pack help" -- "$PARTICLE" pack --help
expect_grep "$TMP/out" "--verify" "help names --verify"
expect_grep "$TMP/out" "--repack" "help names --repack"
expect_exit 2 "pack without model" -- "$PARTICLE" pack
expect_exit 2 "pack unknown flag" -- "$PARTICLE" pack "$TMP/m.gguf" --frobnicate
expect_one_error_line "pack unknown flag"

expect_exit 0 "pack writes" -- "$PARTICLE" pack "$TMP/m.gguf"
expect_grep "$TMP/out" "1 MoE layers x 4 experts" "pack summary"
[ -f "$TMP/m.gguf.xpack" ] && [ -f "$TMP/m.gguf.xpack.json" ] && ok || bad "pack files missing"
# one 4 KiB blob per expert: 3 x 320 bytes fit in 4096
[ "$(wc -c <"$TMP/m.gguf.xpack")" -eq 16384 ] && ok || bad "pack size $(wc -c <"$TMP/m.gguf.xpack")"
expect_grep "$TMP/m.gguf.xpack.json" '"sha256"' "manifest has sha256"
expect_exit 0 "verify ok" -- "$PARTICLE" pack "$TMP/m.gguf" --verify
expect_grep "$TMP/out" "OK" "verify says OK"

expect_exit 0 "pack -o" -- "$PARTICLE" pack "$TMP/m.gguf" -o "$TMP/other.xpack"
expect_exit 0 "verify -o" -- "$PARTICLE" pack "$TMP/m.gguf" -o "$TMP/other.xpack" --verify

# corrupt one byte of the pack: verify fails with one clear line, exit 2
printf 'X' | dd of="$TMP/m.gguf.xpack" bs=1 seek=100 conv=notrunc 2>/dev/null
expect_exit 2 "verify corrupt" -- "$PARTICLE" pack "$TMP/m.gguf" --verify
expect_one_error_line "verify corrupt"
expect_grep "$TMP/err" "corrupt" "corrupt named"
# a model rewritten after packing no longer matches
"$PARTICLE" pack "$TMP/m.gguf" >/dev/null 2>&1
touch -d '2001-01-01' "$TMP/m.gguf"
expect_exit 2 "verify stale" -- "$PARTICLE" pack "$TMP/m.gguf" --verify
expect_grep "$TMP/err" "different version" "stale pack named"
expect_exit 1 "verify missing pack" -- "$PARTICLE" pack "$TMP/m.gguf" -o "$TMP/none.xpack" --verify
expect_one_error_line "verify missing pack"

# cachesim: 2 slots, cycle 0 1 2 0 1 2 -> LRU 0%, LFU 0%, Belady 2/6
printf '0 0 0\n1 0 1\n2 0 2\n3 0 0\n4 0 1\n5 0 2\n' >"$TMP/t.txt"
expect_exit 0 "cachesim" -- "$PARTICLE" cachesim "$TMP/t.txt" --slots 2 --per-layer
expect_grep "$TMP/out" "total             6    0.00%    0.00%   33.33%" "cachesim rates"
expect_exit 2 "cachesim no slots" -- "$PARTICLE" cachesim "$TMP/t.txt"
expect_exit 2 "cachesim bad slots" -- "$PARTICLE" cachesim "$TMP/t.txt" --slots x
expect_exit 2 "cachesim bad trace" -- "$PARTICLE" cachesim "$TMP/m.gguf" --slots 2
expect_one_error_line "cachesim bad trace"
expect_exit 0 "cachesim help" -- "$PARTICLE" cachesim --help
finish
