'use strict';
// nanosrv/http: node:http's server API on libnanosrv (see lib/http/index.js).
module.exports = require('./lib/http');
