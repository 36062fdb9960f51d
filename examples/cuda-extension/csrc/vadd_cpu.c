/* CPU build: the fallback exists only here, so a CUDA wheel never silently runs on the CPU. */
#include <stdio.h>

#include "vadd.h"

int ce_vector_add(const double* a, const double* b, double* out, size_t n, char* err, size_t errlen) {
  (void)err;
  (void)errlen;
  for (size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
  return 0;
}

int ce_device_count(char* err, size_t errlen) {
  snprintf(err, errlen, "this is the CPU build of cuda_extension (no CUDA code was compiled)");
  return 0;
}
