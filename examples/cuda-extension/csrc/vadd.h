/* The one operation of the example: out[i] = a[i] + b[i]. */
#ifndef CE_VADD_H
#define CE_VADD_H
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Returns 0 on success; otherwise writes a message (CUDA's own error string) into err. */
int ce_vector_add(const double* a, const double* b, double* out, size_t n, char* err, size_t errlen);
/* Number of CUDA devices this process can use; 0 with a reason in err when there are none. */
int ce_device_count(char* err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
