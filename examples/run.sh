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

failed=0
run() {
  echo "== $*"
  if ! "$@"; then echo "!! FAILED: $*"; failed=1; fi
}
run /usr/bin/python3 python/locks.py "$port"
if [ ! -d node/node_modules/ioredis ]; then (cd node && npm install --no-audit --no-fund --no-package-lock >/dev/null); fi
run node node/locks.js "$port"
(cd go && run $GO run . "$port")
exit $failed
