// test_hostile.mjs - a table of malformed and hostile requests, each with its documented
// answer (an HTTP status, or "closed" when the server drops the connection), each followed by
// a valid request that must still get the right answer.  Raw sockets for what fetch cannot
// send: header floods, slowloris, half-closed connections, bad framing.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, http, raw, waitMetrics, metric } from './lib.mjs';

let srv, keyed, reference;
const KEY = 'sk-test-0123456789';
before(async () => {
  srv = await startServer(['--timeout', '2', '--max-body', '1M', '--cors', 'http://allowed.example']);
  keyed = await startServer(['--api-key', KEY, '--timeout', '5']);
  reference = await sanity(srv);
});
after(async () => {
  for (const s of [srv, keyed]) {
    const r = await s.stop();
    assert.equal(r.code, 0, `server exit ${JSON.stringify(r)}: ${s.stderr().slice(-2000)}`);
  }
});

async function sanity(s, headers = {}) {
  const body = { prompt: 'ping', max_tokens: 3, temperature: 0 };
  // once more on a network error: the client may reuse a keep-alive connection the server
  // has just closed for idling past --timeout (the race every HTTP client has)
  const r = await http(s, 'POST', '/v1/completions', body, headers)
    .catch(() => http(s, 'POST', '/v1/completions', body, headers));
  assert.equal(r.status, 200, `sanity request: ${r.text}`);
  return r.json.choices[0].text;
}

const msg = [{ role: 'user', content: 'hi' }];
const chat = (extra) => JSON.stringify({ messages: msg, max_tokens: 2, ...extra });
const deep = (n) => '{"messages":' + '['.repeat(n) + ']'.repeat(n) + '}';
const many = (n, f) => Array.from({ length: n }, (_, i) => f(i));
const req = (method, path, body, headers = {}) => {
  const b = body === undefined ? Buffer.alloc(0) : Buffer.isBuffer(body) ? body : Buffer.from(body);
  const head = `${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n` +
    Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join('') +
    (method === 'GET' && !b.length ? '' : `Content-Length: ${b.length}\r\n`) + 'Connection: close\r\n\r\n';
  return [Buffer.concat([Buffer.from(head, 'latin1'), b])];
};

// [name, path, body (string|Buffer), expected status]  - JSON-level cases (POST)
const jsonCases = [
  ['empty body', '/v1/chat/completions', '', 400],
  ['truncated JSON', '/v1/chat/completions', '{"messages":[', 400],
  ['array body', '/v1/chat/completions', '[]', 400],
  ['null body', '/v1/chat/completions', 'null', 400],
  ['string body', '/v1/chat/completions', '"hello"', 400],
  ['trailing garbage', '/v1/chat/completions', chat() + ' x', 400],
  ['nesting 100 deep', '/v1/chat/completions', deep(100), 400],
  ['nesting 100000 deep', '/v1/chat/completions', deep(100000), 400],
  ['temperature 1e400', '/v1/chat/completions', chat().replace('"max_tokens":2', '"max_tokens":2,"temperature":1e400'), 400],
  ['temperature a string', '/v1/chat/completions', chat({ temperature: 'hot' }), 400],
  ['max_tokens 1.5', '/v1/chat/completions', chat({ max_tokens: 1.5 }), 400],
  ['max_tokens -5', '/v1/chat/completions', chat({ max_tokens: -5 }), 400],
  ['max_tokens 0', '/v1/chat/completions', chat({ max_tokens: 0 }), 400],
  ['max_tokens 1e20', '/v1/chat/completions', chat({ max_tokens: 1e20 }), 400],
  ['top_p 2', '/v1/chat/completions', chat({ top_p: 2 }), 400],
  ['top_k -5', '/v1/chat/completions', chat({ top_k: -5 }), 400],
  ['seed a string', '/v1/chat/completions', chat({ seed: 'x' }), 400],
  ['n 2', '/v1/chat/completions', chat({ n: 2 }), 400],
  ['n 0', '/v1/chat/completions', chat({ n: 0 }), 400],
  ['stream "yes"', '/v1/chat/completions', chat({ stream: 'yes' }), 400],
  ['stream_options a string', '/v1/chat/completions', chat({ stream: true, stream_options: 'x' }), 400],
  ['messages missing', '/v1/chat/completions', '{"max_tokens":2}', 400],
  ['messages a string', '/v1/chat/completions', '{"messages":"hi"}', 400],
  ['messages empty', '/v1/chat/completions', '{"messages":[]}', 400],
  ['message a number', '/v1/chat/completions', '{"messages":[42]}', 400],
  ['role missing', '/v1/chat/completions', '{"messages":[{"content":"hi"}]}', 400],
  ['role a number', '/v1/chat/completions', '{"messages":[{"role":1,"content":"hi"}]}', 400],
  ['unknown role', '/v1/chat/completions', '{"messages":[{"role":"wizard","content":"hi"}]}', 400],
  ['content a number', '/v1/chat/completions', '{"messages":[{"role":"user","content":42}]}', 400],
  ['content an object', '/v1/chat/completions', '{"messages":[{"role":"user","content":{"a":1}}]}', 400],
  ['content part of unknown type', '/v1/chat/completions', '{"messages":[{"role":"user","content":[{"type":"video","x":1}]}]}', 400],
  ['image content part', '/v1/chat/completions', '{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:,"}}]}]}', 400],
  ['text part without text', '/v1/chat/completions', '{"messages":[{"role":"user","content":[{"type":"text"}]}]}', 400],
  ['content part not an object', '/v1/chat/completions', '{"messages":[{"role":"user","content":["hi"]}]}', 400],
  ['user content null', '/v1/chat/completions', '{"messages":[{"role":"user","content":null}]}', 400],
  ['tool_calls a string', '/v1/chat/completions', '{"messages":[{"role":"assistant","tool_calls":"x"}]}', 400],
  ['tool_calls without a name', '/v1/chat/completions', '{"messages":[{"role":"assistant","tool_calls":[{"function":{}}]}]}', 400],
  ['tools an object', '/v1/chat/completions', chat({ tools: {} }), 400],
  ['tool of unknown type', '/v1/chat/completions', chat({ tools: [{ type: 'retrieval' }] }), 400],
  ['tool without a name', '/v1/chat/completions', chat({ tools: [{ type: 'function', function: {} }] }), 400],
  ['tool_choice "sometimes"', '/v1/chat/completions', chat({ tool_choice: 'sometimes' }), 400],
  ['tool_choice names a missing tool', '/v1/chat/completions', chat({ tools: [{ type: 'function', function: { name: 'a' } }], tool_choice: { type: 'function', function: { name: 'b' } } }), 400],
  ['tool_choice required without tools', '/v1/chat/completions', chat({ tool_choice: 'required' }), 400],
  ['response_format type xml', '/v1/chat/completions', chat({ response_format: { type: 'xml' } }), 400],
  ['response_format a string', '/v1/chat/completions', chat({ response_format: 'json' }), 400],
  ['stop a number', '/v1/chat/completions', chat({ stop: 5 }), 400],
  ['stop array with a number', '/v1/chat/completions', chat({ stop: ['a', 5] }), 400],
  ['17 stop strings', '/v1/chat/completions', chat({ stop: many(17, (i) => `s${i}`) }), 400],
  ['a 300-byte stop string', '/v1/chat/completions', chat({ stop: 'x'.repeat(300) }), 400],
  ['logit_bias', '/v1/chat/completions', chat({ logit_bias: { 5: 10 } }), 400],
  ['top_logprobs without logprobs', '/v1/chat/completions', chat({ top_logprobs: 2 }), 400],
  ['top_logprobs 50', '/v1/chat/completions', chat({ logprobs: true, top_logprobs: 50 }), 400],
  ['4097 messages', '/v1/chat/completions', JSON.stringify({ messages: many(4097, () => msg[0]) }), 400],
  ['129 tools', '/v1/chat/completions', chat({ tools: many(129, (i) => ({ type: 'function', function: { name: `f${i}` } })) }), 400],
  ['invalid UTF-8 in a string', '/v1/chat/completions', Buffer.concat([Buffer.from('{"messages":[{"role":"user","content":"'), Buffer.from([0xff, 0xfe]), Buffer.from('"}]}')]), 400],
  ['overlong UTF-8', '/v1/chat/completions', Buffer.concat([Buffer.from('{"messages":[{"role":"user","content":"'), Buffer.from([0xc0, 0xaf]), Buffer.from('"}]}')]), 400],
  ['UTF-16 surrogate encoded in UTF-8', '/v1/chat/completions', Buffer.concat([Buffer.from('{"messages":[{"role":"user","content":"'), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from('"}]}')]), 400],
  ['raw NUL byte', '/v1/chat/completions', Buffer.from('{"messages":[{"role":"user","content":"a\0b"}]}'), 400],
  ['\\u0000 escape', '/v1/chat/completions', '{"messages":[{"role":"user","content":"a\\u0000b"}]}', 400],
  ['lone surrogate escape', '/v1/chat/completions', '{"messages":[{"role":"user","content":"\\ud800"}]}', 400],
  ['chat_template_kwargs a list', '/v1/chat/completions', chat({ chat_template_kwargs: [1] }), 400],
  ['enable_thinking a string', '/v1/chat/completions', chat({ chat_template_kwargs: { enable_thinking: 'no' } }), 400],
  ['model a number', '/v1/chat/completions', chat({ model: 7 }), 400],
  ['prompt missing', '/v1/completions', '{"max_tokens":2}', 400],
  ['prompt a number', '/v1/completions', '{"prompt":5}', 400],
  ['prompt id outside the vocabulary', '/v1/completions', '{"prompt":[999999]}', 400],
  ['prompt id negative', '/v1/completions', '{"prompt":[-1]}', 400],
  ['prompt empty', '/v1/completions', '{"prompt":""}', 400],
  ['several prompts', '/v1/completions', '{"prompt":["a","b"]}', 400],
  ['echo', '/v1/completions', '{"prompt":"a","echo":true}', 400],
  ['tokenize without content', '/tokenize', '{}', 400],
  ['detokenize strings', '/detokenize', '{"tokens":["a"]}', 400],
  ['detokenize outside the vocabulary', '/detokenize', '{"tokens":[99999999]}', 400],
  ['apply-template without messages', '/apply-template', '{}', 400],
];

for (const [name, path, body, want] of jsonCases) {
  test(`hostile: ${name} -> ${want}`, async () => {
    const r = await raw(srv.port, req('POST', path, body), { timeoutMs: 10000 });
    assert.equal(r.status, want, `${name}: ${r.text.slice(0, 300)}`);
    const j = JSON.parse(r.text.slice(r.text.indexOf('\r\n\r\n') + 4));
    assert.equal(typeof j.error.message, 'string');
    assert.equal(typeof j.error.type, 'string');
    assert.ok('param' in j.error && 'code' in j.error);
    assert.equal(await sanity(srv), reference);
  });
}

const bigHeaders = many(3000, (i) => `X-Flood-${i}: ${'v'.repeat(20)}\r\n`).join('');
// [name, chunks, expected ('closed' = no answer, the connection is dropped), options]
const rawCases = [
  ['unknown path', req('GET', '/v2/nothing'), 404],
  ['GET on a POST route', req('GET', '/v1/chat/completions'), 405],
  ['DELETE on /v1/models', req('DELETE', '/v1/models'), 405],
  ['percent-encoded NUL in the path', req('GET', '/v1/models%00'), 404],
  ['path of invalid UTF-8', [Buffer.from('GET /v1/\xff\xfe HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n', 'latin1')], 404],
  ['Content-Length of 9 GB', [Buffer.from('POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Length: 9000000000\r\n\r\n{')], 413],
  // the server answers from Content-Length before reading the body: deterministic when the
  // client waits; a client that blasts the whole body may see the reset of the early close
  ['body over --max-body announced (head only)', [Buffer.from('POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1572864\r\nConnection: close\r\n\r\n')], 413],
  ['body over --max-body sent whole', req('POST', '/v1/chat/completions', Buffer.alloc(1536 * 1024, 0x20)), [413, 'closed']],
  ['chunked body over --max-body', [Buffer.from('POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n'),
    ...many(12, () => Buffer.concat([Buffer.from('20000\r\n'), Buffer.alloc(0x20000, 0x20), Buffer.from('\r\n')])), Buffer.from('0\r\n\r\n')], 413],
  ['header flood (3000 headers)', [Buffer.from(`GET /v1/models HTTP/1.1\r\nHost: localhost\r\n${bigHeaders}\r\n`)], 431],
  ['one 100 KB header', [Buffer.from(`GET /v1/models HTTP/1.1\r\nHost: localhost\r\nX-Big: ${'a'.repeat(100000)}\r\n\r\n`)], 431],
  ['100 KB URL', [Buffer.from(`GET /${'a'.repeat(100000)} HTTP/1.1\r\nHost: localhost\r\n\r\n`)], [414, 431]],
  ['garbage request line', [Buffer.from('HELLO THERE\r\n\r\n')], [400, 'closed']],
  ['HTTP/1.1 without Host', [Buffer.from('GET /v1/models HTTP/1.1\r\nConnection: close\r\n\r\n')], 400],
  ['HTTP/1.0 without Host', [Buffer.from('GET /health HTTP/1.0\r\n\r\n')], 200],
  // DNS rebinding: a loopback server answers only requests addressed to a loopback name
  ['Host of another site (DNS rebinding)', [Buffer.from('GET /v1/models HTTP/1.1\r\nHost: attacker.example:8080\r\nConnection: close\r\n\r\n')], 403],
  ['Host of another site, POST', [Buffer.from('POST /v1/completions HTTP/1.1\r\nHost: attacker.example\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}')], 403],
  ['Host 127.0.0.1.attacker.example', [Buffer.from('GET /health HTTP/1.1\r\nHost: 127.0.0.1.attacker.example\r\nConnection: close\r\n\r\n')], 403],
  ['Host localhost with a port', [Buffer.from('GET /health HTTP/1.1\r\nHost: localhost:1\r\nConnection: close\r\n\r\n')], 200],
  ['Host 127.1.2.3', [Buffer.from('GET /health HTTP/1.1\r\nHost: 127.1.2.3\r\nConnection: close\r\n\r\n')], 200],
  ['Host [::1]:80', [Buffer.from('GET /health HTTP/1.1\r\nHost: [::1]:80\r\nConnection: close\r\n\r\n')], 200],
  ['invalid Content-Length', [Buffer.from('POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Length: abc\r\n\r\n')], [400, 413]],
  ['negative Content-Length', [Buffer.from('POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Length: -5\r\n\r\n')], [400, 413]],
  ['NUL in a header value', [Buffer.from('GET /v1/models HTTP/1.1\r\nHost: localhost\r\nX-A: a\0b\r\nConnection: close\r\n\r\n')], [200, 400, 'closed']],
  ['bare LF line endings', [Buffer.from('GET /health HTTP/1.1\nHost: localhost\nConnection: close\n\n')], [200, 400]],
  ['slowloris: head one byte per 400 ms', [Buffer.from('POST /v1/completions HTTP/1.1\r\nHost: localhost\r\n'),
    ...many(25, () => [400, 'X']).flat()], 'closed', { timeoutMs: 9000, maxMs: 6000 }],
  ['slowloris: body 10 bytes per 500 ms', [Buffer.from('POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1000\r\n\r\n'),
    ...many(20, () => [500, '{"prompt":']).flat()], 'closed', { timeoutMs: 9000, maxMs: 6000 }],
  ['connection that never sends', [], 'closed', { timeoutMs: 9000, maxMs: 6000 }],
  ['half-closed after a GET', req('GET', '/v1/models'), 200, { halfClose: true }],
  ['half-closed during a generation (treated as gone)', req('POST', '/v1/completions', '{"prompt":"x","max_tokens":2000}'),
    [499, 'closed'], { halfClose: true, timeoutMs: 9000 }],
  ['two pipelined requests', [Buffer.from('GET /health HTTP/1.1\r\nHost: localhost\r\n\r\nGET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n')], 200],
  ['CORS preflight from an unknown origin', req('OPTIONS', '/v1/chat/completions', undefined, { Origin: 'http://evil.example', 'Access-Control-Request-Method': 'POST' }), 403],
  ['CORS preflight from the allowed origin', req('OPTIONS', '/v1/chat/completions', undefined, { Origin: 'http://allowed.example', 'Access-Control-Request-Method': 'POST' }), 204],
];

for (const [name, chunks, want, opts = {}] of rawCases) {
  test(`hostile raw: ${name} -> ${want}`, async () => {
    const t0 = Date.now();
    const r = await raw(srv.port, chunks, { timeoutMs: opts.timeoutMs ?? 5000, halfClose: opts.halfClose });
    const wants = Array.isArray(want) ? want : [want];
    const got = r.status === 0 ? 'closed' : r.status;
    assert.ok(wants.includes(got), `${name}: got ${got} (${r.why}), want ${wants.join('|')}: ${r.text.slice(0, 200)}`);
    if (got === 'closed') assert.equal(r.why, 'closed', 'the server closed it (not our timeout)');
    if (opts.maxMs) assert.ok(Date.now() - t0 < opts.maxMs, `took ${Date.now() - t0} ms`);
    if (name === 'two pipelined requests') assert.equal(r.text.match(/HTTP\/1\.1 200/g).length, 2);
    if (name.includes('allowed origin')) assert.match(r.text, /Access-Control-Allow-Origin: http:\/\/allowed.example/i);
    assert.equal(await sanity(srv), reference);
  });
}

test('answers advertise the idle cut (Keep-Alive: timeout=2), and a reused connection idle for most of it still answers', async () => {
  const r = await http(srv, 'GET', '/v1/models');
  assert.equal(r.headers.get('keep-alive'), 'timeout=2');
  await new Promise((res) => setTimeout(res, 900)); // under the client's threshold below the hint
  const again = await http(srv, 'GET', '/v1/models');
  assert.equal(again.status, 200);
  assert.equal(again.headers.get('keep-alive'), 'timeout=2');
});

test('CORS: a simple request from the allowed origin carries Access-Control-Allow-Origin', async () => {
  const r = await http(srv, 'GET', '/v1/models', undefined, { Origin: 'http://allowed.example' });
  assert.equal(r.headers.get('access-control-allow-origin'), 'http://allowed.example');
  const e = await http(srv, 'GET', '/v1/models', undefined, { Origin: 'http://evil.example' });
  assert.equal(e.headers.get('access-control-allow-origin'), null);
});

const keyCases = [
  ['no key', {}, 401],
  ['wrong key', { Authorization: 'Bearer sk-wrong' }, 401],
  ['key as Basic', { Authorization: `Basic ${KEY}` }, 401],
  ['key with a suffix', { Authorization: `Bearer ${KEY}x` }, 401],
  ['key prefix only', { Authorization: `Bearer ${KEY.slice(0, 5)}` }, 401],
  ['right key', { Authorization: `Bearer ${KEY}` }, 200],
];
for (const [name, headers, want] of keyCases) {
  test(`api key: ${name} -> ${want}`, async () => {
    const r = await http(keyed, 'POST', '/v1/completions', { prompt: 'ping', max_tokens: 2, temperature: 0 }, headers);
    assert.equal(r.status, want, r.text);
    if (want === 401) {
      assert.equal(r.json.error.type, 'authentication_error');
      assert.equal(r.headers.get('www-authenticate'), 'Bearer');
    }
  });
}
test('api key: /health is public, /v1/models and /metrics are not', async () => {
  assert.equal((await http(keyed, 'GET', '/health')).status, 200);
  assert.equal((await http(keyed, 'GET', '/v1/models')).status, 401);
  assert.equal((await http(keyed, 'GET', '/metrics')).status, 401);
  assert.equal((await http(keyed, 'GET', '/metrics', undefined, { Authorization: `Bearer ${KEY}` })).status, 200);
});

test('a full queue answers 503 with Retry-After; the queued request runs once the slot frees', async () => {
  const q = await startServer(['--max-queue', '1']);
  const open = (body) => {
    const ctl = new AbortController();
    const res = fetch(`${q.url}/v1/completions`, { method: 'POST', signal: ctl.signal,
      headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    return { ctl, res };
  };
  try {
    const long = { prompt: 'go', max_tokens: 3000, temperature: 0, stream: true };
    const a = open(long);                                          // runs
    const ra = await a.res;
    const readerA = ra.body.getReader();
    await readerA.read();                                          // it is generating
    const b = open(long);                                          // waits in the queue
    await waitMetrics(q, (t) => metric(t, 'queue_depth') === 1, 'b queued');
    const c = await http(q, 'POST', '/v1/completions', long);      // refused
    assert.equal(c.status, 503, c.text);
    assert.equal(c.headers.get('retry-after'), '1');
    assert.equal(c.json.error.code, 'queue_full');
    a.ctl.abort();                                                 // the slot frees ...
    const rb = await b.res;                                        // ... and b runs
    assert.equal(rb.status, 200);
    const first = await rb.body.getReader().read();
    assert.match(Buffer.from(first.value).toString(), /^data: /);
    b.ctl.abort();
    assert.equal(await sanity(q), await sanity(srv));
    const m = await http(q, 'GET', '/metrics');
    assert.match(m.text, /particle_requests_rejected_total 1/);
    assert.match(m.text, /particle_http_responses_total\{status="503"\} 1/);
  } finally {
    assert.equal((await q.stop()).code, 0);
  }
});
