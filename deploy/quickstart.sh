#!/usr/bin/env bash
# From a fresh Debian 12 machine to a running ringlm cluster in one command:
# installs the dependencies, builds Release in ./build, finds a model, and
# starts a local cluster on loopback in the foreground. Ctrl-C stops it all.
#
#   deploy/quickstart.sh [--model PATH] [--nodes N] [--api-port P]
#
# The model is the first of: --model, $RINGLM_MODEL,
# ../shared/models/stories260K-f32.gguf (next to the repo), the first *.gguf in
# ${XDG_DATA_HOME:-~/.local/share}/ringlm/models.
#
# Environment: RINGLM_BUILD_DIR (build tree, default ./build),
# RINGLM_SKIP_DEPS=1 (do not run install-deps.sh), and those of
# local-cluster.sh (RINGLM_LOCAL_RUN, RINGLM_LOCAL_MEMORY, RINGLMD_EXTRA_ARGS).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly REPO

log() { echo "quickstart: $*" >&2; }
die() { log "error: $*"; exit 1; }

usage() {
  cat >&2 <<EOF
usage: $0 [--model PATH] [--nodes N] [--api-port P]

Installs the dependencies (deploy/install-deps.sh), builds Release in
${RINGLM_BUILD_DIR:-$REPO/build}, and runs a local N-node cluster (default 3) with the
OpenAI-compatible API and web chat on 127.0.0.1:P (default 8080).
Press Ctrl-C to stop every node.

  --model PATH   GGUF model; otherwise \$RINGLM_MODEL, then
                 ../shared/models/stories260K-f32.gguf, then the first *.gguf in
                 \${XDG_DATA_HOME:-~/.local/share}/ringlm/models
  --nodes N      number of ringlmd daemons (default: 3)
  --api-port P   API and web page port (default: 8080)
EOF
  exit 2
}

model="" nodes=3 api_port=8080
while [[ $# -gt 0 ]]; do
  case "$1" in
    --model) [[ $# -ge 2 ]] || die "--model needs a path"; model="$2"; shift 2 ;;
    --nodes) [[ $# -ge 2 ]] || die "--nodes needs a number"; nodes="$2"; shift 2 ;;
    --api-port) [[ $# -ge 2 ]] || die "--api-port needs a number"; api_port="$2"; shift 2 ;;
    -h|--help) usage ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[[ "$nodes" =~ ^[0-9]+$ && "$nodes" -ge 1 ]] || die "--nodes must be a positive number, got '$nodes'"
[[ "$api_port" =~ ^[0-9]+$ ]] || die "--api-port must be a number, got '$api_port'"

build_dir="${RINGLM_BUILD_DIR:-$REPO/build}"
models_dir="${XDG_DATA_HOME:-$HOME/.local/share}/ringlm/models"

# 1. Dependencies.
if [[ "${RINGLM_SKIP_DEPS:-0}" != 1 ]]; then
  log "installing dependencies (deploy/install-deps.sh)"
  bash "$REPO/deploy/install-deps.sh"
fi

# 2. Release build of the two binaries the cluster needs.
log "building Release in $build_dir"
cmake -S "$REPO" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C "$build_dir" -j"$(nproc)" ringlmd ringlm

# 3. A model.
if [[ -n "$model" ]]; then
  [[ -f "$model" ]] || die "--model: no such file: $model"
elif [[ -n "${RINGLM_MODEL:-}" ]]; then
  [[ -f "$RINGLM_MODEL" ]] || die "RINGLM_MODEL names a missing file: $RINGLM_MODEL"
  model="$RINGLM_MODEL"
elif [[ -f "$REPO/../shared/models/stories260K-f32.gguf" ]]; then
  model="$REPO/../shared/models/stories260K-f32.gguf"
elif [[ -d "$models_dir" ]]; then
  model="$(find "$models_dir" -maxdepth 1 -name '*.gguf' -type f 2>/dev/null | LC_ALL=C sort | head -n 1)"
fi
if [[ -z "$model" ]]; then
  cat >&2 <<EOF
quickstart: no model found. ringlm needs a GGUF model file; it looked at
  --model PATH, \$RINGLM_MODEL, $REPO/../shared/models/stories260K-f32.gguf
  and $models_dir/*.gguf.
Get one of these ways, then run this script again:
  - a small random-weight test model (fast, prints gibberish):
      mkdir -p $models_dir
      $build_dir/cli/ringlm synth --preset tiny --type q8_0 --out $models_dir/tiny-q8_0.gguf
  - a real llama or qwen2 model in GGUF (F32, F16, Q8_0, Q4_0, Q4_K, Q6_K), downloaded
    into $models_dir/ (for example a TinyLlama-1.1B Q8_0 .gguf),
    or passed directly with --model PATH.
EOF
  exit 1
fi
log "model: $model"

# 4. The cluster, attached: Ctrl-C stops every daemon.
exec "$REPO/deploy/local-cluster.sh" "$nodes" --model "$model" --api-port "$api_port" \
  --build-dir "$build_dir" --foreground
