#!/usr/bin/env bash
# A ringlm cluster of N daemons on this machine, on loopback only.
#
#   deploy/local-cluster.sh N [--model PATH] [--api-port P] [--base-port B]
#                             [--run-dir DIR] [--build-dir DIR] [--foreground]
#                             [--cluster-key FILE | --insecure]
#   deploy/local-cluster.sh stop [--run-dir DIR]
#   deploy/local-cluster.sh status [--run-dir DIR]
#
# Node K (1..N) is one ringlmd on 127.0.0.1 with --loopback-only, gRPC port
# B+K, discovery port B (default B: 47800, so gRPC 47801, 47802, ...), a
# --memory-mb of 4000, 2000, 3000, ... (cycled, so the layer split is uneven
# on purpose, with --placement memory: the nodes share this machine's CPU, so
# their measured speeds differ only by noise) and its own --state-dir. Node 1 is the head: it serves the
# OpenAI-compatible API and the web chat page on 127.0.0.1:P (default 8080).
#
# Every node runs with one cluster key: --cluster-key FILE, else
# $RINGLM_CLUSTER_KEY_FILE, else RUN_DIR/cluster.key, made with `ringlm keygen`
# when missing. --insecure runs without one (no TLS, no authentication).
#
# The run directory (default: $RINGLM_LOCAL_RUN or /tmp/ringlm-local) holds
# cluster.key, nodeK/ringlmd.log, nodeK/ringlmd.pid and nodeK/state. The script waits until
# http://127.0.0.1:P/health answers 200 (60 s at most), then prints how to use
# the cluster. With --foreground it stays attached and Ctrl-C stops every
# daemon it started; without it, the daemons keep running until
# `deploy/local-cluster.sh stop`.
#
# Environment: RINGLM_MODEL (default model), RINGLM_LOCAL_RUN (run directory),
# RINGLM_LOCAL_MEMORY (comma-separated --memory-mb list, default 4000,2000,3000),
# RINGLMD_EXTRA_ARGS (more ringlmd flags for every node, split on spaces).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly REPO
readonly SELF="$REPO/deploy/local-cluster.sh"
readonly MAX_NODES=64
readonly READY_TIMEOUT_S=60

log() { echo "local-cluster: $*" >&2; }
die() { log "error: $*"; exit 1; }

usage() {
  cat >&2 <<EOF
usage: $0 N [--model PATH] [--api-port P] [--base-port B] [--run-dir DIR]
                 [--build-dir DIR] [--foreground]
       $0 stop [--run-dir DIR]
       $0 status [--run-dir DIR]

Starts N ringlmd daemons on 127.0.0.1 (--loopback-only): node K has gRPC port
B+K, all share discovery port B, node 1 serves the API on 127.0.0.1:P.

  --model PATH     GGUF model (default: \$RINGLM_MODEL, else
                   ../shared/models/stories260K-f32.gguf next to the repo)
  --api-port P     API and web page port of the head (default: 8080)
  --base-port B    discovery port; gRPC ports are B+1..B+N (default: 47800)
  --run-dir DIR    logs, pid files and state dirs (default: \$RINGLM_LOCAL_RUN
                   or /tmp/ringlm-local)
  --build-dir DIR  build tree holding daemon/ringlmd and cli/ringlm
                   (default: $REPO/build)
  --foreground     stay attached; Ctrl-C stops every daemon
  --cluster-key F  the cluster key (default: \$RINGLM_CLUSTER_KEY_FILE, else
                   RUN_DIR/cluster.key, created when missing)
  --insecure       no cluster key: plaintext, anyone on the network can join
stop               stops the daemons recorded in the run directory
status             shows the daemons of the run directory and the cluster
EOF
  exit 2
}

# ---------------------------------------------------------------- helpers

is_number() { [[ "$1" =~ ^[0-9]+$ ]]; }

# True when pid $1 is alive (not a zombie) and runs ringlmd: a pid file never
# makes us signal a process that merely reused the number.
is_ringlmd() {
  local pid="$1" state
  is_number "$pid" || return 1
  [[ -r "/proc/$pid/cmdline" ]] || return 1
  state="$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || echo X)"
  [[ "$state" != Z && "$state" != X ]] || return 1
  { tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null | grep -q 'ringlmd'
}

# Like is_ringlmd, with bash builtins only (no child process a Ctrl-C could
# kill mid-check): pid $1 exists and is not a zombie.
pid_alive() {
  local stat=""
  is_number "$1" || return 1
  { read -r stat <"/proc/$1/stat"; } 2>/dev/null || return 1
  stat="${stat##*) }"
  [[ -n "$stat" && "${stat:0:1}" != Z ]]
}

# SIGTERM to the given pids, up to 10 s of grace, then SIGKILL.
stop_pids() {
  local pids=("$@") pid i alive
  [[ ${#pids[@]} -gt 0 ]] || return 0
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for ((i = 0; i < 100; ++i)); do
    alive=0
    for pid in "${pids[@]}"; do
      if pid_alive "$pid"; then alive=1; fi
    done
    [[ $alive -eq 1 ]] || return 0
    sleep 0.1
  done
  for pid in "${pids[@]}"; do
    if is_ringlmd "$pid"; then
      log "pid $pid did not stop on SIGTERM; sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  sleep 0.2
}

# Live ringlmd pids recorded under run directory $1, one per line.
recorded_pids() {
  local f pid
  shopt -s nullglob
  for f in "$1"/node*/ringlmd.pid; do
    pid="$(cat "$f" 2>/dev/null || true)"
    if is_ringlmd "$pid"; then echo "$pid"; fi
  done
  shopt -u nullglob
}

# Stops the daemons recorded under run directory $1 and removes their pid files.
stop_run_dir() {
  local run_dir="$1" pids=()
  mapfile -t pids < <(recorded_pids "$run_dir")
  if [[ ${#pids[@]} -gt 0 ]]; then
    log "stopping ringlmd pids ${pids[*]}"
    stop_pids "${pids[@]}"
  fi
  rm -f "$run_dir"/node*/ringlmd.pid
}

# True when something listens on TCP port $1 / UDP port $1 (any address).
tcp_in_use() {
  if command -v ss >/dev/null 2>&1; then
    [[ -n "$(ss -Hltn "sport = :$1" 2>/dev/null)" ]]
  else
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
  fi
}
udp_in_use() {
  command -v ss >/dev/null 2>&1 || return 1
  [[ -n "$(ss -Hlun "sport = :$1" 2>/dev/null)" ]]
}

# Prints the last lines of node $2's log under run directory $1.
log_tail() {
  local file="$1/node$2/ringlmd.log"
  log "node $2: last lines of $file:"
  if [[ -f "$file" ]]; then tail -n 25 "$file" | sed 's/^/    /' >&2; else log "    (no log)"; fi
}

# The plan's stages as node $2 (gRPC port) sees it, in one line of JSON
# ("" when the node does not answer); $1 is the ringlm binary.
plan_stages() {
  # shellcheck disable=SC2086  # $SECURITY_ARGS is one or two words on purpose
  "$1" status --node "127.0.0.1:$2" $SECURITY_ARGS --json 2>/dev/null | grep -o '"stages":\[[^]]*\]' | head -n 1 || true
}

# True when all $3 nodes (gRPC ports $2+1..$2+$3) see the same plan and that
# plan has $3 stages; $1 is the ringlm binary.
cluster_converged() {
  local ringlm="$1" base="$2" n="$3" head k
  head="$(plan_stages "$ringlm" $((base + 1)))"
  [[ -n "$head" ]] || return 1
  [[ "$(grep -o '"first_layer"' <<<"$head" | wc -l)" -ge "$n" ]] || return 1
  for ((k = 2; k <= n; ++k)); do
    [[ "$(plan_stages "$ringlm" $((base + k)))" == "$head" ]] || return 1
  done
}

health_code() {
  curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$1/health" 2>/dev/null || true
}

# ---------------------------------------------------------------- commands

default_run_dir() { echo "${RINGLM_LOCAL_RUN:-/tmp/ringlm-local}"; }

cmd_stop() {
  local run_dir
  run_dir="$(default_run_dir)"
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --run-dir) [[ $# -ge 2 ]] || die "--run-dir needs a path"; run_dir="$2"; shift 2 ;;
      -h|--help) usage ;;
      *) die "stop: unknown option '$1'" ;;
    esac
  done
  if [[ ! -d "$run_dir" ]]; then
    log "nothing to stop: no run directory $run_dir"
    return 0
  fi
  stop_run_dir "$run_dir"
  log "stopped (run dir $run_dir)"
}

cmd_status() {
  local run_dir f pid node grpc_port=""
  run_dir="$(default_run_dir)"
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --run-dir) [[ $# -ge 2 ]] || die "--run-dir needs a path"; run_dir="$2"; shift 2 ;;
      -h|--help) usage ;;
      *) die "status: unknown option '$1'" ;;
    esac
  done
  shopt -s nullglob
  for f in "$run_dir"/node*/ringlmd.pid; do
    pid="$(cat "$f" 2>/dev/null || true)"
    node="$(basename "$(dirname "$f")")"
    if is_ringlmd "$pid"; then echo "$node: ringlmd pid $pid running"
    else echo "$node: ringlmd pid $pid not running"; fi
  done
  shopt -u nullglob
  [[ -f "$run_dir/cluster.env" ]] || { echo "no cluster recorded in $run_dir"; return 0; }
  local ringlm
  # shellcheck source=/dev/null
  grpc_port="$(. "$run_dir/cluster.env" && echo "$GRPC_PORT_1")"
  # shellcheck source=/dev/null
  ringlm="$(. "$run_dir/cluster.env" && echo "$RINGLM_BIN")"
  local security
  # shellcheck source=/dev/null
  security="$(. "$run_dir/cluster.env" && echo "$SECURITY")"
  # shellcheck disable=SC2086  # one or two words on purpose
  "$ringlm" status --node "127.0.0.1:$grpc_port" $security || true
}

cmd_up() {
  [[ $# -ge 1 ]] || usage
  local n="$1"; shift
  if ! is_number "$n" || [[ "$n" -lt 1 || "$n" -gt $MAX_NODES ]]; then
    die "N must be a number of nodes, 1..$MAX_NODES, got '$n' (see --help)"
  fi

  local model="${RINGLM_MODEL:-$REPO/../shared/models/stories260K-f32.gguf}"
  local api_port=8080 base_port=47800 build_dir="$REPO/build" foreground=0 run_dir
  local key="${RINGLM_CLUSTER_KEY_FILE:-}" insecure=0
  run_dir="$(default_run_dir)"
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --model) [[ $# -ge 2 ]] || die "--model needs a path"; model="$2"; shift 2 ;;
      --api-port) [[ $# -ge 2 ]] || die "--api-port needs a number"; api_port="$2"; shift 2 ;;
      --base-port) [[ $# -ge 2 ]] || die "--base-port needs a number"; base_port="$2"; shift 2 ;;
      --run-dir) [[ $# -ge 2 ]] || die "--run-dir needs a path"; run_dir="$2"; shift 2 ;;
      --build-dir) [[ $# -ge 2 ]] || die "--build-dir needs a path"; build_dir="$2"; shift 2 ;;
      --foreground) foreground=1; shift ;;
      --cluster-key) [[ $# -ge 2 ]] || die "--cluster-key needs a file"; key="$2"; shift 2 ;;
      --insecure) insecure=1; shift ;;
      -h|--help) usage ;;
      *) die "unknown option '$1' (see --help)" ;;
    esac
  done
  [[ $insecure -eq 0 || -z "$key" ]] || die "--insecure and a cluster key exclude each other"
  if ! is_number "$api_port" || [[ "$api_port" -lt 1 || "$api_port" -gt 65535 ]]; then
    die "--api-port must be 1..65535, got '$api_port'"
  fi
  if ! is_number "$base_port" || [[ "$base_port" -lt 1 || $((base_port + n)) -gt 65535 ]]; then
    die "--base-port must leave room for $n gRPC ports below 65536, got '$base_port'"
  fi

  # Binaries.
  local ringlmd="$build_dir/daemon/ringlmd" ringlm="$build_dir/cli/ringlm"
  if [[ ! -x "$ringlmd" || ! -x "$ringlm" ]]; then
    die "binaries not found: $ringlmd and $ringlm must exist. Build them with:
    cmake -S $REPO -B $build_dir -G Ninja -DCMAKE_BUILD_TYPE=Release && ninja -C $build_dir ringlmd ringlm
  (or run deploy/quickstart.sh, which installs the dependencies and builds)"
  fi
  ringlmd="$(cd "$(dirname "$ringlmd")" && pwd)/ringlmd"
  ringlm="$(cd "$(dirname "$ringlm")" && pwd)/ringlm"
  command -v curl >/dev/null 2>&1 || die "curl not found (deploy/install-deps.sh installs it)"

  # Model.
  [[ -f "$model" ]] || die "model not found: $model (pass --model PATH or set RINGLM_MODEL)"
  model="$(cd "$(dirname "$model")" && pwd)/$(basename "$model")"

  # Run directory: refuse to start over a running cluster.
  mkdir -p "$run_dir"
  run_dir="$(cd "$run_dir" && pwd)"
  local running=()
  mapfile -t running < <(recorded_pids "$run_dir")
  if [[ ${#running[@]} -gt 0 ]]; then
    die "a cluster from $run_dir is still running (pids ${running[*]}); stop it first:
    $SELF stop --run-dir $run_dir"
  fi

  # Ports.
  local busy=() k
  tcp_in_use "$api_port" && busy+=("API port $api_port/tcp")
  udp_in_use "$base_port" && busy+=("discovery port $base_port/udp (another cluster?)")
  for ((k = 1; k <= n; ++k)); do
    tcp_in_use $((base_port + k)) && busy+=("gRPC port $((base_port + k))/tcp")
  done
  [[ $api_port -gt $base_port && $api_port -le $((base_port + n)) ]] &&
    busy+=("API port $api_port collides with the gRPC ports $((base_port + 1))..$((base_port + n))")
  if [[ ${#busy[@]} -gt 0 ]]; then
    local b
    for b in "${busy[@]}"; do log "in use: $b"; done
    die "ports in use; choose others with --api-port P and --base-port B (gRPC uses B+1..B+N)"
  fi

  # The cluster key: every node gets the same one.
  local security=()
  if [[ $insecure -eq 1 ]]; then
    security=(--insecure)
    log "warning: --insecure: no TLS and no authentication; any host can join this cluster"
  else
    if [[ -z "$key" ]]; then
      key="$run_dir/cluster.key"
      if [[ ! -f "$key" ]]; then
        "$ringlm" keygen --out "$key" >/dev/null || die "cannot write a cluster key to $key"
        log "made a new cluster key: $key"
      fi
    fi
    [[ -f "$key" ]] || die "cluster key not found: $key (make one with: $ringlm keygen --out $key)"
    key="$(cd "$(dirname "$key")" && pwd)/$(basename "$key")"
    security=(--cluster-key "$key")
  fi

  local memory=()
  IFS=',' read -r -a memory <<<"${RINGLM_LOCAL_MEMORY:-4000,2000,3000}"
  [[ ${#memory[@]} -gt 0 ]] || die "RINGLM_LOCAL_MEMORY is empty"
  local extra=()
  # Word-split the extra daemon flags on purpose (no quoting inside them).
  read -r -a extra <<<"${RINGLMD_EXTRA_ARGS:-}"

  # From here on, anything that goes wrong stops what was started.
  STARTED_PIDS=()
  RUN_DIR="$run_dir"
  cleanup() {
    local rc=$?
    trap - INT TERM EXIT
    if [[ ${#STARTED_PIDS[@]} -gt 0 ]]; then
      echo >&2
      log "stopping ${#STARTED_PIDS[@]} daemon(s): ${STARTED_PIDS[*]}"
      stop_pids "${STARTED_PIDS[@]}"
      rm -f "$RUN_DIR"/node*/ringlmd.pid
    fi
    exit "$rc"
  }
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM

  rm -f "$run_dir"/cluster.env
  for ((k = 1; k <= n; ++k)); do
    local dir="$run_dir/node$k" mem="${memory[$(((k - 1) % ${#memory[@]}))]}"
    local args=(--model "$model" --grpc-host 127.0.0.1 --grpc-port $((base_port + k))
      --discovery-port "$base_port" --loopback-only --memory-mb "$mem" --state-dir "$dir/state"
      --placement memory "${security[@]}")
    if [[ $k -eq 1 ]]; then args+=(--api-host 127.0.0.1 --api-port "$api_port"); fi
    mkdir -p "$dir/state"
    # A session of its own: Ctrl-C on the terminal reaches only this script,
    # which then stops the daemons in order; a detached cluster survives the
    # terminal. (setsid execs in place here, so $! is the daemon's pid.)
    setsid "$ringlmd" "${args[@]}" "${extra[@]}" </dev/null >"$dir/ringlmd.log" 2>&1 &
    STARTED_PIDS+=("$!")
    echo "$!" >"$dir/ringlmd.pid"
    log "node $k: pid $!, gRPC 127.0.0.1:$((base_port + k)), --memory-mb $mem$([[ $k -eq 1 ]] && echo ", API 127.0.0.1:$api_port")"
  done
  {
    echo "NODES=$n"
    echo "API_PORT=$api_port"
    echo "BASE_PORT=$base_port"
    echo "GRPC_PORT_1=$((base_port + 1))"
    printf 'RINGLM_BIN=%q\n' "$ringlm"
    printf 'MODEL=%q\n' "$model"
    printf 'SECURITY=%q\n' "${security[*]}"
  } >"$run_dir/cluster.env"

  # Wait for the head's /health, watching for daemons that die early.
  local deadline=$((SECONDS + READY_TIMEOUT_S)) code=""
  printf 'local-cluster: waiting for http://127.0.0.1:%s/health ' "$api_port" >&2
  while :; do
    for ((k = 1; k <= n; ++k)); do
      # pid_alive, not is_ringlmd: a child may not have exec'd ringlmd yet.
      if ! pid_alive "${STARTED_PIDS[$((k - 1))]}"; then
        echo >&2
        log "node $k (pid ${STARTED_PIDS[$((k - 1))]}) exited during startup"
        log_tail "$run_dir" "$k"
        exit 1
      fi
    done
    code="$(health_code "$api_port")"
    [[ "$code" == 200 ]] && break
    if [[ $SECONDS -ge $deadline ]]; then
      echo >&2
      log "the head did not become healthy within ${READY_TIMEOUT_S} s (last /health status: ${code:-none})"
      log "/health says: $(curl -s --max-time 2 "http://127.0.0.1:$api_port/health" 2>/dev/null || true)"
      log_tail "$run_dir" 1
      exit 1
    fi
    printf '.' >&2
    sleep 0.5
  done
  echo " ready" >&2

  # /health turns 200 as soon as the head has a plan, which its peers may not
  # have adopted yet (plan epochs are counted per node). Give the nodes up to
  # 20 s more to agree on one plan that uses all of them, so the first request
  # does not fail. (A model with fewer layers than nodes leaves some nodes
  # idle; then the wait runs out and the cluster is used as it is.)
  local join_deadline=$((SECONDS + 20))
  SECURITY_ARGS="${security[*]}"
  until cluster_converged "$ringlm" "$base_port" "$n"; do
    if [[ $SECONDS -ge $join_deadline ]]; then
      log "warning: the nodes have not agreed on one plan over all $n nodes within 20 s;" \
        "early requests may fail (see the logs in $run_dir)"
      break
    fi
    sleep 0.25
  done

  local api="http://127.0.0.1:$api_port"
  cat <<EOF

ringlm local cluster: $n node(s), model $(basename "$model")
  API:       $api/v1   (OpenAI-compatible; GET $api/health, $api/v1/models)
  web chat:  $api/
  run dir:   $run_dir   (nodeK/ringlmd.log)

Try a streamed chat completion:
  curl -sN $api/v1/chat/completions -H 'Content-Type: application/json' \\
    -d '{"messages":[{"role":"user","content":"Tell me a story about a cat."}],"stream":true,"max_tokens":64}'

Cluster status:
  $ringlm status --node 127.0.0.1:$((base_port + 1)) ${security[*]}

Another machine joins with the same key: copy ${key:-(no key: insecure)} to it
(mode 0600) and start there: ringlmd --model MODEL ${security[*]}

EOF
  "$ringlm" status --node "127.0.0.1:$((base_port + 1))" "${security[@]}" || log "ringlm status failed"

  if [[ $foreground -eq 0 ]]; then
    echo
    echo "Stop it with: $SELF stop --run-dir $run_dir"
    STARTED_PIDS=()  # leave them running
    trap - INT TERM EXIT
    return 0
  fi

  echo
  echo "Running in the foreground; press Ctrl-C to stop every node."
  # Stay attached; if a daemon dies, say which and stop the rest.
  while :; do
    for ((k = 1; k <= n; ++k)); do
      if ! pid_alive "${STARTED_PIDS[$((k - 1))]}"; then
        log "node $k (pid ${STARTED_PIDS[$((k - 1))]}) exited"
        log_tail "$run_dir" "$k"
        exit 1
      fi
    done
    sleep 1 &
    wait $! || true
  done
}

[[ $# -ge 1 ]] || usage
case "$1" in
  stop) shift; cmd_stop "$@" ;;
  status) shift; cmd_status "$@" ;;
  -h|--help|help) usage ;;
  *) cmd_up "$@" ;;
esac
