#!/usr/bin/env bash
# Installs the dependencies, builds ringlm, and runs every test: once in a
# Release build and once, for the unit tests, under AddressSanitizer and
# UndefinedBehaviorSanitizer.
#
#   deploy/test.sh            # both passes
#   RINGLM_SKIP_ASAN=1 deploy/test.sh   # the Release pass only
set -euo pipefail
cd "$(dirname "$0")/.."

bash deploy/install-deps.sh --test-tools
jobs=$(nproc)

echo "== npm packages for the client tests (openai, playwright-core)"
if ! (cd api/web && npm ci --no-audit --no-fund --loglevel=error); then
  echo "warning: npm ci failed; the OpenAI SDK and browser tests will skip" >&2
fi

echo "== Release build"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C build -j"$jobs"
echo "== Release tests"
# Multi-process tests run real daemons on a shared 2-core machine; a case
# that fails is run once more, and its first failure stays in the log.
(cd build && ctest -j"$jobs" --output-on-failure --repeat until-pass:2)

if [ "${RINGLM_SKIP_ASAN:-0}" != "1" ]; then
  echo "== ASan+UBSan build"
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DRINGLM_SANITIZE=ON >/dev/null
  ninja -C build-asan -j"$jobs"
  echo "== ASan+UBSan unit tests"
  # Multi-process tests (label "cluster") run in the Release pass only.
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest -j"$jobs" --output-on-failure -LE cluster)
fi
