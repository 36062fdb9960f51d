// CUDA build: the kernel and the host code that launches it. Every CUDA error is reported with
// CUDA's own name and string (e.g. cudaErrorNoKernelImageForDevice: "no kernel image is
// available for execution on the device"), so a wheel built without the GPU's architecture
// says so instead of failing somewhere else.
#include <cuda_runtime.h>

#include <cstdio>

#include "vadd.h"

namespace {

__global__ void vector_add(const double* a, const double* b, double* out, size_t n) {
  size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}

int report(cudaError_t e, const char* what, char* err, size_t errlen) {
  int device = -1;
  cudaDeviceProp prop{};
  const char* gpu = "unknown GPU";
  int major = 0, minor = 0;
  if (cudaGetDevice(&device) == cudaSuccess && cudaGetDeviceProperties(&prop, device) == cudaSuccess) {
    gpu = prop.name;
    major = prop.major;
    minor = prop.minor;
  }
  std::snprintf(err, errlen, "%s failed: %s (%s) on %s (compute capability %d.%d); this build carries device code for: %s",
                what, cudaGetErrorString(e), cudaGetErrorName(e), gpu, major, minor, CE_ARCHITECTURES);
  return 1;
}

}  // namespace

extern "C" int ce_device_count(char* err, size_t errlen) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    std::snprintf(err, errlen, "%s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
    cudaGetLastError();  // clear the sticky-free error so a later call starts clean
    return 0;
  }
  return count;
}

extern "C" int ce_vector_add(const double* a, const double* b, double* out, size_t n, char* err, size_t errlen) {
  if (n == 0) return 0;
  double *da = nullptr, *db = nullptr, *dout = nullptr;
  const size_t bytes = n * sizeof(double);
  int rc = 0;
  cudaError_t e;
  if ((e = cudaMalloc(&da, bytes)) != cudaSuccess) { rc = report(e, "cudaMalloc", err, errlen); goto done; }
  if ((e = cudaMalloc(&db, bytes)) != cudaSuccess) { rc = report(e, "cudaMalloc", err, errlen); goto done; }
  if ((e = cudaMalloc(&dout, bytes)) != cudaSuccess) { rc = report(e, "cudaMalloc", err, errlen); goto done; }
  if ((e = cudaMemcpy(da, a, bytes, cudaMemcpyHostToDevice)) != cudaSuccess) { rc = report(e, "cudaMemcpy", err, errlen); goto done; }
  if ((e = cudaMemcpy(db, b, bytes, cudaMemcpyHostToDevice)) != cudaSuccess) { rc = report(e, "cudaMemcpy", err, errlen); goto done; }
  {
    const unsigned threads = 256;
    const unsigned blocks = static_cast<unsigned>((n + threads - 1) / threads);
    vector_add<<<blocks, threads>>>(da, db, dout, n);
  }
  if ((e = cudaGetLastError()) != cudaSuccess) { rc = report(e, "kernel launch", err, errlen); goto done; }
  if ((e = cudaDeviceSynchronize()) != cudaSuccess) { rc = report(e, "kernel", err, errlen); goto done; }
  if ((e = cudaMemcpy(out, dout, bytes, cudaMemcpyDeviceToHost)) != cudaSuccess) { rc = report(e, "cudaMemcpy", err, errlen); goto done; }
done:
  cudaFree(da);
  cudaFree(db);
  cudaFree(dout);
  return rc;
}
