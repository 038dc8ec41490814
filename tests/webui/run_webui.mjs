// run_webui.mjs - browser tests of the web UI with Debian's chromium through npm
// playwright-core (no browser download).  Driven by tests/cli/test_webui.sh against a real
// `particle serve`; usage:
//   node tests/webui/run_webui.mjs URL SHOTDIR N_MOE_LAYERS
// Every check prints on failure; the last line is `N passed, N failed`.  Any console error,
// page error, failed request or HTTP error status fails the run, except the aborts the
// test causes itself (the stopped reply, the stats stream cut by a reload).
import { createRequire } from 'node:module';
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';

const require = createRequire(resolve('tools/oracle/package.json'));
const { chromium } = require('playwright-core');

const [url, shotDir, nMoeArg, keyArg] = process.argv.slice(2);
// with a 4th argument KEY the server wants that API key: only the key flow is tested
const apiKey = keyArg || null;
const nMoe = Number(nMoeArg);
let pass = 0, fail = 0;
const ok = (cond, what) => {
	if (cond) pass++;
	else { fail++; console.error('FAIL: ' + what); }
	return cond;
};
mkdirSync(shotDir, { recursive: true });

const problems = [];
let pageRef = null;
let allowAbort = () => false;

async function main() {
	const browser = await chromium.launch({
		executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
		args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
	});
	const ctx = await browser.newContext({ viewport: { width: 1400, height: 900 } });
	const page = await ctx.newPage();
	pageRef = page;
	page.setDefaultTimeout(20000);
	page.on('console', (m) => { if (m.type() === 'error') problems.push('console error: ' + m.text()); });
	page.on('pageerror', (e) => problems.push('page error: ' + e.message));
	page.on('requestfailed', (r) => {
		const why = r.failure() ? r.failure().errorText : '?';
		if (!(why === 'net::ERR_ABORTED' && allowAbort(r))) problems.push('request failed: ' + r.url() + ' ' + why);
	});
	page.on('response', (r) => { if (r.status() >= 400) problems.push('HTTP ' + r.status() + ' ' + r.url()); });

	if (apiKey) return keyFlow(page, ctx, browser);

	// ---- load ----
	const base = url.replace(/\/?$/, '/');
	const resp = await page.goto(base + '?stats_ms=100');
	ok(resp && resp.status() === 200, 'GET / answers 200');
	ok((resp.headers()['content-security-policy'] || '').includes("script-src 'self'"), 'page has a CSP');
	await page.waitForFunction(() => document.getElementById('conn').dataset.state === 'live');
	ok(true, 'stats stream connected');
	await page.waitForFunction(() => document.getElementById('model-name').textContent.length > 0);

	// settings: greedy (the tiny random model then loops instead of ending early) and long
	// replies, so there is time to watch them
	await page.click('#settings summary');
	// (the conversation through step 2 must fit the tiny model's 4,096 positions: this reply,
	// two stopped ones of at most 1,300 tokens and a short one; uncapped, a Stop landing late
	// on a loaded machine overflowed the context and the next message got a 400)
	await page.fill('#set-max_tokens', '1200');
	await page.fill('#set-seed', '7');
	await page.fill('#set-temperature', '0');

	// ---- 1: a reply streams in (>= 3 DOM updates before the end), stats update meanwhile ----
	await page.evaluate(() => {
		window.__t = { updates: 0, done: 0, statsDuring: 0, busySeen: 0 };
		new MutationObserver((recs) => {
			for (const r of recs) for (const n of r.addedNodes)
				if (n.classList && n.classList.contains('assistant') && n.querySelector('.cursor') &&
				    n.querySelector('.body').textContent.length > 0) window.__t.updates++;
		}).observe(document.getElementById('messages'), { childList: true });
		document.addEventListener('particle-reply-done', () => window.__t.done++);
		document.addEventListener('particle-stats', (e) => {
			if (window.ParticleApp.isBusy()) {
				window.__t.statsDuring++;
				if (e.detail.server.slots_busy > 0 || e.detail.gen.decode_tok_s > 0) window.__t.busySeen++;
			}
		});
	});
	await page.fill('#input', 'Hello! Which experts did you use for this?');
	await page.keyboard.press('Enter');
	await page.waitForFunction(() => window.__t.done >= 1, null, { timeout: 60000 });
	const t1 = await page.evaluate(() => window.__t);
	ok(t1.updates >= 3, 'at least three DOM updates before the end (saw ' + t1.updates + ')');
	ok(t1.statsDuring >= 1 && t1.busySeen >= 1, 'stats panel updated during generation (' + JSON.stringify(t1) + ')');
	const first = await page.evaluate(() => {
		const msgs = [...document.querySelectorAll('#messages .msg')];
		const a = msgs[1];
		return { n: msgs.length, user: msgs[0].querySelector('.body').textContent,
			 reply: a ? a.querySelector('.body').textContent : '', err: a ? !!a.querySelector('.err') : true,
			 meta: a && a.querySelector('.meta') ? a.querySelector('.meta').textContent : '' };
	});
	ok(first.n === 2 && first.reply.length > 0 && !first.err, 'a reply arrived: ' + JSON.stringify(first).slice(0, 200));
	ok(/tokens/.test(first.meta), 'reply footer shows usage');

	// heat map after the reply: one row per MoE layer, non-zero cells in each
	await page.waitForFunction((n) => {
		const s = window.ParticleStats.last();
		return s && s.heat && s.heat.uses.length === n && !window.ParticleApp.isBusy() &&
		       s.heat.uses.every((r) => r.some((u) => u > 0));
	}, nMoe);
	const heat = await page.evaluate(() => {
		const c = document.getElementById('heat');
		const [cw, ch] = c.dataset.cell.split('x').map(Number);
		const g = c.getContext('2d');
		const s = window.ParticleStats.last().heat;
		const dpr = window.devicePixelRatio || 1;
		let litRows = 0;
		s.uses.forEach((row, r) => {
			const e = row.findIndex((u) => u > 0);
			// a cell's corner pixel: its colour, away from the residency dot in the middle
			const px = g.getImageData(Math.floor(e * cw * dpr), Math.floor(r * ch * dpr), 1, 1).data;
			const empty = g.getImageData(Math.floor(row.findIndex((u) => u === 0) * cw * dpr), Math.floor(r * ch * dpr), 1, 1).data;
			if (row.indexOf(0) < 0 || px.join() !== empty.join()) litRows++;
		});
		return { rows: Number(c.dataset.rows), nonzero: Number(c.dataset.nonzeroRows), litRows, cols: Number(c.dataset.cols) };
	});
	const res = await page.evaluate(() => {
		const s = window.ParticleStats.last();
		return { mode: s.heat.mode, slots: s.experts.slots_per_layer, n: s.heat.n_expert,
			 counts: s.heat.resident.map((r) => [...r].filter((c) => c === '1').length),
			 drawn: Number(document.getElementById('heat').dataset.resident) };
	});
	ok(res.mode === 'cache' ? res.counts.every((c) => c >= 1 && c <= res.slots) : res.counts.every((c) => c === res.n),
	   'residency per layer fits the mode: ' + JSON.stringify(res));
	ok(res.drawn === res.counts.reduce((a, b) => a + b, 0), 'every resident expert is marked on the heat map');
	ok(heat.rows === nMoe && heat.nonzero === nMoe && heat.litRows === nMoe,
	   'heat map: one row per MoE layer (' + nMoe + '), each with used cells drawn: ' + JSON.stringify(heat));
	const panel = await page.evaluate(() => ({
		decode: document.getElementById('st-decode').textContent, rss: document.getElementById('st-rss').textContent,
		budget: document.getElementById('st-budget').textContent, hit: document.getElementById('st-hit').textContent,
	}));
	ok(/MiB|GiB/.test(panel.rss) && /budget/.test(panel.budget) && panel.hit !== '–', 'status panel filled: ' + JSON.stringify(panel));
	await page.screenshot({ path: join(shotDir, 'chat.png') });
	await page.locator('#status').screenshot({ path: join(shotDir, 'status.png') });

	// ---- 2: Stop mid-way frees the slot; the next message works ----
	await page.fill('#set-max_tokens', '1300');
	await page.evaluate(() => { window.__t.updates = 0; });
	allowAbort = (r) => r.url().endsWith('/v1/chat/completions');
	await page.fill('#input', 'Tell me a long story');
	await page.click('#send');
	await page.waitForFunction(() => window.__t.updates >= 3);
	await page.click('#stop');
	await page.waitForFunction(() => window.__t.done >= 2);
	const stopped = await page.evaluate(() => {
		const a = [...document.querySelectorAll('#messages .msg.assistant')].pop();
		return { meta: a.querySelector('.meta') ? a.querySelector('.meta').textContent : '', len: a.querySelector('.body').textContent.length };
	});
	ok(/stopped/.test(stopped.meta) && stopped.len > 0, 'Stop ends the reply mid-way: ' + JSON.stringify(stopped));
	await page.waitForFunction(() => { const s = window.ParticleStats.last(); return s && s.server.slots_busy === 0; });
	ok(true, 'server freed the slot after Stop');
	// Esc stops too (keyboard)
	await page.evaluate(() => { window.__t.updates = 0; });
	await page.fill('#input', 'Another long one');
	await page.keyboard.press('Enter');
	await page.waitForFunction(() => window.__t.updates >= 3);
	await page.keyboard.press('Escape');
	await page.waitForFunction(() => window.__t.done >= 3);
	const esc = await page.evaluate(() => {
		const a = [...document.querySelectorAll('#messages .msg.assistant')].pop();
		return a.querySelector('.meta') ? a.querySelector('.meta').textContent : '';
	});
	ok(/stopped/.test(esc), 'Esc stops a reply: ' + esc);
	await page.waitForFunction(() => { const s = window.ParticleStats.last(); return s && s.server.slots_busy === 0; });
	await page.fill('#set-max_tokens', '40');
	// the next message (markup in the user's own text: shown as text, sent as is)
	await page.fill('#input', 'Hi <script>window.__xss=1</script><img src=x onerror="window.__xss=2"> **bold**');
	await page.keyboard.press('Enter');
	await page.waitForFunction(() => window.__t.done >= 4, null, { timeout: 60000 });
	const after = await page.evaluate(() => {
		const a = [...document.querySelectorAll('#messages .msg.assistant')].pop();
		const u = [...document.querySelectorAll('#messages .msg.user')].pop();
		return { len: a.querySelector('.body').textContent.length, err: a.querySelector('.err') ? a.querySelector('.err').textContent : '',
			 user: u.querySelector('.body').textContent, imgs: document.querySelectorAll('#messages img').length };
	});
	ok(after.len > 0 && !after.err, 'the next message after Stop works: ' + JSON.stringify(after).slice(0, 200));
	ok(after.user.includes('<script>window.__xss=1</script>') && after.user.includes('<img src=x') && after.imgs === 0,
	   'user text with <script>/<img onerror> shown as text');
	allowAbort = () => false;

	// ---- 3: regenerate and edit-and-resend ----
	const nBefore = await page.locator('#messages .msg').count();
	await page.click('#messages .msg.assistant:last-child button[data-action="regenerate"]');
	await page.waitForFunction(() => window.__t.done >= 5, null, { timeout: 60000 });
	ok(await page.locator('#messages .msg').count() === nBefore, 'regenerate replaces the last reply');
	await page.click('#messages .msg.user >> nth=0 >> button[data-action="edit"]');
	await page.fill('#messages textarea.edit', 'Edited question');
	await page.click('#messages button[data-action="save"]');
	await page.waitForFunction(() => window.__t.done >= 6, null, { timeout: 60000 });
	const edited = await page.evaluate(() => [...document.querySelectorAll('#messages .msg')].map((m) => m.className));
	ok(edited.length === 2 && (await page.locator('#messages .msg.user .body').first().textContent()) === 'Edited question',
	   'edit-and-resend keeps only the edited turn and its new reply: ' + edited.join(','));

	// ---- 4: hostile model output is text (a reply forced through the same SSE path) ----
	const hostile = 'Look: <script>window.__xss=3</script> and <img src=x onerror="window.__xss=4"> ' +
		'[click](javascript:window.__xss=5) [ok](https://example.com/a) `<b>code</b>`\n\n```html\n<script>x()</script>\n```';
	await page.route('**/v1/chat/completions', (route) => {
		const ev = (o) => 'data: ' + JSON.stringify(o) + '\n\n';
		route.fulfill({ status: 200, headers: { 'Content-Type': 'text/event-stream' },
			body: ev({ choices: [{ index: 0, delta: { reasoning_content: 'thinking <img src=x onerror="window.__xss=6">' } }] }) +
			      hostile.match(/[\s\S]{1,9}/g).map((p) => ev({ choices: [{ index: 0, delta: { content: p } }] })).join('') +
			      ev({ choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] }) + 'data: [DONE]\n\n' });
	});
	await page.fill('#input', 'say something nasty');
	await page.keyboard.press('Enter');
	await page.waitForFunction(() => window.__t.done >= 7);
	await page.unroute('**/v1/chat/completions');
	const x = await page.evaluate(() => {
		const a = [...document.querySelectorAll('#messages .msg.assistant')].pop();
		const links = [...a.querySelectorAll('a')];
		const d = a.querySelector('details.reasoning');
		return { scripts: document.querySelectorAll('#messages script').length,
			 imgs: document.querySelectorAll('#messages img').length, xss: window.__xss,
			 text: a.querySelector('.body').textContent,
			 links: links.map((l) => [l.getAttribute('href'), l.rel]),
			 reasoning: d ? { open: d.open, text: d.textContent } : null,
			 code: a.querySelector('pre code') ? a.querySelector('pre code').textContent : '' };
	});
	ok(x.scripts === 0 && x.imgs === 0 && x.xss === undefined, 'no script/img element created, nothing ran: ' + JSON.stringify(x).slice(0, 300));
	ok(x.text.includes('<script>window.__xss=3</script>') && x.text.includes('<img src=x onerror='), 'hostile reply shown as text');
	ok(x.links.length === 1 && x.links[0][0] === 'https://example.com/a' && /noopener/.test(x.links[0][1]),
	   'only the https link is a link (rel=noopener): ' + JSON.stringify(x.links));
	ok(x.code === '<script>x()</script>', 'code block text intact');
	ok(x.reasoning && !x.reasoning.open && x.reasoning.text.includes('onerror'), 'reasoning_content collapsed, as text');
	// the renderer alone, on crafted input
	const r = await page.evaluate(() => {
		const n = window.ParticleMd.render('<svg onload=alert(1)>\n- *a* <iframe src=javascript:1>\n\n> <style>body{}</style>\n[x](data:text/html,1) http://ok.example/p');
		return { html: n.innerHTML, els: [...n.querySelectorAll('*')].map((e) => e.tagName).join(',') };
	});
	ok(!/<(svg|iframe|style|script|img)/i.test(r.html) && /^[A-Z,]*$/.test(r.els) && !/SVG|IFRAME|STYLE/.test(r.els),
	   'renderer makes no element from markup: ' + r.els);

	// ---- 5: reload keeps the conversation ----
	const before = await page.evaluate(() => [...document.querySelectorAll('#messages .msg .body')].map((b) => b.textContent));
	allowAbort = (r) => r.url().includes('/v1/stats/stream');
	await page.reload();
	await page.waitForFunction(() => document.getElementById('conn').dataset.state === 'live');
	allowAbort = () => false;
	const reloaded = await page.evaluate(() => ({
		bodies: [...document.querySelectorAll('#messages .msg .body')].map((b) => b.textContent),
		convs: document.querySelectorAll('#conv-list li').length,
		title: document.querySelector('#conv-list li.current .conv-open').textContent,
		xss: window.__xss, imgs: document.querySelectorAll('#messages img').length,
	}));
	ok(JSON.stringify(reloaded.bodies) === JSON.stringify(before) && reloaded.convs === 1 && reloaded.title.length > 0,
	   'reload keeps the conversation');
	ok(reloaded.xss === undefined && reloaded.imgs === 0, 'stored hostile text stays text after reload');

	// ---- 6: conversations: new, rename, delete ----
	await page.click('#new-chat');
	ok(await page.locator('#conv-list li').count() === 2 && await page.locator('#messages .msg').count() === 0, 'new chat');
	await page.click('#conv-list li:nth-child(2) .conv-open');
	await page.click('#conv-list li.current button[aria-label^="Rename"]');
	await page.fill('#conv-list li input', 'Renamed chat');
	await page.keyboard.press('Enter');
	ok((await page.locator('#conv-list li.current .conv-open').textContent()) === 'Renamed chat', 'rename');
	await page.click('#conv-list li:nth-child(1) button[aria-label^="Delete"]');
	await page.click('#conv-list li:nth-child(1) button[aria-label^="Delete"]');
	ok(await page.locator('#conv-list li').count() === 1, 'delete (two clicks)');

	// ---- a long prompt: the prompt bar shows progress (tokens done / total) ----
	await page.click('#new-chat');
	await page.evaluate(() => { // the page was reloaded: count replies afresh
		window.__t = { done: 0, partial: [] };
		document.addEventListener('particle-reply-done', () => window.__t.done++);
		document.addEventListener('particle-stats', (e) => {
			const g = e.detail.gen;
			if (g.prefill_total > 0 && g.prefill_done > 0 && g.prefill_done < g.prefill_total)
				window.__t.partial.push([g.prefill_done, g.prefill_total,
					Number(document.getElementById('bar-prefill').getAttribute('aria-valuenow')),
					document.getElementById('st-prefill-prog').textContent]);
		});
	});
	if (!(await page.locator('#set-max_tokens').isVisible())) await page.click('#settings summary');
	await page.fill('#set-max_tokens', '4');
	// ~1,400 tokens, fewer when the model's context is smaller (the trained demo model: 1024)
	const n_ctx = (await (await fetch(base + 'v1/models')).json()).data[0].meta.n_ctx;
	await page.fill('#input', 'the cat sat on the mat. '.repeat(Math.min(200, Math.floor((n_ctx - 96) / 7))));
	await page.keyboard.press('Enter');
	await page.waitForFunction(() => window.__t.done >= 1, null, { timeout: 60000 });
	const pf = await page.evaluate(() => window.__t.partial);
	ok(pf.length >= 1 && pf.every(([d, t, v, txt]) => v === Math.round(100 * d / t) && txt === d + ' / ' + t + ' tokens'),
	   'prompt progress shown mid-prefill: ' + JSON.stringify(pf).slice(0, 300));

	// ---- the README's picture: a fresh short chat, dark scheme, the panel after a test run ----
	await page.click('#new-chat');
	await page.fill('#set-max_tokens', '160');
	await page.fill('#input', 'Hello! Which experts did you read from disk for this reply?');
	await page.keyboard.press('Enter');
	await page.waitForFunction(() => window.__t.done >= 2, null, { timeout: 60000 });
	await page.emulateMedia({ colorScheme: 'dark' });
	await page.waitForTimeout(300); // one more stats event: the plots redraw in the new colours
	await page.screenshot({ path: join(shotDir, 'overview.png') });
	await page.emulateMedia({ colorScheme: 'light' });

	// ---- 7: narrow screen: no sideways scrolling, drawers open ----
	await page.setViewportSize({ width: 390, height: 800 });
	const narrow = await page.evaluate(() => document.documentElement.scrollWidth);
	ok(narrow <= 390, 'readable at 390 px (scrollWidth ' + narrow + ')');
	await page.click('#toggle-status');
	ok(await page.locator('#status').isVisible(), 'status drawer opens on a narrow screen');
	await page.keyboard.press('Escape');
	ok(!(await page.locator('#status').isVisible()), 'Esc closes it');

	await browser.close();
	for (const p of problems) console.error('FAIL: ' + p);
	ok(problems.length === 0, 'no console errors or failed requests');
}

// A server with --api-key: the page says so, takes the key in Settings, then works.
async function keyFlow(page, ctx, browser) {
	let beforeKey = true;
	page.removeAllListeners('response');
	page.on('response', (r) => {
		if (r.status() === 401 && beforeKey) return; // expected until the key is given
		if (r.status() >= 400) problems.push('HTTP ' + r.status() + ' ' + r.url());
	});
	page.removeAllListeners('console');
	page.on('console', (m) => {
		if (m.type() === 'error' && !(beforeKey && /401/.test(m.text()))) problems.push('console error: ' + m.text());
	});
	await page.goto(url.replace(/\/?$/, '/'));
	await page.waitForFunction(() => document.getElementById('conn').dataset.state === 'needs API key');
	ok(true, 'without the key the page says it needs one');
	await page.click('#settings summary');
	await page.fill('#set-max_tokens', '8');
	await page.fill('#set-api_key', apiKey);
	await page.waitForFunction(() => document.getElementById('conn').dataset.state === 'live');
	beforeKey = false;
	ok(true, 'with the key the stats stream connects');
	await page.evaluate(() => {
		window.__done = 0;
		document.addEventListener('particle-reply-done', () => window.__done++);
	});
	await page.fill('#input', 'Hello with a key');
	await page.keyboard.press('Enter');
	await page.waitForFunction(() => window.__done >= 1, null, { timeout: 60000 });
	const r = await page.evaluate(() => {
		const a = [...document.querySelectorAll('#messages .msg.assistant')].pop();
		return { len: a.querySelector('.body').textContent.length, err: a.querySelector('.err') ? a.querySelector('.err').textContent : '' };
	});
	ok(r.len > 0 && !r.err, 'a reply with the key: ' + JSON.stringify(r));
	await browser.close();
	for (const p of problems) console.error('FAIL: ' + p);
	ok(problems.length === 0, 'no unexpected console errors or failed requests');
}

main().catch(async (e) => {
	console.error('FAIL: ' + (e && e.stack || e));
	fail++;
	for (const p of problems) console.error('  (also: ' + p + ')');
	if (pageRef) { // what the page showed when it went wrong
		const tail = await pageRef.evaluate(() => [...document.querySelectorAll('#messages .msg')].slice(-2)
			.map((m) => m.className + ': ' + m.textContent.slice(0, 300)).join('\n')).catch(() => '?');
		console.error('  last messages:\n' + tail);
	}
}).finally(() => {
	console.log(pass + ' passed, ' + fail + ' failed');
	process.exit(fail ? 1 : 0);
});
