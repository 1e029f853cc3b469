#!/usr/bin/env bash
# Installs the Debian bookworm packages that ringlm needs to build and run;
# with --test-tools also those its tests use (Chromium, Node.js, HAProxy); with
# --arm-cross the ARM64 cross compiler, qemu-user and the arm64 (multiarch)
# libraries that deploy/test-arm-kernels.sh builds the kernels against.
# Safe to run again: it installs only what is missing.
set -euo pipefail

test_tools=0
arm_cross=0
for arg in "$@"; do
  case "$arg" in
    --test-tools) test_tools=1 ;;
    --arm-cross) arm_cross=1 ;;
    -h|--help) echo "usage: deploy/install-deps.sh [--test-tools] [--arm-cross]"; exit 0 ;;
    *) echo "install-deps: unknown argument $arg" >&2; exit 2 ;;
  esac
done

packages=(
  build-essential cmake ninja-build pkg-config ccache git
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev
  libspdlog-dev libgtest-dev libgmock-dev libcpp-httplib-dev nlohmann-json3-dev
  libhwy-dev libssl-dev
  clang-format iproute2 curl python3
)
if [ "$test_tools" = 1 ]; then
  packages+=(chromium)  # the web page's browser test (headless)
  packages+=(tcpdump)   # the capture test: no prompt text on the wire
  packages+=(clang libclang-rt-14-dev)  # libFuzzer targets (fuzz/)
  packages+=(python3-jinja2)     # the reference renderer of chat templates
  packages+=(python3-jsonschema) # validates structured output against its schema
  packages+=(haproxy)            # heads behind a load balancer (deploy/haproxy.cfg)
fi
if [ "$arm_cross" = 1 ]; then
  packages+=(g++-aarch64-linux-gnu qemu-user)
  # The kernels' libraries for arm64, co-installed with the amd64 ones (same
  # versions, Multi-Arch: same).
  packages+=(libabsl-dev:arm64 libhwy-dev:arm64 libgtest-dev:arm64 libgmock-dev:arm64)
fi

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js runs the OpenAI SDK and browser tests; the machine image may bring
# its own (newer) build, which is fine.
if [ "$test_tools" = 1 ] && ! command -v node >/dev/null 2>&1; then missing+=(nodejs npm); fi

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages already installed"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
if [ "$arm_cross" = 1 ] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
  echo "install-deps: adding the arm64 architecture (dpkg multiarch)"
  "${sudo_cmd[@]}" dpkg --add-architecture arm64
fi
"${sudo_cmd[@]}" apt-get update -q
DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
