#!/usr/bin/env python3
"""mkgguf.py - writes small GGUF files byte by byte (struct only, no gguf package) for the
inspect CLI test and the fuzz seed corpus.

usage: mkgguf.py KIND OUT
  moe        tiny qwen3moe-like model: 2 layers, 4 experts, Q4_K/Q8_0/F16/F32 tensors
  small      tiny file with every value type and F32/F16/Q8_0 tensors (fuzz seed)
  v2         like small, version 2, alignment 64
  notensors  metadata only
  bad-magic, v1, swapped, truncated, dup-tensor, bad-type, misaligned, past-eof
             corrupt variants of small (each breaks one rule)
"""
import struct
import sys

U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
SCALAR_FMT = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f",
              BOOL: "<B", U64: "<Q", I64: "<q", F64: "<d"}
# ggml type id -> (block elements, block bytes)
TYPES = {0: (1, 4), 1: (1, 2), 8: (32, 34), 12: (256, 144), 14: (256, 210)}
F32_T, F16_T, Q8_0_T, Q4_K_T, Q6_K_T = 0, 1, 8, 12, 14


def gstr(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def value(vtype, v):
    if vtype == STR:
        return gstr(v)
    if vtype == ARR:
        etype, items = v
        out = struct.pack("<IQ", etype, len(items))
        for it in items:
            out += value(etype, it)
        return out
    return struct.pack(SCALAR_FMT[vtype], v)


def nbytes(ttype, ne):
    be, bb = TYPES[ttype]
    n = bb * ne[0] // be
    for d in ne[1:]:
        n *= d
    return n


def pad(n, a):
    return (n + a - 1) // a * a


def build(kvs, tensors, alignment=32, version=3):
    """kvs: [(key, vtype, value)]; tensors: [(name, ttype, ne)]; returns bytes."""
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs))
    for key, vtype, v in kvs:
        out += gstr(key) + struct.pack("<I", vtype) + value(vtype, v)
    offset = 0
    sizes = []
    for name, ttype, ne in tensors:
        out += gstr(name) + struct.pack("<I", len(ne))
        out += b"".join(struct.pack("<Q", d) for d in ne)
        out += struct.pack("<IQ", ttype, offset)
        sizes.append(nbytes(ttype, ne))
        offset = pad(offset + sizes[-1], alignment)
    out += b"\0" * (pad(len(out), alignment) - len(out))
    for i, size in enumerate(sizes):
        out += bytes((i * 37 + j * 11) & 0x7f for j in range(size))  # finite halves/floats
        out += b"\0" * (pad(size, alignment) - size)
    return out


def moe():
    a = "qwen3moe"
    kvs = [
        ("general.architecture", STR, a),
        ("general.name", STR, "tiny moe"),
        (a + ".block_count", U32, 2),
        (a + ".context_length", U32, 4096),
        (a + ".embedding_length", U32, 256),
        (a + ".expert_feed_forward_length", U32, 32),
        (a + ".attention.head_count", U32, 4),
        (a + ".attention.head_count_kv", ARR, (I32, [2, 1])),
        (a + ".rope.freq_base", F32, 1000000.0),
        (a + ".expert_count", U32, 4),
        (a + ".expert_used_count", U32, 2),
        ("tokenizer.ggml.model", STR, "gpt2"),
        ("tokenizer.ggml.pre", STR, "qwen2"),
        ("tokenizer.ggml.tokens", ARR, (STR, ["a", "b", "c", "ab", "<|im_start|>",
                                              "<|im_end|>", "x", "y", "z", "xy"])),
        ("tokenizer.ggml.merges", ARR, (STR, ["a b", "x y"])),
        ("tokenizer.ggml.bos_token_id", U32, 1),
        ("tokenizer.ggml.eos_token_id", U32, 5),
        ("tokenizer.chat_template", STR, "{{ messages }}"),
    ]
    tensors = [("token_embd.weight", F16_T, [256, 10]), ("output_norm.weight", F32_T, [256])]
    for layer in range(2):
        p = "blk.%d." % layer
        tensors += [
            (p + "attn_norm.weight", F32_T, [256]),
            (p + "attn_q.weight", Q8_0_T, [256, 64]),
            (p + "ffn_gate_inp.weight", F32_T, [256, 4]),
            (p + "ffn_gate_exps.weight", Q4_K_T, [256, 32, 4]),
            (p + "ffn_up_exps.weight", Q4_K_T, [256, 32, 4]),
            (p + "ffn_down_exps.weight", Q8_0_T if layer == 0 else F16_T, [32, 256, 4]),
        ]
    return build(kvs, tensors)


def small_parts():
    kvs = [
        ("general.architecture", STR, "llama"),
        ("llama.block_count", U32, 1),
        ("t.u8", U8, 7), ("t.i8", I8, -7), ("t.u16", U16, 700), ("t.i16", I16, -700),
        ("t.i32", I32, -70000), ("t.f32", F32, 0.5), ("t.bool", BOOL, 1),
        ("t.u64", U64, 1 << 40), ("t.i64", I64, -(1 << 40)), ("t.f64", F64, 2.5),
        ("t.arr", ARR, (F32, [1.0, 2.0])), ("t.strs", ARR, (STR, ["x", ""])),
    ]
    tensors = [("w", F32_T, [8]), ("h", F16_T, [4, 2]), ("q", Q8_0_T, [32, 2])]
    return kvs, tensors


def corrupt(kind):
    kvs, tensors = small_parts()
    if kind == "dup-tensor":
        return build(kvs, tensors + [("w", F32_T, [8])])
    if kind == "bad-type":
        data = bytearray(build(kvs, [("w", F32_T, [8])]))
        i = data.index(b"\x01" + b"\0" * 7 + b"w") + 9 + 4 + 8  # name, n_dims, ne[0]: type
        data[i:i + 4] = struct.pack("<I", 37)
        return bytes(data)
    data = bytearray(build(kvs, tensors))
    if kind == "bad-magic":
        data[0:4] = b"GGUG"
    elif kind == "v1":
        data[4:8] = struct.pack("<I", 1)
    elif kind == "swapped":
        data[4:8] = struct.pack(">I", 3)
    elif kind == "truncated":
        data = data[:len(data) - 100]
    elif kind == "misaligned":
        i = data.index(b"\x01" + b"\0" * 7 + b"h") + 9 + 4 + 16 + 4  # offset of tensor h
        data[i:i + 8] = struct.pack("<Q", 40)
    elif kind == "past-eof":
        data = data[:len(data) - 40]
    return bytes(data)


def main():
    if len(sys.argv) != 3:
        sys.stderr.write(__doc__)
        return 2
    kind, out = sys.argv[1], sys.argv[2]
    if kind == "moe":
        data = moe()
    elif kind == "small":
        data = build(*small_parts())
    elif kind == "v2":
        kvs, tensors = small_parts()
        data = build([("general.alignment", U32, 64)] + kvs, tensors, 64, 2)
    elif kind == "notensors":
        data = build(small_parts()[0], [])
    else:
        data = corrupt(kind)
    with open(out, "wb") as f:
        f.write(data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
