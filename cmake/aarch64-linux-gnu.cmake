# Cross-compiles for ARM64 with Debian's g++-aarch64-linux-gnu, finding the
# arm64 multiarch -dev packages (libabsl-dev:arm64, ...) in
# /usr/lib/aarch64-linux-gnu; the binaries run under qemu-user, so ctest and
# gtest_discover_tests work on an x86 machine:
#
#   deploy/install-deps.sh --arm-cross
#   cmake -S cmake/kernels -B build-arm64 -G Ninja \
#     -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake
#
# (deploy/test-arm-kernels.sh does both and runs the tests.)
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
# Debian's cross compiler already searches the multiarch folders
# (/usr/include/aarch64-linux-gnu, /usr/lib/aarch64-linux-gnu); this makes
# find_package look for <prefix>/lib/aarch64-linux-gnu/cmake/<name> (and never
# the amd64 copies) even before the compiler is inspected.
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(PKG_CONFIG_EXECUTABLE aarch64-linux-gnu-pkg-config)

# No -L sysroot: the arm64 libraries come from multiarch packages, which bring
# libc6:arm64 with them, so /lib/ld-linux-aarch64.so.1 and the libc it loads
# are one version. (-L /usr/aarch64-linux-gnu would pair the cross toolchain's
# ld.so with libc6:arm64's libc.so.6.) The CPU is qemu's default, "max" (NEON,
# dotprod, fp16, SVE2, ...); export QEMU_CPU=cortex-a53 for a plain ARMv8.0
# core.
find_program(RINGLM_QEMU_AARCH64 NAMES qemu-aarch64 qemu-aarch64-static)
if(RINGLM_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${RINGLM_QEMU_AARCH64})
endif()
