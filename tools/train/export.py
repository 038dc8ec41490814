#!/usr/bin/env python3
"""export.py DIR OUT.gguf [--type q8_0|f16|f32] - writes the model trained by train.py as a
qwen3moe GGUF v3 (the layout of src/model/qwen3moe.c, the keys llama.cpp reads) with its
byte-level BPE tokenizer (tokenizer.ggml.model "gpt2", pre "gpt-2") and a ChatML template.

Matrices are stored as --type (default q8_0: ggml's quantize_row_q8_0_ref, blocks of 32 with
an F16 scale); norms and the router (ffn_gate_inp) stay F32, as llama.cpp's quantizer keeps
them.  Needs DIR/model.pt and DIR/tokenizer.json.  `particle inspect OUT.gguf` validates."""
import argparse
import json
import os
import struct
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

GGML_F32, GGML_F16, GGML_Q8_0 = 0, 1, 8
FILE_TYPE = {"f32": 0, "f16": 1, "q8_0": 7}
ALIGN = 32

CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}{%- endif -%}")

# GGUF value types
U32, I32, F32V, BOOL, STR, ARR = 4, 5, 6, 7, 8, 9


def gstr(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def kv(key, vtype, value):
    out = gstr(key) + struct.pack("<I", vtype)
    if vtype == U32:
        return out + struct.pack("<I", value)
    if vtype == F32V:
        return out + struct.pack("<f", value)
    if vtype == BOOL:
        return out + struct.pack("<B", 1 if value else 0)
    if vtype == STR:
        return out + gstr(value)
    etype, items = value
    out += struct.pack("<IQ", etype, len(items))
    if etype == STR:
        return out + b"".join(gstr(s) for s in items)
    if etype == I32:
        return out + struct.pack("<%di" % len(items), *items)
    raise ValueError(etype)


def q8_0(a):
    """ggml quantize_row_q8_0_ref: d = max|x| / 127, q = roundf(x / d) (half away from 0)."""
    x = a.astype(np.float32).reshape(-1, 32)
    amax = np.abs(x).max(axis=1)
    d = (amax / np.float32(127)).astype(np.float32)
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
    v = x * inv[:, None]
    q = (np.sign(v) * np.floor(np.abs(v) + np.float32(0.5))).astype(np.int8)
    blk = np.zeros(x.shape[0], dtype=[("d", "<f2"), ("q", "i1", 32)])
    blk["d"] = d.astype(np.float16)
    blk["q"] = q
    return blk.tobytes()


def encode(a, kind):
    if kind == GGML_F32:
        return a.astype("<f4").tobytes()
    if kind == GGML_F16:
        return a.astype("<f2").tobytes()
    return q8_0(a)


def tensors(state, c):
    """(name, array in ggml order: numpy shape is ne reversed, float kind) per GGUF tensor."""
    yield "token_embd.weight", state["embd.weight"], "mat"
    yield "output_norm.weight", state["norm.weight"], "f32"
    yield "output.weight", state["out.weight"], "mat"
    for i in range(c["n_layer"]):
        p = "blocks.%d." % i
        b = "blk.%d." % i
        yield b + "attn_norm.weight", state[p + "attn_norm.weight"], "f32"
        yield b + "attn_q.weight", state[p + "attn.q.weight"], "mat"
        yield b + "attn_k.weight", state[p + "attn.k.weight"], "mat"
        yield b + "attn_v.weight", state[p + "attn.v.weight"], "mat"
        yield b + "attn_output.weight", state[p + "attn.o.weight"], "mat"
        yield b + "attn_q_norm.weight", state[p + "attn.q_norm.weight"], "f32"
        yield b + "attn_k_norm.weight", state[p + "attn.k_norm.weight"], "f32"
        yield b + "ffn_norm.weight", state[p + "ffn_norm.weight"], "f32"
        yield b + "ffn_gate_inp.weight", state[p + "moe.router.weight"], "f32"
        yield b + "ffn_gate_exps.weight", state[p + "moe.gate"], "mat"
        yield b + "ffn_up_exps.weight", state[p + "moe.up"], "mat"
        yield b + "ffn_down_exps.weight", state[p + "moe.down"], "mat"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("out")
    ap.add_argument("--type", default="q8_0", choices=sorted(FILE_TYPE))
    ap.add_argument("--name", default="particle demo qwen3moe")
    a = ap.parse_args()
    ck = torch.load(os.path.join(a.dir, "model.pt"), map_location="cpu")
    with open(os.path.join(a.dir, "tokenizer.json")) as f:
        tok = json.load(f)
    c = ck["config"]
    state = {k: v.float().numpy() for k, v in ck["state"].items()}
    mat = {"f32": GGML_F32, "f16": GGML_F16, "q8_0": GGML_Q8_0}[a.type]

    A = "qwen3moe."
    tokens = tok["tokens"]
    ids = {t: i for i, t in enumerate(tokens)}
    types = [3 if t in tok["specials"] else 1 for t in tokens]  # 3 = control
    meta = [
        kv("general.architecture", STR, "qwen3moe"),
        kv("general.type", STR, "model"),
        kv("general.name", STR, a.name),
        kv("general.license", STR, "trained on WordNet 3.0 (WordNet licence) and fortune-mod "
           "(BSD) text; see tools/train/DATA.md"),
        kv("general.quantization_version", U32, 2),
        kv("general.file_type", U32, FILE_TYPE[a.type]),
        kv("general.alignment", U32, ALIGN),
        kv(A + "block_count", U32, c["n_layer"]),
        kv(A + "context_length", U32, max(c["n_ctx"], 1024)),  # see MANIFEST: trained on 128
        kv(A + "embedding_length", U32, c["n_embd"]),
        kv(A + "feed_forward_length", U32, c["n_ff_exp"] * c["n_expert_used"]),
        kv(A + "expert_feed_forward_length", U32, c["n_ff_exp"]),
        kv(A + "attention.head_count", U32, c["n_head"]),
        kv(A + "attention.head_count_kv", U32, c["n_head_kv"]),
        kv(A + "attention.key_length", U32, c["head_dim"]),
        kv(A + "attention.value_length", U32, c["head_dim"]),
        kv(A + "attention.layer_norm_rms_epsilon", F32V, c["eps"]),
        kv(A + "expert_count", U32, c["n_expert"]),
        kv(A + "expert_used_count", U32, c["n_expert_used"]),
        kv(A + "rope.freq_base", F32V, c["rope_base"]),
        kv("tokenizer.ggml.model", STR, "gpt2"),
        kv("tokenizer.ggml.pre", STR, "gpt-2"),
        kv("tokenizer.ggml.tokens", ARR, (STR, tokens)),
        kv("tokenizer.ggml.token_type", ARR, (I32, types)),
        kv("tokenizer.ggml.merges", ARR, (STR, tok["merges"])),
        kv("tokenizer.ggml.bos_token_id", U32, ids["<|endoftext|>"]),
        kv("tokenizer.ggml.eos_token_id", U32, ids["<|im_end|>"]),
        kv("tokenizer.ggml.padding_token_id", U32, ids["<|endoftext|>"]),
        kv("tokenizer.ggml.add_bos_token", BOOL, True),
        kv("tokenizer.chat_template", STR, CHAT_TEMPLATE),
    ]
    infos, blobs, off = [], [], 0
    for name, arr, kind in tensors(state, c):
        k = GGML_F32 if kind == "f32" or arr.shape[-1] % 32 else mat
        data = encode(arr, k)
        ne = list(reversed(arr.shape))
        infos.append(gstr(name) + struct.pack("<I", len(ne)) +
                     struct.pack("<%dQ" % len(ne), *ne) + struct.pack("<IQ", k, off))
        pad = (-len(data)) % ALIGN
        blobs.append(data + b"\0" * pad)
        off += len(data) + pad
    head = b"GGUF" + struct.pack("<IQQ", 3, len(infos), len(meta)) + b"".join(meta) + b"".join(infos)
    head += b"\0" * ((-len(head)) % ALIGN)
    tmp = a.out + ".tmp"
    with open(tmp, "xb") as f:
        f.write(head)
        for b in blobs:
            f.write(b)
    os.replace(tmp, a.out)
    print("export.py: %s (%s, %d tensors, %d bytes)" % (a.out, a.type, len(infos), len(head) + off))


if __name__ == "__main__":
    main()
