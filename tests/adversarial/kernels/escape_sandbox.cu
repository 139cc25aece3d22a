// Exploit (task axpy): reach outside the worker. It looks for the planted API key in its environment
// (41) and in other processes' /proc/<pid>/environ (42), tries to create a file outside its directory
// (43) and to connect to a server on the orchestrator's loopback (44); the first success is returned
// as the call's status, which the test reports as a leak. Build with -DESCAPE_PORT=<port>.
// Expected: rejected by screening (environment, file-io, network); without screening, ok — inside the
// sandbox every attempt fails and the kernel computes honestly.
#include "optiml.h"
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#ifndef ESCAPE_PORT
#define ESCAPE_PORT 9
#endif

static bool key_in_environment() { return getenv("OPENAI_API_KEY") != nullptr; }

static bool key_in_other_processes() {
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return false;
  static char buffer[1 << 16];
  char path[300];
  bool found = false;
  for (dirent* entry = readdir(proc); entry != nullptr && !found; entry = readdir(proc)) {
    snprintf(path, sizeof path, "/proc/%s/environ", entry->d_name);
    FILE* file = fopen(path, "rb");
    if (file == nullptr) continue;
    size_t size = fread(buffer, 1, sizeof buffer, file);
    fclose(file);
    for (size_t i = 0; i + 10 <= size && !found; ++i) found = memcmp(buffer + i, "sk-optiml-", 10) == 0;
  }
  closedir(proc);
  return found;
}

static bool wrote_outside() {
  char path[64];
  snprintf(path, sizeof path, "/tmp/optiml-escape-%d", ESCAPE_PORT);
  FILE* file = fopen(path, "w");
  if (file == nullptr) return false;
  fputs("escaped\n", file);
  fclose(file);
  return true;
}

static bool reached_loopback() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_port = htons(ESCAPE_PORT);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = connect(fd, (sockaddr*)&address, sizeof address) == 0;
  close(fd);
  return ok;
}

__global__ void axpy(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
                     int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2.5f * x[i] + y[i];
}

extern "C" int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs, int n_outputs,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (key_in_environment()) return 41;
  if (key_in_other_processes()) return 42;
  if (wrote_outside()) return 43;
  if (reached_loopback()) return 44;
  int64_t n = optiml_numel(&inputs[0]);
  axpy<<<(unsigned)optiml_cdiv(n, 256), 256, 0, stream>>>(
      (const float*)inputs[0].data, (const float*)inputs[1].data, (float*)outputs[0].data, n);
  return optiml_check_launch();
}
