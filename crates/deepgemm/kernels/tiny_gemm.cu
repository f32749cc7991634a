// ---------------------------------------------------------------------------------------------
// tiny backend: D = A · B for GEMMs too small to fill the GPU or to pay for a pipeline (17x33x65,
// 127x129x255): their time is the launch and a few memory latencies, so this kernel keeps the
// path from launch to store short. No shared memory, no barrier, no ring:
//   - Each warp owns WARP_M x WARP_N outputs; the block's WARPS warps sit side by side along N
//     and share their A rows through L1.
//   - The lanes split K: lane l takes k = l, l + 32, ... (a warp's load covers 32 consecutive
//     elements of a K-major row). Elements are loaded one by one from global memory, so any
//     alignment, leading dimension and layout works as it is (no repack), and converted to f32.
//   - UNROLL warp-wide steps of K are loaded before any of them is summed, so a lane has
//     UNROLL x (WARP_M + WARP_N) loads in flight and K of at most 32 x UNROLL costs one memory
//     latency.
//   - The sums are f32 FFMA; a transposing butterfly across the warp leaves each output's sum in
//     one lane, which applies the spec's epilogue and stores it.
// ---------------------------------------------------------------------------------------------

constexpr int TILE_M = {{TILE_M}};   // block tile: WARP_M rows ...
constexpr int TILE_N = {{TILE_N}};   // ... by WARPS x WARP_N columns
constexpr int TILE_K = {{TILE_K}};   // K loaded per loop turn: 32 x UNROLL
constexpr int THREADS = {{THREADS}};
constexpr int WARPS = THREADS / 32;
constexpr int WARP_M = TILE_M;
constexpr int WARP_N = TILE_N / WARPS;
constexpr int UNROLL = TILE_K / 32;
constexpr int VALUES = WARP_M * WARP_N;  // partial sums per lane

constexpr bool A_ROW = {{A_ROW}};  // A[M,K] row-major (K contiguous), else col-major
constexpr bool B_ROW = {{B_ROW}};  // B[K,N] row-major (N contiguous), else col-major
constexpr bool D_ROW = {{D_ROW}};  // D[M,N] row-major (N contiguous), else col-major

typedef {{A_TYPE}} ElementA;
typedef {{B_TYPE}} ElementB;
typedef {{D_TYPE}} ElementD;

static_assert(WARP_N * WARPS == TILE_N, "the warps split the tile's columns evenly");
static_assert(UNROLL * 32 == TILE_K, "K per turn is whole warp-wide steps");
static_assert(VALUES <= 32 && (VALUES & (VALUES - 1)) == 0, "the butterfly takes 2^n <= 32 sums");

extern "C" __global__ void __launch_bounds__(THREADS, 1) {{ENTRY}}({{PARAMS}}) {
  // First of all: the vectors read below may be an earlier kernel's output.
  dg_wait_for_prior_grids();
{{BINDINGS}}
{{EPILOGUE}}

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int tiles_n = (N + TILE_N - 1) / TILE_N;
  const int m0 = (blockIdx.x / tiles_n) * TILE_M;
  const int n0 = (blockIdx.x % tiles_n) * TILE_N + warp * WARP_N;
  // The warp's rows of A and columns of B; those past the extent read row M - 1 (column N - 1)
  // instead, whose sums are not stored, so no load needs a test of its row.
  long long a_row[WARP_M], b_col[WARP_N];
#pragma unroll
  for (int i = 0; i < WARP_M; ++i) a_row[i] = min(m0 + i, M - 1) * (A_ROW ? lda : 1LL);
#pragma unroll
  for (int j = 0; j < WARP_N; ++j) b_col[j] = min(n0 + j, N - 1) * (B_ROW ? 1LL : ldb);
  const long long a_k = A_ROW ? 1LL : lda, b_k = B_ROW ? ldb : 1LL;  // one step of K

  float acc[VALUES];
#pragma unroll
  for (int v = 0; v < VALUES; ++v) acc[v] = 0.0f;
  for (int k0 = 0; k0 < K; k0 += TILE_K) {
    float a[UNROLL][WARP_M], b[UNROLL][WARP_N];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const int k = k0 + 32 * u + lane;
      const bool inside = k < K;  // past K: zeros on both sides
#pragma unroll
      for (int i = 0; i < WARP_M; ++i)
        a[u][i] = inside ? dg_to_float(gA[a_row[i] + k * a_k]) : 0.0f;
#pragma unroll
      for (int j = 0; j < WARP_N; ++j)
        b[u][j] = inside ? dg_to_float(gB[b_col[j] + k * b_k]) : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u)
#pragma unroll
      for (int i = 0; i < WARP_M; ++i)
#pragma unroll
        for (int j = 0; j < WARP_N; ++j)
          acc[i * WARP_N + j] = fmaf(a[u][i], b[u][j], acc[i * WARP_N + j]);
  }

  // ---- epilogue: one lane per output, after the transposing butterfly ----
  const float sum = dg_warp_transpose_sum<VALUES>(acc);
  constexpr int LANES_PER_VALUE = 32 / VALUES;
  const int value = lane / LANES_PER_VALUE;
  const int m = m0 + value / WARP_N, n = n0 + value % WARP_N;
  dg_amax<AMAX, AMAX_PER_ROW, 1> amax(amax_out);
  if (lane % LANES_PER_VALUE == 0 && m < M && n < N) {
    const long long offset = D_ROW ? (long long)m * ldd + n : (long long)n * ldd + m;
    const float v = epilogue(sum, m, n);
    amax.add(0, m, v);
    dg_store(gD + offset, v);
  }
  amax.flush_rows<1>();
  amax.finish();
}
