/* The Python binding: a plain CPython extension, so the example needs nothing but a compiler. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "vadd.h"

#ifdef CE_WITH_CUDA
#define CE_BUILT_WITH_CUDA 1
#else
#define CE_BUILT_WITH_CUDA 0
#define CE_ARCHITECTURES ""
#endif

static int to_doubles(PyObject* seq, const char* name, double** out, Py_ssize_t* n) {
  PyObject* fast = PySequence_Fast(seq, "add() takes two sequences of numbers");
  if (fast == NULL) return -1;
  Py_ssize_t len = PySequence_Fast_GET_SIZE(fast);
  double* buf = PyMem_Malloc((size_t)(len > 0 ? len : 1) * sizeof(double));
  if (buf == NULL) {
    Py_DECREF(fast);
    PyErr_NoMemory();
    return -1;
  }
  PyObject** items = PySequence_Fast_ITEMS(fast);
  for (Py_ssize_t i = 0; i < len; ++i) {
    buf[i] = PyFloat_AsDouble(items[i]);
    if (buf[i] == -1.0 && PyErr_Occurred()) {
      PyErr_Format(PyExc_TypeError, "add(): %s[%zd] is not a number", name, i);
      PyMem_Free(buf);
      Py_DECREF(fast);
      return -1;
    }
  }
  Py_DECREF(fast);
  *out = buf;
  *n = len;
  return 0;
}

static PyObject* ce_add(PyObject* self, PyObject* args) {
  (void)self;
  PyObject *pa, *pb;
  if (!PyArg_ParseTuple(args, "OO", &pa, &pb)) return NULL;
  double *a = NULL, *b = NULL, *out = NULL;
  Py_ssize_t na = 0, nb = 0;
  PyObject* result = NULL;
  char err[512] = {0};
  if (to_doubles(pa, "a", &a, &na) < 0 || to_doubles(pb, "b", &b, &nb) < 0) goto done;
  if (na != nb) {
    PyErr_Format(PyExc_ValueError, "add(): lengths differ (%zd and %zd)", na, nb);
    goto done;
  }
  out = PyMem_Malloc((size_t)(na > 0 ? na : 1) * sizeof(double));
  if (out == NULL) {
    PyErr_NoMemory();
    goto done;
  }
  int rc;
  Py_BEGIN_ALLOW_THREADS
  rc = ce_vector_add(a, b, out, (size_t)na, err, sizeof err);
  Py_END_ALLOW_THREADS
  if (rc != 0) {
    PyErr_SetString(PyExc_RuntimeError, err);
    goto done;
  }
  result = PyList_New(na);
  if (result == NULL) goto done;
  for (Py_ssize_t i = 0; i < na; ++i) {
    PyObject* v = PyFloat_FromDouble(out[i]);
    if (v == NULL) {
      Py_CLEAR(result);
      goto done;
    }
    PyList_SET_ITEM(result, i, v);
  }
done:
  PyMem_Free(a);
  PyMem_Free(b);
  PyMem_Free(out);
  return result;
}

static PyObject* ce_cuda_available(PyObject* self, PyObject* unused) {
  (void)self;
  (void)unused;
  char err[512] = {0};
  return PyBool_FromLong(ce_device_count(err, sizeof err) > 0);
}

static PyObject* ce_cuda_status(PyObject* self, PyObject* unused) {
  (void)self;
  (void)unused;
  char err[512] = {0};
  int count = ce_device_count(err, sizeof err);
  if (count > 0) return PyUnicode_FromFormat("%d CUDA device(s)", count);
  return PyUnicode_FromString(err);
}

static PyMethodDef methods[] = {
    {"add", ce_add, METH_VARARGS, "add(a, b) -> list: element-wise a + b (on the GPU in a CUDA build)."},
    {"cuda_available", ce_cuda_available, METH_NOARGS, "Whether this build has CUDA and a usable GPU."},
    {"cuda_status", ce_cuda_status, METH_NOARGS, "Why CUDA is or is not usable, in CUDA's words."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_core", "vector add, on the GPU in a CUDA build", -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__core(void) {
  PyObject* m = PyModule_Create(&module);
  if (m == NULL) return NULL;
  if (PyModule_AddIntConstant(m, "built_with_cuda", CE_BUILT_WITH_CUDA) < 0 ||
      PyModule_AddStringConstant(m, "cuda_architectures", CE_ARCHITECTURES) < 0) {
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
