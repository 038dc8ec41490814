// test_soak.mjs - 8 concurrent clients for SOAK_SECONDS (default 20; `make soak`: 600) mixing
// JSON and streamed chat and completions, streams cancelled mid-way and bad requests, on 3
// batched slots (--parallel 3 --cache-prompts 1).  Every
// answer is checked against the greedy reference computed alone at the start (prefix reuse
// and interleaving must not change a token).  After the run, the server's RSS and open file
// descriptors are back within a few percent of their level after warm-up.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, http, parseSSE, procStats } from './lib.mjs';

const SECONDS = Number(process.env.SOAK_SECONDS || 20);
const CLIENTS = 8;

const prompts = [
  'Write a haiku about rivers.', 'What is two plus two?', 'List three colours.',
  'Tell me about the moon.', 'Why is the sky blue?', 'Name a famous painter.',
];
const chatBody = (p, extra = {}) => ({ messages: [{ role: 'user', content: p }], max_tokens: 12, temperature: 0, ...extra });
const complBody = (p, extra = {}) => ({ prompt: p, max_tokens: 12, temperature: 0, ...extra });

async function streamText(srv, path, body, abortAfter) {
  const ctl = new AbortController();
  const r = await fetch(`${srv.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ ...body, stream: true }), signal: ctl.signal });
  assert.equal(r.status, 200);
  const reader = r.body.getReader();
  let text = '', n = 0;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += Buffer.from(value).toString('utf8');
      if (abortAfter && ++n >= abortAfter) { ctl.abort(); return null; }
    }
  } catch (e) {
    if (abortAfter) return null;
    throw e;
  }
  return parseSSE(text);
}

// Waits until running generations wound down and idle connections closed (only the
// /metrics request's own connection left), at most 10 s.
async function quiet(srv) {
  for (let i = 0; i < 40; i++) {
    await new Promise((r) => setTimeout(r, 250));
    const m = await http(srv, 'GET', '/metrics', undefined, { connection: 'close' }).catch(() => null);
    if (m && /^particle_http_connections 1$/m.test(m.text) && /^particle_slots_busy 0$/m.test(m.text)) break;
  }
  await new Promise((r) => setTimeout(r, 300));
}

test(`soak: ${CLIENTS} clients for ${SECONDS} s, every answer checked, RSS and fds stable`, { timeout: (SECONDS + 120) * 1000 }, async () => {
  // --timeout 3: idle keep-alive connections close soon after the clients stop
  const srv = await startServer(['--max-queue', '32', '--parallel', '3', '--cache-prompts', '1', '--timeout', '3']);
  try {
    const refChat = [], refCompl = [];
    for (const p of prompts) {
      refChat.push((await http(srv, 'POST', '/v1/chat/completions', chatBody(p))).json.choices[0].message.content);
      refCompl.push((await http(srv, 'POST', '/v1/completions', complBody(p))).json.choices[0].text);
    }
    await quiet(srv);
    const idle = procStats(srv.proc.pid); // no connection open, nothing running
    let warm = null, checked = 0, cancelled = 0, errors = 0;
    const t0 = Date.now(), end = t0 + SECONDS * 1000, warmAt = t0 + Math.min(5000, SECONDS * 200);
    async function client(id) {
      let i = id;
      while (Date.now() < end) {
        if (!warm && Date.now() > warmAt) warm = procStats(srv.proc.pid);
        const k = i++ % prompts.length, kind = (i * 7 + id) % 6;
        if (kind === 0) {
          const r = await http(srv, 'POST', '/v1/chat/completions', chatBody(prompts[k]));
          assert.equal(r.status, 200, r.text);
          assert.equal(r.json.choices[0].message.content, refChat[k]);
        } else if (kind === 1) {
          const ev = await streamText(srv, '/v1/chat/completions', chatBody(prompts[k]));
          assert.equal(ev.at(-1), '[DONE]');
          assert.equal(ev.slice(0, -1).map((e) => e.choices[0]?.delta?.content ?? '').join(''), refChat[k]);
        } else if (kind === 2) {
          const r = await http(srv, 'POST', '/v1/completions', complBody(prompts[k]));
          assert.equal(r.status, 200, r.text);
          assert.equal(r.json.choices[0].text, refCompl[k]);
        } else if (kind === 3) {
          await streamText(srv, '/v1/chat/completions', chatBody(prompts[k], { max_tokens: 500 }), 2);
          cancelled++;
          continue;
        } else if (kind === 4) {
          const r = await http(srv, 'POST', '/v1/chat/completions', '{"messages": [{"role": "user"');
          assert.equal(r.status, 400);
          errors++;
          continue;
        } else {
          const ev = await streamText(srv, '/v1/completions', complBody(prompts[k]));
          assert.equal(ev.slice(0, -1).map((e) => e.choices[0]?.text ?? '').join(''), refCompl[k]);
        }
        checked++;
      }
    }
    await Promise.all(Array.from({ length: CLIENTS }, (_, id) => client(id)));
    await quiet(srv);
    const after = procStats(srv.proc.pid);
    assert.ok(checked > CLIENTS, `only ${checked} answers checked`);
    assert.ok(cancelled > 0 && errors > 0);
    assert.ok(warm, 'warm-up sample taken');
    // a few percent, with a floor of 4 MiB for allocator noise on a small process
    // Under ASan the freed-memory quarantine (256 MiB by default) grows RSS by design, so
    // there LeakSanitizer at exit is the leak check and RSS is not compared.
    if (!/\b(asan|tsan)\b/.test(process.env.PARTICLE || ''))
      assert.ok(after.rss <= warm.rss * 1.05 + 4 * 1048576, `RSS ${warm.rss} after warm-up, ${after.rss} at the end`);
    assert.ok(after.fds <= warm.fds + 2, `fds ${warm.fds} after warm-up, ${after.fds} at the end`);
    assert.ok(after.fds <= idle.fds, `fds ${idle.fds} idle before, ${after.fds} idle after: a leak`);
    console.log(`# soak: ${checked} answers checked, ${cancelled} cancelled, ${errors} errors; RSS ${(warm.rss / 1048576).toFixed(1)} -> ${(after.rss / 1048576).toFixed(1)} MiB, fds ${warm.fds} -> ${after.fds} (idle ${idle.fds} -> ${after.fds})`);
  } finally {
    assert.equal((await srv.stop()).code, 0);
  }
});
