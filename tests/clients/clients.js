// ioredis and node-redis (v4, v5, v6) against redlock-proxy, with default
// options and with a client name. Run by tests/clients_test.go:
// node clients.js PORT. Prints one JSON line per variant; exits non-zero
// with the reason on the first failure.
'use strict';
const assert = require('node:assert/strict');

const port = Number(process.argv[2]);

async function scenario(call, res) {
  const g = await call(['RLOCK', res, '10000']);
  assert.ok(Array.isArray(g) && g.length === 3, `grant ${JSON.stringify(g)}`);
  const [token, validity, fence] = g;
  assert.ok(Number(validity) > 0 && Number(validity) <= 10000, `validity ${validity}`);
  assert.ok(Number(fence) >= 1, `fence ${fence}`);
  assert.equal(await call(['RLOCK', res, '10000']), null);
  const v = await call(['REXTEND', res, String(token), '20000']);
  assert.ok(Number(v) > 0 && Number(v) <= 20000, `rextend ${v}`);
  assert.equal(Number(await call(['RUNLOCK', res, String(token)])), 1);
  assert.equal(Number(await call(['RUNLOCK', res, String(token)])), 0);
  await assert.rejects(call(['RLOCK', res, 'soon']), /value is not an integer or out of range/);
}

function report(client, variant) {
  console.log(JSON.stringify({ client, variant, ok: true }));
}

async function ioredis() {
  const Redis = require('ioredis');
  const version = require('ioredis/package.json').version;
  for (const [variant, opts] of [['default', {}], ['connectionName', { connectionName: 'io-worker' }]]) {
    const r = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 0, ...opts });
    await scenario((args) => r.call(...args), `io:${variant}`);
    if (opts.connectionName) assert.equal(await r.client('GETNAME'), 'io-worker');
    report(`ioredis ${version}`, variant);
    await r.quit();
  }
}

async function nodeRedis(mod) {
  const { createClient } = require(mod);
  const version = require(`${mod}/package.json`).version;
  for (const [variant, opts] of [['default', {}], ['name', { name: 'nr-worker' }]]) {
    const c = createClient({ socket: { host: '127.0.0.1', port, reconnectStrategy: false }, ...opts });
    c.on('error', () => {});
    await c.connect();
    await scenario((args) => c.sendCommand(args), `${mod}:${variant}`);
    if (opts.name) assert.equal(await c.sendCommand(['CLIENT', 'GETNAME']), 'nr-worker');
    report(`node-redis ${version}`, variant);
    await c.quit();
  }
}

(async () => {
  await ioredis();
  for (const mod of ['redis4', 'redis5', 'redis6']) await nodeRedis(mod);
})().catch((err) => {
  console.error(err && err.stack ? err.stack : String(err));
  process.exit(1);
});
