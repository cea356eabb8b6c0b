// Types of nanosrv/net: the node:net API on libnanosrv's raw TCP.
import { Duplex } from 'stream';
import { EventEmitter } from 'events';

export interface SocketConstructorOpts {
  allowHalfOpen?: boolean;
  readableHighWaterMark?: number;
  writableHighWaterMark?: number;
}

/** Outbound TLS: verified against ca (PEM) or the system bundle, and the host name, unless rejectUnauthorized is false. */
export interface ClientTlsOptions {
  ca?: string | Buffer | Array<string | Buffer>;
  rejectUnauthorized?: boolean;
}

export interface TcpConnectOpts extends SocketConstructorOpts {
  port: number;
  host?: string;
  timeout?: number;
  /** Connect with TLS (tls://). */
  tls?: boolean | ClientTlsOptions;
}

export class Socket extends Duplex {
  constructor(opts?: SocketConstructorOpts);
  connect(options: TcpConnectOpts, connectionListener?: () => void): this;
  connect(port: number, host?: string, connectionListener?: () => void): this;
  connect(port: number, connectionListener?: () => void): this;
  readonly connecting: boolean;
  readonly pending: boolean;
  readonly encrypted: boolean;
  readonly bytesRead: number;
  readonly bytesWritten: number;
  readonly bufferSize: number;
  readonly remoteAddress?: string;
  readonly remotePort?: number;
  readonly remoteFamily?: string;
  readonly localPort?: number;
  readonly readyState: 'opening' | 'open' | 'readOnly' | 'writeOnly' | 'closed';
  readonly timeout?: number;
  /** The connection id in the library (server.wakeup takes it or the socket). */
  readonly id: number | bigint | null;
  setNoDelay(noDelay?: boolean): this;
  setKeepAlive(enable?: boolean, initialDelay?: number): this;
  setTimeout(ms: number, callback?: () => void): this;
  /** Per-connection water marks of the library's output queue (nsv_set_water_marks). */
  setWaterMarks(high: number, low: number): this;
  address(): { port?: number; family?: string; address?: string };
  ref(): this;
  unref(): this;
  on(event: 'connect' | 'ready' | 'end' | 'drain' | 'timeout' | 'finish', listener: () => void): this;
  on(event: 'close', listener: (hadError: boolean) => void): this;
  on(event: 'data' | 'wakeup', listener: (data: Buffer) => void): this;
  on(event: 'error', listener: (err: Error) => void): this;
  on(event: string | symbol, listener: (...args: any[]) => void): this;
}
export { Socket as Stream };

export interface ServerOpts {
  allowHalfOpen?: boolean;
  pauseOnConnect?: boolean;
  noDelay?: boolean;
  /** I/O worker threads of the server (default 1). */
  threads?: number;
  backend?: 'koffi' | 'ffi-napi';
  /** tls:// with tls.createServer's names: PEM strings or Buffers. */
  tls?: { cert?: string | Buffer; key?: string | Buffer; passphrase?: string; ca?: string | Buffer | Array<string | Buffer>; requestCert?: boolean; rejectUnauthorized?: boolean };
  /** Or the library's options: tlsCertFile, tlsKeyFile, tlsCaFile, tlsVerifyClient, ... */
  [tlsOption: `tls${string}`]: unknown;
}

export interface AddressInfo { address: string; family: string; port: number }

export class Server extends EventEmitter {
  constructor(connectionListener?: (socket: Socket) => void);
  constructor(options?: ServerOpts, connectionListener?: (socket: Socket) => void);
  listen(port?: number, host?: string, backlog?: number, listeningListener?: () => void): this;
  listen(port?: number, host?: string, listeningListener?: () => void): this;
  listen(port?: number, listeningListener?: () => void): this;
  listen(options: { port?: number; host?: string }, listeningListener?: () => void): this;
  listen(listeningListener?: () => void): this;
  close(callback?: (err?: Error) => void): this;
  address(): AddressInfo | null;
  getConnections(cb: (error: Error | null, count: number) => void): this;
  /** A WAKEUP event for a connection: the socket and the server emit 'wakeup'. False when it is gone. */
  wakeup(socket: Socket | number | bigint, data?: string | Uint8Array): boolean;
  ref(): this;
  unref(): this;
  readonly listening: boolean;
  maxConnections: number | undefined;
  on(event: 'connection', listener: (socket: Socket) => void): this;
  on(event: 'listening' | 'close', listener: () => void): this;
  on(event: 'error', listener: (err: Error) => void): this;
  on(event: 'wakeup', listener: (id: number | bigint, data: Buffer) => void): this;
  on(event: string | symbol, listener: (...args: any[]) => void): this;
}

export function createServer(connectionListener?: (socket: Socket) => void): Server;
export function createServer(options?: ServerOpts, connectionListener?: (socket: Socket) => void): Server;
export function connect(options: TcpConnectOpts, connectionListener?: () => void): Socket;
export function connect(port: number, host?: string, connectionListener?: () => void): Socket;
export { connect as createConnection };
export function isIP(input: string): number;
export function isIPv4(input: string): boolean;
export function isIPv6(input: string): boolean;
