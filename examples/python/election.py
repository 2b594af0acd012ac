"""Leader election with redlock-proxy from Python (redis-py): a singleton job.

Run against a proxy: python3 election.py [port]   (default 6380)

Two workers campaign for the election "nightly-report". Only the leader
runs the job, one step at a time, and before each step it checks that it
still leads (RELECT PROCLAIM answers 1 only to the leader; 0, or -LOST for
an AUTOEXTEND leadership the proxy could not keep, means it lost: stop at
once). Each step passes the term to the store, which refuses older terms.
Every step asserts what the proxy answers.
"""
import sys
import threading
import time

import redis
from redis.exceptions import ResponseError

PORT = int(sys.argv[1]) if len(sys.argv) > 1 else 6380
ELECTION = "nightly-report"


def connect():
    # No client-side retries: a resent CAMPAIGN would be a second campaign.
    return redis.Redis(port=PORT, decode_responses=True, socket_timeout=15, retry_on_timeout=False)


class Store:
    """Stand-in for what the job writes to: it refuses an older term."""

    def __init__(self):
        self.term = 0
        self.lock = threading.Lock()

    def write(self, term, what):
        with self.lock:
            if term < self.term:
                raise RuntimeError(f"refused: term {term} < {self.term}")
            self.term = term
            print(f"  store: {what} (term {term})")


def still_leader(conn, token, status):
    """True while this worker leads; advertises its status as it goes."""
    try:
        return conn.execute_command("RELECT", "PROCLAIM", ELECTION, token, status) == 1
    except ResponseError as e:
        if str(e).startswith("LOST"):  # AUTOEXTEND could not keep it
            return False
        raise


def run_job(name, conn, token, term, store, steps, pause=0.0):
    """The singleton job: one step at a time, only while leader."""
    done = 0
    for step in range(steps):
        time.sleep(pause)  # a long step, or a stalled process
        if not still_leader(conn, token, f"{name} at step {step}"):
            print(f"  {name}: lost the leadership, stopping after {done} steps")
            return done
        store.write(term, f"{name} step {step}")
        done += 1
    return done


def main():
    store = Store()
    observer = connect()
    a, b = connect(), connect()

    # A wins; AUTOEXTEND keeps the leadership while A's connection is open.
    token_a, validity, term_a = a.execute_command("RELECT", "CAMPAIGN", ELECTION, 3000, "worker-a", "AUTOEXTEND")
    assert validity > 0 and term_a > 0
    value, term, ttl_ms = observer.execute_command("RELECT", "LEADER", ELECTION)
    assert (value, term) == ("worker-a", term_a) and ttl_ms > 0
    print(f"worker-a leads, term {term_a}")

    # B campaigns and waits; it is elected the moment A goes away.
    result = {}

    def campaign_b():
        result["b"] = b.execute_command("RELECT", "CAMPAIGN", ELECTION, 600, "worker-b", "WAIT", 10000)

    waiter = threading.Thread(target=campaign_b)
    waiter.start()
    time.sleep(0.2)

    assert run_job("worker-a", a, token_a, term_a, store, steps=3) == 3
    # A crashes: its connection closes, the proxy resigns for it.
    a.close()
    a.connection_pool.disconnect()

    waiter.join()
    token_b, validity, term_b = result["b"]
    assert term_b > term_a, (term_b, term_a)
    print(f"worker-b leads, term {term_b}")

    # RESP2 clients follow changes with WAITCHANGE (RESP3 ones can use
    # RELECT OBSERVE and get pushes).
    seen = observer.execute_command("RELECT", "WAITCHANGE", ELECTION, term_a, "WAIT", 1000)
    assert seen[1] == term_b, seen

    # B has no AUTOEXTEND and a 600 ms ttl, and each step takes 350 ms (a
    # stalled process): by its second step the leadership has lapsed, and
    # the check before that step tells it so.
    assert run_job("worker-b", b, token_b, term_b, store, steps=3, pause=0.35) == 1
    assert observer.execute_command("RELECT", "LEADER", ELECTION) is None
    # The store never went back a term.
    assert store.term == term_b
    print("python election: all examples passed")


if __name__ == "__main__":
    main()
