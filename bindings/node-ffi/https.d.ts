// Types of nanosrv/https: node:https's createServer on libnanosrv's TLS.
import * as https from 'https';
import * as http from 'http';
import { ServerOptions as HttpServerOptions, Server as HttpServer } from './http';

/** key, cert, ca, passphrase, requestCert, rejectUnauthorized are used; other TLS options are not. */
export interface ServerOptions extends HttpServerOptions, Pick<https.ServerOptions, 'key' | 'cert' | 'ca' | 'passphrase' | 'requestCert' | 'rejectUnauthorized'> {}

export class Server extends HttpServer {}

export function createServer(requestListener?: http.RequestListener): Server;
export function createServer(options: ServerOptions, requestListener?: http.RequestListener): Server;

export { request, get, Agent, globalAgent } from 'https';
export {
  IncomingMessage, ServerResponse, STATUS_CODES, METHODS, WebSocketServer, WebSocket,
} from './http';
