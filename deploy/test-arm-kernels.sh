#!/usr/bin/env bash
# Cross-compiles the compute kernels (inference/ops, through cmake/kernels)
# for ARM64 with Debian's g++-aarch64-linux-gnu and runs their unit tests
# under qemu-user, so the NEON paths of the Highway kernels are checked
# against their scalar references on an x86 machine. Installs nothing: run
# deploy/install-deps.sh --arm-cross first.
#
#   deploy/test-arm-kernels.sh                    # build-arm64, every kernel test
#   deploy/test-arm-kernels.sh /tmp/arm -R MatMul # another folder; more ctest arguments
#   RINGLM_ARM_ALLOW_SKIP=1 deploy/test-arm-kernels.sh  # exit 0 without the cross tools
#   QEMU_CPU=cortex-a53 deploy/test-arm-kernels.sh      # emulate a plain ARMv8.0 core
#                                                       # (default: qemu's "max")
#   RINGLM_JOBS=1 deploy/test-arm-kernels.sh      # build and test jobs (default: nproc)
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir="${1:-build-arm64}"
shift || true
jobs="${RINGLM_JOBS:-$(nproc)}"

missing=()
for tool in aarch64-linux-gnu-g++ qemu-aarch64 cmake ninja; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [ ${#missing[@]} -ne 0 ]; then
  if [ "${RINGLM_ARM_ALLOW_SKIP:-0}" = "1" ]; then
    echo "test-arm-kernels: skipped: ${missing[*]} not installed (deploy/install-deps.sh --arm-cross)"
    exit 0
  fi
  echo "test-arm-kernels: ${missing[*]} not installed; run deploy/install-deps.sh --arm-cross" \
    "(or set RINGLM_ARM_ALLOW_SKIP=1 to skip)" >&2
  exit 1
fi

cmake -S cmake/kernels -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/aarch64-linux-gnu.cmake" >/dev/null
ninja -C "$build_dir" -j"$jobs"
# Say what was built and how it runs, so the log shows it really was ARM.
readelf -h "$build_dir/inference/ops/matmul_test" | sed -n 's/^ *Machine: *\(.*\)/test-arm-kernels: binaries: \1/p'
echo "test-arm-kernels: running under $(qemu-aarch64 --version | head -n1), CPU ${QEMU_CPU:-max (default)}"

log="$build_dir/ctest.log"
status=0
(cd "$build_dir" && ctest -j"$jobs" --output-on-failure --no-tests=error "$@") 2>&1 | tee "$log" || status=$?
summary=$(grep -E '[0-9]+% tests passed' "$log" || echo "no ctest summary")
echo "test-arm-kernels: aarch64: $summary"
exit "$status"
