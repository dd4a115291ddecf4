#!/bin/bash
# Floods examples/server over a fresh Redis with wrk and counts the answers by status: the
# measurement behind "a flood never switches limiting off" (issue 16's closing note).
#
#   cargo build --release --all-features --example server
#   scripts/flood.sh target/release/examples/server local sliding-log 3000
#
# Arguments: the server binary, --on-store-error mode, --algorithm, connections. Needs
# redis-server, redis-cli and wrk (apt-get install wrk); limit 100/1h on one global key, 8 s.
set -euo pipefail
BIN=$1; MODE=$2; ALG=$3; CONNECTIONS=$4
HERE=$(cd "$(dirname "$0")" && pwd)
REDIS_PORT=$((7000 + RANDOM % 1000))
HTTP_PORT=$((8000 + RANDOM % 1000))
redis-server --port "$REDIS_PORT" --save '' --appendonly no --daemonize yes >/dev/null
trap 'redis-cli -p "$REDIS_PORT" shutdown nosave >/dev/null 2>&1 || true' EXIT
until redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1; do sleep 0.05; done
"$BIN" --bind "127.0.0.1:$HTTP_PORT" --redis "redis://127.0.0.1:$REDIS_PORT" \
    --algorithm "$ALG" --limit 100/1h --key global --on-store-error "$MODE" >/dev/null 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true; redis-cli -p "$REDIS_PORT" shutdown nosave >/dev/null 2>&1 || true' EXIT
until (exec 3<>"/dev/tcp/127.0.0.1/$HTTP_PORT") 2>/dev/null; do sleep 0.05; done
OUT=$(wrk -t2 -c"$CONNECTIONS" -d8s -s "$HERE/flood_count.lua" "http://127.0.0.1:$HTTP_PORT/" 2>&1)
TOTAL=$(echo "$OUT" | grep -oE "[0-9]+ requests in" | grep -oE "^[0-9]+")
echo "$MODE $ALG c=$CONNECTIONS: $(echo "$OUT" | grep STATUS) total=$TOTAL"
