#!/usr/bin/env node
// klcmp.mjs REF OTHER N_VOCAB - compares two float32 probability dumps [positions][n_vocab]
// (oracle.mjs eval / particle eval --probs-out): mean and max KL(REF || OTHER), top-1
// agreement, and REF's mean entropy and mean top-1 probability (how confident the model is).
// KLPOS=X in the environment also prints every position whose KL exceeds X.
import { readFileSync } from "node:fs";
const [ra, rb, nv] = process.argv.slice(2);
const a = new Float32Array(readFileSync(ra).buffer.slice(0));
const b = new Float32Array(readFileSync(rb).buffer.slice(0));
const V = Number(nv);
if (!V || a.length !== b.length || a.length % V) throw new Error("size mismatch");
const P = a.length / V;
let skl = 0, mkl = 0, agree = 0, sh = 0, sp = 0;
for (let i = 0; i < P; i++) {
	let kl = 0, h = 0, ia = 0, ib = 0;
	for (let j = 0; j < V; j++) {
		const p = a[i * V + j], q = Math.max(b[i * V + j], 1e-30);
		if (p > 0) { kl += p * Math.log(p / q); h -= p * Math.log(p); }
		if (p > a[i * V + ia]) ia = j;
		if (b[i * V + j] > b[i * V + ib]) ib = j;
	}
	if (process.env.KLPOS && kl > Number(process.env.KLPOS)) console.log(`pos ${i} kl ${kl.toExponential(2)} top ${ia} ${ib}`);
	skl += kl; mkl = Math.max(mkl, kl); agree += ia === ib; sh += h; sp += a[i * V + ia];
}
console.log(`mean_kl ${(skl / P).toExponential(2)} max_kl ${mkl.toExponential(2)} top1 ${(agree / P).toFixed(3)} entropy ${(sh / P).toFixed(3)} logV ${Math.log(V).toFixed(2)} ptop ${(sp / P).toFixed(3)}`);
