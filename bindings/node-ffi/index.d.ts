// Type declarations of the nanosrv Node binding.
import { Readable } from 'stream';
import { EventEmitter } from 'events';

/** Connection ids: a Number while below 2^53, a BigInt beyond. */
export type ConnId = number | bigint;
export type Body = string | Buffer | Uint8Array | null | undefined;
export type Backend = 'koffi' | 'ffi-napi';

export interface ServerOptions {
  /** FFI backend; default $NANOSRV_BACKEND or 'koffi'. */
  backend?: Backend;
  /** Path of libnanosrv.so.1; default $NANOSRV_LIBRARY, next to the package, then the system path. */
  library?: string;
  /** I/O worker threads (0 = one per CPU); default 1. */
  threads?: number;
  /** false: one loop run from the Node thread by nsv_poll(0) instead of worker threads (default true). */
  sharded?: boolean;
  /** Events per poll (default 256) and initial arena bytes (default 1 MiB; grows on demand). */
  maxEvents?: number;
  arenaSize?: number;
  /** Handler for requests that no route matched (default: 404 JSON from the library). */
  handler?: Handler;
  /** highWaterMark of streamed request bodies and of fetch response bodies (default 64 KiB): past it reading pauses in C. */
  bodyHighWaterMark?: number;
  /** Access log: a line format written to accessLogStream (default process.stdout), a function per record,
   * or true (records only as 'access' events; adding an 'access' listener turns it on too). */
  accessLog?: 'common' | 'combined' | 'json' | ((record: AccessRecord) => void) | boolean;
  accessLogStream?: { write(text: string): unknown };
  /** Records kept per worker between takes (NSV_OPT_ACCESS_LOG, default 4096). */
  accessLogQueue?: number;
  /** Listener option defaults for every listen(). */
  proxyProtocol?: ListenerOptions['proxyProtocol'];
  proxyTimeoutMs?: number;
  proxyFrom?: string | string[];
  allow?: string | string[];
  deny?: string | string[];
  /** maxConns (default 10000), shed (1: make room at maxConns by closing idle/slow connections; 0: refuse, 503),
   * reuseport (SO_REUSEPORT on later listeners), metricsLatency (0: no latency histograms). */
  maxConns?: number;
  shed?: boolean | number;
  reuseport?: boolean;
  metricsLatency?: boolean | number;
  /** Library options in camelCase: maxBody, maxHeaderBytes, requestTimeoutMs, idleTimeoutMs, maxConns, streamBody, tcpHighWater, ...
   * and the string options: tlsCertFile, tlsKeyFile, tlsCertPem, tlsKeyPem, tlsCaFile, tlsCaPem, tlsKeyPassword,
   * tlsClientCaFile, tlsClientCaPem, gzipTypes (string or Buffer); tlsVerifyClient (0 none, 1 optional, 2 required),
   * tlsVerifyServer (outbound, default 1). */
  [option: string]: unknown;
}

/** TLS details of a request or WebSocket on an https/wss listener. */
export interface TlsInfo {
  /** The server name the client asked for (SNI), '' if none. */
  servername: string;
  /** Subject of the client certificate verified against tlsCaFile/tlsCaPem, e.g. 'CN=alice, O=Example'; '' if none. */
  subject: string;
  /** A client certificate was verified. */
  authorized: boolean;
}

/** The front's fields of a connection that came through a PROXY protocol front ('' / 0 where the header said nothing). */
export interface ProxyInfo {
  /** The address that connected to this server (the load balancer) and its port. */
  front: string;
  frontPort: number;
  /** The address and port the client connected to on the front. */
  dst: string;
  dstPort: number;
  /** The TLS version the client spoke to the front (v2 PP2_TYPE_SSL), its SNI (PP2_TYPE_AUTHORITY) and ALPN. */
  ssl: string;
  authority: string;
  alpn: string;
}

/** Options of one listener (listen()), or defaults for every listen() when given to createServer. */
export interface ListenerOptions {
  /** A PROXY protocol header before anything else: true or 'any' (either version), 'v1', 'v2'; false/'off' (default). */
  proxyProtocol?: boolean | 'v1' | 'v2' | 'any' | 'off' | 0 | 1 | 2 | 3;
  /** Deadline for the whole header from accept (default 5000). */
  proxyTimeoutMs?: number;
  /** Fronts allowed to connect when the PROXY protocol is on (CIDR list). */
  proxyFrom?: string | string[];
  /** Clients served (CIDR list; empty: all) and clients never served (checked first). */
  allow?: string | string[];
  deny?: string | string[];
}

export interface ListenOptions extends ListenerOptions {
  port?: number;
  host?: string;
  /** A URL instead of port and host ('https://0.0.0.0:8443'); with fd, the scheme of the adopted socket. */
  url?: string;
  /** A listening socket to adopt (nsv_listen_fd), e.g. an inherited one. */
  fd?: number;
}

/** One access record (nsv_access_record), as the 'access' event and an accessLog function get it. */
export interface AccessRecord {
  /** Wall clock at the request head complete, ms since the epoch. */
  timeMs: number;
  peer: string;
  port: number;
  method: string;
  /** Path and query as sent (at most 4096 bytes). */
  target: string;
  httpVersion: '1.0' | '1.1';
  /** Status sent; 0 when the connection closed with none. */
  status: number;
  /** Response and request bytes as framed on the wire. */
  bytesOut: number;
  bytesIn: number;
  durationUs: number;
  userAgent: string;
  referer: string;
  conn: number;
  listener: number;
  tls: boolean;
  proxy: boolean;
  head: boolean;
}

export interface Histogram {
  /** [upper bound in seconds (Infinity last), cumulative count]. */
  buckets: Array<[number, number]>;
  sum_seconds: number;
  count: number;
}

/** Every metric by its library name (conns_accepted, requests, resp_2xx, ...); lat_queued and lat_flushed are histograms. */
export type Metrics = Record<string, number> & { lat_queued: Histogram; lat_flushed: Histogram };

/** The part of http.IncomingMessage#socket a handler reads. */
export interface RequestSocket {
  readonly encrypted: boolean;
  readonly remoteAddress: string | undefined;
  readonly remotePort: number;
  /** The front's fields behind a PROXY protocol front (remoteAddress is then the client's), else null. */
  readonly proxy: ProxyInfo | null;
  /** TLS details on https, null on http. */
  readonly tls: TlsInfo | null;
  readonly socket: RequestSocket;
  readonly protocol: 'http' | 'https';
  readonly secure: boolean;
  /** SNI name, false when the client sent none; undefined on plain http. */
  readonly servername: string | false | undefined;
  readonly authorized: boolean | undefined;
  /** { subject: { CN, O, ... }, subjectString } of the verified client certificate, {} when none. */
  getPeerCertificate(): { subject?: Record<string, string>; subjectString?: string };
}

export class NanosrvError extends Error {
  /** 'NSV_ESTALE', 'NSV_ESTATE', ... */
  code: string;
  /** The library's negative code, e.g. -3. */
  errno: number;
  /** HTTP status for errors that are the client's (multipart 400/413/415, body limits); a handler that lets one escape answers with it. */
  status?: number;
  statusCode?: number;
  /** The library's reason, without the code's message. */
  detail?: string;
}

export interface RouteOptions {
  /** Deliver the request once its head is parsed; the body streams through the request (a Readable). */
  streamBody?: boolean;
}

export interface MultipartOptions {
  maxParts?: number;
  /** One part's header block (default 16384). */
  maxHeaderBytes?: number;
  /** Bytes of one part's data; past it a 413 error. */
  maxPartSize?: number;
  /** Buffer of each part stream (default 64 KiB). */
  highWaterMark?: number;
}

export interface SpoolOptions extends MultipartOptions {
  /** Parts up to this size stay in memory (buffer), larger ones go to a temp file (filepath). */
  spoolThreshold: number;
  /** Directory of the temp files (default os.tmpdir()). */
  tmpdir?: string;
  /** Keep the temp files after the response (default: removed on finish/close). */
  keepFiles?: boolean;
}

/** One multipart part: a Readable of its data. */
export class Part extends Readable {
  readonly name: string;
  /** null when the part has no filename parameter. */
  readonly filename: string | null;
  /** null without a Content-Type header (read it as text/plain). */
  readonly contentType: string | null;
  readonly headers: Record<string, string>;
  /** Data bytes so far. */
  readonly size: number;
}

export interface SpooledPart {
  name: string;
  filename: string | null;
  contentType: string | null;
  headers: Record<string, string>;
  size: number;
  /** The data when size <= spoolThreshold, else null. */
  buffer: Buffer | null;
  /** The temp file when size > spoolThreshold, else null. */
  filepath: string | null;
}

export interface CookieOptions {
  /** Milliseconds (as Express): gives Max-Age in seconds and Expires. */
  maxAge?: number;
  expires?: Date;
  /** Default '/'. */
  path?: string | null;
  domain?: string;
  secure?: boolean;
  httpOnly?: boolean;
  sameSite?: 'lax' | 'strict' | 'none' | 'Lax' | 'Strict' | 'None' | boolean;
  partitioned?: boolean;
  /** Value encoder, default encodeURIComponent. */
  encode?: (value: string) => string;
}

export interface SendFileOptions extends StaticFlags {
  /** Resolve path as a URL path (percent-encoded) under root, by the static rules; without it path is a file system path. */
  root?: string;
  /** Send the whole file with this status (default: 200/206/304/416 as the request asks). */
  status?: number;
  headers?: Record<string, string | number | Array<string | number>>;
}

export interface StaticFlags {
  list?: boolean;
  symlinks?: boolean;
  precompressed?: boolean;
  fallthrough?: boolean;
  dotfiles?: boolean;
  /** NSV_STATIC_* bits, or-ed with the named ones. */
  flags?: number;
}

export interface StaticOptions extends StaticFlags {
  cacheControl?: string;
}

export interface SseEvent {
  /** A string (line breaks become several data: lines), bytes, or any other value as JSON. */
  data?: unknown;
  event?: string;
  id?: string | number;
  /** Reconnection delay in ms. */
  retry?: number;
}

/** A server-sent event stream (res.sse()). */
export class EventStream extends EventEmitter {
  /** The client left ('close' was emitted); later sends are dropped. */
  readonly closed: boolean;
  readonly ended: boolean;
  readonly writableNeedDrain: boolean;
  /** false under backpressure: wait for 'drain'. Nothing is lost either way. */
  send(event: SseEvent | string | Buffer): boolean;
  /** A comment line, e.g. a keepalive. */
  comment(text?: string): boolean;
  end(): void;
  on(event: 'drain' | 'close' | 'finish', listener: () => void): this;
  once(event: 'drain' | 'close' | 'finish', listener: () => void): this;
}

/** The request: a Readable of its body. */
export class Request extends Readable {
  readonly conn: ConnId;
  readonly route: number;
  readonly flags: number;
  readonly method: string;
  /** Raw path, not percent-decoded. */
  readonly path: string;
  /** Raw query string without '?' ('' when absent). */
  readonly querystring: string;
  /** Decoded query; a repeated name gives an array of its values in order (no prototype). */
  readonly query: Record<string, string | string[]>;
  /** The query as [name, value] pairs in order. */
  readonly queryPairs: Array<[string, string]>;
  /** Cookies of the Cookie header (first of a repeated name; %XX decoded when valid). */
  readonly cookies: Record<string, string>;
  /** The body arrives in pieces (streamBody route); body/text()/json() then throw: read the stream or await buffer(). */
  readonly streaming: boolean;
  /** The whole body has arrived. */
  readonly complete: boolean;
  /** The client left before the body was complete ('aborted', then an ECONNRESET error). */
  readonly aborted: boolean;
  /** path + '?' + query, like http.IncomingMessage#url. */
  readonly url: string;
  readonly httpVersion: '1.0' | '1.1';
  /** Lower-case names; repeated headers joined with ', ' (set-cookie: array). */
  readonly headers: Record<string, string | string[]>;
  /** Route parameters, percent-decoded. */
  readonly params: Record<string, string>;
  /** Body copy, safe to keep. */
  readonly body: Buffer;
  readonly bodyLength: number;
  /** The client's address; behind a PROXY protocol front, the one from its header. */
  readonly remoteAddress: string;
  readonly remotePort: number;
  /** The front's fields behind a PROXY protocol front, else null. */
  readonly proxy: ProxyInfo | null;
  header(name: string): string | string[] | undefined;
  text(): string;
  json(): any;
  /** A urlencoded body as query. */
  form(): Record<string, string | string[]>;
  /** The whole body, streamed or not. */
  buffer(): Promise<Buffer>;
  /** multipart/form-data part by part (415 / 400 / 413 errors carry err.status). */
  multipart(opts?: MultipartOptions): AsyncIterableIterator<Part>;
  multipart(opts: SpoolOptions): AsyncIterableIterator<SpooledPart>;
}

export class Response {
  readonly conn: ConnId;
  readonly req: Request;
  statusCode: number;
  readonly headersSent: boolean;
  readonly writableEnded: boolean;
  /** The connection closed before the reply. */
  readonly destroyed: boolean;
  /** The client left: end()/write()/sendFile() are no-ops (write() returns false). */
  readonly closed: boolean;
  setHeader(name: string, value: string | number | Array<string | number>): this;
  getHeader(name: string): string | number | Array<string | number> | undefined;
  getHeaders(): Record<string, string | number | Array<string | number>>;
  hasHeader(name: string): boolean;
  removeHeader(name: string): void;
  writeHead(status: number, headers?: Record<string, string | number | Array<string | number>> | Array<string>): this;
  writeHead(status: number, statusMessage: string, headers?: Record<string, string | number | Array<string | number>>): this;
  /** true after write() returned false, until 'drain'. */
  readonly writableNeedDrain: boolean;
  /** Streams a chunk (chunked encoding). Returns false once the queued output
   *  passed the high water mark: wait for 'drain' before writing more. */
  write(chunk: Body): boolean;
  /** Sends the reply; throws NSV_ESTATE when called twice. cb runs after 'finish'. */
  end(body?: Body, cb?: () => void): this;
  end(body: string, encoding: BufferEncoding, cb?: () => void): this;
  end(cb: () => void): this;
  json(value: unknown, status?: number): this;
  /** Set-Cookie, validated by the library (throws NSV_EINVAL with the reason). */
  cookie(name: string, value: string, opts?: CookieOptions): this;
  clearCookie(name: string, opts?: CookieOptions): this;
  /** Starts a server-sent event stream with the headers set so far. */
  sse(): EventStream;
  /** Answers with a file; throws NanosrvError NSV_ENOTFOUND (nothing sent) when there is none. */
  sendFile(path: string, opts?: SendFileOptions): this;
  on(event: 'finish' | 'close' | 'drain', listener: () => void): this;
  once(event: 'finish' | 'close' | 'drain', listener: () => void): this;
  off(event: 'finish' | 'close' | 'drain', listener: () => void): this;
}

/** A handler may end the response itself or return (a Promise of) the body: strings and bytes as they are, other values as JSON. */
export type Handler = (req: Request, res: Response) => unknown | Promise<unknown>;

export class WebSocket {
  static readonly CONNECTING: 0;
  static readonly OPEN: 1;
  static readonly CLOSING: 2;
  static readonly CLOSED: 3;
  readonly id: ConnId;
  readonly url: string;
  readonly remoteAddress: string;
  readonly remotePort: number;
  /** TLS details on wss://, null otherwise. */
  readonly tls: TlsInfo | null;
  readyState: 0 | 1 | 2 | 3;
  /** Free for the application. */
  data: Record<string, any>;
  /** Bytes sent that the library has not taken yet (counted by the binding). */
  readonly bufferedAmount: number;
  /** A closing or closed peer drops the message quietly; cb hears of it (NSV_ESTATE / NSV_ESTALE). */
  send(data: string | Buffer | Uint8Array, cb?: (err?: NanosrvError) => void): void;
  send(data: string | Buffer | Uint8Array, opts: { binary?: boolean } | undefined, cb?: (err?: NanosrvError) => void): void;
  ping(data?: string | Buffer | Uint8Array, cb?: (err?: NanosrvError) => void): void;
  ping(cb: (err?: NanosrvError) => void): void;
  /** Throws NSV_EINVAL for a code a server may not send or a reason over 123 bytes. */
  close(code?: number, reason?: string): void;
}

export interface WebSocketHandlers {
  open?(ws: WebSocket, req: Request): unknown;
  message?(ws: WebSocket, data: string | Buffer, isBinary: boolean): unknown;
  close?(ws: WebSocket, code: number, reason: string): unknown;
  ping?(ws: WebSocket, data: Buffer): unknown;
  pong?(ws: WebSocket, data: Buffer): unknown;
}

export class Server {
  readonly backend: Backend;
  /** True when the I/O runs on worker threads (always, with a library that has sharding). */
  readonly sharded: boolean;
  readonly port: number | null;
  readonly connections: number;
  route(method: string, pattern: string, handler: Handler, opts?: RouteOptions | number): this;
  get(pattern: string, handler: Handler, opts?: RouteOptions): this;
  post(pattern: string, handler: Handler, opts?: RouteOptions): this;
  put(pattern: string, handler: Handler, opts?: RouteOptions): this;
  delete(pattern: string, handler: Handler, opts?: RouteOptions): this;
  patch(pattern: string, handler: Handler, opts?: RouteOptions): this;
  all(pattern: string, handler: Handler, opts?: RouteOptions): this;
  /** Serves dir under prefix ('/static/') in C; returns the mount id. Before listen(). */
  static(prefix: string, dir: string, opts?: StaticOptions): number;
  fallback(handler: Handler): this;
  ws(pattern: string, handlers: WebSocketHandlers): this;
  broadcast(pattern: string, data: string | Buffer | Uint8Array): number;
  listen(port?: number, host?: string): Promise<number>;
  /** node's forms: cb runs on 'listening' (a later tick); a failure is also an 'error' event. */
  listen(port: number, cb: () => void): Promise<number>;
  listen(port: number, host: string, cb: () => void): Promise<number>;
  listen(port: number, host: string, backlog: number, cb?: () => void): Promise<number>;
  listen(options: ListenOptions, cb?: () => void): Promise<number>;
  /** listen('https://127.0.0.1:8443'): http, https, ws, wss, tcp or tls URL; resolves with the bound port. */
  listen(url: string, options?: ListenerOptions): Promise<number>;
  listen(port: number, host: string, options: ListenerOptions): Promise<number>;
  /** Adopts the sockets of systemd socket activation (LISTEN_PID/LISTEN_FDS, removed from the environment); [] when none. */
  listenInherited(options?: ListenerOptions & { url?: string }): Promise<Array<{ fd: number; name: string; port: number }>>;
  /** Every metric by name, read in one call; metrics(worker): that worker's share. */
  metrics(worker?: number): Metrics;
  /** Prometheus text exposition (prefix default 'nanosrv_'). */
  metricsText(prefix?: string, opts?: { perWorker?: boolean }): string;
  /** A handler for GET /metrics (Content-Type: text/plain; version=0.0.4). */
  metricsHandler(opts?: { prefix?: string; perWorker?: boolean }): Handler;
  /** True once a drain started (close(), a signal drain): readiness checks should fail. */
  readonly draining: boolean;
  /** A handler for readiness checks: 200 "ready", 503 "draining" once draining (echo-server's bodies). */
  readinessHandler(): Handler;
  on(event: 'access', listener: (record: AccessRecord) => void): this;
  /** Whether the server keeps the process alive (default: it does). */
  ref(): this;
  unref(): this;
  /** A WAKEUP for conn carrying data: the server emits 'wakeup' (conn, data). False when the connection is gone. */
  wakeup(conn: ConnId, data?: string | Uint8Array): boolean;
  /** A library timer, delivered with the server's events: fn after ms, then every repeat ms if repeat > 0. Returns its id. */
  timer(ms: number, fn: () => void, repeat?: number): number;
  /** Cancels a timer; false when it is unknown or done. */
  clearTimer(id: number): boolean;
  address(): { port: number } | null;
  close(timeoutMs?: number): Promise<void>;
  setOption(name: string, value: number | bigint | boolean | string | Buffer | null): this;
  getOption(name: string): number;
  /** Complete reply by connection id. Headers are checked as res.setHeader checks them (TypeError).
   * Returns false, without an exception, when the client has left. */
  reply(conn: ConnId, status: number, headers?: Record<string, string | number | Array<string | number>> | Array<string | number> | null, body?: Body): boolean;
  closeConnection(conn: ConnId): void;
  on(event: 'listening', listener: (port: number) => void): this;
  on(event: 'close', listener: () => void): this;
  on(event: 'error', listener: (err: Error) => void): this;
  on(event: 'wakeup', listener: (conn: ConnId, data: Buffer) => void): this;
  on(event: 'clientError', listener: (err: NanosrvError, conn: ConnId) => void): this;
  on(event: 'handlerError', listener: (err: unknown, req: Request | null, res: Response | null) => void): this;
  /** fetch() on this server's loop (the library's HTTP/1.1 client): the platform's Response, its body streamed
   * with backpressure. Rejects with TypeError('fetch failed') whose cause is a NanosrvError (cause.code
   * 'NSV_ECONNREFUSED', ...), or with the signal's reason (AbortError). redirect: 'follow' (default, 20 hops),
   * 'manual' (the 3xx answer itself) or 'error'. */
  fetch(input: string | URL | globalThis.Request, init?: RequestInit): Promise<globalThis.Response>;
  /** A WHATWG-shaped WebSocket client class whose connections run on this server: new srv.WebSocket(url, protocols). */
  readonly WebSocket: WebSocketClientClass;
}

/** The client's close event (CloseEvent is not a global before Node 23). */
export class CloseEvent extends Event {
  constructor(type: string, init?: { code?: number; reason?: string; wasClean?: boolean });
  readonly code: number;
  readonly reason: string;
  readonly wasClean: boolean;
}

/** The client's error event: .error is the library's error (code 'NSV_ECONNREFUSED', 'NSV_EPARSE', ...). */
export interface WebSocketErrorEvent extends Event {
  readonly error: NanosrvError | undefined;
  readonly message: string;
}

export type BinaryType = 'nodebuffer' | 'arraybuffer' | 'blob';

/** Second argument of the client constructor: subprotocols, or (as undici) { protocols, headers }. */
export type WebSocketClientOptions = string | string[] | { protocols?: string | string[]; headers?: HeadersInit };

/** A WebSocket client connection, shaped like the WHATWG WebSocket. */
export interface WebSocketClient extends EventTarget {
  readonly url: string;
  readonly readyState: 0 | 1 | 2 | 3;
  /** The subprotocol the server chose ('' when none). */
  readonly protocol: string;
  readonly extensions: string;
  /** Bytes handed over by send() and not sent yet (on a sharded server: not yet taken by its worker). */
  readonly bufferedAmount: number;
  /** How binary messages arrive: Buffer (default), ArrayBuffer or Blob. */
  binaryType: BinaryType;
  readonly CONNECTING: 0;
  readonly OPEN: 1;
  readonly CLOSING: 2;
  readonly CLOSED: 3;
  onopen: ((this: WebSocketClient, ev: Event) => unknown) | null;
  onmessage: ((this: WebSocketClient, ev: MessageEvent) => unknown) | null;
  onerror: ((this: WebSocketClient, ev: WebSocketErrorEvent) => unknown) | null;
  onclose: ((this: WebSocketClient, ev: CloseEvent) => unknown) | null;
  /** A string goes as text, bytes (ArrayBuffer, views, Buffer, Blob) as binary. InvalidStateError while CONNECTING. */
  send(data: string | ArrayBufferLike | ArrayBufferView | Blob): void;
  /** code: 1000 or 3000-4999 (else InvalidAccessError); reason: at most 123 UTF-8 bytes (else SyntaxError). */
  close(code?: number, reason?: string): void;
}

export interface WebSocketClientClass {
  new (url: string | URL, protocols?: WebSocketClientOptions): WebSocketClient;
  readonly CONNECTING: 0;
  readonly OPEN: 1;
  readonly CLOSING: 2;
  readonly CLOSED: 3;
}

/** fetch() on a shared nanosrv server made on first use (it keeps the process alive only while a request is in flight). */
export function fetch(input: string | URL | globalThis.Request, init?: RequestInit): Promise<globalThis.Response>;
/** The WebSocket client on the same shared server. */
export const WebSocketClient: WebSocketClientClass;

export function createServer(handler?: Handler): Server;
export function createServer(opts: ServerOptions, handler?: Handler): Server;

// ---- fetch-style serving (lib/fetch.js): WHATWG Request in, Response out ----

export interface ServeTlsOptions {
  key: string | Buffer | Array<string | Buffer>;
  cert: string | Buffer | Array<string | Buffer>;
  ca?: string | Buffer | Array<string | Buffer>;
  passphrase?: string;
  requestCert?: boolean;
  rejectUnauthorized?: boolean;
}

/** The second argument of the fetch handler (Hono: `c.env`). */
export interface ServeInfo {
  remoteAddr: { hostname: string; port: number; transport: 'tcp' };
  server: FetchServer;
  /** The native request and response (lib/request.js, lib/response.js). */
  incoming: Request;
  outgoing: Response;
}

export type FetchHandler = (request: globalThis.Request, info: ServeInfo) => globalThis.Response | Promise<globalThis.Response>;

export interface ServeOptions {
  fetch?: FetchHandler;
  /** Default 3000; 0 picks a free port (read it from server.port). */
  port?: number;
  /** Default '0.0.0.0'. */
  hostname?: string;
  tls?: ServeTlsOptions;
  /** Deno's spelling of tls. */
  key?: string | Buffer;
  cert?: string | Buffer;
  /** Aborting it closes the server. */
  signal?: AbortSignal;
  onListen?: (addr: { hostname: string; port: number }) => void;
  /** The answer when the handler throws or returns no Response (default: 500 and a log line). */
  onError?: (error: unknown, request: globalThis.Request | null) => globalThis.Response | undefined | void | Promise<globalThis.Response | undefined | void>;
  backend?: Backend;
  library?: string;
  threads?: number;
  /** Library options (ServerOptions) for the server underneath. */
  nanosrv?: ServerOptions;
}

export interface FetchServer {
  readonly port: number;
  readonly hostname: string;
  readonly address: { address: string; family: 'IPv4' | 'IPv6'; port: number };
  readonly url: URL;
  /** Stops taking connections; resolves once the requests in flight are answered. */
  close(): Promise<void>;
  /** Bun's: stop(true) also ends the open connections at once. */
  stop(closeActiveConnections?: boolean): Promise<void>;
  /** Deno's: resolves when the server has closed. */
  readonly finished: Promise<void>;
  ref(): FetchServer;
  unref(): FetchServer;
  /** The native server underneath. */
  readonly core: Server;
  [Symbol.asyncDispose](): Promise<void>;
}

/** Serves a fetch-style handler (Hono: serve({ fetch: app.fetch })). Listens before it returns; throws NSV_EADDRINUSE. */
export function serve(options: ServeOptions & { fetch: FetchHandler }): FetchServer;
export function serve(handler: FetchHandler): FetchServer;
export function serve(options: ServeOptions, handler: FetchHandler): FetchServer;
export function loadLibrary(opts?: { backend?: Backend; library?: string }): { backend: Backend; backendVersion: string; path: string; missing: string[] };

export const constants: Readonly<Record<string, number>>;
export function base64Encode(data: string | Uint8Array): string;
export function base64Decode(text: string | Uint8Array): Buffer;
export function urlEncode(text: string | Uint8Array): string;
export function urlDecode(text: string | Uint8Array, form?: boolean): string;
export function parseUrl(url: string): { scheme: string; host: string; path: string; query: string; port: number; tls: boolean };
export function jsonString(json: string | Uint8Array, path: string): string | undefined;
export function jsonNumber(json: string | Uint8Array, path: string): number | undefined;
export function jsonInteger(json: string | Uint8Array, path: string): number | bigint | undefined;
export function jsonBoolean(json: string | Uint8Array, path: string): boolean | undefined;
export function millis(): number;
export function version(): string;
export function abiVersion(): number;
export function tlsAvailable(): boolean;
/** The library was built with HTTP/2 (the `http2` option: NSV_H2_* bits). */
export function http2Available(): boolean;
export function logLevel(): number;
export function setLogLevel(level: number): void;
export function strerror(code: number): string;
export function parseForm(src: string | Uint8Array): Array<[string, string]>;
export function parseCookie(header: string | Uint8Array): Array<[string, string]>;
export function serializeCookie(name: string, value: string, opts?: CookieOptions): string;
export function mimeType(name: string | Uint8Array): string;
export function errname(code: number): string;
/** The sockets passed by systemd socket activation, [{ fd, name }] (fds 3, 4, ...; [] when none); removes the variables. */
export function inheritedFds(): Array<{ fd: number; name: string }>;
