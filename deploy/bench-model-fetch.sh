#!/usr/bin/env bash
# How fast a node without the model file gets going (docs/model-fetch.md).
# Node A holds MODEL; node B starts with --model-from-peers and a larger
# --memory-mb, so it takes most layers. Prints, for one run:
#
#   fetched_mb  fetch_s  fetch_mb_per_s  copy_mb_per_s  share_of_copy  start_to_first_token_s
#
# copy_mb_per_s is a plain `cp` of MODEL (from the page cache) into the same
# folder B's state dir is in, so share_of_copy compares the fetch with the
# copy a user would otherwise make. start_to_first_token_s runs from B's
# start to the first token of a request that enters the cluster through B.
#
#   deploy/bench-model-fetch.sh MODEL.gguf [RUN_DIR] [THREADS=2]
#   Set INSECURE=1 to compare without TLS.
set -euo pipefail
cd "$(dirname "$0")/.."
# Arithmetic on decimals without bc (not on a fresh Debian): calc "1.5 / 3".
calc() { awk "BEGIN { print $1 }"; }
model=${1:?usage: deploy/bench-model-fetch.sh MODEL.gguf [RUN_DIR] [THREADS]}
run=${2:-$(mktemp -d /tmp/ringlm-fetch-bench-XXXXXX)}
threads=${3:-2}
build=${BUILD_DIR:-build}
mkdir -p "$run"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

base=$((20000 + RANDOM % 20000))
if [ "${INSECURE:-0}" = 1 ]; then
  security=(--insecure)
else
  "$build/cli/ringlm" keygen --out "$run/cluster.key" --force >/dev/null
  security=(--cluster-key "$run/cluster.key")
fi
rm -rf "$run/a" "$run/b" "$run/copy.gguf"
cat "$model" >/dev/null  # both the copy and the fetch read from the page cache

start=$(date +%s.%N)
cp "$model" "$run/copy.gguf"
sync "$run/copy.gguf"
copy_s=$(calc "$(date +%s.%N) - $start")
size_mb=$(calc "$(stat -c %s "$model") / 1000000")
rm -f "$run/copy.gguf"

common=(--grpc-host 127.0.0.1 --discovery-port "$base" --loopback-only --threads "$threads" --placement memory
        --log-level info "${security[@]}")
"$build/daemon/ringlmd" --model "$model" --grpc-port $((base + 1)) --memory-mb 1000 \
  --state-dir "$run/a" "${common[@]}" >"$run/a.log" 2>&1 &
pids+=($!)
sleep 2  # A is up and announcing
start=$(date +%s.%N)
"$build/daemon/ringlmd" --model-from-peers --grpc-port $((base + 2)) --memory-mb 16000 \
  --state-dir "$run/b" "${common[@]}" >"$run/b.log" 2>&1 &
pids+=($!)
# Until B serves: the first attempts fail while it learns the model and fetches.
for attempt in $(seq 1 3000); do
  "$build/cli/ringlm" generate --cluster 127.0.0.1:$((base + 2)) "${security[@]}" \
    --prompt "Once upon a time" --temp 0 -n 1 --timeout 60 >/dev/null 2>&1 && break
  [ "$attempt" -lt 3000 ] || { echo "bench-model-fetch: no token through B; see $run/b.log" >&2; exit 1; }
  sleep 0.2
done
first_token_s=$(calc "$(date +%s.%N) - $start")

summary=$(grep "model fetch: layers .*MB in" "$run/b.log" | tail -1)
fetched_mb=$(echo "$summary" | sed -E 's/.*: ([0-9.]+) MB in .*/\1/')
fetch_s=$(echo "$summary" | sed -E 's/.* tensors in ([0-9.]+) s .*/\1/')
copy_rate=$(calc "$size_mb / $copy_s")
fetch_rate=$(calc "$fetched_mb / $fetch_s")
printf "%-10s %-8s %-14s %-13s %-13s %s\n" fetched_mb fetch_s fetch_mb_per_s copy_mb_per_s \
  share_of_copy start_to_first_token_s
printf "%-10.1f %-8.2f %-14.1f %-13.1f %-13.2f %.2f\n" "$fetched_mb" "$fetch_s" "$fetch_rate" \
  "$copy_rate" "$(calc "$fetch_rate / $copy_rate")" "$first_token_s"
