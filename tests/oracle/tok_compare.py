#!/usr/bin/env python3
"""tok_compare.py - compares particle's tokenizer against llama.cpp (and reports Hugging
Face agreement) for one vocabulary.  Used by test_tokenizer.sh.
  tok_compare.py NAME STRINGS.json DIR ROUNDTRIP(0|1)
DIR holds: pt.p1 / pt.p0 (JSON id arrays per line), pt.d0 / pt.d1 (base64 text per line),
pt.rt (base64 detokenize of pt.p0 ids), llama.jsonl, optionally hf.jsonl.
Prints mismatches and the line `N passed, N failed` (one check per string and mode)."""
import base64, json, sys

name, strings_file, d, roundtrip = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
raw_bytes = len(sys.argv) > 5 and sys.argv[5] == "raw"  # SPM: invalid UTF-8 cannot reach llama.cpp
strings = json.load(open(strings_file))
def lines(f):
    try:
        return open(f"{d}/{f}").read().split("\n")[:len(strings)]
    except FileNotFoundError:
        return None
p1 = [json.loads(x) for x in lines("pt.p1")]
p0 = [json.loads(x) for x in lines("pt.p0")]
d0, d1, rt = lines("pt.d0"), lines("pt.d1"), lines("pt.rt")
ll = [json.loads(x) for x in lines("llama.jsonl")]
hf = lines("hf.jsonl")
hf = [json.loads(x)["ids"] for x in hf] if hf else None

passed = failed = 0
hf_same = hf_n = 0
rt_ok = rt_n = 0
shown = 0
def check(ok, what, s):
    global passed, failed, shown
    if ok:
        passed += 1
        return
    failed += 1
    if shown < 25:
        shown += 1
        print(f"FAIL {name} {s['name']} {what}", file=sys.stderr)

skipped = 0
hf_diff = []
for i, s in enumerate(strings):
    raw = s["text"].encode() if "text" in s else base64.b64decode(s["b64"])
    if "skip" in ll[i] or (raw_bytes and "b64" in s):
        skipped += 1
        continue
    check(p1[i] == ll[i]["p1"], f"ids parse_special=on: particle {p1[i][:24]} llama {ll[i]['p1'][:24]}", s)
    check(p0[i] == ll[i]["p0"], f"ids parse_special=off: particle {p0[i][:24]} llama {ll[i]['p0'][:24]}", s)
    check(d0[i] == ll[i]["d0"], f"detokenize special=off: particle {base64.b64decode(d0[i])[:60]!r} llama {base64.b64decode(ll[i]['d0'])[:60]!r}", s)
    check(d1[i] == ll[i]["d1"], f"detokenize special=on: particle {base64.b64decode(d1[i])[:60]!r} llama {base64.b64decode(ll[i]['d1'])[:60]!r}", s)
    valid = "text" in s
    back = base64.b64decode(rt[i])
    # Sarvam's <0xXX> pieces are NORMAL tokens: llama.cpp prints their text, so text that
    # needed byte fallback is not representable on the way back.
    representable = not (b"<0x" in back and b"<0x" not in raw)
    if roundtrip and valid and representable:
        check(back == raw, f"round trip: {base64.b64decode(rt[i])[:60]!r} != {raw[:60]!r}", s)
    if valid:
        rt_n += 1
        rt_ok += base64.b64decode(rt[i]) == raw
    if hf and valid:
        hf_n += 1
        hf_same += hf[i] == p0[i]
        if hf[i] != p0[i]:
            hf_diff.append(s["name"])
print(f"{name}: {len(strings)} strings; detokenize(tokenize(s)) == s for {rt_ok}/{rt_n} valid UTF-8 strings"
      + (f"; Hugging Face ids equal (parse_special=off) for {hf_same}/{hf_n}" if hf else "")
      + (f"; {skipped} not expressible through node-llama-cpp" if skipped else ""))
if hf_diff:
    print(f"{name}: differs from Hugging Face on: {' '.join(hf_diff)}")
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
