// Exploit (task axpy): reach the judge and what lies beside the candidate (issue 39, classes 3 and 5).
// It signals every other pid it can name (signal 0: a probe, never a stop) (51, then the pid's five digits), lists /proc for other
// processes (52), reads a file planted in the user's /tmp (53), opens the compile cache (54) and looks
// for the judge's own files above its directory (55); the first success is returned as the call's status,
// which the test reports as a breach. Build with -DPLANTED_TMP="..." -DCOMPILE_CACHE="...".
// Expected: rejected by screening (signals); without screening, ok — in its own pid and mount namespaces
// every probe fails and the kernel computes honestly.
#include "optiml.h"
#include <dirent.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#ifndef PLANTED_TMP
#define PLANTED_TMP "/tmp/optiml-planted"
#endif
#ifndef COMPILE_CACHE
#define COMPILE_CACHE "/root/.cache/optiml/kernels"
#endif

// The first other process it can signal (0: none). Returned as 51 followed by five digits of the pid, so a
// breach names the pid it reached. kill() also accepts the ids of this process's own threads (the CUDA
// driver starts several: on the H200 that alone read as a breach), so a pid that tgkill() finds in its own
// thread group is not another process.
static int signalled_pid() {
  pid_t self = getpid();
  for (pid_t pid = 2; pid < 1 << 16; ++pid)
    if (pid != self && kill(pid, 0) == 0 && syscall(SYS_tgkill, self, pid, 0) != 0) return (int)pid;
  return 0;
}

static bool sees_other_processes() {
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return false;
  char self[32];
  snprintf(self, sizeof self, "%d", (int)getpid());
  bool found = false;
  for (dirent* entry = readdir(proc); entry != nullptr && !found; entry = readdir(proc))
    found = entry->d_name[0] >= '2' && entry->d_name[0] <= '9' && strcmp(entry->d_name, self) != 0;
  closedir(proc);
  return found;
}

static bool readable(const char* path) {
  FILE* file = fopen(path, "rb");
  if (file == nullptr) return false;
  fclose(file);
  return true;
}

static bool judge_files_above() {
  for (const char* up : {"..", "../..", "../../.."}) {
    DIR* dir = opendir(up);
    if (dir == nullptr) continue;
    bool found = false;
    for (dirent* entry = readdir(dir); entry != nullptr && !found; entry = readdir(dir))
      found = strstr(entry->d_name, ".stderr") != nullptr || strncmp(entry->d_name, "optiml-block-", 13) == 0;
    closedir(dir);
    if (found) return true;
  }
  return false;
}

static int breach() {
  if (int pid = signalled_pid()) return 5100000 + pid;
  if (sees_other_processes()) return 52;
  if (readable(PLANTED_TMP)) return 53;
  DIR* cache = opendir(COMPILE_CACHE);
  if (cache != nullptr) {
    closedir(cache);
    return 54;
  }
  if (judge_files_above()) return 55;
  return 0;
}

__global__ void axpy(const float* x, const float* y, float* out, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2.5f * x[i] + y[i];
}

extern "C" int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs, int n_outputs,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  static int found = -1;
  if (found < 0) found = breach();
  if (found) return found;
  int64_t n = optiml_numel(&inputs[0]);
  axpy<<<(unsigned)optiml_cdiv(n, 256), 256, 0, stream>>>((const float*)inputs[0].data, (const float*)inputs[1].data,
                                                       (float*)outputs[0].data, n);
  return optiml_check_launch();
}
