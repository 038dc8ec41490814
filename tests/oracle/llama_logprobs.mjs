// llama_logprobs.mjs MODEL TOKENS_FILE OUT [--threads N]
// Teacher-forces the comma/space separated token ids through llama.cpp (node-llama-cpp,
// CPU, flash attention on as llama.cpp's own default resolves on CPU, F16 KV cache) and
// writes float32 log-probabilities [positions][n_vocab] of the token after each position:
// the layout `particle eval --compare` reads.  Probabilities come from the greedy sampler's
// full candidate list (softmax of the raw logits).
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const nlc = await import(pathToFileURL(join(here, "../../tools/oracle/node_modules/node-llama-cpp/dist/index.js")).href);

const [modelPath, tokensPath, outPath] = process.argv.slice(2);
if (!outPath) {
	console.error("usage: llama_logprobs.mjs MODEL TOKENS_FILE OUT");
	process.exit(2);
}
const tokens = readFileSync(tokensPath, "utf8").split(/[\s,]+/).filter((s) => s.length).map(Number);
const llama = await nlc.getLlama({ gpu: false, build: "never", logLevel: "error" });
const model = await llama.loadModel({ modelPath });
const nv = model.tokens.ggufVocabularySize ?? model.fileInfo.metadata?.tokenizer?.ggml?.tokens?.length;
const ctx = await model.createContext({
	contextSize: Math.max(256, tokens.length + 8),
	batchSize: process.env.ORACLE_BATCH ? Number(process.env.ORACLE_BATCH) : Math.max(256, tokens.length + 8),
	threads: 1,
	flashAttention: true,
});
const seq = ctx.getSequence();
const items = tokens.map((t) => [t, { generateNext: { probabilities: true } }]);
const res = await seq.controlledEvaluate(items);
const out = new Float32Array(tokens.length * nv).fill(-Infinity);
for (let p = 0; p < tokens.length; p++) {
	const probs = res[p]?.next?.probabilities;
	if (!probs) throw new Error(`no probabilities at position ${p}`);
	for (const [id, pr] of probs) out[p * nv + id] = Math.log(pr);
}
writeFileSync(outPath, Buffer.from(out.buffer));
console.error(`llama_logprobs: ${tokens.length} positions x ${nv} vocab`);
await ctx.dispose();
await model.dispose();
