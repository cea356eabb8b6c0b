#!/usr/bin/env node
'use strict';
// A small API gateway in front of an upstream JSON API, on one loop: the
// server's own srv.fetch makes the upstream calls, so the requests it
// serves and the requests it makes share the library's event loop.
//
//   node examples/gateway.js --port N --upstream URL [--timeout-ms N] [--backend koffi|ffi-napi]
//
// Prints "listening on PORT" once ready.
//   GET /health                  {"ok":true}
//   GET /users/:id               the upstream's GET /users/:id, as
//                                {"user": <its JSON>, "upstreamMs": N}
//   GET /users?ids=1,2,3         the upstream's users fetched in parallel:
//                                {"users": [...], "missing": [ids it answered 404 for]}
//   ALL /api/*                   passed through to the upstream's /*: method,
//                                query, body and answer streamed both ways
//                                (with backpressure), hop-by-hop headers left out
// An upstream that cannot be reached answers 502 {"error", "code"}; one
// slower than --timeout-ms (default 5000) 504; a non-JSON answer where JSON
// is expected 502. SIGTERM/SIGINT drain, then exit 0.
const nanosrv = require('..');

const args = { port: 8080, upstream: null, timeoutMs: 5000, backend: undefined };
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i += 2) {
  const flag = argv[i], v = argv[i + 1];
  if (v === undefined) args.bad = true;
  else if (flag === '--port') args.port = +v;
  else if (flag === '--upstream') args.upstream = v.replace(/\/+$/, '');
  else if (flag === '--timeout-ms') args.timeoutMs = +v;
  else if (flag === '--backend') args.backend = v;
  else args.bad = true;
}
if (args.bad || !args.upstream) {
  process.stderr.write('usage: gateway.js --port N --upstream URL [--timeout-ms N] [--backend koffi|ffi-napi]\n');
  process.exit(2);
}

// Headers that belong to one connection, not to the message (RFC 9110 7.6.1).
const HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'host', 'content-length']);

// Pass-through bodies are streamed, never held whole: a large limit costs no memory.
const srv = nanosrv.createServer({ backend: args.backend, maxBody: 1 << 30 });

function upstreamError(res, e) {
  const timeout = e.name === 'TimeoutError' || (e.cause && e.cause.code === 'NSV_ETIMEDOUT');
  res.json({ error: timeout ? 'upstream timed out' : 'upstream unreachable', code: (e.cause && e.cause.code) || e.name },
    timeout ? 504 : 502);
}

// GET url from the upstream as JSON: { status, body } (body null on 404).
async function getJson(path) {
  const r = await srv.fetch(`${args.upstream}${path}`, {
    headers: { accept: 'application/json' }, signal: AbortSignal.timeout(args.timeoutMs),
  });
  if (r.status === 404) { await r.body?.cancel(); return { status: 404, body: null }; }
  const text = await r.text();
  try {
    return { status: r.status, body: JSON.parse(text) };
  } catch {
    const e = new Error(`upstream answered ${r.status} with something that is not JSON`);
    e.name = 'BadUpstream';
    throw e;
  }
}

srv.get('/health', () => ({ ok: true }));

srv.get('/users/:id', async (req, res) => {
  const t0 = Date.now();
  try {
    const { status, body } = await getJson(`/users/${encodeURIComponent(req.params.id)}`);
    if (status === 404) return res.json({ error: 'no such user' }, 404);
    res.json({ user: body, upstreamMs: Date.now() - t0 }, status);
  } catch (e) {
    if (e.name === 'BadUpstream') return res.json({ error: e.message }, 502);
    upstreamError(res, e);
  }
});

srv.get('/users', async (req, res) => {
  const ids = String(req.query.ids || '').split(',').filter(Boolean);
  try {
    const answers = await Promise.all(ids.map((id) => getJson(`/users/${encodeURIComponent(id)}`)));
    res.json({
      users: answers.filter((a) => a.status !== 404).map((a) => a.body),
      missing: ids.filter((id, i) => answers[i].status === 404),
    });
  } catch (e) {
    if (e.name === 'BadUpstream') return res.json({ error: e.message }, 502);
    upstreamError(res, e);
  }
});

// The pass-through: the request body is the server's stream of it (read as
// it arrives), the answer is written as the upstream sends it.
srv.all('/api/*', async (req, res) => {
  const headers = new Headers();
  for (const [k, v] of Object.entries(req.headers)) {
    // content-length is kept: it declares the streamed body's length, so
    // the upstream gets it as sent rather than chunked.
    if (!HOP.has(k) || k === 'content-length') headers.append(k, Array.isArray(v) ? v.join(', ') : v);
  }
  headers.set('x-forwarded-for', req.remoteAddress);
  // --timeout-ms bounds the wait for the answer's head; the body then
  // streams for as long as it takes.
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(new DOMException('upstream timed out', 'TimeoutError')), args.timeoutMs);
  const init = { method: req.method, headers, redirect: 'manual', signal: ac.signal };
  const hasBody = req.headers['content-length'] ? req.headers['content-length'] !== '0' : !!req.headers['transfer-encoding'];
  if (hasBody && req.method !== 'GET' && req.method !== 'HEAD') {
    init.body = req; // a Readable is an async iterable: streamed chunked
    init.duplex = 'half';
  }
  let r;
  try {
    r = await srv.fetch(`${args.upstream}${req.path.slice('/api'.length)}${req.querystring ? `?${req.querystring}` : ''}`, init);
  } catch (e) {
    return upstreamError(res, e);
  } finally {
    clearTimeout(timer);
  }
  res.statusCode = r.status;
  for (const [k, v] of r.headers) if (!HOP.has(k) && k !== 'date' && k !== 'set-cookie') res.setHeader(k, v);
  const cookies = r.headers.getSetCookie();
  if (cookies.length) res.setHeader('set-cookie', cookies);
  if (r.body === null) return res.end();
  try {
    for await (const chunk of r.body) {
      if (!res.write(chunk)) await new Promise((resolve) => res.once('drain', resolve));
    }
    res.end();
  } catch (e) {
    // The upstream broke off mid-answer: the client must not take a cut
    // answer for a whole one, so its connection is closed.
    srv.closeConnection(req.conn);
  }
}, { streamBody: true });

srv.listen(args.port, '127.0.0.1').then((port) => {
  process.stdout.write(`listening on ${port}\n`);
});
const stop = () => srv.close().then(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
