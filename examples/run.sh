#!/usr/bin/env bash
# make examples: start a --dev proxy (embedded masters) on a free port, run
# every example against it, and exit 0 only if all of them pass.
set -euo pipefail
cd "$(dirname "$0")"
GO=${GO:-go}
bin=$(mktemp -d)/redlock-proxy
(cd .. && $GO build -o "$bin" ./cmd/redlock-proxy)
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$bin" --dev --listen "127.0.0.1:$port" --metrics-listen off >/tmp/redlock-examples-proxy.log 2>&1 &
proxy=$!
trap 'kill $proxy 2>/dev/null; wait $proxy 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
  if python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), 0.2)" 2>/dev/null; then break; fi
  sleep 0.1
done

# The first python3 that imports redis-py: the one on PATH (a virtualenv's),
# else the system's (Debian's python3-redis installs for /usr/bin/python3).
python=""
for p in python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null && "$p" -c 'import redis' 2>/dev/null; then python=$p; break; fi
done

failed=0
run() {
  echo "== $*"
  if ! "$@"; then echo "!! FAILED: $*"; failed=1; fi
}
if [ -n "$python" ]; then
  run "$python" python/locks.py "$port"
  run "$python" python/election.py "$port"
else
  echo "!! FAILED: no python3 imports redis-py (pip install redis, or apt-get install python3-redis)"
  failed=1
fi
if [ ! -d node/node_modules/ioredis ]; then (cd node && npm install --no-audit --no-fund --no-package-lock >/dev/null); fi
run node node/locks.js "$port"
(cd go && run $GO run . "$port")
(cd go && run $GO run ./election "$port")
exit $failed
