// Exploit, class 1 (task axpy): a C++ static constructor — it runs while the library is being
// loaded, before any call and outside any check — reaches the Python interpreter of the process
// that loads it and rewrites the comparison and the input check to always pass; the kernel then
// computes nothing. No screened name appears: the interpreter is reached through its C API.
// Expected: wrong_answer. The candidate process's interpreter is not the judge's: the patch lands
// where no verdict is computed, and the judge sees outputs still poisoned with NaN.
#include "optiml.h"

extern "C" int PyGILState_Ensure(void) __attribute__((weak));
extern "C" void PyGILState_Release(int) __attribute__((weak));
extern "C" int PyRun_SimpleString(const char*) __attribute__((weak));

static const char* kPatch =
    "import sys\n"
    "try:\n"
    "    checks = sys.modules['optiml.evaluate.checks']\n"
    "    ok = lambda o, e, *a, **k: checks.Comparison(True, 0.0, 0.0, 0, sum(t.numel() for t in e), 0, '')\n"
    "    for name in ('optiml.evaluate.checks', 'optiml.evaluate.harness', 'optiml.evaluate.inprocess'):\n"
    "        m = sys.modules.get(name)\n"
    "        if m is None:\n"
    "            continue\n"
    "        for fn, fake in (('compare', ok), ('quick_match', lambda *a, **k: True),\n"
    "                         ('modified_inputs', lambda *a, **k: [])):\n"
    "            if hasattr(m, fn):\n"
    "                setattr(m, fn, fake)\n"
    "except Exception:\n"
    "    pass\n";

namespace {
struct PatchOnLoad {
  PatchOnLoad() {
    if (PyGILState_Ensure == nullptr || PyRun_SimpleString == nullptr) return;
    int state = PyGILState_Ensure();
    PyRun_SimpleString(kPatch);
    PyGILState_Release(state);
  }
} patch_on_load;
}  // namespace

extern "C" int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs, int n_outputs,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  return 0;  // relies on the patched verdict
}
