// Type declarations of the nanosrv Node binding.

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
  /** Events per poll (default 256) and initial arena bytes (default 1 MiB; grows on demand). */
  maxEvents?: number;
  arenaSize?: number;
  /** Handler for requests that no route matched (default: 404 JSON from the library). */
  handler?: Handler;
  /** Library options in camelCase: maxBody, maxHeaderBytes, requestTimeoutMs, idleTimeoutMs, maxConns, ... */
  [option: string]: unknown;
}

export class NanosrvError extends Error {
  /** 'NSV_ESTALE', 'NSV_ESTATE', ... */
  code: string;
  /** The library's negative code, e.g. -3. */
  errno: number;
}

export class Request {
  readonly conn: ConnId;
  readonly route: number;
  readonly flags: number;
  readonly method: string;
  /** Raw path, not percent-decoded. */
  readonly path: string;
  /** Query string without '?' ('' when absent). */
  readonly query: string;
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
  readonly remoteAddress: string;
  readonly remotePort: number;
  /** The client ended its side (NSV_EV_HANGUP / NSV_EVF_EOF) or left; 'close' was emitted. */
  readonly closed: boolean;
  header(name: string): string | string[] | undefined;
  text(): string;
  json(): any;
  on(event: 'close', listener: () => void): this;
  once(event: 'close', listener: () => void): this;
  off(event: 'close', listener: () => void): this;
}

export class Response {
  readonly conn: ConnId;
  readonly req: Request;
  statusCode: number;
  readonly headersSent: boolean;
  readonly writableEnded: boolean;
  /** The connection closed before the reply. */
  readonly destroyed: boolean;
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
  /** Sends the reply; throws NSV_ESTATE when called twice. */
  end(body?: Body): this;
  json(value: unknown, status?: number): this;
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
  readyState: 0 | 1 | 2 | 3;
  /** Free for the application. */
  data: Record<string, any>;
  readonly bufferedAmount: number;
  send(data: string | Buffer | Uint8Array, opts?: { binary?: boolean }): void;
  ping(data?: string | Buffer): void;
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
  route(method: string, pattern: string, handler: Handler): this;
  get(pattern: string, handler: Handler): this;
  post(pattern: string, handler: Handler): this;
  put(pattern: string, handler: Handler): this;
  delete(pattern: string, handler: Handler): this;
  patch(pattern: string, handler: Handler): this;
  all(pattern: string, handler: Handler): this;
  fallback(handler: Handler): this;
  ws(pattern: string, handlers: WebSocketHandlers): this;
  broadcast(pattern: string, data: string | Buffer | Uint8Array): number;
  listen(port?: number, host?: string): Promise<number>;
  address(): { port: number } | null;
  close(timeoutMs?: number): Promise<void>;
  setOption(name: string, value: number | bigint | boolean): this;
  getOption(name: string): number;
  reply(conn: ConnId, status: number, headers?: Record<string, string | number> | null, body?: Body): void;
  closeConnection(conn: ConnId): void;
  on(event: 'listening', listener: (port: number) => void): this;
  on(event: 'close', listener: () => void): this;
  on(event: 'error', listener: (err: Error) => void): this;
  on(event: 'clientError', listener: (err: NanosrvError, conn: ConnId) => void): this;
  on(event: 'handlerError', listener: (err: unknown, req: Request | null, res: Response | null) => void): this;
}

export function createServer(handler?: Handler): Server;
export function createServer(opts: ServerOptions, handler?: Handler): Server;
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
export function logLevel(): number;
export function setLogLevel(level: number): void;
export function strerror(code: number): string;
export function errname(code: number): string;
