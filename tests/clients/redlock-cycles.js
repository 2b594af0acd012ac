// node-redlock v5 (on ioredis) as a peer of the proxy in cmd/redlock-bench's
// cycles section: C concurrent workers on one event loop, each doing
// acquire -> release of one resource drawn from K, for a given time, on the
// same masters and keys (bench:<n>) as the other drivers. No retries: a
// refused acquire counts as not granted, as for the other drivers.
//
//   node redlock-cycles.js ADDRS C K DURATION_MS TTL_MS
//
// ADDRS is host:port,host:port,... Prints one JSON line: cycles, seconds,
// the process's CPU over those seconds (user + system, microseconds),
// latencies in microseconds (acq p50, p99, p999; unl p50, p99),
// not granted, errors and the first error.
'use strict';
const Redis = require('ioredis');
const { default: Redlock, ExecutionError } = require('redlock');

const [addrs, c, k, durationMs, ttl] = [
  process.argv[2].split(','), Number(process.argv[3]), Number(process.argv[4]),
  Number(process.argv[5]), Number(process.argv[6]),
];

function pct(sorted, p) {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
}

function micros(t0) {
  const d = process.hrtime.bigint() - t0;
  return Number(d / 1000n);
}

async function main() {
  const clients = addrs.map((a) => {
    const [host, port] = a.split(':');
    return new Redis({ host, port: Number(port), maxRetriesPerRequest: 0, enableOfflineQueue: true });
  });
  await Promise.all(clients.map((r) => r.ping()));
  const redlock = new Redlock(clients, { retryCount: 0, driftFactor: 0.01 });
  // A refused acquire is expected here; the library reports it as an error
  // event as well as a rejection.
  redlock.on('error', () => {});

  const acq = [];
  const unl = [];
  let cycles = 0;
  let notGranted = 0;
  let errors = 0;
  let firstErr = '';
  const t0 = process.hrtime.bigint();
  const cpu0 = process.cpuUsage();
  const deadline = Date.now() + durationMs;

  async function worker() {
    while (Date.now() < deadline) {
      const key = `bench:${Math.floor(Math.random() * k)}`;
      const a0 = process.hrtime.bigint();
      let lock;
      try {
        lock = await redlock.acquire([key], ttl);
      } catch (e) {
        acq.push(micros(a0));
        if (e instanceof ExecutionError) {
          notGranted++;
        } else {
          errors++;
          firstErr = firstErr || String(e);
        }
        continue;
      }
      acq.push(micros(a0));
      const u0 = process.hrtime.bigint();
      try {
        await lock.release();
      } catch (e) {
        errors++;
        firstErr = firstErr || String(e);
      }
      unl.push(micros(u0));
      cycles++;
    }
  }
  await Promise.all(Array.from({ length: c }, worker));
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  const used = process.cpuUsage(cpu0);
  const cpu = used.user + used.system;
  acq.sort((a, b) => a - b);
  unl.sort((a, b) => a - b);
  console.log(JSON.stringify({
    cycles, seconds, cpu,
    acq: [pct(acq, 0.5), pct(acq, 0.99), pct(acq, 0.999)],
    unl: [pct(unl, 0.5), pct(unl, 0.99)],
    notGranted, errors, firstErr,
  }));
  await Promise.all(clients.map((r) => r.quit()));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
