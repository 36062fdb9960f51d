// The operator's schema and its CPU kernel (pytorch/extension-cpp's muladd, reduced).
#include <Python.h>
#include <ATen/Operators.h>
#include <torch/all.h>
#include <torch/library.h>

extern "C" {
// `import extension_mini._C` loads this library, which registers the operator below.
PyObject* PyInit__C(void) {
  static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_C", NULL, -1, NULL};
  return PyModule_Create(&module_def);
}
}

namespace extension_mini {

at::Tensor mymuladd_cpu(const at::Tensor& a, const at::Tensor& b, double c) {
  TORCH_CHECK(a.sizes() == b.sizes());
  TORCH_CHECK(a.dtype() == at::kFloat && b.dtype() == at::kFloat);
  at::Tensor a_contig = a.contiguous();
  at::Tensor b_contig = b.contiguous();
  at::Tensor result = torch::empty(a_contig.sizes(), a_contig.options());
  const float* a_ptr = a_contig.data_ptr<float>();
  const float* b_ptr = b_contig.data_ptr<float>();
  float* result_ptr = result.data_ptr<float>();
  for (int64_t i = 0; i < result.numel(); i++) {
    result_ptr[i] = a_ptr[i] * b_ptr[i] + static_cast<float>(c);
  }
  return result;
}

TORCH_LIBRARY(extension_mini, m) { m.def("mymuladd(Tensor a, Tensor b, float c) -> Tensor"); }

TORCH_LIBRARY_IMPL(extension_mini, CPU, m) { m.impl("mymuladd", &mymuladd_cpu); }

}  // namespace extension_mini
