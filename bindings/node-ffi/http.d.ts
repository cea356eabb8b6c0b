// Types of nanosrv/http: node:http's server API on libnanosrv. The request
// and response objects have node's types; the server adds nanosrv's options
// and its WebSocket endpoints.
import * as http from 'http';
import { EventEmitter } from 'events';
import { Backend } from './index';

export interface ServerOptions extends http.ServerOptions {
  /** FFI backend (default koffi, or NANOSRV_BACKEND). */
  backend?: Backend;
  /** Path of libnanosrv.so.1 (default NANOSRV_LIBRARY, then next to the package, then the system). */
  library?: string;
  /** Library worker threads (default 1, 0 = one per CPU). */
  threads?: number;
  /** Library options in camelCase (maxBody, maxConns, maxOutput, ...), applied last. */
  nanosrv?: Record<string, number | boolean | string>;
}

export class Server extends http.Server {
  /** listen({ port, host, fd, proxyProtocol, proxyTimeoutMs, proxyFrom, allow, deny }[, cb]). */
  listen(options: import('./index').ListenOptions, cb?: () => void): this;
  listen(port?: number, hostname?: string, backlog?: number, listeningListener?: () => void): this;
  listen(port?: number, hostname?: string, listeningListener?: () => void): this;
  listen(port?: number, listeningListener?: () => void): this;
  /** The core server's metrics and Prometheus text (after listen). */
  metrics(worker?: number): import('./index').Metrics;
  metricsText(prefix?: string, opts?: { perWorker?: boolean }): string;
  metricsHandler(opts?: { prefix?: string; perWorker?: boolean }): http.RequestListener;
  /** True from close() on. */
  readonly draining: boolean;
  readinessHandler(): http.RequestListener;
  on(event: 'access', listener: (record: import('./index').AccessRecord) => void): this;
  on(event: string | symbol, listener: (...args: any[]) => void): this;
  /** A WebSocket endpoint answered by the library (before listen): nanosrv's server.ws() handlers. */
  ws(pattern: string, handlers: import('./index').WebSocketHandlers): this;
  broadcast(pattern: string, data: string | Uint8Array): number;
}

export function createServer(requestListener?: http.RequestListener): Server;
export function createServer(options: ServerOptions, requestListener?: http.RequestListener): Server;

/** The `ws` package's WebSocket (server side), for nanosrv/http connections. */
export class WebSocket extends EventEmitter {
  static readonly CONNECTING: 0;
  static readonly OPEN: 1;
  static readonly CLOSING: 2;
  static readonly CLOSED: 3;
  readonly readyState: 0 | 1 | 2 | 3;
  readonly protocol: string;
  readonly url: string;
  readonly bufferedAmount: number;
  send(data: string | Uint8Array | ArrayBuffer, cb?: (err?: Error) => void): void;
  send(data: string | Uint8Array | ArrayBuffer, opts: { binary?: boolean }, cb?: (err?: Error) => void): void;
  ping(data?: string | Uint8Array, mask?: boolean, cb?: (err?: Error) => void): void;
  close(code?: number, reason?: string): void;
  terminate(): void;
  on(event: 'message', listener: (data: Buffer, isBinary: boolean) => void): this;
  on(event: 'close', listener: (code: number, reason: Buffer) => void): this;
  on(event: string | symbol, listener: (...args: any[]) => void): this;
}

/** The `ws` package's WebSocketServer shape: { server, path } or { noServer: true } + handleUpgrade. */
export class WebSocketServer extends EventEmitter {
  static WebSocket: typeof WebSocket;
  constructor(options: { server?: Server; path?: string; noServer?: boolean;
    handleProtocols?: (protocols: Set<string>, req: http.IncomingMessage) => string | false }, callback?: () => void);
  readonly clients: Set<WebSocket>;
  shouldHandle(req: http.IncomingMessage): boolean;
  handleUpgrade(req: http.IncomingMessage, socket: import('stream').Duplex | object, head: Buffer,
    cb: (ws: WebSocket, req: http.IncomingMessage) => void): void;
  close(cb?: () => void): void;
  on(event: 'connection', listener: (ws: WebSocket, req: http.IncomingMessage) => void): this;
  on(event: string | symbol, listener: (...args: any[]) => void): this;
}

export {
  IncomingMessage, ServerResponse, STATUS_CODES, METHODS, request, get, Agent, globalAgent,
  ClientRequest, OutgoingMessage, validateHeaderName, validateHeaderValue, maxHeaderSize, RequestListener,
} from 'http';
