#!/usr/bin/env node
// oracle.mjs - llama.cpp (node-llama-cpp 3.21.1, CPU build, prebuilt binary only) as the
// numerical oracle for particle.
//
//   node oracle.mjs tokenize MODEL TEXT-FILE [--special]
//       -> stdout: JSON array of token ids.  The model is loaded vocabulary-only.  No BOS/EOS
//          is added (llama.cpp common_tokenize with add_special = false); --special parses
//          special-token text such as <|im_start|> (parse_special = true).
//   node oracle.mjs eval MODEL TOKENS-FILE OUT [--threads N] [--flash-attention auto|on|off]
//                   [--no-check-tensors]   (skip llama.cpp's load-time data validation)
//                   [--kv-type f16|q8_0]   (the K and V cache type; default f16)
//                   [--batch B]   (feed the tokens in successive batches of B; default all)
//       TOKENS-FILE: JSON array of ids (teacher forcing: exactly these tokens are fed, in one
//       batch unless --batch, nothing is added).  OUT: raw little-endian float32 [positions][n_vocab]; row i
//       is P(token i+1 | tokens 0..i) = softmax over the full vocabulary of llama.cpp's
//       logits at position i, computed in float32 by node-llama-cpp (expf(l - max) / sum).
//       The sampler chain is greedy only (temperature 0, no top-k/top-p/min-p, no penalties,
//       no token bias), which selects a token but leaves the logits untouched, so these are
//       the model's unmodified probabilities.  stdout: {"positions":P,"n_vocab":V}.
//   node oracle.mjs generate MODEL PROMPT N [--special] [--threads N]
//       -> stdout: {"prompt": [ids], "tokens": [N greedy ids], "text": "..."}; stops early at
//          an end-of-generation token.
//   node oracle.mjs bench MODEL [--prompt N] [--gen N] [--threads N]
//       -> stdout: {"prefill_tokens", "prefill_tps", "decode_tokens", "decode_tps",
//          "threads"}; prefill = one batch of N tokens, decode = N single-token steps.
//   node oracle.mjs batch JOBS-FILE DIR
//       JOBS-FILE: one JSON array per line, the arguments of one command above, e.g.
//       ["eval", "m.gguf", "toks.json", "out.f32"].  The jobs run one after the other in this
//       one process (one node start-up and one llama.cpp binding instead of one per model:
//       the oracle suites evaluate dozens of tiny files).  Each job gets what it would get
//       alone (its own model load and context, freed after it).  For job N (1-based line
//       number): DIR/N.out what the command prints on stdout, DIR/N.err its error line (empty
//       if none), DIR/N.rc its exit status (0, 1 failed, 2 bad usage).  Exit 0 once every job
//       has run (tests/oracle/batch.sh queues and reads jobs from sh).
//
// Defaults match the tests: threads 1 (2 threads cost ~20 ms/token of synchronisation on
// tiny models), gpu off, never build from source, flash attention "auto" (llama.cpp's own
// default, which enables it on CPU), swa_full on (llama.cpp's default).
import { readFileSync, writeFileSync } from "node:fs";
import { getLlama, LlamaLogLevel } from "node-llama-cpp";

// A usage error: exit 2 on its own; in a batch, the job's rc 2.
class UsageError extends Error {}
let inBatch = false;

function usage(msg) {
	if (inBatch) throw new UsageError(msg || "usage");
	if (msg) process.stderr.write(`oracle: error: ${msg}\n`);
	process.stderr.write(
		"usage: oracle.mjs tokenize MODEL TEXT-FILE [--special]\n" +
		"       oracle.mjs eval MODEL TOKENS-FILE OUT [--threads N] [--flash-attention auto|on|off] [--no-check-tensors] [--batch B] [--kv-type f16|q8_0]\n" +
		"       oracle.mjs generate MODEL PROMPT N [--special] [--threads N]\n" +
		"       oracle.mjs bench MODEL [--prompt N] [--gen N] [--threads N]\n" +
		"       oracle.mjs batch JOBS-FILE DIR\n");
	process.exit(2);
}

function parseFlags(args, spec) {
	const pos = [], flags = {};
	for (let i = 0; i < args.length; i++) {
		const a = args[i];
		if (!a.startsWith("--")) { pos.push(a); continue; }
		const name = a.slice(2);
		if (!(name in spec)) usage(`unknown flag ${a}`);
		if (spec[name] === "bool") { flags[name] = true; continue; }
		if (i + 1 >= args.length) usage(`${a} needs a value`);
		flags[name] = args[++i];
	}
	return { pos, flags };
}

function intFlag(v, def, name) {
	if (v === undefined) return def;
	const n = Number(v);
	if (!Number.isInteger(n) || n < 1) usage(`--${name} expects a positive integer`);
	return n;
}

// The binding is loaded once per thread count (a batch reuses it); models are per job.
const llamas = new Map();
// checkTensors: llama.cpp validates every tensor's data on load (reads the whole file).
async function load(modelPath, threads, vocabOnly = false, checkTensors = !vocabOnly) {
	if (!llamas.has(threads))
		llamas.set(threads, await getLlama({ gpu: false, build: "never",
			logLevel: LlamaLogLevel.error, maxThreads: threads, progressLogs: false }));
	const llama = llamas.get(threads);
	const model = await llama.loadModel({ modelPath, vocabOnly, gpuLayers: 0,
		useMmap: true, checkTensors });
	disposers.push(() => model.dispose());
	return { llama, model };
}

// What a job loaded (model, context), freed in reverse order when it ends.
let disposers = [];
async function disposeAll() {
	const d = disposers.reverse();
	disposers = [];
	for (const f of d) await f();
}

// kvType: the K and V cache type ("f16", llama.cpp's default, or "q8_0": -ctk/-ctv q8_0).
async function newSequence(model, n, threads, fa = "auto", kvType = "f16") {
	const flashAttention = fa === "on" ? true : fa === "off" ? false : "auto";
	const size = Math.max(n + 8, 64);
	const kv = kvType === "q8_0" ? { experimentalKvCacheKeyType: "Q8_0",
		experimentalKvCacheValueType: "Q8_0" } : {};
	const context = await model.createContext({ contextSize: size, batchSize: size,
		threads: { ideal: threads, min: threads }, flashAttention, swaFullCache: true,
		sequences: 1, ...kv });
	disposers.push(() => context.dispose());
	return { context, seq: context.getSequence() };
}

// The vocabulary size: the length of the GGUF token list.
function vocabSize(model) {
	const n = model.fileInfo?.metadata?.tokenizer?.ggml?.tokens?.length;
	if (!Number.isInteger(n) || n < 1) throw new Error("cannot read tokenizer.ggml.tokens");
	return n;
}

async function cmdTokenize(args) {
	const { pos, flags } = parseFlags(args, { special: "bool" });
	if (pos.length !== 2) usage("tokenize needs MODEL TEXT-FILE");
	const { model } = await load(pos[0], 1, true);
	const text = readFileSync(pos[1], "utf8");
	return JSON.stringify(Array.from(model.tokenize(text, !!flags.special))) + "\n";
}

async function cmdEval(args) {
	const { pos, flags } = parseFlags(args, { threads: "val", "flash-attention": "val",
		"no-check-tensors": "bool", batch: "val", "kv-type": "val" });
	if (pos.length !== 3) usage("eval needs MODEL TOKENS-FILE OUT");
	const threads = intFlag(flags.threads, 1, "threads");
	const fa = flags["flash-attention"] ?? "auto";
	if (!["auto", "on", "off"].includes(fa)) usage("--flash-attention expects auto, on or off");
	const kvType = flags["kv-type"] ?? "f16";
	if (!["f16", "q8_0"].includes(kvType)) usage("--kv-type expects f16 or q8_0");
	const tokens = JSON.parse(readFileSync(pos[1], "utf8"));
	if (!Array.isArray(tokens) || tokens.length === 0 || !tokens.every(Number.isInteger))
		usage("TOKENS-FILE must hold a non-empty JSON array of integers");
	const { model } = await load(pos[0], threads, false, !flags["no-check-tensors"]);
	const nVocab = vocabSize(model);
	for (const t of tokens)
		if (t < 0 || t >= nVocab) usage(`token id ${t} outside the vocabulary (${nVocab})`);
	const { seq } = await newSequence(model, tokens.length, threads, fa, kvType);
	const input = tokens.map((t) => [t, { generateNext: { probabilities: true } }]);
	// --batch B: evaluate in successive chunks of B tokens (B=1: token by token) to measure
	// llama.cpp's own sensitivity to batching.
	const bsz = flags.batch === undefined ? input.length : intFlag(flags.batch, 1, "batch");
	const res = [];
	for (let i = 0; i < input.length; i += bsz)
		res.push(...await seq.controlledEvaluate(input.slice(i, i + bsz)));
	if (res[0]?.next?.probabilities?.size !== nVocab)
		throw new Error(`llama.cpp returned ${res[0]?.next?.probabilities?.size} probabilities, expected ${nVocab}`);
	const out = new Float32Array(tokens.length * nVocab);
	for (let i = 0; i < tokens.length; i++) {
		const probs = res[i]?.next?.probabilities;
		if (!probs) throw new Error(`no probabilities at position ${i}`);
		for (const [id, p] of probs) out[i * nVocab + id] = p;
	}
	writeFileSync(pos[2], Buffer.from(out.buffer));
	return JSON.stringify({ positions: tokens.length, n_vocab: nVocab }) + "\n";
}

async function greedy(seq, model, prompt, n) {
	const out = [];
	let input = prompt;
	for (let i = 0; i < n; i++) {
		const items = input.map((t, k) => (k === input.length - 1 ? [t, { generateNext: { token: true } }] : t));
		const res = await seq.controlledEvaluate(items);
		const next = res[items.length - 1]?.next?.token;
		if (next == null) break;
		out.push(next);
		if (model.isEogToken(next)) break;
		input = [next];
	}
	return out;
}

async function cmdGenerate(args) {
	const { pos, flags } = parseFlags(args, { special: "bool", threads: "val" });
	if (pos.length !== 3) usage("generate needs MODEL PROMPT N");
	const n = intFlag(pos[2], 0, "N");
	const threads = intFlag(flags.threads, 1, "threads");
	const { model } = await load(pos[0], threads);
	const prompt = Array.from(model.tokenize(pos[1], !!flags.special));
	if (prompt.length === 0) usage("the prompt tokenizes to nothing");
	const { seq } = await newSequence(model, prompt.length + n, threads);
	const tokens = await greedy(seq, model, prompt, n);
	return JSON.stringify({ prompt, tokens, text: model.detokenize(tokens) }) + "\n";
}

async function cmdBench(args) {
	const { pos, flags } = parseFlags(args, { prompt: "val", gen: "val", threads: "val" });
	if (pos.length !== 1) usage("bench needs MODEL");
	const np = intFlag(flags.prompt, 128, "prompt"), ng = intFlag(flags.gen, 32, "gen");
	const threads = intFlag(flags.threads, 1, "threads");
	const { model } = await load(pos[0], threads);
	const nVocab = vocabSize(model);
	const { seq } = await newSequence(model, np + ng, threads);
	let s = 12345;
	const prompt = Array.from({ length: np }, () => (s = (s * 1103515245 + 12345) % 2147483648) % nVocab);
	let t0 = performance.now();
	await seq.evaluateWithoutGeneratingNewTokens(prompt);
	const prefillMs = performance.now() - t0;
	let last = prompt[np - 1];
	t0 = performance.now();
	for (let i = 0; i < ng; i++) {
		const res = await seq.controlledEvaluate([[last, { generateNext: { token: true } }]]);
		last = res[0]?.next?.token ?? 0;
	}
	const decodeMs = performance.now() - t0;
	return JSON.stringify({ prefill_tokens: np, prefill_tps: np / (prefillMs / 1000),
		decode_tokens: ng, decode_tps: ng / (decodeMs / 1000), threads }) + "\n";
}

const cmds = { tokenize: cmdTokenize, eval: cmdEval, generate: cmdGenerate, bench: cmdBench };

async function cmdBatch(args) {
	if (args.length !== 2) usage("batch needs JOBS-FILE DIR");
	const jobs = readFileSync(args[0], "utf8").split("\n").filter((l) => l.trim() !== "");
	inBatch = true;
	for (let n = 1; n <= jobs.length; n++) {
		let rc = 0, out = "", err = "";
		try {
			let job = null;
			try { job = JSON.parse(jobs[n - 1]); } catch { /* not JSON: refused below */ }
			if (!Array.isArray(job) || !job.every((a) => typeof a === "string"))
				throw new UsageError("a job is a JSON array of strings");
			if (!cmds[job[0]] || job[0] === "batch") throw new UsageError(`unknown command ${job[0]}`);
			out = await cmds[job[0]](job.slice(1));
		} catch (e) {
			rc = e instanceof UsageError ? 2 : 1;
			err = `oracle: error: ${e?.message ?? e}\n`;
		}
		try { await disposeAll(); } catch (e) {
			if (!rc) { rc = 1; err = `oracle: error: ${e?.message ?? e}\n`; }
		}
		writeFileSync(`${args[1]}/${n}.out`, out);
		writeFileSync(`${args[1]}/${n}.err`, err);
		writeFileSync(`${args[1]}/${n}.rc`, `${rc}\n`);
	}
	return "";
}
cmds.batch = cmdBatch;

const [cmd, ...rest] = process.argv.slice(2);
if (!cmds[cmd]) usage(cmd ? `unknown command ${cmd}` : "");
try {
	process.stdout.write(await cmds[cmd](rest));
	process.exit(0);
} catch (e) {
	process.stderr.write(`oracle: error: ${e?.message ?? e}\n`);
	process.exit(1);
}
