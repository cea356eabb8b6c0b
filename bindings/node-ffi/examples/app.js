#!/usr/bin/env node
'use strict';
// A small app: a notes API with route parameters, JSON bodies, an async
// handler, a streamed response and a WebSocket feed of changes.
//   node examples/app.js [port]      then: curl -d '{"text":"hi"}' localhost:8080/notes
const nanosrv = require('..');

const notes = new Map();
let nextId = 1;

const srv = nanosrv.createServer({ maxBody: 64 * 1024 }, (req, res) => {
  res.statusCode = 404;
  res.json({ error: `no route for ${req.method} ${req.path}` });
});

srv.get('/notes', () => [...notes.values()]); // returned values are sent as JSON

srv.get('/notes/:id', (req, res) => {
  const note = notes.get(+req.params.id);
  if (!note) return res.json({ error: 'no such note' }, 404);
  return res.json(note);
});

srv.post('/notes', async (req, res) => {
  let text;
  try { text = req.json().text; } catch { text = undefined; }
  if (typeof text !== 'string') return res.json({ error: 'expected {"text": "..."}' }, 400);
  await new Promise((r) => setTimeout(r, 1)); // stands for a database write
  const note = { id: nextId++, text, at: new Date().toISOString() };
  notes.set(note.id, note);
  srv.broadcast('/feed', JSON.stringify({ added: note }));
  return res.json(note, 201);
});

srv.delete('/notes/:id', (req, res) => {
  const ok = notes.delete(+req.params.id);
  if (ok) srv.broadcast('/feed', JSON.stringify({ deleted: +req.params.id }));
  res.statusCode = ok ? 204 : 404;
  res.end();
});

// Streams every note as a line of text, one chunk each.
srv.get('/export', (req, res) => {
  res.setHeader('Content-Type', 'text/plain; charset=utf-8');
  for (const n of notes.values()) res.write(`${n.id}\t${n.text}\n`);
  res.end();
});

srv.ws('/feed', {
  open(ws) { ws.send(JSON.stringify({ hello: notes.size })); },
  message(ws, data) { if (data === 'ping') ws.send('pong'); },
});

srv.listen(+(process.argv[2] || 8080)).then((port) => {
  console.log(`notes app on http://127.0.0.1:${port} (${srv.backend})`);
});
process.once('SIGINT', () => srv.close().then(() => process.exit(0)));
process.once('SIGTERM', () => srv.close().then(() => process.exit(0)));
