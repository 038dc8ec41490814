// mock_server.mjs - a stand-in for `particle serve` for working on the page alone:
// serves webui/ as the binary does (/, /assets/NAME), fakes a streamed chat reply (one
// token every 25 ms) and /v1/stats/stream.  The real tests (run_webui.mjs) use particle.
//   node tests/webui/mock_server.mjs [PORT]      (prints the URL)
import { createServer } from 'node:http';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'webui');
const types = { html: 'text/html; charset=utf-8', js: 'text/javascript; charset=utf-8',
		css: 'text/css; charset=utf-8' };
const WORDS = 'the model streams experts from disk into a small cache and **this** is `code` ok'.split(' ');
let decoded = 0, busy = 0, hits = 0, misses = 0;
const uses = Array.from({ length: 4 }, () => new Array(16).fill(0));

const srv = createServer((req, res) => {
	const url = new URL(req.url, 'http://x');
	if (req.method === 'GET' && (url.pathname === '/' || url.pathname.startsWith('/assets/'))) {
		const name = url.pathname === '/' ? 'index.html' : url.pathname.slice(8);
		if (!/^[a-z]+\.(html|js|css)$/.test(name)) { res.writeHead(404); return res.end(); }
		try {
			const body = readFileSync(join(root, name));
			res.writeHead(200, { 'Content-Type': types[name.split('.').pop()] });
			return res.end(body);
		} catch { res.writeHead(404); return res.end(); }
	}
	if (url.pathname === '/v1/models') {
		res.writeHead(200, { 'Content-Type': 'application/json' });
		return res.end(JSON.stringify({ object: 'list', data: [{ id: 'mock-model', object: 'model' }] }));
	}
	if (url.pathname === '/v1/chat/completions' && req.method === 'POST') {
		let body = '';
		req.on('data', (d) => { body += d; });
		req.on('end', () => {
			const j = JSON.parse(body);
			const n = j.max_tokens || 40;
			res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' });
			let i = 0;
			busy++;
			const send = (o) => res.write('data: ' + JSON.stringify(o) + '\n\n');
			const tick = setInterval(() => {
				if (i < n) {
					send({ choices: [{ index: 0, delta: { content: WORDS[i % WORDS.length] + ' ' }, finish_reason: null }] });
					decoded++;
					for (let l = 0; l < 4; l++) { uses[l][(i * 3 + l) % 16]++; uses[l][(i * 7 + 1) % 16]++; }
					if (i % 3) hits++; else misses++;
					i++;
					return;
				}
				clearInterval(tick);
				busy--;
				send({ choices: [{ index: 0, delta: {}, finish_reason: 'length' }] });
				send({ choices: [], usage: { prompt_tokens: 5, completion_tokens: n, total_tokens: n + 5 } });
				res.end('data: [DONE]\n\n');
			}, 25);
			res.on('close', () => { if (i < n) { clearInterval(tick); busy--; } });
		});
		return;
	}
	if (url.pathname === '/v1/stats/stream') {
		res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' });
		let prev = decoded;
		const ev = () => {
			const d = decoded - prev;
			prev = decoded;
			res.write('data: ' + JSON.stringify({
				t_ms: Date.now(), uptime_s: 1, interval_s: 0.5,
				model: { id: 'mock-model', arch: 'qwen3moe', n_ctx: 4096, n_moe_layers: 4, n_expert: 16, n_expert_used: 2 },
				server: { slots_total: 1, slots_busy: busy, queue_depth: 0 },
				gen: { decode_tok_s: d * 2, prefill_tok_s: null, ttft_s: 0.05, prefill_done: 0, prefill_total: 0 },
				memory: { budget_bytes: 2 ** 31, rss_bytes: 2 ** 29, peak_rss_bytes: 2 ** 29 + 2 ** 27 },
				experts: { mode: 'cache', io_engine: 'mock', hit_rate: hits / Math.max(1, hits + misses), hit_rate_now: 0.66, mib_per_token: 1.5, disk_mb_s: 120 },
				heat: { mode: 'cache', n_expert: 16, layers: [0, 1, 2, 3],
					resident: uses.map((r) => r.map((u) => (u > 2 ? '1' : '0')).join('')), uses },
			}) + '\n\n');
		};
		ev();
		const t = setInterval(ev, 500);
		res.on('close', () => clearInterval(t));
		return;
	}
	res.writeHead(404, { 'Content-Type': 'application/json' });
	res.end('{"error":{"message":"not found"}}');
});
srv.listen(Number(process.argv[2] || 0), '127.0.0.1', () => {
	console.log('http://127.0.0.1:' + srv.address().port + '/');
});
