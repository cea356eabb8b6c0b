// The demo page's behaviour: the SSE clock, the upload with its progress
// bar, the WebSocket echo. Plain browser APIs, no libraries.
'use strict';
const $ = (id) => document.getElementById(id);

// Server clock: an EventSource reconnects by itself if the stream drops.
let ticks = 0;
const clock = new EventSource('/clock');
clock.onmessage = (e) => {
  $('clock').textContent = e.data;
  $('ticks').textContent = ++ticks + (ticks === 1 ? ' tick' : ' ticks');
};
clock.onerror = () => { $('clock').textContent = 'reconnecting…'; };

// Upload: XMLHttpRequest, because fetch reports no upload progress.
function showProgress(fraction) {
  const pct = Math.floor(fraction * 100);
  $('progress').value = pct;
  $('percent').textContent = pct + '%';
}
$('upload').addEventListener('submit', (e) => {
  e.preventDefault();
  const xhr = new XMLHttpRequest();
  xhr.open('POST', '/upload');
  xhr.upload.onprogress = (p) => { if (p.lengthComputable) showProgress(p.loaded / p.total); };
  xhr.upload.onload = () => showProgress(1); // every byte of the body was sent
  xhr.onload = () => {
    $('result').textContent = xhr.status === 200
      ? JSON.stringify(JSON.parse(xhr.responseText), null, 2)
      : 'HTTP ' + xhr.status + ': ' + xhr.responseText;
  };
  xhr.onerror = () => { $('result').textContent = 'upload failed (network error)'; };
  showProgress(0);
  $('result').textContent = '';
  xhr.send(new FormData(e.target));
});

// WebSocket echo.
const ws = new WebSocket((location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/ws');
ws.onopen = () => { $('ws-state').textContent = 'open'; };
ws.onclose = () => { $('ws-state').textContent = 'closed'; };
ws.onmessage = (e) => { $('ws-log').textContent += 'echo: ' + e.data + '\n'; };
$('ws-form').addEventListener('submit', (e) => {
  e.preventDefault();
  if (ws.readyState === WebSocket.OPEN)
    ws.send($('ws-text').value);
});

document.documentElement.dataset.js = 'ready'; // the browser test waits for this
