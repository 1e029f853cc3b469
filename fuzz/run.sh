#!/usr/bin/env bash
# Builds the fuzz targets (clang, build-fuzz/) and runs each one on a scratch
# copy of its seed corpus. See fuzz/README.md.
#
#   fuzz/run.sh [SECONDS] [TARGET...]           # each target for SECONDS (default 60)
#   fuzz/run.sh --runs N [SECONDS] [TARGET...]  # each target for N executions
#                                               # (SECONDS, if given, caps the time)
#
# TARGET is announcement_fuzzer, stage_step_fuzzer, chat_request_fuzzer,
# gguf_fuzzer, constraint_fuzzer, jinja_fuzzer or pre_tokenizer_fuzzer (the _fuzzer suffix
# may be left out);
# default: all of them. Prints
# one line per target:
#   fuzz: TARGET runs=N execs_per_sec=M seconds=S status=ok|CRASH
# and, for a crash (also a leak, timeout or out-of-memory), the saved input:
#   fuzz: TARGET crash_input=PATH log=PATH
# Exits 1 if any target crashed, 2 on a usage or build error.
#
# Environment: RINGLM_FUZZ_BUILD_DIR (default <repo>/build-fuzz),
# RINGLM_FUZZ_JOBS (build parallelism, default 2), RINGLM_FUZZ_MODEL (the
# model chat_request_fuzzer tokenizes with), RINGLM_FUZZ_KEEP=1 keeps the
# scratch corpora (their path is printed).
set -euo pipefail

FUZZ_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$FUZZ_DIR/.." && pwd)"
SHARED_DIR="$REPO_DIR/../shared"
BUILD_DIR="${RINGLM_FUZZ_BUILD_DIR:-$REPO_DIR/build-fuzz}"
ALL_TARGETS=(announcement_fuzzer stage_step_fuzzer chat_request_fuzzer gguf_fuzzer constraint_fuzzer
             jinja_fuzzer pre_tokenizer_fuzzer)

usage() {
  sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

seconds=""
runs=""
targets=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --runs)
      [[ $# -ge 2 && "$2" =~ ^[0-9]+$ ]] || usage
      runs="$2"
      shift 2
      ;;
    --runs=*)
      runs="${1#--runs=}"
      [[ "$runs" =~ ^[0-9]+$ ]] || usage
      shift
      ;;
    -h | --help) usage ;;
    [0-9]*)
      [[ "$1" =~ ^[0-9]+$ && -z "$seconds" ]] || usage
      seconds="$1"
      shift
      ;;
    *)
      t="${1%_fuzzer}_fuzzer"
      [[ " ${ALL_TARGETS[*]} " == *" $t "* ]] || {
        echo "fuzz: unknown target '$1' (known: ${ALL_TARGETS[*]})" >&2
        exit 2
      }
      targets+=("$t")
      shift
      ;;
  esac
done
[[ ${#targets[@]} -gt 0 ]] || targets=("${ALL_TARGETS[@]}")
if [[ -z "$runs" && -z "$seconds" ]]; then seconds=60; fi

# ---- Build (quiet; the log is shown only on failure) -------------------------
mkdir -p "$BUILD_DIR"
build_log="$BUILD_DIR/fuzz-build.log"
if [[ -f "$BUILD_DIR/CMakeCache.txt" ]]; then
  home="$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$BUILD_DIR/CMakeCache.txt")"
  if [[ "$(cd "$home" 2>/dev/null && pwd -P)" != "$(cd "$FUZZ_DIR" && pwd -P)" ]]; then
    echo "fuzz: $BUILD_DIR was configured from $home, not $FUZZ_DIR;" \
      "set RINGLM_FUZZ_BUILD_DIR to another directory" >&2
    exit 2
  fi
fi
if [[ ! -f "$BUILD_DIR/build.ninja" ]]; then
  if ! CC="${CC:-clang}" CXX="${CXX:-clang++}" cmake -S "$FUZZ_DIR" -B "$BUILD_DIR" -G Ninja \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$build_log" 2>&1; then
    cat "$build_log" >&2
    echo "fuzz: configure failed (log: $build_log)" >&2
    exit 2
  fi
fi
if ! ninja -C "$BUILD_DIR" -j "${RINGLM_FUZZ_JOBS:-2}" "${targets[@]}" >>"$build_log" 2>&1; then
  tail -n 60 "$build_log" >&2
  echo "fuzz: build failed (log: $build_log)" >&2
  exit 2
fi

# ---- Run ----------------------------------------------------------------------
scratch="$(mktemp -d "${TMPDIR:-/tmp}/ringlm-fuzz.XXXXXX")"
if [[ "${RINGLM_FUZZ_KEEP:-0}" == 1 ]]; then
  echo "fuzz: scratch corpora kept in $scratch"
else
  trap 'rm -rf "$scratch"' EXIT
fi
mkdir -p "$BUILD_DIR/logs"

export ASAN_OPTIONS="detect_leaks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"

failed=0
for target in "${targets[@]}"; do
  corpus="$scratch/$target/corpus"
  mkdir -p "$corpus"
  # Seeds, then past crashes kept as regression seeds. Copies: libFuzzer
  # writes new inputs into the first corpus directory, never into fuzz/.
  for seeds in "$FUZZ_DIR/corpus/$target" "$FUZZ_DIR/regressions/$target"; do
    if [[ -d "$seeds" ]]; then find "$seeds" -maxdepth 1 -type f -exec cp -t "$corpus" {} +; fi
  done
  # Extra read-only seed directories, and per-target options.
  extra_dirs=()
  extra_flags=()
  case "$target" in
    gguf_fuzzer)
      # The bundled models, cut to their first 64 KiB (the header and tensor
      # table, then truncated data) by -max_len: whole 1 MB inputs would make
      # every mutation slow.
      models="$scratch/$target/models"
      mkdir -p "$models"
      for m in "$SHARED_DIR"/models/*.gguf; do [[ -f "$m" ]] && cp "$m" "$models/"; done
      extra_dirs+=("$models")
      extra_flags+=(-max_len=65536)
      ;;
  esac
  [[ -f "$FUZZ_DIR/dicts/$target.dict" ]] && extra_flags+=("-dict=$FUZZ_DIR/dicts/$target.dict")
  if [[ -n "$runs" ]]; then extra_flags+=("-runs=$runs"); fi
  if [[ -n "$seconds" ]]; then extra_flags+=("-max_total_time=$seconds"); fi

  artifacts="$BUILD_DIR/crashes/$target"
  mkdir -p "$artifacts"
  log="$BUILD_DIR/logs/$target.log"
  start=$(date +%s.%N)
  status=ok
  if ! "$BUILD_DIR/$target" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$artifacts/" "${extra_flags[@]}" "$corpus" "${extra_dirs[@]}" \
    >"$log" 2>&1; then
    status=CRASH
  fi
  end=$(date +%s.%N)
  n=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  eps=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
  secs=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.0f", b - a }')
  # libFuzzer rounds down to whole seconds: a run under 1 s reports 0.
  if [[ "${eps:-0}" == 0 && -n "$n" ]]; then
    eps=$(awk -v n="$n" -v a="$start" -v b="$end" 'BEGIN { printf "%.0f", n / (b - a) }')
  fi
  echo "fuzz: $target runs=${n:-0} execs_per_sec=${eps:-0} seconds=$secs status=$status"
  if [[ "$status" != ok ]]; then
    failed=1
    input=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
    echo "fuzz: $target crash_input=${input:-none} log=$log"
  fi
done
exit "$failed"
