#ifndef CAIRN_CFUZZER_SHIM_H
#define CAIRN_CFUZZER_SHIM_H
#include <stddef.h>
#include <stdint.h>

/* libFuzzer's driver entry point (compiler-rt, linked by -sanitize=fuzzer). SwiftPM gives every
   executable its own main, so the fuzz target calls the driver itself. Declared only: nothing
   here is linked unless the build uses -sanitize=fuzzer and -DFUZZING. */
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*UserCb)(const uint8_t *Data, size_t Size));
#endif
