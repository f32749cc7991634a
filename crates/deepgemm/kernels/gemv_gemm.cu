// ---------------------------------------------------------------------------------------------
// gemv backend: D = A · B where one of M and N is a few (at most 8 per block): decode-sized M,
// or a handful of output columns. Such a GEMM is a stream of the large operand ("X": rows of K
// contiguous elements) against the few rows of the small one ("Y"), bound by DRAM, so this
// kernel does not tile for reuse: it reads X once, with 16-byte loads at any alignment, and sums
// on the CUDA cores in f32.
//   - The block owns ROWS rows of X and SMALL rows of Y (one tile of D). Its 8 warps take
//     ROWS_PER_WARP rows of X each; along K the lanes take consecutive 16-byte words, so a warp
//     reads 512 contiguous bytes of each of its rows per step, and keeps AHEAD steps in flight.
//   - Y is staged in shared memory chunk by chunk (TILE_K elements of every row), zero past K and
//     past its extent; each step a lane reads its words of Y once for all of its rows of X.
//   - A row that does not start on 16 bytes is read as the aligned words it overlaps, and each
//     lane shifts the pair its elements straddle into place (dg_bytes_from); words the operand's
//     extent only partly covers are read element by element, so nothing outside it is touched.
//   - At the end each lane holds partial sums of ROWS_PER_WARP x SMALL outputs: a transposing
//     butterfly (N - 1 + 5 - log2 N shuffles for N sums) leaves each output's sum in one lane,
//     which applies the spec's epilogue and stores it.
// ---------------------------------------------------------------------------------------------

constexpr int TILE_M = {{TILE_M}};
constexpr int TILE_N = {{TILE_N}};
constexpr int TILE_K = {{TILE_K}};    // Y's chunk along K, staged at once
constexpr int GROUP_M = {{GROUP_M}};  // tile rows per raster group
constexpr int THREADS = 256;
constexpr int WARPS = THREADS / 32;

constexpr bool A_ROW = {{A_ROW}};  // A[M,K] row-major (K contiguous), else col-major
constexpr bool B_ROW = {{B_ROW}};  // B[K,N] row-major (N contiguous), else col-major
constexpr bool D_ROW = {{D_ROW}};  // D[M,N] row-major (N contiguous), else col-major

typedef {{A_TYPE}} ElementA;
typedef {{B_TYPE}} ElementB;
typedef {{D_TYPE}} ElementD;

// Which operand is streamed: A when the tile is a few columns of D wide, else B.
constexpr bool X_IS_A = TILE_N <= 8;
constexpr int ROWS = X_IS_A ? TILE_M : TILE_N;   // rows of X per block
constexpr int SMALL = X_IS_A ? TILE_N : TILE_M;  // rows of Y per block
constexpr int ROWS_PER_WARP = ROWS / WARPS;
constexpr int VALUES = ROWS_PER_WARP * SMALL;    // partial sums per lane
template <bool C, typename T, typename F> struct dg_pick { typedef T type; };
template <typename T, typename F> struct dg_pick<false, T, F> { typedef F type; };
typedef typename dg_pick<X_IS_A, ElementA, ElementB>::type ElementX;
typedef typename dg_pick<X_IS_A, ElementB, ElementA>::type ElementY;
constexpr int ELEM_BYTES = sizeof(ElementA);  // A and B have one element size (the check)
constexpr int ELEMS_PER_WORD = 16 / ELEM_BYTES;
constexpr int STEP_K = 32 * ELEMS_PER_WORD;      // K one warp-wide load of a row covers
constexpr int STEPS = TILE_K / STEP_K;
constexpr int Y_WORDS = SMALL * TILE_K / ELEMS_PER_WORD;  // 16-byte words of one Y chunk

static_assert(sizeof(ElementA) == sizeof(ElementB) && (ELEM_BYTES == 2 || ELEM_BYTES == 4),
              "A and B have one element size, 2 or 4 bytes");
static_assert(A_ROW && !B_ROW, "both operands are K-major");
static_assert(ROWS % WARPS == 0 && ROWS_PER_WARP >= 1, "every warp owns whole rows of X");
static_assert(VALUES <= 32 && (VALUES & (VALUES - 1)) == 0, "the butterfly takes 2^n <= 32");
static_assert(TILE_K % STEP_K == 0, "a chunk is whole warp-wide steps");
static_assert(SMALL * TILE_K * ELEM_BYTES == (X_IS_A ? {{B_STAGE_BYTES}} : {{A_STAGE_BYTES}}),
              "the Y chunk differs from the plan's stage");

{{BYTES_FROM}}

// A row's 16-byte word is read in two halves, so that a warp has many in flight: `dg_row_issue`
// loads the aligned words the word at `at` overlaps (the second only where the row is not
// 16-byte aligned, SKEWED), with no branch that waits on them; `dg_row_finish`, steps later,
// shifts them into place. [first, last) bounds the operand's bytes: a word whose aligned pair
// they do not wholly hold is not loaded there but read element by element by `dg_row_finish`,
// so nothing outside the operand is touched. `valid` (1..8) of the word's elements are the
// row's; the rest come back zero.
struct dg_raw_word {
  uint4 lo, hi;
};

template <bool SKEWED>
__device__ __forceinline__ bool dg_row_pair_inside(const char* at, const char* first,
                                                   const char* last) {
  const char* lo = at - (reinterpret_cast<unsigned long long>(at) & 15);
  return lo >= first && lo + (SKEWED ? 32 : 16) <= last;
}

template <bool SKEWED>
__device__ __forceinline__ void dg_row_issue(dg_raw_word& raw, const char* at, const char* first,
                                             const char* last) {
  const char* lo = at - (reinterpret_cast<unsigned long long>(at) & 15);
  raw.lo = raw.hi = make_uint4(0, 0, 0, 0);
  if (dg_row_pair_inside<SKEWED>(at, first, last)) {
    raw.lo = *reinterpret_cast<const uint4*>(lo);
    if constexpr (SKEWED) raw.hi = *reinterpret_cast<const uint4*>(lo + 16);
  }
}

template <bool SKEWED>
__device__ __forceinline__ uint4 dg_row_finish(const dg_raw_word& raw, const char* at, int valid,
                                               const char* first, const char* last) {
  uint4 w;
  if (dg_row_pair_inside<SKEWED>(at, first, last)) {
    const int skew = (int)(reinterpret_cast<unsigned long long>(at) & 15);
    w = SKEWED && skew ? dg_bytes_from(raw.lo, raw.hi, skew) : raw.lo;
  } else {  // an edge of the operand: element by element
    unsigned u[4] = {0u, 0u, 0u, 0u};
#pragma unroll
    for (int i = 0; i < ELEMS_PER_WORD; ++i) {
      const char* p = at + i * ELEM_BYTES;
      if (p >= first && p + ELEM_BYTES <= last) {
        const unsigned bits = ELEM_BYTES == 2 ? *reinterpret_cast<const unsigned short*>(p)
                                              : *reinterpret_cast<const unsigned*>(p);
        u[i * ELEM_BYTES / 4] |= bits << (8 * (i * ELEM_BYTES % 4));
      }
    }
    w = make_uint4(u[0], u[1], u[2], u[3]);
  }
  if (valid < ELEMS_PER_WORD) {  // the row ends inside the word: the rest is not this row's
    unsigned u[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int kept = min(max(valid * ELEM_BYTES - 4 * j, 0), 4);  // bytes of word j kept
      u[j] &= kept == 4 ? ~0u : (1u << (8 * kept)) - 1u;
    }
    w = make_uint4(u[0], u[1], u[2], u[3]);
  }
  return w;
}

// Word `w` of `T` elements (2 or 4 bytes) as floats.
__device__ __forceinline__ float dg_bits_to_float(unsigned b, dg_bf16) { return __uint_as_float(b << 16); }
__device__ __forceinline__ float dg_bits_to_float(unsigned b, dg_f16) {
  dg_f16 h;
  h.bits = (unsigned short)b;
  return dg_to_float(h);
}
__device__ __forceinline__ float dg_bits_to_float(unsigned b, float) { return __uint_as_float(b); }
template <typename T>
__device__ __forceinline__ void dg_word_floats(uint4 w, float (&f)[ELEMS_PER_WORD]) {
  const unsigned u[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
  for (int i = 0; i < ELEMS_PER_WORD; ++i) {
    const unsigned bits = ELEM_BYTES == 2 ? (u[i / 2] >> (16 * (i % 2))) & 0xFFFFu : u[i];
    f[i] = dg_bits_to_float(bits, T{});
  }
}

// What the main loop reads: X and Y as bytes (`ld*` bytes per row, [base, *_last) spanned),
// the block's first row of Y and the warp's first row of X, and Y's staged chunk.
struct dg_gemv_view {
  const char* x;
  const char* y;
  long long ldx, ldy;
  const char* x_last;
  const char* y_last;
  int x_rows, y_rows, row0, y0, K;
  uint4* smem_y;  // [SMALL][TILE_K / ELEMS_PER_WORD] words
};

// Y's chunk starting at column k0 into shared memory, Y_BATCH words per thread in flight at a
// time (more would spill beside the ring of X), each batch's shifts after all its loads.
constexpr int Y_PER_THREAD = (Y_WORDS + THREADS - 1) / THREADS;
constexpr int Y_BATCH = Y_PER_THREAD < 2 ? Y_PER_THREAD : 2;
template <bool SKEWED>
__device__ __forceinline__ void dg_stage_y(const dg_gemv_view& v, int k0) {
  auto at = [&](int w) {
    const int s = w / (TILE_K / ELEMS_PER_WORD);
    const int col = k0 + (w % (TILE_K / ELEMS_PER_WORD)) * ELEMS_PER_WORD;
    return v.y + (long long)(v.y0 + s) * v.ldy + (long long)col * ELEM_BYTES;
  };
  auto live = [&](int w) {
    const int s = w / (TILE_K / ELEMS_PER_WORD);
    const int col = k0 + (w % (TILE_K / ELEMS_PER_WORD)) * ELEMS_PER_WORD;
    return w < Y_WORDS && v.y0 + s < v.y_rows && col < v.K;
  };
#pragma unroll
  for (int b = 0; b < Y_PER_THREAD; b += Y_BATCH) {
    dg_raw_word raw[Y_BATCH];
#pragma unroll
    for (int i = 0; i < Y_BATCH; ++i) {
      const int w = threadIdx.x + (b + i) * THREADS;
      if (live(w)) dg_row_issue<SKEWED>(raw[i], at(w), v.y, v.y_last);
    }
#pragma unroll
    for (int i = 0; i < Y_BATCH; ++i) {
      const int w = threadIdx.x + (b + i) * THREADS;
      const int col = k0 + (w % (TILE_K / ELEMS_PER_WORD)) * ELEMS_PER_WORD;
      if (w < Y_WORDS)
        v.smem_y[w] = live(w) ? dg_row_finish<SKEWED>(raw[i], at(w), min(v.K - col, ELEMS_PER_WORD),
                                                      v.y, v.y_last)
                              : make_uint4(0, 0, 0, 0);
    }
  }
}

// The stream of X into the lane's partial sums: step t covers columns
// [t * STEP_K, (t + 1) * STEP_K) of the warp's rows, and AHEAD steps' loads are in flight in a
// ring, across chunk boundaries too. SX / SY: some row of the block's X / Y tile is not 16-byte aligned, so every
// word of it takes two aligned loads.
template <bool SX, bool SY>
__device__ __forceinline__ void dg_gemv_stream(const dg_gemv_view& v, float (&acc)[VALUES]) {
  // 8 words per lane, or 4 pairs where they straddle; half as many beside 16 partial sums
  // (what fits in the registers of two blocks per SM without spilling).
  constexpr int WORDS = (SX ? 4 : 8) / (VALUES >= 16 ? 2 : 1);
  constexpr int AHEAD = WORDS / ROWS_PER_WARP > 0 ? WORDS / ROWS_PER_WARP : 1;
  const int lane = threadIdx.x % 32;
  const int total_steps = (v.K + STEP_K - 1) / STEP_K;
  auto at = [&](int r, int step) {
    return v.x + (long long)(v.row0 + r) * v.ldx +
           (long long)(step * STEP_K + lane * ELEMS_PER_WORD) * ELEM_BYTES;
  };
  auto live = [&](int r, int step) {
    return step < total_steps && v.row0 + r < v.x_rows &&
           step * STEP_K + lane * ELEMS_PER_WORD < v.K;
  };
  dg_raw_word ring[AHEAD][ROWS_PER_WARP];
  auto issue = [&](dg_raw_word (&slot)[ROWS_PER_WARP], int step) {
#pragma unroll
    for (int r = 0; r < ROWS_PER_WARP; ++r)
      if (live(r, step)) dg_row_issue<SX>(slot[r], at(r, step), v.x, v.x_last);
  };
#pragma unroll
  for (int u = 0; u < AHEAD; ++u) issue(ring[u], u);

  for (int step0 = 0; step0 < total_steps; step0 += AHEAD) {
#pragma unroll
    for (int u = 0; u < AHEAD; ++u) {
      const int step = step0 + u;
      if (step >= total_steps) break;
      if (step % STEPS == 0) {  // a new chunk of Y (the same step in every warp)
        __syncthreads();        // everyone is done reading the previous chunk
        dg_stage_y<SY>(v, step * STEP_K);
        __syncthreads();
      }
      float x[ROWS_PER_WARP][ELEMS_PER_WORD];
      const int col = step * STEP_K + lane * ELEMS_PER_WORD;
#pragma unroll
      for (int r = 0; r < ROWS_PER_WARP; ++r) {
        const uint4 w = live(r, step) ? dg_row_finish<SX>(ring[u][r], at(r, step),
                                                          min(v.K - col, ELEMS_PER_WORD), v.x,
                                                          v.x_last)
                                      : make_uint4(0, 0, 0, 0);
        dg_word_floats<ElementX>(w, x[r]);
      }
      issue(ring[u], step + AHEAD);  // refill the slot just read
      const int y_word = (step % STEPS) * 32 + lane;
#pragma unroll
      for (int s = 0; s < SMALL; ++s) {
        float y[ELEMS_PER_WORD];
        dg_word_floats<ElementY>(v.smem_y[s * (TILE_K / ELEMS_PER_WORD) + y_word], y);
#pragma unroll
        for (int r = 0; r < ROWS_PER_WARP; ++r)
#pragma unroll
          for (int i = 0; i < ELEMS_PER_WORD; ++i) acc[r * SMALL + s] += x[r][i] * y[i];
      }
    }
  }
}

// Sums v[0..N) over the warp's lanes, transposing as it goes: each halving trades half the
// values with the lane `offset` away, so N values take N - 1 + (5 - log2 N) shuffles in all.
// Lane l ends with the sum of value (l >> (5 - log2 N)).
template <int N>
__device__ __forceinline__ float dg_warp_transpose_sum(float (&v)[VALUES]) {
  const int lane = threadIdx.x % 32;
  int live = N;
#pragma unroll
  for (int offset = 16; offset >= 1; offset /= 2) {
    if (live > 1) {
      const int half = live / 2;
      const bool upper = lane & offset;
#pragma unroll
      for (int i = 0; i < VALUES / 2; ++i) {
        if (i < half) {
          const float send = upper ? v[i] : v[i + half];
          const float keep = upper ? v[i + half] : v[i];
          v[i] = keep + __shfl_xor_sync(0xffffffffu, send, offset);
        }
      }
      live = half;
    } else {
      v[0] += __shfl_xor_sync(0xffffffffu, v[0], offset);
    }
  }
  return v[0];
}

extern "C" __global__ void __launch_bounds__(THREADS, 2) {{ENTRY}}({{PARAMS}}) {
  // First of all: the vectors read below may be an earlier kernel's output.
  dg_wait_for_prior_grids();
{{BINDINGS}}
{{EPILOGUE}}

  extern __shared__ __align__(16) unsigned char dg_smem[];
  uint4* smem_y = reinterpret_cast<uint4*>(dg_smem);  // [SMALL][TILE_K / ELEMS_PER_WORD] words

  int tile_m, tile_n;
  dg_tile_coords<GROUP_M>(blockIdx.x, (M + TILE_M - 1) / TILE_M, (N + TILE_N - 1) / TILE_N,
                          tile_m, tile_n);
  const int x0 = X_IS_A ? tile_m * TILE_M : tile_n * TILE_N;  // first row of X and of Y
  const int y0 = X_IS_A ? tile_n * TILE_N : tile_m * TILE_M;
  const int x_rows = X_IS_A ? M : N, y_rows = X_IS_A ? N : M;
  // Both K-major: row i of X (or Y) is A's row m or B's column n, `ld` elements after row i - 1.
  const char* gX = reinterpret_cast<const char*>(X_IS_A ? (const void*)gA : (const void*)gB);
  const char* gY = reinterpret_cast<const char*>(X_IS_A ? (const void*)gB : (const void*)gA);
  const long long ldx = (X_IS_A ? lda : ldb) * ELEM_BYTES, ldy = (X_IS_A ? ldb : lda) * ELEM_BYTES;
  // The bytes each operand spans (its last row ends at column K - 1): dg_row_issue reads no
  // aligned word beyond them.
  const char* x_last = gX + (long long)(x_rows - 1) * ldx + (long long)K * ELEM_BYTES;
  const char* y_last = gY + (long long)(y_rows - 1) * ldy + (long long)K * ELEM_BYTES;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row0 = x0 + warp * ROWS_PER_WARP;  // this warp's first row of X

  float acc[VALUES];  // [r * SMALL + s]: row r of the warp's X rows, row s of Y
#pragma unroll
  for (int i = 0; i < VALUES; ++i) acc[i] = 0.0f;

  // Whether any row of the block's tile of an operand starts off a 16-byte boundary (then every
  // word of that row straddles two). The same answer in every warp, so that every thread takes
  // the same path to the __syncthreads around Y's chunks.
  bool x_skewed = false, y_skewed = false;
#pragma unroll
  for (int r = 0; r < ROWS; ++r)
    x_skewed |= (reinterpret_cast<unsigned long long>(gX + (long long)(x0 + r) * ldx) & 15) != 0;
#pragma unroll
  for (int s = 0; s < SMALL; ++s)
    y_skewed |= (reinterpret_cast<unsigned long long>(gY + (long long)(y0 + s) * ldy) & 15) != 0;
  const dg_gemv_view view{gX, gY, ldx, ldy, x_last, y_last, x_rows, y_rows, row0, y0, K, smem_y};
  if (x_skewed) {
    if (y_skewed) dg_gemv_stream<true, true>(view, acc);
    else dg_gemv_stream<true, false>(view, acc);
  } else {
    if (y_skewed) dg_gemv_stream<false, true>(view, acc);
    else dg_gemv_stream<false, false>(view, acc);
  }

  // ---- epilogue: one lane per output applies the spec's expression ----
  const float sum = dg_warp_transpose_sum<VALUES>(acc);
  constexpr int LANES_PER_VALUE = 32 / VALUES;
  const int value = lane / LANES_PER_VALUE;
  const int x = row0 + value / SMALL, y = y0 + value % SMALL;
  dg_amax<AMAX, AMAX_PER_ROW, 1> amax(amax_out);
  if (lane % LANES_PER_VALUE == 0 && x < x_rows && y < y_rows) {
    const int m = X_IS_A ? x : y, n = X_IS_A ? y : x;
    const long long offset = D_ROW ? (long long)m * ldd + n : (long long)n * ldd + m;
    const float v = epilogue(sum, m, n);
    amax.add(0, m, v);
    dg_store(gD + offset, v);
  }
  amax.flush_rows<1>();
  amax.finish();
}
