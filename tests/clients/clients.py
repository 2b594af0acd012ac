"""redis-py against redlock-proxy, with the options applications use.

Run by tests/clients_test.go: python3 clients.py PORT [auth]. Prints one
JSON line per variant; exits non-zero with the reason on the first failure.
With "auth" the proxy requires authentication (tests/security_test.go's
users) and the variants log in with redis-py's username/password options.
"""
import json
import sys

import redis

port = int(sys.argv[1])
auth = len(sys.argv) > 2 and sys.argv[2] == "auth"


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


if auth:
    variants = [
        ("user_password", {"username": "billing", "password": "billing-pw"}, "billing:py"),
        ("user_password_decode", {"username": "billing", "password": "billing-pw", "decode_responses": True}, "billing:py2"),
        ("default_password", {"password": "default-pw"}, "py:default"),
    ]
else:
    variants = [
        ("default", {}, None),
        ("client_name", {"client_name": "py-worker"}, None),
        ("db0", {"db": 0}, None),
        ("decode_responses", {"decode_responses": True}, None),
        ("username_password", {"username": "default", "password": "any"}, None),
    ]
for name, kwargs, res in variants:
    r = redis.Redis(host="127.0.0.1", port=port, **kwargs)
    scenario(r, res or "py:" + name)
    if "client_name" in kwargs:
        assert r.client_getname() in ("py-worker", b"py-worker")
    if kwargs.get("username") == "billing":
        try:
            r.execute_command("RLOCK", "orders:py", 1000)
            raise AssertionError("resource outside the namespace granted")
        except redis.ResponseError as e:
            assert "NOPERM" in str(e) or "No permissions" in str(e), str(e)
    r.close()
    print(json.dumps({"client": "redis-py " + redis.__version__, "variant": name, "ok": True}))

if auth:
    for kwargs in ({"username": "billing", "password": "wrong"}, {"password": "wrong"}):
        r = redis.Redis(host="127.0.0.1", port=port, **kwargs)
        try:
            r.ping()
            raise AssertionError("wrong password accepted: %r" % (kwargs,))
        except redis.AuthenticationError:
            pass
        except redis.ResponseError as e:  # redis-py 4.3 raises WRONGPASS as is
            assert str(e).startswith("WRONGPASS"), str(e)
        r.close()
    r = redis.Redis(host="127.0.0.1", port=port)
    try:
        r.execute_command("RLOCK", "billing:x", 1000)
        raise AssertionError("unauthenticated RLOCK served")
    except redis.AuthenticationError:
        pass  # redis-py maps NOAUTH to AuthenticationRequired (a subclass)
    except redis.ResponseError as e:
        assert str(e).startswith("Authentication required"), str(e)
    r.close()
    print(json.dumps({"client": "redis-py " + redis.__version__, "variant": "wrong_and_missing", "ok": True}))
