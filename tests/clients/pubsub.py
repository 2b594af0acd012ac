"""redis-py as a subscriber of redlock-proxy (run by tests/pubsub_test.go).

python3 pubsub.py PORT CHANNEL: subscribes to CHANNEL with redis-py's
PubSub (RESP2), prints "ready" once the proxy confirmed, then one line per
message ("message <data>"), and exits after the message "END".
"""
import sys

import redis

port, channel = int(sys.argv[1]), sys.argv[2]
p = redis.Redis(port=port, socket_timeout=60).pubsub()
p.subscribe(channel)
m = p.get_message(timeout=10)
assert m is not None and m["type"] == "subscribe" and m["data"] == 1, m
print("ready", flush=True)
for m in p.listen():
    assert m["type"] == "message", m
    data = m["data"].decode()
    print("message", data, flush=True)
    if data == "END":
        break
p.close()
