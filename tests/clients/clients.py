"""redis-py against redlock-proxy, with the options applications use.

Run by tests/clients_test.go: python3 clients.py PORT. Prints one JSON line
per variant; exits non-zero with the reason on the first failure.
"""
import json
import sys

import redis

port = int(sys.argv[1])


def scenario(r, res):
    g = r.execute_command("RLOCK", res, 10000)
    assert g is not None and len(g) == 3, g
    token, validity, fence = g
    if isinstance(token, bytes):
        token = token.decode()
    assert 0 < validity <= 10000 and fence >= 1, g
    assert r.execute_command("RLOCK", res, 10000) is None, "held lock granted twice"
    v = r.execute_command("REXTEND", res, token, 20000)
    assert 0 < v <= 20000, v
    assert r.execute_command("RUNLOCK", res, token) == 1
    assert r.execute_command("RUNLOCK", res, token) == 0
    try:
        r.execute_command("RLOCK", res, "soon")
        raise AssertionError("bad ttl accepted")
    except redis.ResponseError as e:
        assert str(e) == "value is not an integer or out of range", str(e)
    assert r.ping()
    assert "redis_version" in r.info()


variants = [
    ("default", {}),
    ("client_name", {"client_name": "py-worker"}),
    ("db0", {"db": 0}),
    ("decode_responses", {"decode_responses": True}),
    ("username_password", {"username": "default", "password": "any"}),
]
for name, kwargs in variants:
    r = redis.Redis(host="127.0.0.1", port=port, **kwargs)
    scenario(r, "py:" + name)
    if "client_name" in kwargs:
        assert r.client_getname() in ("py-worker", b"py-worker")
    r.close()
    print(json.dumps({"client": "redis-py " + redis.__version__, "variant": name, "ok": True}))
