#!/usr/bin/env bash
# Decode latency through a ring of 1..N ringlmd processes on this host
# (loopback only), for one model, with mutual TLS (a fresh cluster key) and,
# side by side in the same run, with --insecure. Prints one row per security
# mode and cluster size:
#
#   security  nodes  ttft_ms  ms_per_token  tokens_per_s  per_hop_ms
#
# per_hop_ms is (ms_per_token - ms_per_token at 1 node) / (nodes - 1): the
# cost a token pays per extra gRPC hop on loopback. Each figure is the best
# of REPEATS runs (default 3).
#
#   deploy/bench-cluster.sh MODEL.gguf [MAX_NODES=3] [TOKENS=128] [THREADS=1]
#   MODES="tls insecure" (default) chooses the security modes; REPEATS=3.
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:?usage: deploy/bench-cluster.sh MODEL.gguf [MAX_NODES] [TOKENS] [THREADS]}
max_nodes=${2:-3}
tokens=${3:-128}
threads=${4:-1}
build=${BUILD_DIR:-build}
run=$(mktemp -d /tmp/ringlm-bench-XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$run"
}
trap cleanup EXIT

base=$((20000 + RANDOM % 20000))
"$build/cli/ringlm" keygen --out "$run/cluster.key" >/dev/null
printf "%-9s %-6s %9s %13s %13s %11s\n" security nodes ttft_ms ms_per_token tokens_per_s per_hop_ms
for mode in ${MODES:-tls insecure}; do
case "$mode" in
  tls) security=(--cluster-key "$run/cluster.key") ;;
  insecure) security=(--insecure) ;;
  *) echo "bench-cluster: unknown mode '$mode' (tls or insecure)" >&2; exit 2 ;;
esac
one_node=""
for n in $(seq 1 "$max_nodes"); do
  pids=()
  for i in $(seq 1 "$n"); do
    "$build/daemon/ringlmd" --model "$model" --grpc-host 127.0.0.1 --grpc-port $((base + i)) \
      --discovery-port "$base" --loopback-only --memory-mb 4000 --placement memory --threads "$threads" \
      --state-dir "$run/s$n-$i" --ctx-size 2048 --log-level warn "${security[@]}" \
      >"$run/log-$mode-$n-$i" 2>&1 &
    pids+=($!)
  done
  for _ in $(seq 1 200); do
    stages=$("$build/cli/ringlm" status --json --node 127.0.0.1:$((base + 1)) "${security[@]}" 2>/dev/null |
      python3 -c 'import json,sys; print(len(json.load(sys.stdin)["plan"]["stages"]))' 2>/dev/null || echo 0)
    [ "$stages" = "$n" ] && break
    sleep 0.1
  done
  sleep 1  # every node applies the plan
  best=""
  for _ in $(seq 1 "${REPEATS:-3}"); do
    line=$("$build/cli/ringlm" generate --cluster 127.0.0.1:$((base + 1)) "${security[@]}" --prompt "Once upon a time" \
      --temp 0 -n "$tokens" --ignore-eos --timings 2>&1 >/dev/null | grep "first token")
    best=$(python3 - "$line" "$best" <<'PY'
import re, sys
line, best = sys.argv[1], sys.argv[2]
m = re.search(r"after ([\d.]+) ms .* ([\d.]+) ms/token", line)
cur = (float(m.group(1)), float(m.group(2)))
if best:
    b = tuple(map(float, best.split()))
    cur = min(cur, b, key=lambda x: x[1])
print(f"{cur[0]} {cur[1]}")
PY
)
  done
  read -r ttft mspt <<<"$best"
  [ -z "$one_node" ] && one_node=$mspt
  python3 - "$mode" "$n" "$ttft" "$mspt" "$one_node" <<'PY'
import sys
mode, n = sys.argv[1], int(sys.argv[2])
ttft, mspt, one = float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
hop = (mspt - one) / (n - 1) if n > 1 else 0.0
print(f"{mode:<9} {n:<6} {ttft:9.2f} {mspt:13.3f} {1000/mspt:13.1f} {hop:11.3f}")
PY
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
done
done
