// nanosrv as an ES module: the CommonJS entry's exports, each a real named
// export (the utilities are made at run time, which Node's CommonJS export
// detection cannot see). Same objects as require('nanosrv').
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const nanosrv = require('./index.js');

export default nanosrv;
export const {
  createServer, serve, fetch, WebSocketClient, CloseEvent, loadLibrary, inheritedFds, Server, Request, Response, WebSocket, NanosrvError, constants,
  base64Encode, base64Decode, urlEncode, urlDecode, parseUrl, jsonString, jsonNumber, jsonInteger,
  jsonBoolean, millis, version, abiVersion, tlsAvailable, http2Available, logLevel, setLogLevel, parseForm, parseCookie,
  serializeCookie, mimeType, strerror, errname,
} = nanosrv;
