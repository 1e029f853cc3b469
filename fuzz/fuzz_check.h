// FUZZ_CHECK: the fuzz targets' assertion. A violated invariant prints what
// failed and traps, which libFuzzer reports as a crash (with the input saved
// as crash-<sha1>). Unlike assert() it is never compiled out.
#ifndef RINGLM_FUZZ_FUZZ_CHECK_H_
#define RINGLM_FUZZ_FUZZ_CHECK_H_

#include <cstdio>

#define FUZZ_CHECK(cond)                                                                 \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      __builtin_trap();                                                                  \
    }                                                                                    \
  } while (0)

#endif  // RINGLM_FUZZ_FUZZ_CHECK_H_
