'use strict';
// Query strings, forms, cookies and server-sent events through real
// clients (fetch, raw sockets), both backends.
const { describe, test } = require('node:test');
const assert = require('node:assert');
const { BACKENDS, serve, nanosrv } = require('./helpers');

// A spec-following reader of text/event-stream: events as { event, data, id }.
function parseEvents(text) {
  const out = [];
  let ev = { event: 'message', data: [], id: undefined };
  for (const line of text.split(/\r\n|\r|\n/)) {
    if (line === '') {
      if (ev.data.length) out.push({ event: ev.event, data: ev.data.join('\n'), id: ev.id });
      ev = { event: 'message', data: [], id: ev.id };
      continue;
    }
    if (line.startsWith(':')) continue;
    const c = line.indexOf(':');
    const name = c < 0 ? line : line.slice(0, c);
    let value = c < 0 ? '' : line.slice(c + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (name === 'data') ev.data.push(value);
    else if (name === 'event') ev.event = value;
    else if (name === 'id') ev.id = value;
  }
  return out;
}

for (const backend of BACKENDS) {
  describe(`forms, cookies, SSE (${backend})`, { timeout: 60000 }, () => {
    test('req.query: decoded, repeated keys as arrays in order; queryPairs; form()', async (t) => {
      const { base } = await serve(t, backend, {}, (srv) => {
        srv.get('/q', (req) => ({ q: { ...req.query }, pairs: req.queryPairs, raw: req.querystring }));
        srv.post('/f', (req) => ({ f: { ...req.form() } }));
      });
      let r = await fetch(`${base}/q?a=1&b=x+y&a=%C3%A9&a=3&empty&c=%zz&&__proto__=p`);
      const j = await r.json();
      assert.deepStrictEqual(j.q, { a: ['1', 'é', '3'], b: 'x y', empty: '', c: '%zz', ['__proto__']: 'p' });
      assert.deepStrictEqual(j.pairs, [['a', '1'], ['b', 'x y'], ['a', 'é'], ['a', '3'], ['empty', ''], ['c', '%zz'], ['__proto__', 'p']]);
      assert.strictEqual(j.raw, 'a=1&b=x+y&a=%C3%A9&a=3&empty&c=%zz&&__proto__=p');
      r = await fetch(`${base}/q`);
      assert.deepStrictEqual((await r.json()).q, {});
      r = await fetch(`${base}/f`, { method: 'POST', body: new URLSearchParams([['k', 'v 1'], ['k', 'v&2'], ['z', '']]) });
      assert.deepStrictEqual(await r.json(), { f: { k: ['v 1', 'v&2'], z: '' } });
    });

    test('req.cookies; res.cookie / clearCookie; a bad attribute throws with the reason', async (t) => {
      const errors = [];
      const { base } = await serve(t, backend, {}, (srv) => {
        srv.get('/c', (req, res) => {
          res.cookie('sid', 'a b;c', { httpOnly: true, sameSite: 'lax', maxAge: 60000, secure: true });
          res.cookie('theme', 'dark', { path: '/app', domain: 'example.com' });
          res.clearCookie('old');
          for (const bad of [
            () => res.cookie('s', 'v', { sameSite: 'none' }),
            () => res.cookie('s', 'v', { domain: 'a;b' }),
            () => res.cookie('bad name', 'v'),
            () => res.cookie('__Host-x', 'v', { secure: true, domain: 'example.com' }),
            () => res.cookie('s', 'v', { encode: (v) => v, path: '/' }) && res.cookie('s', 'v"x', { encode: (v) => v }),
          ]) {
            try { bad(); errors.push('no error'); } catch (e) { errors.push(e.code); if (!e.message.includes('nsv_set_cookie')) errors.push(`no detail: ${e.message}`); }
          }
          res.json({ cookies: { ...req.cookies } });
        });
      });
      const r = await fetch(`${base}/c`, { headers: { Cookie: 'a=1; b="quoted"; a=2; flag; enc=x%20y; bad=%zz' } });
      assert.deepStrictEqual(await r.json(), { cookies: { a: '1', b: 'quoted', enc: 'x y', bad: '%zz' } });
      const set = r.headers.getSetCookie();
      assert.strictEqual(set.length, 4, set.join(' | '));
      assert.match(set[0], /^sid=a%20b%3Bc; Path=\/; Max-Age=60; Expires=\w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d GMT; Secure; HttpOnly; SameSite=Lax$/);
      assert.strictEqual(set[1], 'theme=dark; Path=/app; Domain=example.com');
      assert.strictEqual(set[2], 'old=; Path=/; Max-Age=0; Expires=Thu, 01 Jan 1970 00:00:00 GMT');
      assert.match(set[3], /^s=v; Path=\/$/);
      assert.deepStrictEqual(errors, ['NSV_EINVAL', 'NSV_EINVAL', 'NSV_EINVAL', 'NSV_EINVAL', 'NSV_EINVAL']);
    });

    test('SSE: events (multi-line data, event, id, retry), comments, end; parsed by a client', async (t) => {
      const { base } = await serve(t, backend, {}, (srv) => {
        srv.get('/sse', (req, res) => {
          res.setHeader('X-Extra', 'yes');
          const s = res.sse();
          s.comment('hello');
          s.send('plain');
          s.send({ data: 'line1\nline2\r\nline3', event: 'multi', id: 7, retry: 1500 });
          s.send({ data: { json: true }, id: 'x' });
          assert.throws(() => s.send({ data: 'x', event: 'bad\nname' }), { code: 'NSV_EINVAL' });
          s.end();
          assert.throws(() => s.send('late'), { code: 'NSV_ESTATE' });
        });
      });
      const r = await fetch(`${base}/sse`);
      assert.strictEqual(r.headers.get('content-type'), 'text/event-stream');
      assert.strictEqual(r.headers.get('x-extra'), 'yes');
      const text = await r.text();
      assert.ok(text.startsWith(': hello\n\n'), text);
      assert.match(text, /retry: 1500\n/);
      assert.deepStrictEqual(parseEvents(text), [
        { event: 'message', data: 'plain', id: undefined },
        { event: 'multi', data: 'line1\nline2\nline3', id: '7' },
        { event: 'message', data: '{"json":true}', id: 'x' },
      ]);
    });

    test("SSE: send() returns false under backpressure, 'drain' resumes; the client leaving emits 'close'", async (t) => {
      let stats = null;
      let done;
      const finished = new Promise((r) => { done = r; });
      const { base } = await serve(t, backend, { tcpHighWater: 65536, tcpLowWater: 16384 }, (srv) => {
        srv.get('/flood', (req, res) => {
          const s = res.sse();
          const big = 'x'.repeat(16384);
          let sent = 0, falses = 0, drains = 0;
          const pump = () => {
            while (!s.closed && sent < 100000) {
              sent++;
              if (!s.send(big)) { falses++; return; }
            }
          };
          s.on('drain', () => { drains++; pump(); });
          s.on('close', () => { stats = { falses, drains, sent }; done(); });
          pump();
        });
      });
      const ac = new AbortController();
      const r = await fetch(`${base}/flood`, { signal: ac.signal });
      const reader = r.body.getReader();
      let got = 0;
      for (let i = 0; i < 10000 && got < 4 << 20; i++) {
        const { value, done: end } = await reader.read();
        if (end) break;
        got += value.length;
      }
      ac.abort();
      await finished;
      assert.ok(stats.falses >= 1, 'send() returned false at the high water mark');
      assert.ok(stats.drains >= 1, "'drain' came when the client read");
      assert.ok(stats.sent < 100000, `the stream stopped when the client left (sent ${stats.sent})`);
    });

    test('utilities: parseForm, parseCookie, serializeCookie', () => {
      nanosrv.loadLibrary({ backend });
      assert.deepStrictEqual(nanosrv.parseForm('a=1&a=2&b'), [['a', '1'], ['a', '2'], ['b', '']]);
      assert.deepStrictEqual(nanosrv.parseCookie('x=1; y="2"'), [['x', '1'], ['y', '2']]);
      assert.strictEqual(nanosrv.serializeCookie('n', 'v', { httpOnly: true }), 'n=v; Path=/; HttpOnly');
      assert.throws(() => nanosrv.serializeCookie('n', 'v', { sameSite: 'sideways' }), { code: 'NSV_EINVAL' });
    });
  });
}
