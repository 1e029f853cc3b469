#!/usr/bin/env bash
# Placement by speed against placement by memory, on this host (loopback):
# three ringlmd with memory for the whole model each, one of them held to a
# quarter of a core by a CPU cgroup (v1 cpu.cfs_quota_us, or v2 cpu.max).
# Prints the per-token time of a greedy stream through
#
#   two      the two unlimited nodes alone
#   speed    all three, --placement speed (the default)
#   memory   all three, --placement memory (the split before speed placement)
#
# with each run's plan, and the ratios to "two". The goal: speed <= 1.1x two.
# Needs root for the cgroup; without it (or without a cpu controller) it
# says so and exits 0 without measuring.
#
#   deploy/bench-placement.sh [MODEL.gguf] [TOKENS=64]
#   MODEL defaults to a synthetic tinyllama-1.1b Q8_0 (`ringlm synth`, 1.1 GB,
#   written once to $RINGLM_BENCH_DIR, default /tmp/ringlm-bench-models).
#   REPEATS=3 runs per setting (the best is kept); QUOTA_PCT=25.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
tokens=${2:-64}
quota_pct=${QUOTA_PCT:-25}
model=${1:-}
if [[ -z "$model" ]]; then
  dir=${RINGLM_BENCH_DIR:-/tmp/ringlm-bench-models}
  model="$dir/synth-tinyllama-1.1b-q8_0.gguf"
  if [[ ! -s "$model" ]]; then
    mkdir -p "$dir"
    "$build/cli/ringlm" synth --preset tinyllama-1.1b --type q8_0 -o "$model"
  fi
fi

# The cgroup: v1's cpu controller where it is mounted, else v2's.
cg=""
if [[ -w /sys/fs/cgroup/cpu ]]; then
  cg=/sys/fs/cgroup/cpu/ringlm-bench-$$
  mkdir "$cg"
  echo 100000 >"$cg/cpu.cfs_period_us"
  echo $((quota_pct * 1000)) >"$cg/cpu.cfs_quota_us"
elif [[ -f /sys/fs/cgroup/cgroup.controllers ]] && grep -qw cpu /sys/fs/cgroup/cgroup.controllers &&
  [[ -w /sys/fs/cgroup ]]; then
  echo +cpu >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || true
  cg=/sys/fs/cgroup/ringlm-bench-$$
  mkdir "$cg"
  echo "$((quota_pct * 1000)) 100000" >"$cg/cpu.max"
else
  echo "bench-placement: skipped: no writable CPU cgroup (v1 cpu or v2 cpu.max); run as root" >&2
  exit 0
fi

run=$(mktemp -d /tmp/ringlm-placement-XXXXXX)
base=$((47000 + RANDOM % 2000))
pids=()
stop_nodes() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  pids=()
}
cleanup() {
  stop_nodes
  rmdir "$cg" 2>/dev/null || true
  rm -rf "$run"
}
trap cleanup EXIT

# start_node NAME INDEX PLACEMENT LIMITED(0|1): one daemon; waits until it
# has measured its speed, so the next one measures on a quiet machine.
start_node() {
  local name=$1 i=$2 placement=$3 limited=$4 log="$run/$1.log"
  local args=(--model "$model" --grpc-host 127.0.0.1 --grpc-port $((base + i))
    --discovery-port "$base" --loopback-only --memory-mb 4000 --threads 1
    --placement "$placement" --state-dir "$run/state-$name" --insecure --log-level info)
  if [[ $limited -eq 1 ]]; then
    # Into the cgroup before exec, so the probe already runs under the quota.
    sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$cg" \
      "$build/daemon/ringlmd" "${args[@]}" >"$log" 2>&1 &
  else
    "$build/daemon/ringlmd" "${args[@]}" >"$log" 2>&1 &
  fi
  pids+=($!)
  for _ in $(seq 1 300); do
    grep -q "measured:" "$log" && break
    sleep 0.1
  done
  grep -o "measured: .*" "$log" | sed "s/^/  $name /" >&2
}

# measure NAME STAGES: waits for a plan of STAGES stages, then prints
# "ms_per_token plan" for the best of REPEATS greedy streams.
measure() {
  local stages=$1 plan=""
  for _ in $(seq 1 300); do
    plan=$("$build/cli/ringlm" status --json --node 127.0.0.1:$((base + 1)) --insecure 2>/dev/null |
      python3 -c 'import json,sys
d=json.load(sys.stdin); s=d["plan"]["stages"]
print(len(s), " ".join("%s[%d,%d)" % (x["node_id"], x["first_layer"], x["last_layer"]) for x in s))' \
      2>/dev/null || true)
    [[ "${plan%% *}" == "$stages" ]] && break
    sleep 0.1
  done
  sleep 2  # every node has applied the plan and loaded its layers
  local best=""
  for _ in $(seq 1 "${REPEATS:-3}"); do
    local line
    line=$("$build/cli/ringlm" generate --cluster 127.0.0.1:$((base + 1)) --insecure \
      --prompt "Once upon a time" --temp 0 -n "$tokens" --ignore-eos --timings 2>&1 >/dev/null |
      grep "first token")
    best=$(python3 -c 'import re,sys
m=re.search(r"([\d.]+) ms/token", sys.argv[1]); cur=float(m.group(1))
print(min(cur, float(sys.argv[2])) if sys.argv[2] else cur)' "$line" "$best")
  done
  echo "$best ${plan#* }"
}

echo "model $model, $tokens tokens, slow node at ${quota_pct}% of a core ($cg)" >&2
declare -A result
for setting in two speed memory; do
  placement=speed
  [[ $setting == memory ]] && placement=memory
  echo "== $setting" >&2
  start_node fast1 1 "$placement" 0
  start_node fast2 2 "$placement" 0
  if [[ $setting != two ]]; then start_node slow 3 "$placement" 1; fi
  # Speed placement leaves the slow node idle; memory placement gives it layers.
  want=2
  [[ $setting == memory ]] && want=3
  result[$setting]=$(measure "$want")
  stop_nodes
done
two_ms=${result[two]%% *}
printf "%-8s %13s %9s  %s\n" setting ms_per_token vs_two plan
for setting in two speed memory; do
  ms=${result[$setting]%% *}
  printf "%-8s %13.2f %8.2fx  %s\n" "$setting" "$ms" "$(python3 -c "print($ms / $two_ms)")" \
    "${result[$setting]#* }"
done
