#!/usr/bin/env bash
# A ring of ringlmd hosts on one machine, each in its own network namespace.
#
#   deploy/netns-cluster.sh up N [--model PATH] [--model-only-on K]
#                                [--daemon-args "..."]
#                                [--cluster-key FILE | --insecure]
#   deploy/netns-cluster.sh down [N]
#   deploy/netns-cluster.sh status
#
# Layout (needs root):
#   root namespace : blackhole route for 10.99.0.0/24 (added before anything
#                    else, so nothing addressed to the test subnet can leave
#                    through the real interface), no links of the cluster
#   ringlm-br      : bridge br0, one veth port vbrK per host, no address
#   ringlm-hK      : eth0 (veth into br0) 10.99.0.K/24 brd 10.99.0.255, lo up,
#                    no default route; one ringlmd (gRPC 0.0.0.0:47801, default
#                    discovery: directed broadcast to 10.99.0.255 plus loopback)
#                    With --model-only-on K, only host K gets the model file;
#                    the others start with --model-from-peers and fetch their
#                    layers from it into their own state dirs.
#
# Every host runs with the same cluster key: --cluster-key FILE, else
# RUN_DIR/cluster.key (made with `ringlm keygen` when missing).
#
# Environment:
#   RINGLMD, RINGLM       binaries (default: build/daemon/ringlmd, build/cli/ringlm)
#   RINGLM_NETNS_RUN      run directory for pid files, logs and state dirs
#                         (default: /tmp/ringlm-netns)
#   RINGLM_NETNS_MEMORY   comma-separated --memory-mb per host, cycled
#                         (default: 4000,2000,3000)
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly REPO
readonly RINGLMD="${RINGLMD:-$REPO/build/daemon/ringlmd}"
readonly RINGLM="${RINGLM:-$REPO/build/cli/ringlm}"
readonly RUN_DIR="${RINGLM_NETNS_RUN:-/tmp/ringlm-netns}"
readonly MEMORY_LIST="${RINGLM_NETNS_MEMORY:-4000,2000,3000}"
readonly SUBNET="10.99.0.0/24"
readonly PREFIX="10.99.0"
readonly BRIDGE_NS="ringlm-br"
readonly HOST_NS="ringlm-h"
readonly GRPC_PORT=47801
readonly MAX_HOSTS=250

log() { echo "netns-cluster: $*" >&2; }
die() { log "error: $*"; exit 1; }

usage() {
  cat >&2 <<EOF
usage: $0 up N [--model PATH] [--model-only-on K] [--daemon-args "ARGS"]
       $0 down [N]
       $0 status

up      creates namespace $BRIDGE_NS (bridge br0) and N host namespaces
        ${HOST_NS}1..N (addresses $PREFIX.1..N/24), after adding a blackhole
        route for $SUBNET in the root namespace, and starts one ringlmd per host.
        An existing cluster is torn down first. --model-only-on K gives the
        model file to host K only; the others fetch their layers from peers.
down    stops the daemons, deletes the namespaces (and with them the veths) and
        removes the blackhole route. Safe to run any number of times.
status  shows namespaces, route, daemons, and the cluster as host 1 sees it.

env: RINGLMD, RINGLM, RINGLM_NETNS_RUN (default /tmp/ringlm-netns),
     RINGLM_NETNS_MEMORY (default 4000,2000,3000). Needs root.
EOF
  exit 2
}

require_root() {
  [[ $(id -u) -eq 0 ]] || die "must run as root (network namespaces need CAP_SYS_ADMIN/CAP_NET_ADMIN)"
  command -v ip >/dev/null 2>&1 || die "'ip' (iproute2) not found"
}

# Names of existing ringlm-* namespaces, one per line.
our_namespaces() {
  ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^(${BRIDGE_NS}|${HOST_NS}[0-9]+)\$" || true
}

blackhole_present() {
  ip -4 route show exact "$SUBNET" type blackhole 2>/dev/null | grep -q .
}

# Makes sure nothing addressed to the test subnet can leave the root namespace.
ensure_blackhole() {
  if blackhole_present; then
    log "blackhole route for $SUBNET already present"
  else
    local existing
    existing="$(ip -4 route show exact "$SUBNET" 2>/dev/null || true)"
    [[ -z "$existing" ]] || die "the root namespace already routes $SUBNET ($existing); refusing to touch it"
    ip route add blackhole "$SUBNET"
    log "added: ip route add blackhole $SUBNET"
  fi
  # A more specific route could still send host addresses out; check them.
  local k out
  for ((k = 1; k <= $1; ++k)); do
    out="$(ip -4 route get "$PREFIX.$k" 2>&1 || true)"
    if grep -q ' dev ' <<<"$out"; then
      die "$PREFIX.$k is routed out of the root namespace ($out); refusing to start"
    fi
  done
}

remove_blackhole() {
  if blackhole_present; then
    ip route del blackhole "$SUBNET"
    log "removed blackhole route for $SUBNET"
  fi
}

# True when pid $1 is alive and is a ringlmd (guards against reused pids).
is_ringlmd() {
  local pid="$1"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  [[ -r "/proc/$pid/cmdline" ]] || return 1
  local state
  state="$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || echo X)"
  [[ "$state" != Z && "$state" != X ]] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q 'ringlmd'
}

# Sends SIGTERM to the given pids, waits up to 5 s, then SIGKILLs the rest.
stop_pids() {
  local pids=("$@") pid i alive
  [[ ${#pids[@]} -gt 0 ]] || return 0
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for ((i = 0; i < 50; ++i)); do
    alive=0
    for pid in "${pids[@]}"; do
      if kill -0 "$pid" 2>/dev/null && [[ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != Z ]]; then
        alive=1
      fi
    done
    [[ $alive -eq 1 ]] || return 0
    sleep 0.1
  done
  for pid in "${pids[@]}"; do
    if kill -0 "$pid" 2>/dev/null; then
      log "pid $pid did not stop on SIGTERM; sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  sleep 0.2
}

cmd_down() {
  local n="${1:-0}"
  [[ "$n" =~ ^[0-9]+$ ]] || die "down: N must be a number, got '$n'"
  require_root
  # 1. The daemons of this run directory, by pid file.
  local pids=() f pid
  shopt -s nullglob
  for f in "$RUN_DIR"/h*/ringlmd.pid; do
    pid="$(cat "$f" 2>/dev/null || true)"
    if is_ringlmd "$pid"; then pids+=("$pid"); fi
  done
  if [[ ${#pids[@]} -gt 0 ]]; then
    log "stopping ringlmd pids ${pids[*]}"
    stop_pids "${pids[@]}"
  fi
  for f in "$RUN_DIR"/h*/ringlmd.pid; do rm -f "$f"; done
  shopt -u nullglob
  # 2. Anything else still running inside our namespaces (a daemon started
  #    with another run directory, a client): a namespace with processes in it
  #    outlives `ip netns del`, and so would its veth.
  local namespaces=() ns k
  mapfile -t namespaces < <(our_namespaces)
  for ((k = 1; k <= n; ++k)); do namespaces+=("$HOST_NS$k"); done
  pids=()
  for ns in "${namespaces[@]}"; do
    ip netns list | awk '{print $1}' | grep -qx "$ns" || continue
    while read -r pid; do
      [[ -n "$pid" && "$pid" != "$$" ]] && pids+=("$pid")
    done < <(ip netns pids "$ns" 2>/dev/null || true)
  done
  if [[ ${#pids[@]} -gt 0 ]]; then
    log "stopping processes left in the namespaces: ${pids[*]}"
    stop_pids "${pids[@]}"
  fi
  # 3. Hosts first (their veth ends go with them), then the bridge.
  local deleted=0
  for ns in "${namespaces[@]}"; do
    [[ "$ns" == "$BRIDGE_NS" ]] && continue
    if ip netns list | awk '{print $1}' | grep -qx "$ns"; then
      ip netns del "$ns" && deleted=$((deleted + 1))
    fi
  done
  if ip netns list | awk '{print $1}' | grep -qx "$BRIDGE_NS"; then
    ip netns del "$BRIDGE_NS" && deleted=$((deleted + 1))
  fi
  log "deleted $deleted namespace(s)"
  # 4. Only now, with no host left that could use it, the blackhole route.
  remove_blackhole
  local left
  left="$(our_namespaces)"
  [[ -z "$left" ]] || die "namespaces still present: $left"
  log "down: clean"
}

cmd_up() {
  [[ $# -ge 1 ]] || usage
  local n="$1"; shift
  [[ "$n" =~ ^[0-9]+$ && "$n" -ge 1 && "$n" -le $MAX_HOSTS ]] || die "up: N must be 1..$MAX_HOSTS, got '$n'"
  local model="$REPO/../shared/models/stories260K-f32.gguf" daemon_args="" key="" insecure=0
  local only_on=0
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --model) [[ $# -ge 2 ]] || die "--model needs a path"; model="$2"; shift 2 ;;
      --cluster-key) [[ $# -ge 2 ]] || die "--cluster-key needs a file"; key="$2"; shift 2 ;;
      --insecure) insecure=1; shift ;;
      --model-only-on) [[ $# -ge 2 && "$2" =~ ^[0-9]+$ ]] || die "--model-only-on needs a host number"
        only_on="$2"; shift 2 ;;
      --daemon-args) [[ $# -ge 2 ]] || die "--daemon-args needs a value"; daemon_args="$2"; shift 2 ;;
      -h|--help) usage ;;
      *) die "up: unknown option '$1'" ;;
    esac
  done
  require_root
  [[ -x "$RINGLMD" ]] || die "ringlmd not found at $RINGLMD (build it, or set RINGLMD)"
  [[ -f "$model" ]] || die "model not found: $model"
  [[ $only_on -le $n ]] || die "--model-only-on $only_on: there are only $n hosts"
  model="$(cd "$(dirname "$model")" && pwd)/$(basename "$model")"
  local memory=()
  IFS=',' read -r -a memory <<<"$MEMORY_LIST"
  [[ ${#memory[@]} -gt 0 ]] || die "RINGLM_NETNS_MEMORY is empty"

  if [[ -n "$(our_namespaces)" ]]; then
    log "a cluster already exists; tearing it down first"
    cmd_down "$n"
  fi

  # Safety first: the root namespace must not route the test subnet anywhere.
  ensure_blackhole "$n"

  mkdir -p "$RUN_DIR"
  RUN_ABS="$(cd "$RUN_DIR" && pwd)"

  # One cluster key for every host.
  local security=()
  if [[ $insecure -eq 1 ]]; then
    security=(--insecure)
  else
    if [[ -z "$key" ]]; then
      key="$RUN_ABS/cluster.key"
      [[ -f "$key" ]] || "$RINGLM" keygen --out "$key" >/dev/null || die "cannot write $key"
    fi
    [[ -f "$key" ]] || die "cluster key not found: $key"
    key="$(cd "$(dirname "$key")" && pwd)/$(basename "$key")"
    security=(--cluster-key "$key")
  fi
  printf '%s\n' "${security[*]}" >"$RUN_ABS/security"

  ip netns add "$BRIDGE_NS"
  ip -n "$BRIDGE_NS" link set lo up
  ip -n "$BRIDGE_NS" link add br0 type bridge stp_state 0 forward_delay 0
  ip -n "$BRIDGE_NS" link set br0 up

  local k
  for ((k = 1; k <= n; ++k)); do
    local ns="$HOST_NS$k"
    ip netns add "$ns"
    # Both ends are created inside namespaces: no link ever appears in root.
    ip -n "$BRIDGE_NS" link add "vbr$k" type veth peer name eth0 netns "$ns"
    ip -n "$BRIDGE_NS" link set "vbr$k" master br0
    ip -n "$BRIDGE_NS" link set "vbr$k" up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$PREFIX.$k/24" brd "$PREFIX.255" dev eth0
    ip -n "$ns" link set eth0 up
  done
  log "network: $BRIDGE_NS/br0 with hosts ${HOST_NS}1..$n at $PREFIX.1..$n"

  local extra=()
  # Word-split the daemon arguments on purpose (no quoting inside them).
  read -r -a extra <<<"$daemon_args"
  for ((k = 1; k <= n; ++k)); do
    local ns="$HOST_NS$k" dir="$RUN_ABS/h$k"
    local mem="${memory[$(((k - 1) % ${#memory[@]}))]}"
    mkdir -p "$dir/state"
    local source=(--model "$model")
    [[ $only_on -eq 0 || $only_on -eq $k ]] || source=(--model-from-peers)
    nohup ip netns exec "$ns" "$RINGLMD" "${source[@]}" --grpc-host 0.0.0.0 \
      --grpc-port "$GRPC_PORT" --memory-mb "$mem" --placement memory --state-dir "$dir/state" \
      "${security[@]}" \
      "${extra[@]}" \
      </dev/null >"$dir/ringlmd.log" 2>&1 &
    echo $! >"$dir/ringlmd.pid"
    log "host $k: ringlmd pid $! in $ns, $PREFIX.$k:$GRPC_PORT, --memory-mb $mem, log $dir/ringlmd.log"
  done
  echo "$n" >"$RUN_ABS/hosts"

  # Catch daemons that die at once (bad flag, bad model).
  sleep 0.5
  local failed=0 pid
  for ((k = 1; k <= n; ++k)); do
    pid="$(cat "$RUN_ABS/h$k/ringlmd.pid")"
    if ! is_ringlmd "$pid"; then
      log "host $k: ringlmd exited; its log:"
      sed 's/^/    /' "$RUN_ABS/h$k/ringlmd.log" >&2 || true
      failed=1
    fi
  done
  if [[ $failed -ne 0 ]]; then
    log "tearing down after the failure"
    cmd_down "$n"
    exit 1
  fi

  cat <<EOF
ringlm netns cluster: $n host(s), run dir $RUN_ABS
  status:   ip netns exec ${HOST_NS}1 $RINGLM status --node $PREFIX.1:$GRPC_PORT ${security[*]}
  generate: ip netns exec ${HOST_NS}1 $RINGLM generate --cluster $PREFIX.1:$GRPC_PORT ${security[*]} --prompt "Once upon a time" --temp 0
  logs:     $RUN_ABS/hK/ringlmd.log
  stop:     $0 down
EOF
}

cmd_status() {
  require_root
  local namespaces
  namespaces="$(our_namespaces)"
  echo "namespaces: ${namespaces//$'\n'/ }"
  echo "root route: $(ip -4 route show exact "$SUBNET" 2>/dev/null || true)"
  local f pid
  shopt -s nullglob
  for f in "$RUN_DIR"/h*/ringlmd.pid; do
    pid="$(cat "$f")"
    if is_ringlmd "$pid"; then echo "$(basename "$(dirname "$f")"): ringlmd pid $pid running"
    else echo "$(basename "$(dirname "$f")"): ringlmd pid $pid not running"; fi
  done
  shopt -u nullglob
  if grep -qx "${HOST_NS}1" <<<"$namespaces"; then
    local security
    security="$(cat "$RUN_DIR/security" 2>/dev/null || echo --insecure)"
    # shellcheck disable=SC2086  # one or two words on purpose
    ip netns exec "${HOST_NS}1" "$RINGLM" status --node "$PREFIX.1:$GRPC_PORT" $security || true
  else
    echo "no cluster is up"
  fi
}

[[ $# -ge 1 ]] || usage
case "$1" in
  up) shift; cmd_up "$@" ;;
  down) shift; [[ $# -le 1 ]] || usage; cmd_down "${1:-0}" ;;
  status) shift; [[ $# -eq 0 ]] || usage; cmd_status ;;
  -h|--help|help) usage ;;
  *) usage ;;
esac
