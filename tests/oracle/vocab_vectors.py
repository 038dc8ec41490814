#!/usr/bin/env python3
"""vocab_vectors.py INP OUT PARTICLE VOCAB.gguf - llama.cpp's own tokenizer test vectors
(models/ggml-vocab-*.gguf.inp / .out: texts separated by a __ggml_vocab_test__ line, one line
of ids per text) against `particle tokenize --batch` on the same vocab-only GGUF.  Prints one
line per differing text and a last line "N equal, N differ"; exit 0 when all are equal."""
import base64, os, subprocess, sys, tempfile

inp, out, particle, vocab = sys.argv[1:5]
texts = open(inp, 'rb').read().split(b'\n__ggml_vocab_test__\n')
if texts and texts[-1] == b'':
    texts.pop()
want = open(out, encoding='utf-8').read().split('\n')
with tempfile.NamedTemporaryFile('w', delete=False) as f:
    for t in texts:
        f.write(base64.b64encode(t).decode() + '\n')
    batch = f.name
try:
    r = subprocess.run([particle, 'tokenize', '-m', vocab, '--batch', batch, '--no-bos',
                        '--ids-only'], capture_output=True, text=True)
finally:
    os.unlink(batch)
if r.returncode != 0:
    print('particle tokenize exit %d: %s' % (r.returncode, r.stderr.strip()[:300]))
    print('0 equal, %d differ' % len(texts))
    sys.exit(1)
got = r.stdout.split('\n')
equal = differ = 0
for i, t in enumerate(texts):
    w = want[i].strip() if i < len(want) else None
    g = got[i].strip() if i < len(got) else None
    if w is not None and w == g:
        equal += 1
    else:
        differ += 1
        print('differs: %r: llama.cpp %s, particle %s' % (t[:60], w, g))
print('%d equal, %d differ' % (equal, differ))
sys.exit(0 if differ == 0 and equal > 0 else 1)
