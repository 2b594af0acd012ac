// redlock-proxy from Node.js with ioredis: one short example per family.
//
// Run against a proxy: node locks.js [port]   (default 6380)
// Every step asserts what the proxy answers.
"use strict";
const assert = require("node:assert");
const crypto = require("node:crypto");
const Redis = require("ioredis");

const port = Number(process.argv[2] || 6380);
// One ioredis client is one connection: a blocking WAIT would stall every
// other command on it, so waits get their own client (duplicate()). Keep
// the command timeout above the WAIT, and no automatic resend of a
// timed-out RLOCK (maxRetriesPerRequest: 0).
const redis = new Redis({ port, maxRetriesPerRequest: 0 });

async function lockFenceExtendRelease() {
  console.log("lock, fence, extend, release");
  const token = crypto.randomUUID(); // always pass TOKEN: a retry is idempotent
  let reply;
  try {
    reply = await redis.call("RLOCK", "invoice:42", 10000, "TOKEN", token);
  } catch (e) {
    if (String(e.message).startsWith("NOQUORUM")) throw new Error("no quorum: nothing is held, retry later");
    throw e;
  }
  if (reply === null) return console.log("  held by someone else");
  const [, , fence] = reply;
  console.log(`  write to invoice:42 with fence ${fence} (the store refuses older fences)`);
  const validity = await redis.call("REXTEND", "invoice:42", token, 20000);
  assert(validity > 19000);
  assert.equal(await redis.call("RUNLOCK", "invoice:42", token), 1);
}

async function waitForALock() {
  console.log("WAIT: block until the holder releases");
  const [token] = await redis.call("RLOCK", "report", 5000);
  const waiter = redis.duplicate();
  setTimeout(() => redis.call("RUNLOCK", "report", token), 200);
  const reply = await waiter.call("RLOCK", "report", 5000, "WAIT", 3000);
  assert(reply, "not granted within WAIT");
  await waiter.call("RUNLOCK", "report", reply[0]);
  waiter.disconnect();
}

async function multi() {
  console.log("RMULTILOCK: several resources, all or nothing");
  const [token, , fences] = await redis.call("RMULTILOCK", 10000, 2, "acct:1", "acct:2");
  assert.equal(fences.length, 2);
  assert.equal(await redis.call("RMULTIUNLOCK", token, "acct:1", "acct:2"), 1);
}

async function fair() {
  console.log("RFAIRLOCK: waiters granted in arrival order");
  const [token] = await redis.call("RFAIRLOCK", "queue", 10000);
  assert.equal(await redis.call("RUNLOCK", "queue", token), 1);
}

async function semaphore() {
  console.log("RSEMACQUIRE: at most 2 at once");
  const a = await redis.call("RSEMACQUIRE", "api", 2, 10000);
  const b = await redis.call("RSEMACQUIRE", "api", 2, 10000);
  assert.equal(await redis.call("RSEMACQUIRE", "api", 2, 10000), null);
  for (const [token] of [a, b]) assert.equal(await redis.call("RSEMRELEASE", "api", token), 1);
}

async function autoextend() {
  console.log("AUTOEXTEND: the proxy keeps it alive while this connection is open");
  const c = redis.duplicate(); // a connection of its own
  const [token] = await c.call("RLOCK", "nightly", 1000, "AUTOEXTEND");
  await new Promise((r) => setTimeout(r, 1500));
  const info = await c.call("RLOCKINFO", "nightly", token);
  assert.equal(info[info.indexOf("autoextend") + 1], 1);
  assert.equal(await c.call("RUNLOCK", "nightly", token), 1);
  c.disconnect();
}

async function readWrite() {
  console.log("RRLOCK: readers share, a writer waits for them");
  const [r1] = await redis.call("RRLOCK", "config", 10000);
  const [r2] = await redis.call("RRLOCK", "config", 10000);
  assert.equal(await redis.call("RLOCK", "config", 1000), null);
  for (const t of [r1, r2]) assert.equal(await redis.call("RRUNLOCK", "config", t), 1);
}

async function latch() {
  console.log("RLATCH: wait until 3 workers arrived");
  assert.equal(await redis.call("RLATCH", "job:7:node", 3, 10000), 1);
  for (const w of ["a", "b", "c", "a"]) await redis.call("RLATCHDOWN", "job:7:node", w); // "a" twice counts once
  assert.equal(await redis.call("RLATCHWAIT", "job:7:node", 1000), 1);
}

(async () => {
  for (const step of [lockFenceExtendRelease, waitForALock, multi, fair, semaphore, autoextend, readWrite, latch]) {
    await step();
  }
  redis.disconnect();
  console.log("node: all examples passed");
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
