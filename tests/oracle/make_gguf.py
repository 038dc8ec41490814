#!/usr/bin/env python3
"""make_gguf.py OUT TEMPLATE_FILE|- BOS_ID EOS_ID TOKEN... - writes a minimal GGUF v3 (no
tensors) with tokenizer.chat_template (omitted for '-'), tokenizer.ggml.tokens and the
bos/eos ids, for the `particle template -m` tests."""
import struct
import sys


def s(x):
    b = x.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def main():
    out, tmpl, bos, eos, toks = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5:]
    kv = []
    kv.append(s("general.architecture") + struct.pack("<I", 8) + s("llama"))
    kv.append(s("general.alignment") + struct.pack("<I", 4) + struct.pack("<I", 32))
    if tmpl != "-":
        with open(tmpl, encoding="utf-8", newline="") as f:
            kv.append(s("tokenizer.chat_template") + struct.pack("<I", 8) + s(f.read()))
    kv.append(s("tokenizer.ggml.tokens") + struct.pack("<II", 9, 8) + struct.pack("<Q", len(toks)) +
              b"".join(s(t) for t in toks))
    kv.append(s("tokenizer.ggml.bos_token_id") + struct.pack("<I", 4) + struct.pack("<I", bos))
    kv.append(s("tokenizer.ggml.eos_token_id") + struct.pack("<I", 4) + struct.pack("<I", eos))
    data = b"GGUF" + struct.pack("<IQQ", 3, 0, len(kv)) + b"".join(kv)
    data += b"\0" * ((-len(data)) % 32)
    with open(out, "wb") as f:
        f.write(data)


if __name__ == "__main__":
    main()
