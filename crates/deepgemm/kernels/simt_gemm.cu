// ---------------------------------------------------------------------------------------------
// simt backend: CUDA-core GEMM for every input dtype on every architecture.
// 256 threads form a 16x16 grid; thread (tm, tn) owns the THREAD_M x THREAD_N outputs
// (tm + 16 i, tn + 16 j) of the block tile, so each k step reads 16 consecutive words of one
// staged operand (conflict-free) and broadcasts the other.
// Global loads are element-wise (any alignment, any layout), converted to the accumulator type
// (and dequantized by their FP8 scales) on the way into shared memory.
// ---------------------------------------------------------------------------------------------

constexpr int TILE_M = {{TILE_M}};
constexpr int TILE_N = {{TILE_N}};
constexpr int TILE_K = {{TILE_K}};
constexpr int STAGES = {{STAGES}};    // 1: load, sync, compute; 2: the next tile is fetched into
                                      //    registers while the current one is multiplied
constexpr int GROUP_M = {{GROUP_M}};  // tile rows per raster group (L2 reuse)
constexpr int THREADS = 256;
constexpr int THREAD_M = TILE_M / 16;
constexpr int THREAD_N = TILE_N / 16;

constexpr bool A_ROW = {{A_ROW}};  // A[M,K] row-major (K contiguous), else col-major
constexpr bool B_ROW = {{B_ROW}};  // B[K,N] row-major (N contiguous), else col-major
constexpr bool D_ROW = {{D_ROW}};  // D[M,N] row-major (N contiguous), else col-major
constexpr bool A_SCALED = {{A_SCALED}};  // A is multiplied by its scale tensor on load
constexpr bool B_SCALED = {{B_SCALED}};

typedef {{A_TYPE}} ElementA;
typedef {{B_TYPE}} ElementB;
typedef {{D_TYPE}} ElementD;
typedef {{ACC_TYPE}} Acc;  // accumulator and staging type
constexpr bool ACC_IS_INT = {{ACC_IS_INT}};  // i8 inputs accumulate exactly in int32

// Shared memory (codegen::space::smem_layout): per stage, A staged as [TILE_K][TILE_M + PAD]
// and B as [TILE_K][TILE_N + PAD] in the accumulator type; A's stages come first.
constexpr int PAD = {{PAD}};
constexpr int A_STRIDE = TILE_M + PAD;
constexpr int B_STRIDE = TILE_N + PAD;
constexpr int A_STAGE_ELEMS = TILE_K * A_STRIDE;
constexpr int B_STAGE_ELEMS = TILE_K * B_STRIDE;
static_assert(A_STAGE_ELEMS * 4 == {{A_STAGE_BYTES}}, "A stage size differs from the plan");
static_assert(B_STAGE_ELEMS * 4 == {{B_STAGE_BYTES}}, "B stage size differs from the plan");

constexpr int A_LOADS = TILE_M * TILE_K / THREADS;  // elements of A each thread stages per tile
constexpr int B_LOADS = TILE_N * TILE_K / THREADS;
static_assert(A_LOADS * THREADS == TILE_M * TILE_K, "A tile must split evenly over threads");
static_assert(B_LOADS * THREADS == TILE_N * TILE_K, "B tile must split evenly over threads");

template <typename T>
__device__ __forceinline__ Acc dg_to_acc(T x, float scale) {
  if constexpr (ACC_IS_INT) {
    return (Acc)x;
  } else {
    return dg_to_float(x) * scale;
  }
}

extern "C" __global__ void __launch_bounds__(THREADS, 1) {{ENTRY}}({{PARAMS}}) {
  // First of all: the scales and vectors read below may be the repack copy's output.
  dg_wait_for_prior_grids();
{{BINDINGS}}
{{SCALES}}
{{EPILOGUE}}

  extern __shared__ __align__(16) unsigned char dg_smem[];
  Acc* smem_a = reinterpret_cast<Acc*>(dg_smem);
  Acc* smem_b = smem_a + STAGES * A_STAGE_ELEMS;

  int tile_m, tile_n;
  dg_tile_coords<GROUP_M>(blockIdx.x, (M + TILE_M - 1) / TILE_M, (N + TILE_N - 1) / TILE_N,
                          tile_m, tile_n);
  const int m0 = tile_m * TILE_M;
  const int n0 = tile_n * TILE_N;
  const int tid = threadIdx.x;
  // The grid index that runs fastest across a warp follows D's contiguous dimension, so the
  // epilogue's stores coalesce.
  const int tm = D_ROW ? tid / 16 : tid % 16;
  const int tn = D_ROW ? tid % 16 : tid / 16;

  Acc acc[THREAD_M][THREAD_N];
#pragma unroll
  for (int i = 0; i < THREAD_M; ++i)
#pragma unroll
    for (int j = 0; j < THREAD_N; ++j) acc[i][j] = Acc(0);

  // Staging registers: this thread's share of the next k-tile. Consecutive threads take
  // consecutive elements along each operand's contiguous dimension (coalesced loads).
  Acc a_next[A_LOADS];
  Acc b_next[B_LOADS];

  auto fetch = [&](int k0) {
#pragma unroll
    for (int i = 0; i < A_LOADS; ++i) {
      const int e = tid + i * THREADS;
      const int m = A_ROW ? e / TILE_K : e % TILE_M;
      const int k = A_ROW ? e % TILE_K : e / TILE_M;
      const int gm = m0 + m, gk = k0 + k;
      Acc v = Acc(0);
      if (gm < M && gk < K) {
        const long long offset = A_ROW ? (long long)gm * lda + gk : (long long)gk * lda + gm;
        v = dg_to_acc(gA[offset], A_SCALED ? scale_a(gm, gk) : 1.0f);
      }
      a_next[i] = v;
    }
#pragma unroll
    for (int i = 0; i < B_LOADS; ++i) {
      const int e = tid + i * THREADS;
      const int n = B_ROW ? e % TILE_N : e / TILE_K;
      const int k = B_ROW ? e / TILE_N : e % TILE_K;
      const int gn = n0 + n, gk = k0 + k;
      Acc v = Acc(0);
      if (gn < N && gk < K) {
        const long long offset = B_ROW ? (long long)gk * ldb + gn : (long long)gn * ldb + gk;
        v = dg_to_acc(gB[offset], B_SCALED ? scale_b(gk, gn) : 1.0f);
      }
      b_next[i] = v;
    }
  };

  auto stash = [&](int stage) {
    Acc* sa = smem_a + stage * A_STAGE_ELEMS;
    Acc* sb = smem_b + stage * B_STAGE_ELEMS;
#pragma unroll
    for (int i = 0; i < A_LOADS; ++i) {
      const int e = tid + i * THREADS;
      const int m = A_ROW ? e / TILE_K : e % TILE_M;
      const int k = A_ROW ? e % TILE_K : e / TILE_M;
      sa[k * A_STRIDE + m] = a_next[i];
    }
#pragma unroll
    for (int i = 0; i < B_LOADS; ++i) {
      const int e = tid + i * THREADS;
      const int n = B_ROW ? e % TILE_N : e / TILE_K;
      const int k = B_ROW ? e / TILE_N : e % TILE_K;
      sb[k * B_STRIDE + n] = b_next[i];
    }
  };

  auto multiply = [&](int stage) {
    const Acc* sa = smem_a + stage * A_STAGE_ELEMS + tm;
    const Acc* sb = smem_b + stage * B_STAGE_ELEMS + tn;
#pragma unroll
    for (int k = 0; k < TILE_K; ++k) {
      Acc a_col[THREAD_M], b_row[THREAD_N];
#pragma unroll
      for (int i = 0; i < THREAD_M; ++i) a_col[i] = sa[k * A_STRIDE + 16 * i];
#pragma unroll
      for (int j = 0; j < THREAD_N; ++j) b_row[j] = sb[k * B_STRIDE + 16 * j];
#pragma unroll
      for (int i = 0; i < THREAD_M; ++i)
#pragma unroll
        for (int j = 0; j < THREAD_N; ++j) acc[i][j] += a_col[i] * b_row[j];
    }
  };

  // ---- main loop over k-tiles ----
  const int k_tiles = (K + TILE_K - 1) / TILE_K;
  if constexpr (STAGES == 2) {
    if (k_tiles > 0) {
      fetch(0);
      stash(0);
    }
    __syncthreads();
    for (int t = 0; t < k_tiles; ++t) {
      const bool has_next = t + 1 < k_tiles;
      if (has_next) fetch((t + 1) * TILE_K);  // in flight while this tile is multiplied
      multiply(t & 1);
      if (has_next) stash((t + 1) & 1);      // the other stage: last read before the previous sync
      __syncthreads();
    }
  } else {
    for (int t = 0; t < k_tiles; ++t) {
      fetch(t * TILE_K);
      __syncthreads();  // everyone is done multiplying the previous tile
      stash(0);
      __syncthreads();
      multiply(0);
    }
  }

  // ---- epilogue: each thread applies the spec's expression to its outputs ----
  // AMAX: the largest |value| of each of the thread's THREAD_M rows (or of all).
  dg_amax<AMAX, AMAX_PER_ROW, THREAD_M> amax(amax_out);
#pragma unroll
  for (int i = 0; i < THREAD_M; ++i) {
    const int m = m0 + tm + 16 * i;
    if (m >= M) continue;
#pragma unroll
    for (int j = 0; j < THREAD_N; ++j) {
      const int n = n0 + tn + 16 * j;
      if (n >= N) continue;
      const long long offset = D_ROW ? (long long)m * ldd + n : (long long)n * ldd + m;
      const float v = epilogue(dg_to_float(acc[i][j]), m, n);
      amax.add(i, m, v);
      dg_store(gD + offset, v);
    }
  }
  amax.flush_rows<1>();
  amax.finish();
}
