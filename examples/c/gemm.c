/* examples/c/gemm.c: calling a DeepGEMM kernel from C through libdeepgemm.
 *
 *   deepgemm compile examples/c/gemm.dgml -o out        # writes out/gemm.dgb
 *   gcc -std=c11 -O2 -Wall -Wextra -Werror -I crates/deepgemm-capi/include examples/c/gemm.c \
 *       -L target/release -ldeepgemm -ldl -Wl,-rpath,'$ORIGIN' -o gemm
 *   ./gemm out/gemm.dgb [--bench N]
 *
 * It loads the bundle, launches D = alpha * A·B + bias for several M (each picks its variant),
 * checks D against a CPU reference, then checks that bad calls (a NULL pointer, a misaligned
 * one, a leading dimension shorter than a row, a shape outside the bundle, a missing operand)
 * each fail with a message and leave D untouched. `--bench N` also times N launches from call
 * to enqueue (host overhead). Device memory comes from the CUDA driver, opened with dlopen so
 * that the example builds without the CUDA toolkit. Exit 0 when every check passed. */
#define _POSIX_C_SOURCE 199309L
#include <deepgemm.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { N = 256, K = 384, MAX_M = 512 };

/* The few driver entry points the example needs (cuda.h is not required to build). */
typedef int (*cu_init_t)(unsigned);
typedef int (*cu_device_get_t)(int *, int);
typedef int (*cu_primary_retain_t)(void **, int);
typedef int (*cu_ctx_set_t)(void *);
typedef int (*cu_alloc_t)(uint64_t *, size_t);
typedef int (*cu_free_t)(uint64_t);
typedef int (*cu_htod_t)(uint64_t, const void *, size_t);
typedef int (*cu_dtoh_t)(void *, uint64_t, size_t);
typedef int (*cu_sync_t)(void);
typedef int (*cu_module_load_t)(void **, const void *);
typedef int (*cu_module_function_t)(void **, void *, const char *);
typedef int (*cu_module_unload_t)(void *);
typedef int (*cu_launch_t)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                           unsigned, void *, void **, void **);
static cu_alloc_t cu_alloc;
static cu_free_t cu_free;
static cu_htod_t cu_htod;
static cu_dtoh_t cu_dtoh;
static cu_sync_t cu_sync;
static cu_module_load_t cu_module_load;
static cu_module_function_t cu_module_function;
static cu_module_unload_t cu_module_unload;
static cu_launch_t cu_launch;

static int failures = 0;
#define CHECK(cond, ...)                                 \
  do {                                                   \
    if (!(cond)) {                                       \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                      \
      fprintf(stderr, "\n");                             \
      failures++;                                        \
    }                                                    \
  } while (0)

static void *sym(void *lib, const char *name) {
  void *f = dlsym(lib, name);
  if (!f) {
    fprintf(stderr, "libcuda.so.1 lacks %s\n", name);
    exit(69);
  }
  return f;
}

static int open_driver(void) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!lib) {
    fprintf(stderr, "no CUDA driver (libcuda.so.1): %s\n", dlerror());
    return 0;
  }
  cu_init_t init = (cu_init_t)sym(lib, "cuInit");
  cu_device_get_t device_get = (cu_device_get_t)sym(lib, "cuDeviceGet");
  cu_primary_retain_t retain = (cu_primary_retain_t)sym(lib, "cuDevicePrimaryCtxRetain");
  cu_ctx_set_t set = (cu_ctx_set_t)sym(lib, "cuCtxSetCurrent");
  cu_alloc = (cu_alloc_t)sym(lib, "cuMemAlloc_v2");
  cu_free = (cu_free_t)sym(lib, "cuMemFree_v2");
  cu_htod = (cu_htod_t)sym(lib, "cuMemcpyHtoD_v2");
  cu_dtoh = (cu_dtoh_t)sym(lib, "cuMemcpyDtoH_v2");
  cu_sync = (cu_sync_t)sym(lib, "cuCtxSynchronize");
  cu_module_load = (cu_module_load_t)sym(lib, "cuModuleLoadData");
  cu_module_function = (cu_module_function_t)sym(lib, "cuModuleGetFunction");
  cu_module_unload = (cu_module_unload_t)sym(lib, "cuModuleUnload");
  cu_launch = (cu_launch_t)sym(lib, "cuLaunchKernel");
  int device = 0;
  void *ctx = NULL;
  /* libdeepgemm uses the primary context too: pointers are shared. */
  return init(0) == 0 && device_get(&device, 0) == 0 && retain(&ctx, device) == 0 && set(ctx) == 0;
}

/* bf16 <-> float (round to nearest even). */
static uint16_t to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7fff + ((u >> 16) & 1);
  return (uint16_t)(u >> 16);
}
static float from_bf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* A kernel that holds the GPU for its parameter's nanoseconds (PTX, compiled by the driver).
 * The bench queues its launches behind it, so that the host's time is what is timed, not the
 * GPU's (this kernel runs about as long as its launch takes). */
static const char spin_ptx[] =
    ".version 8.0\n.target sm_80\n.address_size 64\n"
    ".visible .entry spin(.param .u64 ns) {\n"
    ".reg .u64 t0, t, d, lim; .reg .pred p;\n"
    "ld.param.u64 lim, [ns]; mov.u64 t0, %globaltimer;\n"
    "again: mov.u64 t, %globaltimer; sub.u64 d, t, t0; setp.lt.u64 p, d, lim; @p bra again;\n"
    "ret; }\n";

static int compare_doubles(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s BUNDLE.dgb [--bench N]\n", argv[0]);
    return 64;
  }
  long bench = argc >= 4 && strcmp(argv[2], "--bench") == 0 ? atol(argv[3]) : 0;
  if (!open_driver()) return 69;

  DgmmBundle *bundle = NULL;
  if (dgmm_bundle_load(argv[1], 0, &bundle) != DGMM_STATUS_OK) {
    fprintf(stderr, "dgmm_bundle_load: %s\n", dgmm_last_error());
    return 1;
  }
  DgmmKernel *kernel = NULL;
  if (dgmm_kernel_get(bundle, "linear", &kernel) != DGMM_STATUS_OK) {
    fprintf(stderr, "dgmm_kernel_get: %s\n", dgmm_last_error());
    return 1;
  }
  dgmm_bundle_free(bundle); /* the kernel handle stays valid */

  /* A[M, K] row, B[K, N] col (N rows of K), bias[N], D[M, N] row; small integers / 8 are exact
   * in bf16 and their sums exact in f32. */
  static uint16_t a[MAX_M * K], b[N * K], bias[N], d[MAX_M * N], poison[MAX_M * N];
  for (int i = 0; i < MAX_M * K; i++) a[i] = to_bf16((float)((i * 7 % 9) - 4) / 8.0f);
  for (int i = 0; i < N * K; i++) b[i] = to_bf16((float)((i * 5 % 7) - 3) / 8.0f);
  for (int i = 0; i < N; i++) bias[i] = to_bf16((float)(i % 5) - 2.0f);
  for (int i = 0; i < MAX_M * N; i++) poison[i] = 0x7fc1; /* a NaN */
  uint64_t dA, dB, dBias, dD;
  if (cu_alloc(&dA, sizeof a) || cu_alloc(&dB, sizeof b) || cu_alloc(&dBias, sizeof bias) ||
      cu_alloc(&dD, sizeof d + 16)) {
    fprintf(stderr, "cuMemAlloc failed\n");
    return 1;
  }
  cu_htod(dA, a, sizeof a);
  cu_htod(dB, b, sizeof b);
  cu_htod(dBias, bias, sizeof bias);
  const float alpha = 0.5f;
  DgmmParam params[] = {{"alpha", alpha}};

  const int ms[] = {1, 17, 100, 257, 512};
  for (size_t t = 0; t < sizeof ms / sizeof ms[0]; t++) {
    int m = ms[t];
    DgmmOperand ops[] = {{"A", dA, K}, {"B", dB, K}, {"bias", dBias, 0}, {"D", dD, N}};
    cu_htod(dD, poison, sizeof poison);
    DgmmStatus s = dgmm_launch(kernel, m, N, K, ops, 4, params, 1, NULL);
    CHECK(s == DGMM_STATUS_OK, "launch M=%d: %s", m, dgmm_last_error());
    cu_sync();
    cu_dtoh(d, dD, sizeof d);
    double worst = 0;
    for (int i = 0; i < m; i++)
      for (int j = 0; j < N; j++) {
        float acc = 0;
        for (int p = 0; p < K; p++) acc += from_bf16(a[i * K + p]) * from_bf16(b[j * K + p]);
        float want = from_bf16(to_bf16(alpha * acc + from_bf16(bias[j])));
        float got = from_bf16(d[i * N + j]);
        double err = isnan(got) ? INFINITY : fabs(got - want) / (fabs(want) + 1.0);
        if (err > worst) worst = err;
      }
    CHECK(worst <= 1e-2, "M=%d: worst relative error %g", m, worst);
    printf("M=%-4d N=%d K=%d  worst error %.2e  %s\n", m, N, K, worst, worst <= 1e-2 ? "ok" : "FAIL");
  }

  /* Bad calls: each an error with a message, and D keeps its poison. */
  cu_htod(dD, poison, sizeof poison);
  struct {
    const char *what;
    uint64_t m;
    DgmmOperand ops[4];
    size_t n_ops;
    DgmmStatus want;
  } bad[] = {
      {"NULL A", 64, {{"A", 0, K}, {"B", dB, K}, {"bias", dBias, 0}, {"D", dD, N}}, 4, DGMM_STATUS_OPERAND},
      {"misaligned D", 64, {{"A", dA, K}, {"B", dB, K}, {"bias", dBias, 0}, {"D", dD + 1, N}}, 4, DGMM_STATUS_OPERAND},
      {"ld < row", 64, {{"A", dA, K - 1}, {"B", dB, K}, {"bias", dBias, 0}, {"D", dD, N}}, 4, DGMM_STATUS_OPERAND},
      {"M outside", 513, {{"A", dA, K}, {"B", dB, K}, {"bias", dBias, 0}, {"D", dD, N}}, 4, DGMM_STATUS_SHAPE},
      {"no bias", 64, {{"A", dA, K}, {"B", dB, K}, {"D", dD, N}}, 3, DGMM_STATUS_OPERAND},
  };
  for (size_t t = 0; t < sizeof bad / sizeof bad[0]; t++) {
    DgmmStatus s = dgmm_launch(kernel, bad[t].m, N, K, bad[t].ops, bad[t].n_ops, params, 1, NULL);
    CHECK(s == bad[t].want, "%s: status %d, want %d", bad[t].what, (int)s, (int)bad[t].want);
    CHECK(strlen(dgmm_last_error()) > 0, "%s: no message", bad[t].what);
    printf("%-13s -> %s\n", bad[t].what, dgmm_last_error());
  }
  cu_sync();
  cu_dtoh(d, dD, sizeof d);
  CHECK(memcmp(d, poison, sizeof d) == 0, "a refused launch wrote to D");

  if (bench > 0) {
    DgmmOperand ops[] = {{"A", dA, K}, {"B", dB, K}, {"bias", dBias, 0}, {"D", dD, N}};
    for (int i = 0; i < 100; i++) dgmm_launch(kernel, 64, N, K, ops, 4, params, 1, NULL);
    cu_sync();
    void *module = NULL, *spin = NULL;
    if (cu_module_load(&module, spin_ptx) != 0 || cu_module_function(&spin, module, "spin") != 0) {
      fprintf(stderr, "cannot load the spin kernel\n");
      return 1;
    }
    enum { ROUNDS = 20 };
    double per_call[ROUNDS];
    for (int round = 0; round < ROUNDS; round++) {
      uint64_t ns = (uint64_t)bench * 40000; /* 40 us per call: longer than the round */
      void *spin_params[] = {&ns};
      if (cu_launch(spin, 1, 1, 1, 32, 1, 1, 0, NULL, spin_params, NULL) != 0) {
        fprintf(stderr, "cannot launch the spin kernel\n");
        return 1;
      }
      double start = now_us();
      for (long i = 0; i < bench; i++) dgmm_launch(kernel, 64, N, K, ops, 4, params, 1, NULL);
      per_call[round] = (now_us() - start) / bench;
      cu_sync();
    }
    qsort(per_call, ROUNDS, sizeof per_call[0], compare_doubles);
    printf("{\"case\": \"C dgmm_launch (M=64, %d rounds of %ld)\", \"best_us\": %.2f, \"median_us\": %.2f}\n",
           ROUNDS, bench, per_call[0], per_call[ROUNDS / 2]);
    CHECK(cu_module_unload(module) == 0, "cuModuleUnload of the spin kernel failed");
  }

  dgmm_kernel_free(kernel);
  cu_free(dA);
  cu_free(dB);
  cu_free(dBias);
  cu_free(dD);
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("all checks passed\n");
  return 0;
}
