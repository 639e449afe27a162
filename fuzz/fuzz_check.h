#ifndef DPCURATOR_FUZZ_FUZZ_CHECK_H_
#define DPCURATOR_FUZZ_FUZZ_CHECK_H_

// Invariant checks for the fuzz targets. A failed check is a finding: it
// prints what broke and aborts, which libFuzzer (and fuzz/smoke_main.cc)
// report as a crash together with the input that caused it.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

// Every target defines this (the libFuzzer entry point).
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

#define DPC_FUZZ_CHECK(condition, ...)                                              \
  do {                                                                              \
    if (!(condition)) {                                                             \
      std::fprintf(stderr, "%s:%d: invariant failed: %s\n  ", __FILE__, __LINE__,   \
                   #condition);                                                     \
      std::fprintf(stderr, __VA_ARGS__);                                            \
      std::fprintf(stderr, "\n");                                                   \
      std::abort();                                                                 \
    }                                                                               \
  } while (0)

#endif  // DPCURATOR_FUZZ_FUZZ_CHECK_H_
