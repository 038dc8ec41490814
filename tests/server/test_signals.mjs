// test_signals.mjs - graceful stop: SIGTERM and SIGINT let running requests (JSON and SSE)
// finish, refuse new connections, and exit 0 within a few seconds.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, http, parseSSE, waitMetrics, metric } from './lib.mjs';

for (const sig of ['SIGTERM', 'SIGINT']) {
  test(`${sig}: in-flight requests finish, then exit 0`, async () => {
    const srv = await startServer([]);
    // calibrate: the two in-flight answers must fit the 5 s grace on this (maybe slow) build
    const t0c = Date.now();
    await http(srv, 'POST', '/v1/completions', { prompt: 'calibrate', max_tokens: 100, temperature: 0 });
    const perToken = Math.max(0.05, (Date.now() - t0c) / 100);
    const body = { prompt: 'The story goes', max_tokens: Math.max(8, Math.min(600, Math.floor(1200 / perToken))), temperature: 0 };
    const ref = await http(srv, 'POST', '/v1/completions', body);
    assert.equal(ref.status, 200);
    const a = http(srv, 'POST', '/v1/completions', body);
    const b = http(srv, 'POST', '/v1/completions', { ...body, stream: true });
    // both accepted (calibrate, ref, a, b) before the signal: a fixed 100 ms was a race
    // under ASan on a loaded machine (a request not yet read was refused with 503)
    await waitMetrics(srv, (t) => metric(t, 'requests_total') >= 4, 'both requests accepted');
    const t0 = Date.now();
    srv.proc.kill(sig);
    const [ra, rb] = await Promise.all([a, b]);
    assert.equal(ra.status, 200, ra.text);
    assert.equal(ra.json.choices[0].text, ref.json.choices[0].text, 'the running request finished whole');
    assert.equal(rb.status, 200);
    const ev = parseSSE(rb.text);
    assert.equal(ev.at(-1), '[DONE]', 'the stream finished whole');
    assert.equal(ev.slice(0, -1).map((e) => e.choices[0]?.text ?? '').join(''), ref.json.choices[0].text);
    const r = await srv.exited;
    assert.equal(r.code, 0, srv.stderr());
    assert.ok(Date.now() - t0 < 8000, `stopped in ${Date.now() - t0} ms`);
    await assert.rejects(http(srv, 'GET', '/health', undefined, {}, 2000));
  });
}

test('an answer longer than the grace period is cut; the server still exits 0 in time', async () => {
  const srv = await startServer([]);
  const long = http(srv, 'POST', '/v1/completions', { prompt: 'Go on', max_tokens: 100000, temperature: 0, stream: true }, {}, 60000)
    .then((r) => r.text, () => 'cut');
  await waitMetrics(srv, (t) => metric(t, 'requests_total') >= 1, 'the long request accepted');
  const t0 = Date.now();
  srv.proc.kill('SIGTERM');
  const r = await srv.exited;
  assert.equal(r.code, 0, srv.stderr());
  assert.ok(Date.now() - t0 < 12000, `stopped in ${Date.now() - t0} ms`);
  const text = await long;
  assert.ok(text === 'cut' || !text.includes('data: [DONE]') || /"finish_reason":"length"/.test(text));
});

test('an idle server stops at once on SIGTERM', async () => {
  const srv = await startServer([]);
  const t0 = Date.now();
  const r = await srv.stop('SIGTERM');
  assert.equal(r.code, 0);
  assert.ok(Date.now() - t0 < 5000, `stopped in ${Date.now() - t0} ms`);
});

test('--host ::1 serves on IPv6 loopback', async () => {
  const srv = await startServer(['--host', '::1']);
  try {
    const r = await fetch(`http://[::1]:${srv.port}/health`, { signal: AbortSignal.timeout(10000) });
    assert.equal(r.status, 200);
    assert.doesNotMatch(srv.stderr(), /warning/);
  } finally {
    assert.equal((await srv.stop()).code, 0);
  }
});
