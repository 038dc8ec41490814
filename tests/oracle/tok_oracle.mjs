// tok_oracle.mjs - reference token ids for tests/oracle/test_tokenizer.sh.
//   node tok_oracle.mjs llama GGUF STRINGS.json   llama.cpp (node-llama-cpp, vocab only):
//        per string one JSON line {"p1": ids parse_special, "p0": ids no parse_special,
//        "d0": base64 detokenize(p0, special=false), "d1": base64 detokenize(p1, special=true)}
//   node tok_oracle.mjs info GGUF                 special ids (-1 unless CONTROL: node-llama-cpp
//        hides others), llama_vocab_get_add_bos/eos, EOG ids (JSON)
//   node tok_oracle.mjs hf PACKAGE STRINGS.json    Hugging Face (@lenml/tokenizers): {"ids": [...]}
//   node tok_oracle.mjs batch JOBS   many of the above in one process (one node start-up and
//        llama.cpp binding; each vocabulary loaded once for its info and llama jobs): lines
//        MODE<TAB>GGUF-or-PACKAGE<TAB>STRINGS.json (empty for info)<TAB>OUT, the output of
//        each to OUT, or its error to OUT.err
// Strings given as base64 bytes that are not valid UTF-8 cannot cross into JavaScript as is:
// they are passed as llama.cpp itself decodes them (each malformed byte -> U+FFFD), which is
// exactly what llama.cpp's BPE path sees (see src/token/tok.h).  Not expressible at all:
// encoded surrogates (llama.cpp keeps their bytes; JavaScript cannot carry them) -> {"skip"}.
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

const here = path.dirname(new URL(import.meta.url).pathname);
const nm = path.resolve(here, "../../tools/oracle/node_modules");
const require = createRequire(path.join(nm, "x.js"));

function llamaDecode(buf) {
  let out = "";
  const cont = (i) => i < buf.length && (buf[i] & 0xc0) === 0x80;
  for (let i = 0; i < buf.length;) {
    const c = buf[i];
    let cp = 0xfffd, n = 1;
    if (c < 0x80) { cp = c; }
    else if ((c & 0xe0) === 0xc0 && cont(i + 1)) { cp = ((c & 0x1f) << 6) | (buf[i + 1] & 0x3f); n = 2; }
    else if ((c & 0xf0) === 0xe0 && cont(i + 1) && cont(i + 2)) {
      cp = ((c & 0x0f) << 12) | ((buf[i + 1] & 0x3f) << 6) | (buf[i + 2] & 0x3f); n = 3;
    } else if ((c & 0xf8) === 0xf0 && cont(i + 1) && cont(i + 2) && cont(i + 3)) {
      const v = ((c & 0x07) << 18) | ((buf[i + 1] & 0x3f) << 12) | ((buf[i + 2] & 0x3f) << 6) | (buf[i + 3] & 0x3f);
      if (v <= 0x10ffff) { cp = v; n = 4; }
    }
    // lone surrogates cannot be represented in UTF-8 from JS: the same U+FFFD per byte then
    if (cp >= 0xd800 && cp <= 0xdfff) return null;
    out += String.fromCodePoint(cp);
    i += n;
  }
  return out;
}

const texts = (file) => JSON.parse(readFileSync(file, "utf8")).map((s) =>
  s.text !== undefined ? s.text : llamaDecode(Buffer.from(s.b64, "base64")));

// One loaded vocabulary (the last one asked for: a batch asks for each twice in a row, info
// then llama) and every Hugging Face tokenizer asked for, kept for the rest of a batch.
let llama = null, loaded = null;
async function vocab(target) {
  if (loaded?.path === target) return loaded.model;
  if (loaded) { await loaded.model.dispose(); loaded = null; }
  if (!llama) {
    const { getLlama, LlamaLogLevel } = await import(path.join(nm, "node-llama-cpp/dist/index.js"));
    llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
  }
  loaded = { path: target, model: await llama.loadModel({ modelPath: target, vocabOnly: true }) };
  return loaded.model;
}
const hfs = new Map();

async function run(mode, target, file) {
  const out = [];
  if (mode === "info") {
    const model = await vocab(target);
    const tk = model.tokens, eog = [];
    const n = model.fileInfo.metadata.tokenizer.ggml.tokens.length;
    for (let i = 0; i < n; i++) if (model.isEogToken(i)) eog.push(i);
    out.push(JSON.stringify({ n_vocab: n, bos: tk.bos ?? -1, eos: tk.eos ?? -1, eot: tk.eot ?? -1,
      add_bos: model._model.shouldPrependBosToken(), add_eos: model._model.shouldAppendEosToken(),
      eog }));
  } else if (mode === "llama") {
    const model = await vocab(target);
    for (const t of texts(file)) {
      if (t === null) { out.push(JSON.stringify({ skip: "surrogate bytes" })); continue; }
      const p1 = model.tokenize(t, true), p0 = model.tokenize(t, false);
      const b64 = (ids, sp) => Buffer.from(model.detokenize(ids, sp), "utf8").toString("base64");
      out.push(JSON.stringify({ p1, p0, d0: b64(p0, false), d1: b64(p1, true) }));
    }
  } else if (mode === "hf") {
    if (!hfs.has(target)) hfs.set(target, require(target).fromPreTrained());
    const tok = hfs.get(target);
    for (const t of texts(file))
      out.push(t === null ? "{\"ids\":null}" : JSON.stringify({ ids: Array.from(tok.encode(t, { add_special_tokens: false })) }));
  } else {
    throw new Error(`unknown mode ${mode}`);
  }
  return out.join("\n") + "\n";
}

const [mode, ...args] = process.argv.slice(2);
if (mode === "batch" && args.length === 1) {
  // batch JOBS: one job a line, MODE<TAB>TARGET<TAB>STRINGS-or-empty<TAB>OUT: writes what
  // `tok_oracle.mjs MODE TARGET STRINGS` prints to OUT, or "error: ..." to OUT.err
  for (const line of readFileSync(args[0], "utf8").split("\n")) {
    if (!line) continue;
    const [m, target, file, outPath] = line.split("\t");
    try {
      writeFileSync(outPath, await run(m, target, file));
    } catch (e) {
      writeFileSync(outPath + ".err", `error: ${e?.message ?? e}\n`);
    }
  }
  if (loaded) await loaded.model.dispose();
} else if (["info", "llama", "hf"].includes(mode) && args.length >= 1) {
  process.stdout.write(await run(mode, args[0], args[1]));
  if (loaded) await loaded.model.dispose();
} else {
  console.error("usage: tok_oracle.mjs llama GGUF STRINGS.json | info GGUF | hf PACKAGE STRINGS.json | batch JOBS");
  process.exit(2);
}
