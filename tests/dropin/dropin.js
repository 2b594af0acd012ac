// Node.js workers of the drop-in corpus (tests/dropin_corpus_test.go).
//
// usage: node dropin/dropin.js ROW LOCKADDR,LOCKADDR COUNTERADDR WORKERS CYCLES
//
// Runs WORKERS concurrent workers; worker w locks through LOCKADDR[w % 2]
// with the row's library (installed by npm in tests/dropin), unchanged,
// and does the critical section of the corpus on the plain redis-server at
// COUNTERADDR with its own ioredis client. Prints "FAIL <reason>" and exits
// 1 on the first error a worker meets.
"use strict";

const crypto = require("crypto");
const IORedis = require("ioredis");
const IORedis4 = require("ioredis4");
const redis4 = require("redis4");
const redis5 = require("redis5");

const RESOURCE = "dropin";

// The release script of the distributed-locks page of the Redis docs.
const RELEASE = `if redis.call("get",KEYS[1]) == ARGV[1] then
    return redis.call("del",KEYS[1])
else
    return 0
end`;
const RELEASE_SHA = crypto.createHash("sha1").update(RELEASE).digest("hex");

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function fail(what) {
  console.log("FAIL " + String(what).split(/\s+/).join(" ")); // one line
  process.exit(1);
}
process.on("unhandledRejection", (e) => fail("unhandled rejection: " + describe(e)));
process.on("uncaughtException", (e) => fail("uncaught exception: " + describe(e)));

// describe says what went wrong, with the server errors a library hides
// inside its own error (redlock's attempts).
function describe(e) {
  let s = (e && e.name ? e.name + ": " : "") + (e && e.message ? e.message : String(e));
  if (e && Array.isArray(e.attempts) && e.attempts.length > 0) {
    s += " [last attempt: " + String(e.lastAttemptError || "") + "]";
  }
  return s;
}

function hostPort(addr) {
  const i = addr.lastIndexOf(":");
  return { host: addr.slice(0, i), port: Number(addr.slice(i + 1)) };
}

// critical is the critical section: a read-modify-write of the counter;
// sem: an INCR (several holders at once are allowed).
async function critical(plain, w, c, sem, hold = 1) {
  const n = await plain.incr("inside");
  await plain.zadd("peak", "GT", n, "peak");
  await plain.set("held:" + w, c);
  if (sem) {
    await sleep(1);
    await plain.incr("counter");
  } else {
    const v = Number((await plain.get("counter")) || 0);
    await sleep(hold);
    await plain.set("counter", v + 1);
  }
  await plain.del("held:" + w);
  await plain.decr("inside");
}

function token() {
  return crypto.randomBytes(16).toString("hex");
}

// The docs' idiom from node-redis: SET NX PX, then the release script,
// by EVAL (even workers) or EVALSHA first with EVAL on NOSCRIPT (odd).
function redisio(redis) {
  return {
    async connect(addr) {
      const c = redis.createClient({ socket: hostPort(addr) });
      c.on("error", () => {});
      await c.connect();
      return c;
    },
    async loop(c, plain, w, cycles) {
      for (let i = 0; i < cycles; i++) {
        const tok = token();
        const deadline = Date.now() + 30000;
        while ((await c.set(RESOURCE, tok, { NX: true, PX: 10000 })) === null) {
          if (Date.now() > deadline) throw new Error("not acquired in 30 s");
          await sleep(5);
        }
        await critical(plain, w, i);
        const opts = { keys: [RESOURCE], arguments: [tok] };
        let got;
        if (w % 2 === 0) {
          got = await c.eval(RELEASE, opts);
        } else {
          try {
            got = await c.evalSha(RELEASE_SHA, opts);
          } catch (e) {
            if (!String(e.message).startsWith("NOSCRIPT")) throw e;
            got = await c.eval(RELEASE, opts);
          }
        }
        if (got !== 1) throw new Error(`the release script answered ${got}, want 1`);
      }
    },
  };
}

function ioredisClient(addr, Ctor = IORedis) {
  const c = new Ctor({ ...hostPort(addr), maxRetriesPerRequest: 0, lazyConnect: false });
  c.on("error", () => {});
  return c;
}

// redisSemaphore runs one of redis-semaphore's classes; make builds a lock.
function redisSemaphore(make, sem) {
  const opts = {
    lockTimeout: 10000,
    acquireTimeout: 30000,
    retryInterval: 5,
    refreshInterval: 1, // refresh while held, so that the refresh script runs too
  };
  return {
    async connect(addr) {
      return ioredisClient(addr);
    },
    async loop(c, plain, w, cycles) {
      const Lib = require("redis-semaphore");
      for (let i = 0; i < cycles; i++) {
        const lock = make(Lib, c, opts);
        await lock.acquire();
        await critical(plain, w, i, sem);
        await lock.release();
      }
    },
  };
}

const rows = {
  "redisio-node4": redisio(redis4),
  "redisio-node5": redisio(redis5),
  "redis-lock": {
    async connect(addr) {
      return redisio(redis4).connect(addr);
    },
    async loop(c, plain, w, cycles) {
      const lock = require("redis-lock")(c, 5);
      for (let i = 0; i < cycles; i++) {
        const done = await lock(RESOURCE, 10000);
        await critical(plain, w, i);
        await done();
      }
    },
  },
  "redis-semaphore-mutex": redisSemaphore((L, c, o) => new L.Mutex(c, RESOURCE, o), false),
  "redis-semaphore-semaphore": redisSemaphore((L, c, o) => new L.Semaphore(c, RESOURCE, 3, o), true),
  // 4 permits, 2 per holder: at most 2 holders.
  "redis-semaphore-multisemaphore": redisSemaphore((L, c, o) => new L.MultiSemaphore(c, RESOURCE, 4, 2, o), true),
  "redis-semaphore-redlockmutex": redisSemaphore((L, c, o) => new L.RedlockMutex([c], RESOURCE, o), false),
  "redis-semaphore-redlocksemaphore": redisSemaphore((L, c, o) => new L.RedlockSemaphore([c], RESOURCE, 3, o), true),
  redlock4: {
    async connect(addr) {
      return ioredisClient(addr);
    },
    async loop(c, plain, w, cycles) {
      const Redlock = require("redlock4");
      const redlock = new Redlock([c], { retryCount: 3000, retryDelay: 5, retryJitter: 5 });
      let errors = 0;
      redlock.on("clientError", (e) => {
        // redlock 4 retries on errors as on a held lock: a run of them
        // is the row's failure.
        if (++errors >= 20) fail(`worker ${w}: redlock clientError: ${describe(e)}`);
      });
      for (let i = 0; i < cycles; i++) {
        let lock = await redlock.lock(RESOURCE, 10000);
        lock = await lock.extend(10000);
        await critical(plain, w, i);
        await lock.unlock();
      }
    },
  },
  redlock5: {
    async connect(addr) {
      return ioredisClient(addr);
    },
    async loop(c, plain, w, cycles) {
      const Redlock = require("redlock5").default;
      const redlock = new Redlock([c], { retryCount: 3000, retryDelay: 5, retryJitter: 5 });
      for (let i = 0; i < cycles; i++) {
        let lock;
        try {
          lock = await redlock.acquire([RESOURCE], 10000);
          lock = await lock.extend(10000);
        } catch (e) {
          throw new Error(describe(e) + (await redlockVotes(e)));
        }
        await critical(plain, w, i);
        await lock.release();
      }
    },
  },
  // redlock-universal's using(): it extends the lock itself (its atomic
  // extend declines when too little ttl is left) and only aborts a signal
  // when an extension fails. Each worker's 100th cycle holds a 1.2 s lock
  // for 1.8 s: without the extension a second holder would enter.
  "redlock-universal": {
    async connect(addr) {
      return ioredisClient(addr);
    },
    async loop(c, plain, w, cycles) {
      const { createLock, IoredisAdapter } = require("redlock-universal");
      const adapter = new IoredisAdapter(c);
      for (let i = 0; i < cycles; i++) {
        const long = i === 100 || (cycles <= 100 && i === cycles - 1);
        const lock = createLock({ adapter, key: RESOURCE, ttl: long ? 1200 : 10000, retryAttempts: 6000, retryDelay: 5 });
        await lock.using(async (signal) => {
          await critical(plain, w, i, false, long ? 1800 : 1);
          if (signal.aborted) throw new Error("the lock was lost while held: " + describe(signal.reason));
        });
      }
    },
  },
  // redlock-universal's LockManager.acquireBatch: one script checks that
  // every key is free, then sets each to its own value, all or none; the
  // batch here is the resource and a second key.
  "redlock-universal-batch": {
    async connect(addr) {
      return ioredisClient(addr);
    },
    async loop(c, plain, w, cycles) {
      const { LockManager, IoredisAdapter } = require("redlock-universal");
      const manager = new LockManager({ nodes: [new IoredisAdapter(c)], defaultTTL: 10000, defaultRetryAttempts: 6000, defaultRetryDelay: 5 });
      for (let i = 0; i < cycles; i++) {
        const handles = await manager.acquireBatch([RESOURCE + ":batch", RESOURCE]);
        await critical(plain, w, i);
        const released = await manager.releaseBatch(handles);
        if (!released.every(Boolean)) throw new Error("releaseBatch answered " + JSON.stringify(released));
      }
    },
  },
  // @sesamecare-oss/redlock (a node-redlock 5 fork): its scripts first
  // SELECT the configured db with redis.pcall; using() extends the lock
  // while the routine runs. Like redlock-universal, each worker's 100th
  // cycle holds a 1.2 s lock for 1.8 s.
  "sesamecare-redlock": {
    async connect(addr) {
      return ioredisClient(addr);
    },
    async loop(c, plain, w, cycles) {
      const { Redlock } = require("@sesamecare-oss/redlock");
      const redlock = new Redlock([c], { retryCount: 6000, retryDelay: 5, retryJitter: 5 });
      for (let i = 0; i < cycles; i++) {
        const long = i === 100 || (cycles <= 100 && i === cycles - 1);
        try {
          await redlock.using([RESOURCE], long ? 1200 : 10000, async (signal) => {
            await critical(plain, w, i, false, long ? 1800 : 1);
            if (signal.aborted) throw new Error("the lock was lost while held: " + describe(signal.error));
          });
        } catch (e) {
          throw new Error(describe(e) + (await redlockVotes(e)));
        }
      }
    },
  },
  // node-redis-warlock on node-redis 3 (callbacks): SET NX PX, a
  // compare-and-delete script, and touch(), an extend whose ttl and value
  // travel in KEYS[2] and KEYS[3].
  "redis-warlock": {
    async connect(addr) {
      const redis3 = require("redis3");
      const c = redis3.createClient({ ...hostPort(addr), retry_strategy: () => undefined });
      c.on("error", () => {});
      return c;
    },
    async loop(c, plain, w, cycles) {
      const warlock = require("node-redis-warlock")(c);
      const lock = (key, ttl) =>
        new Promise((resolve, reject) =>
          warlock.optimistic(key, ttl, 6000, 5, (err, unlock) => (err ? reject(err) : resolve(unlock))),
        );
      for (let i = 0; i < cycles; i++) {
        const unlock = await lock(RESOURCE, 10000);
        const id = await new Promise((resolve, reject) => c.get(RESOURCE + ":lock", (err, v) => (err ? reject(err) : resolve(v))));
        const touched = await warlock.touch(RESOURCE, id, 10000);
        if (touched !== "OK") throw new Error(`touch answered ${touched}, want OK`);
        await critical(plain, w, i);
        const got = await new Promise((resolve, reject) => unlock((err, n) => (err ? reject(err) : resolve(n))));
        if (got !== 1) throw new Error(`unlock answered ${got}, want 1`);
      }
    },
  },
  "ioredis-lock": {
    async connect(addr) {
      return ioredisClient(addr, IORedis4);
    },
    async loop(c, plain, w, cycles) {
      const { createLock } = require("ioredis-lock");
      for (let i = 0; i < cycles; i++) {
        const lock = createLock(c, { timeout: 10000, retries: 6000, delay: 5 });
        await lock.acquire(RESOURCE);
        await lock.extend(10000);
        await critical(plain, w, i);
        await lock.release();
      }
    },
  },
  // simple-redis-mutex numbers its grants with INCR of one counter key
  // (its fencing token) and announces a release with a JSON message,
  // built with string.format, to waiters subscribed on a connection of
  // the first worker's proxy.
  "simple-redis-mutex": {
    async connect(addr) {
      return redisio(redis5).connect(addr);
    },
    async loop(c, plain, w, cycles) {
      const { lock } = require("simple-redis-mutex");
      for (let i = 0; i < cycles; i++) {
        const release = await lock(c, RESOURCE, { timeout: 10000, pollingInterval: 1000, failAfter: 60000 });
        const last = Number((await plain.get("fence")) || 0);
        if (!(release.fencingToken > last)) {
          throw new Error(`fencing token ${release.fencingToken} after ${last}, want it greater`);
        }
        await plain.set("fence", release.fencingToken);
        await critical(plain, w, i);
        await release();
      }
    },
  },
  // node-redis-lock passes its value and ttl in KEYS, and acquires with
  // SETNX then EXPIRE in one script.
  "node-redis-lock": {
    async connect(addr) {
      const Lock = require("node-redis-lock");
      const { host, port } = hostPort(addr);
      return new Lock({ namespace: "nrl", host, port });
    },
    async loop(lock, plain, w, cycles) {
      const call = (fn, ...args) => new Promise((resolve) => fn.call(lock, ...args, (e, ok) => resolve(e || ok)));
      for (let i = 0; i < cycles; i++) {
        const deadline = Date.now() + 30000;
        for (;;) {
          const got = await call(lock.acquire, RESOURCE, 10);
          if (got === true) break;
          if (!(got instanceof Error) || got.message !== "Locked.") throw got;
          if (Date.now() > deadline) throw new Error("not acquired in 30 s");
          await sleep(5);
        }
        const renewed = await call(lock.renew, RESOURCE, 10);
        if (renewed !== true) throw renewed;
        await critical(plain, w, i);
        const released = await call(lock.release, RESOURCE);
        if (released !== true) throw released;
      }
    },
  },
};

// redlockVotes lists the server errors of redlock 5's last attempt.
async function redlockVotes(e) {
  if (!e || !Array.isArray(e.attempts) || e.attempts.length === 0) return "";
  try {
    const stats = await e.attempts[e.attempts.length - 1];
    const errs = [...stats.votesAgainst.values()].map((x) => x && x.message);
    return " [votes against: " + errs.join("; ") + "]";
  } catch (x) {
    return "";
  }
}

async function main() {
  const [row, lockAddrs, counterAddr, workers, cycles] = process.argv.slice(2);
  const impl = rows[row];
  if (!impl) fail("unknown row " + row);
  const addrs = lockAddrs.split(",");
  const all = [];
  for (let w = 0; w < Number(workers); w++) {
    all.push(
      (async () => {
        const c = await impl.connect(addrs[w % addrs.length]);
        const plain = ioredisClient(counterAddr);
        try {
          await impl.loop(c, plain, w, Number(cycles));
        } catch (e) {
          fail(`worker ${w}: ${describe(e)}`);
        }
        plain.disconnect();
        if (c.disconnect) {
          await c.disconnect();
        } else if (c.quit) {
          c.quit();
        }
      })(),
    );
  }
  await Promise.all(all);
  console.log("done");
  process.exit(0);
}

main().catch((e) => fail(describe(e)));
