"""Python workers of the drop-in corpus (tests/dropin_corpus_test.go).

usage: dropin.py ROW LOCKADDR,LOCKADDR COUNTERADDR WORKERS CYCLES

Runs WORKERS threads; worker w locks through LOCKADDR[w % 2] with redis-py
(Debian's python3-redis, as installed), unchanged, and does the critical
section of the corpus on the plain redis-server at COUNTERADDR. Prints
"FAIL <reason>" and exits 1 on the first error a worker meets.
"""

import os
import sys
import threading
import time

import redis

RESOURCE = "dropin"

# The release script of the distributed-locks page of the Redis docs.
RELEASE = """if redis.call("get",KEYS[1]) == ARGV[1] then
    return redis.call("del",KEYS[1])
else
    return 0
end"""


def client(addr):
    host, port = addr.rsplit(":", 1)
    return redis.Redis(host=host, port=int(port))


def critical(plain, w, c):
    """The critical section: a read-modify-write of the counter."""
    n = plain.incr("inside")
    plain.zadd("peak", {"peak": n}, gt=True)
    plain.set("held:%d" % w, c)
    v = int(plain.get("counter") or 0)
    time.sleep(0.001)
    plain.set("counter", v + 1)
    plain.delete("held:%d" % w)
    plain.decr("inside")


def token():
    return os.urandom(16).hex()


def redis_py_lock(r, plain, w, cycles):
    # The default: r.lock(name), no timeout (SET NX without an expiry).
    for c in range(cycles):
        lock = r.lock(RESOURCE, sleep=0.005)
        if not lock.acquire(blocking=True, blocking_timeout=30):
            raise RuntimeError("blocking acquire ran out after 30 s")
        critical(plain, w, c)
        lock.release()


def redis_py_lock_timeout(r, plain, w, cycles):
    # timeout, blocking acquire, extend and reacquire.
    for c in range(cycles):
        lock = r.lock(RESOURCE, timeout=10, sleep=0.005, blocking_timeout=30)
        if not lock.acquire():
            raise RuntimeError("blocking acquire ran out after 30 s")
        if not lock.owned():
            raise RuntimeError("owned() is False right after the acquire")
        if c % 2 == 0:
            lock.extend(5)
        else:
            lock.reacquire()
        critical(plain, w, c)
        lock.release()


def redis_py_pipeline(r, plain, w, cycles):
    # A transactional pipeline (MULTI/EXEC, redis-py's default) takes the
    # lock with SET NX PX and releases it with the docs' script.
    for c in range(cycles):
        tok = token()
        deadline = time.time() + 30
        while True:
            pipe = r.pipeline()
            pipe.set(RESOURCE, tok, nx=True, px=10000)
            if pipe.execute()[0]:
                break
            if time.time() > deadline:
                raise RuntimeError("not acquired in 30 s")
            time.sleep(0.005)
        critical(plain, w, c)
        pipe = r.pipeline()
        pipe.eval(RELEASE, 1, RESOURCE, tok)
        if pipe.execute()[0] != 1:
            raise RuntimeError("the release script did not delete the lock")


def acquire_set_nx(r, value):
    deadline = time.time() + 30
    while not r.set(RESOURCE, value, nx=True, px=10000):
        if time.time() > deadline:
            raise RuntimeError("not acquired in 30 s")
        time.sleep(0.005)


def redisio_py(r, plain, w, cycles):
    # SET NX PX + the docs' release script: even workers EVAL, odd ones
    # redis-py's Script (EVALSHA first, SCRIPT LOAD on NOSCRIPT).
    script = r.register_script(RELEASE)
    for c in range(cycles):
        tok = token()
        acquire_set_nx(r, tok)
        critical(plain, w, c)
        if w % 2 == 0:
            got = r.eval(RELEASE, 1, RESOURCE, tok)
        else:
            got = script(keys=[RESOURCE], args=[tok])
        if got != 1:
            raise RuntimeError("the release script answered %r, want 1" % got)


def const_set_del(r, plain, w, cycles):
    # The constant-value idiom: SET lock 1 NX PX 10000, DEL.
    for c in range(cycles):
        acquire_set_nx(r, "1")
        critical(plain, w, c)
        if r.delete(RESOURCE) != 1:
            raise RuntimeError("DEL of the held lock did not delete it")


def control_nolock(r, plain, w, cycles):
    # No lock at all: the negative control, which the harness must catch.
    for c in range(cycles):
        critical(plain, w, c)


ROWS = {
    "control-nolock": control_nolock,
    "redis-py-lock": redis_py_lock,
    "redis-py-lock-timeout": redis_py_lock_timeout,
    "redis-py-pipeline": redis_py_pipeline,
    "redisio-py": redisio_py,
    "const-set-del": const_set_del,
}


def main():
    row, lock_addrs, counter_addr, workers, cycles = sys.argv[1:6]
    run = ROWS[row]
    addrs = lock_addrs.split(",")
    failing = threading.Lock()

    def worker(w):
        try:
            r = client(addrs[w % len(addrs)])
            plain = client(counter_addr)
            run(r, plain, w, int(cycles))
        except Exception as e:  # the first failure is the row's verdict
            with failing:  # one FAIL line, on one line, then out
                msg = " ".join(("worker %d: %s: %s" % (w, type(e).__name__, e)).split())
                sys.stdout.write("FAIL " + msg + "\n")
                sys.stdout.flush()
                os._exit(1)

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(int(workers))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    print("done", flush=True)


if __name__ == "__main__":
    main()
