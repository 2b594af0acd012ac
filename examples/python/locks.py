"""redlock-proxy from Python with redis-py: one short example per family.

Run against a proxy: python3 locks.py [port]   (default 6380)
Every step asserts what the proxy answers, so the script fails loudly if
the proxy does not behave as documented.
"""
import sys
import threading
import time
import uuid

import redis
from redis.exceptions import ResponseError

PORT = int(sys.argv[1]) if len(sys.argv) > 1 else 6380

# Turn off client-side retries of timed-out commands: a resent RLOCK would
# take a second grant. Keep the read timeout above any WAIT you use.
r = redis.Redis(port=PORT, decode_responses=True, socket_timeout=15, retry_on_timeout=False)


def protected_write(resource, fence, value):
    """Stand-in for the store you protect: it must refuse older fences."""
    print(f"  write {value!r} to {resource} with fence {fence}")


def lock_fence_extend_release():
    print("lock, fence, extend, release")
    token = uuid.uuid4().hex  # always pass TOKEN: a retry is then idempotent
    try:
        reply = r.execute_command("RLOCK", "invoice:42", 10000, "TOKEN", token)
    except ResponseError as e:
        if str(e).startswith("NOQUORUM"):
            # Too few masters answered: nothing is held. Retry later.
            raise SystemExit(f"no quorum: {e}")
        raise
    if reply is None:
        print("  held by someone else")  # nil: a quorum said it is taken
        return
    token, validity_ms, fence = reply
    started = time.monotonic()
    protected_write("invoice:42", fence, "paid")
    # Long work: extend before the validity runs out.
    validity_ms = r.execute_command("REXTEND", "invoice:42", token, 20000)
    assert validity_ms and validity_ms > 19000, validity_ms
    assert time.monotonic() - started < validity_ms / 1000
    assert r.execute_command("RUNLOCK", "invoice:42", token) == 1


def wait_for_a_lock():
    print("WAIT: block until the holder releases")
    token, _, _ = r.execute_command("RLOCK", "report", 5000)

    def release_soon():
        time.sleep(0.2)
        r.execute_command("RUNLOCK", "report", token)

    threading.Thread(target=release_soon).start()
    waiter = redis.Redis(port=PORT, decode_responses=True, socket_timeout=15)
    reply = waiter.execute_command("RLOCK", "report", 5000, "WAIT", 3000)
    assert reply is not None, "not granted within WAIT"
    print("  granted after the release, fence", reply[2])
    waiter.execute_command("RUNLOCK", "report", reply[0])


def multi():
    print("RMULTILOCK: several resources, all or nothing")
    token, _, fences = r.execute_command("RMULTILOCK", 10000, 2, "acct:1", "acct:2")
    print("  fences", fences)
    assert r.execute_command("RMULTIUNLOCK", token, "acct:1", "acct:2") == 1


def fair():
    print("RFAIRLOCK: waiters granted in arrival order")
    token, _, _ = r.execute_command("RFAIRLOCK", "queue", 10000)
    assert r.execute_command("RUNLOCK", "queue", token) == 1


def semaphore():
    print("RSEMACQUIRE: at most 2 at once")
    a = r.execute_command("RSEMACQUIRE", "api", 2, 10000)
    b = r.execute_command("RSEMACQUIRE", "api", 2, 10000)
    assert r.execute_command("RSEMACQUIRE", "api", 2, 10000) is None
    assert r.execute_command("RSEMCOUNT", "api") == 2
    for token, _ in (a, b):
        assert r.execute_command("RSEMRELEASE", "api", token) == 1


def autoextend():
    print("AUTOEXTEND: the proxy keeps it alive while this connection is open")
    c = r.client()  # one dedicated connection of the pool
    token = c.execute_command("RLOCK", "nightly", 1000, "AUTOEXTEND")[0]
    time.sleep(1.5)  # longer than the ttl: still held
    info = c.execute_command("RLOCKINFO", "nightly", token)
    info = dict(zip(info[::2], info[1::2]))
    assert info["held"] == 1 and info["autoextend"] == 1, info
    assert c.execute_command("RUNLOCK", "nightly", token) == 1
    c.close()


def read_write():
    print("RRLOCK: readers share, a writer waits for them")
    r1 = r.execute_command("RRLOCK", "config", 10000)[0]
    r2 = r.execute_command("RRLOCK", "config", 10000)[0]
    assert r.execute_command("RLOCK", "config", 1000) is None
    for t in (r1, r2):
        assert r.execute_command("RRUNLOCK", "config", t) == 1
    w = r.execute_command("RLOCK", "config", 1000)
    assert r.execute_command("RUNLOCK", "config", w[0]) == 1


def latch():
    print("RLATCH: wait until 3 workers arrived")
    assert r.execute_command("RLATCH", "job:7:py", 3, 10000) == 1
    for worker in ("a", "b", "c", "a"):  # a resent arrival counts once
        r.execute_command("RLATCHDOWN", "job:7:py", worker)
    assert r.execute_command("RLATCHCOUNT", "job:7:py") == 0
    assert r.execute_command("RLATCHWAIT", "job:7:py", 1000) == 1


if __name__ == "__main__":
    for step in (lock_fence_extend_release, wait_for_a_lock, multi, fair, semaphore,
                 autoextend, read_write, latch):
        step()
    print("python: all examples passed")
