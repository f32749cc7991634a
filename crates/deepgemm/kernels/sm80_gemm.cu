// ---------------------------------------------------------------------------------------------
// sm80 backend: multistage cp.async ring -> ldmatrix -> mma.sync (tensor cores), sm_80 and later.
// Each warp owns a WARP_TILE_M x WARP_TILE_N piece of the block tile as (16 x 8) mma tiles.
// Fragments are double-buffered across k-steps: step s+1 is read from shared memory while
// step s multiplies. One __syncthreads per k-tile, after the second-to-last step's mmas, when the
// read pointer moves to the next stage.
// ---------------------------------------------------------------------------------------------

constexpr int TILE_M = {{TILE_M}};
constexpr int TILE_N = {{TILE_N}};
constexpr int TILE_K = {{TILE_K}};
constexpr int STAGES = {{STAGES}};
constexpr int WARPS_M = {{WARPS_M}};
constexpr int WARPS_N = {{WARPS_N}};
constexpr int GROUP_M = {{GROUP_M}};  // tile rows per raster group (L2 reuse)
constexpr int THREADS = WARPS_M * WARPS_N * 32;
constexpr int WARP_TILE_M = TILE_M / WARPS_M;
constexpr int WARP_TILE_N = TILE_N / WARPS_N;

constexpr bool A_ROW = {{A_ROW}};  // A[M,K] row-major: K contiguous (staged [TILE_M][TILE_K])
constexpr bool B_COL = {{B_COL}};  // B[K,N] col-major: K contiguous (staged [TILE_N][TILE_K])
constexpr bool D_ROW = {{D_ROW}};  // D[M,N] row-major (N contiguous), else col-major

typedef {{IN_TYPE}} Element;  // A and B
typedef {{D_TYPE}} ElementD;
constexpr bool TF32 = {{TF32}};  // 32-bit inputs are tf32 (m16n8k8), else f16/bf16 (m16n8k16)
constexpr int ELEM_BYTES = sizeof(Element);
constexpr int MMA_K = TF32 ? 8 : 16;
constexpr int K_STEPS = TILE_K / MMA_K;
constexpr int M_FRAGS = WARP_TILE_M / 16;  // mma tiles per warp along M
constexpr int N_FRAGS = WARP_TILE_N / 8;   // mma tiles per warp along N
static_assert(WARP_TILE_M % 16 == 0 && WARP_TILE_N % 16 == 0, "warp tile must be 16-aligned");
static_assert(TILE_K % MMA_K == 0, "TILE_K must be a multiple of the mma K");
static_assert(K_STEPS >= 2 && K_STEPS % 2 == 0,
              "fragment buffers alternate per k-step; the ring advances at the second-to-last");

// ---- shared memory (codegen::space::smem_layout): a ring of STAGES stages -------------------
// Every operand is staged in its global order, A's stages first, then B's. 16-bit operands are
// XOR-swizzled: 16-byte chunk c of row r is stored at chunk c ^ s(r), where s(r) spreads any 8
// consecutive rows' same chunk over all 32 banks, so ldmatrix's eight row reads and the cp.async
// writes of whole rows are both conflict-free. tf32 operands (32-bit loads, no ldmatrix) are
// padded by PAD elements (16 bytes) per row instead.
constexpr bool SWIZZLE = {{SWIZZLE}};
constexpr int PAD = {{PAD}};
constexpr int A_ROWS = A_ROW ? TILE_M : TILE_K;  // rows of the staged A tile
constexpr int A_COLS = A_ROW ? TILE_K : TILE_M;  // contiguous elements per row
constexpr int B_ROWS = B_COL ? TILE_N : TILE_K;
constexpr int B_COLS = B_COL ? TILE_K : TILE_N;
constexpr int A_ROW_BYTES = (A_COLS + PAD) * ELEM_BYTES;
constexpr int B_ROW_BYTES = (B_COLS + PAD) * ELEM_BYTES;
constexpr int A_STAGE_BYTES = A_ROWS * A_ROW_BYTES;
constexpr int B_STAGE_BYTES = B_ROWS * B_ROW_BYTES;
static_assert(!SWIZZLE || PAD == 0, "a swizzled layout has no padding");
static_assert(!(SWIZZLE && TF32), "tf32 tiles (32-bit loads) are padded, not swizzled");

// Byte offset within a stage of the byte `col_byte` of staged row `row` (rows of ROW_BYTES).
template <int ROW_BYTES>
__device__ __forceinline__ unsigned dg_staged_offset(unsigned row, unsigned col_byte) {
  if constexpr (SWIZZLE) {
    constexpr unsigned CHUNKS = ROW_BYTES / 16;            // 16-byte chunks per row
    constexpr unsigned GROUP = CHUNKS < 8 ? CHUNKS : 8;    // chunks permuted among each other
    static_assert(ROW_BYTES % 16 == 0 && (CHUNKS & (CHUNKS - 1)) == 0 && CHUNKS >= 2,
                  "swizzled rows are a power of two of 16-byte chunks");
    // 128-byte rows and longer: s = r % 8. 64-byte rows pair up in one 128-byte bank line:
    // s = (r / 2) % 4, which with the row's half of the line again covers all 8 bank groups.
    const unsigned s = (row / (8 / GROUP)) % GROUP;
    return row * ROW_BYTES + ((((col_byte >> 4) ^ s)) << 4) + (col_byte & 15);
  } else {
    return row * ROW_BYTES + col_byte;
  }
}
static_assert(A_STAGE_BYTES == {{A_STAGE_BYTES}}, "A stage size differs from the plan");
static_assert(B_STAGE_BYTES == {{B_STAGE_BYTES}}, "B stage size differs from the plan");
static_assert(STAGES >= 2, "the cp.async ring needs at least two stages");

// ---- PTX wrappers -------------------------------------------------------------------------
{{CP_ASYNC}}

__device__ __forceinline__ void dg_ldmatrix_x4(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void dg_ldmatrix_x4_trans(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ unsigned dg_to_tf32(float x) {
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
}

// d += a * b for one 16x8 tile. Fragments follow the PTX ISA "Matrix Fragments for mma.m16n8k*":
// with g = lane / 4 and t = lane % 4, d[0..1] = (row g, cols 2t, 2t+1), d[2..3] = (row g+8, ...).
__device__ __forceinline__ void dg_mma(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
  asm volatile(
      "{{MMA_INSTRUCTION}} "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// ---- global -> shared copies ------------------------------------------------------------------
// One operand's tile is ROWS x COLS elements with COLS contiguous in both global and shared
// memory. Threads copy CHUNK_BYTES at a time: THREADS / CHUNKS_PER_ROW rows per pass.
// K runs along the rows (K_ALONG_ROWS: A col-major, B row-major) or along the columns.
// Everything that does not change with K is worked out once: a k-tile's copies then cost a
// compare, three selects and an address add each, and the source pointer walks K by a constant.
template <int ROWS, int COLS, int ROW_BYTES, int CHUNK_BYTES, bool K_ALONG_ROWS>
struct TileCopy {
  static constexpr int CHUNK_ELEMS = CHUNK_BYTES / ELEM_BYTES;
  static constexpr int CHUNKS_PER_ROW = COLS / CHUNK_ELEMS;
  static constexpr int ROWS_PER_PASS = THREADS / CHUNKS_PER_ROW;
  static constexpr int PASSES = ROWS / ROWS_PER_PASS;
  static_assert(COLS % CHUNK_ELEMS == 0 && THREADS % CHUNKS_PER_ROW == 0 &&
                    ROWS % ROWS_PER_PASS == 0,
                "the tile must split evenly into per-thread chunks");

  const char* base;        // the matrix (a safe address for zero-byte copies)
  const char* src;         // this thread's first chunk in the next k-tile to issue
  long long pass_bytes;    // global bytes between one pass's rows and the next's
  long long k_tile_bytes;  // global bytes from one k-tile to the next
  unsigned tile_row;       // this thread's first chunk in the staged tile: row
  unsigned tile_col_byte;  // ... and byte within the row
  int rows_left;           // matrix rows from this thread's first row in the next k-tile
  int cols_left;           // matrix elements from this thread's first column to the row's end

  __device__ __forceinline__ TileCopy(const Element* matrix, long long ld, int row0, int col0,
                                      int rows_total, int cols_total, int tid)
      : base(reinterpret_cast<const char*>(matrix)),
        pass_bytes((long long)ROWS_PER_PASS * ld * ELEM_BYTES),
        k_tile_bytes(K_ALONG_ROWS ? (long long)TILE_K * ld * ELEM_BYTES
                                  : (long long)TILE_K * ELEM_BYTES) {
    const int r = tid / CHUNKS_PER_ROW;
    const int c = (tid % CHUNKS_PER_ROW) * CHUNK_ELEMS;
    src = reinterpret_cast<const char*>(matrix + (long long)(row0 + r) * ld + col0 + c);
    tile_row = (unsigned)r;
    tile_col_byte = (unsigned)(c * ELEM_BYTES);
    rows_left = rows_total - (row0 + r);
    cols_left = cols_total - (col0 + c);
  }

  // Issues part `part` of `parts` of the next k-tile's copies into the stage at shared address
  // `stage` (a k-tile's copies are spread over the k-steps). Outside the matrix (including
  // k-tiles past the end) the copies read nothing and zero-fill.
  __device__ __forceinline__ void issue(unsigned stage, int part, int parts) const {
    // Passes [first, last) are this part's: those with p * parts / PASSES == part.
    const int first = (part * PASSES + parts - 1) / parts;
    const int last = ((part + 1) * PASSES + parts - 1) / parts;
    // Bytes of this thread's chunk inside the matrix along the columns: element-granular.
    const int col_bytes = min(max(cols_left, 0) * ELEM_BYTES, CHUNK_BYTES);
    // Walked pass by pass (one add each) rather than src + p * pass_bytes, whose products the
    // compiler would keep live across the main loop, a register pair per pass.
    const char* row_src = src + first * pass_bytes;
#pragma unroll
    for (int p = 0; p < PASSES; ++p) {
      if (p < first || p >= last) continue;  // resolved at compile time
      const int bytes = p * ROWS_PER_PASS < rows_left ? col_bytes : 0;
      // Passes are ROWS_PER_PASS rows apart; when that is a multiple of the swizzle's 8-row
      // period every pass keeps the thread's first permutation and the compiler folds it.
      const unsigned dst =
          dg_staged_offset<ROW_BYTES>(tile_row + p * ROWS_PER_PASS, tile_col_byte);
      dg_cp_async<CHUNK_BYTES>(stage + dst, bytes > 0 ? row_src : base, bytes);
      row_src += pass_bytes;
    }
  }

  // Moves on to the next k-tile.
  __device__ __forceinline__ void advance() {
    src += k_tile_bytes;
    if (K_ALONG_ROWS) {
      rows_left -= TILE_K;
    } else {
      cols_left -= TILE_K;
    }
  }
};

extern "C" __global__ void __launch_bounds__(THREADS, 1) {{ENTRY}}({{PARAMS}}) {
  // First of all: the scales and vectors read below may be the repack copy's output.
  dg_wait_for_prior_grids();
{{BINDINGS}}
{{EPILOGUE}}

  extern __shared__ __align__(128) unsigned char dg_smem[];
  const unsigned smem_a = dg_smem_addr(dg_smem);
  const unsigned smem_b = smem_a + STAGES * A_STAGE_BYTES;

  int tile_m, tile_n;
  dg_tile_coords<GROUP_M>(blockIdx.x, (M + TILE_M - 1) / TILE_M, (N + TILE_N - 1) / TILE_N,
                          tile_m, tile_n);
  const int m0 = tile_m * TILE_M;
  const int n0 = tile_n * TILE_N;
  const int tid = threadIdx.x;
  const int lane = tid % 32;
  const int warp = tid / 32;
  const int warp_m = warp % WARPS_M;
  const int warp_n = warp / WARPS_M;

  // Copies: A is [rows, cols] = [M, K] when row-major, [K, M] when col-major; B likewise.
  TileCopy<A_ROWS, A_COLS, A_ROW_BYTES, {{A_COPY_BYTES}}, !A_ROW> copy_a(
      gA, lda, A_ROW ? m0 : 0, A_ROW ? 0 : m0, A_ROW ? M : K, A_ROW ? K : M, tid);
  TileCopy<B_ROWS, B_COLS, B_ROW_BYTES, {{B_COPY_BYTES}}, !B_COL> copy_b(
      gB, ldb, B_COL ? n0 : 0, B_COL ? 0 : n0, B_COL ? N : K, B_COL ? K : N, tid);

  // Each lane's coordinates in the first mma tile of its warp at k-step 0; fragment (i, ks) adds
  // i * 16 (or j * 8) along M (N) and ks * MMA_K along K. Offsets within a stage:
  // A element (m, k) / B element (n, k) -> dg_staged_offset of its staged row and byte.
  auto a_at = [](int m, int k) {
    return A_ROW ? dg_staged_offset<A_ROW_BYTES>(m, k * ELEM_BYTES)
                 : dg_staged_offset<A_ROW_BYTES>(k, m * ELEM_BYTES);
  };
  auto b_at = [](int n, int k) {
    return B_COL ? dg_staged_offset<B_ROW_BYTES>(n, k * ELEM_BYTES)
                 : dg_staged_offset<B_ROW_BYTES>(k, n * ELEM_BYTES);
  };
  int a_m, a_k, b_n, b_k;
  if constexpr (TF32) {
    // Plain 32-bit loads: a = (m g, k t), (g+8, t), (g, t+4), (g+8, t+4); b = (k t, n g), (t+4, g).
    const int g = lane / 4, t = lane % 4;
    a_m = warp_m * WARP_TILE_M + g;
    a_k = t;
    b_n = warp_n * WARP_TILE_N + g;
    b_k = t;
  } else {
    // ldmatrix.x4: lanes 8i..8i+7 address the rows of 8x8 matrix i.
    // A fragment = matrices (m 0-7, k 0-7), (m 8-15, k 0-7), (m 0-7, k 8-15), (m 8-15, k 8-15).
    // B fragment pair = (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15).
    // Transposed layouts (ldmatrix .trans) address rows of k instead, in the same matrix order.
    const int i = lane / 8, r = lane % 8;
    a_m = warp_m * WARP_TILE_M + (A_ROW ? r + 8 * (i % 2) : 8 * (i % 2));
    a_k = A_ROW ? 8 * (i / 2) : r + 8 * (i / 2);
    b_n = warp_n * WARP_TILE_N + (B_COL ? r + 8 * (i / 2) : 8 * (i / 2));
    b_k = B_COL ? 8 * (i % 2) : r + 8 * (i % 2);
  }

  unsigned a_frag[2][M_FRAGS][4];
  unsigned b_frag[2][N_FRAGS][2];
  float acc[M_FRAGS][N_FRAGS][4];
#pragma unroll
  for (int i = 0; i < M_FRAGS; ++i)
#pragma unroll
    for (int j = 0; j < N_FRAGS; ++j)
#pragma unroll
      for (int v = 0; v < 4; ++v) acc[i][j][v] = 0.0f;

  // Reads the fragments of k-step `ks` of the stage at `stage` (a stage index) into buffer `buf`.
  auto load_fragments = [&](int buf, int stage, int ks) {
    const unsigned sa = smem_a + stage * A_STAGE_BYTES;
    const unsigned sb = smem_b + stage * B_STAGE_BYTES;
    if constexpr (TF32) {
      // Padded (unswizzled) rows: each element's offset from the lane's first one is a
      // compile-time constant, which the loads take as an immediate.
      const unsigned char* lane_a = dg_smem + (sa - smem_a) + a_at(a_m, a_k);
      const unsigned char* lane_b = dg_smem + (sb - smem_a) + b_at(b_n, b_k);
#pragma unroll
      for (int i = 0; i < M_FRAGS; ++i)
#pragma unroll
        for (int v = 0; v < 4; ++v)
          a_frag[buf][i][v] = dg_to_tf32(*reinterpret_cast<const float*>(
              lane_a + a_at(i * 16 + 8 * (v % 2), ks * MMA_K + 4 * (v / 2))));
#pragma unroll
      for (int j = 0; j < N_FRAGS; ++j)
#pragma unroll
        for (int v = 0; v < 2; ++v)
          b_frag[buf][j][v] = dg_to_tf32(
              *reinterpret_cast<const float*>(lane_b + b_at(j * 8, ks * MMA_K + 4 * v)));
    } else {
#pragma unroll
      for (int i = 0; i < M_FRAGS; ++i) {
        const unsigned at = sa + a_at(a_m + i * 16, a_k + ks * MMA_K);
        if constexpr (A_ROW) {
          dg_ldmatrix_x4(a_frag[buf][i], at);
        } else {
          dg_ldmatrix_x4_trans(a_frag[buf][i], at);
        }
      }
#pragma unroll
      for (int j = 0; j < N_FRAGS; j += 2) {
        unsigned r[4];
        const unsigned at = sb + b_at(b_n + j * 8, b_k + ks * MMA_K);
        if constexpr (B_COL) {
          dg_ldmatrix_x4(r, at);
        } else {
          dg_ldmatrix_x4_trans(r, at);
        }
        b_frag[buf][j][0] = r[0];
        b_frag[buf][j][1] = r[1];
        b_frag[buf][j + 1][0] = r[2];
        b_frag[buf][j + 1][1] = r[3];
      }
    }
  };

  // ---- prologue: fill STAGES - 1 stages of the ring ----
  const int k_tiles = (K + TILE_K - 1) / TILE_K;
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    // Past the last k-tile the copies zero-fill, so every stage is one commit group.
    copy_a.issue(smem_a + s * A_STAGE_BYTES, 0, 1);
    copy_b.issue(smem_b + s * B_STAGE_BYTES, 0, 1);
    copy_a.advance();
    copy_b.advance();
    dg_cp_async_commit();
  }
  dg_cp_async_wait<STAGES - 2>();  // k-tile 0 has landed
  __syncthreads();

  int read_stage = 0;
  int write_stage = STAGES - 1;
  load_fragments(0, read_stage, 0);

  // ---- main loop ----
  // Per k-step: issue a share of the copies of k-tile kt + STAGES - 1 (into the stage every warp
  // finished reading before the last __syncthreads), read the next step's fragments, then issue
  // this step's mmas. Spreading the copies over the k-steps keeps their address arithmetic from
  // stalling all warps' mma streams at once. The ring advances at the second-to-last k-step,
  // after its mmas are issued, so the tensor cores work through the barrier wait; by then every
  // warp holds the last step's fragments of this stage.
  // With two stages the k-tile being copied is the one waited for at this k-tile's barrier, so
  // its copies all go out at k-step 0, as early as they can.
  constexpr int COPY_PARTS = STAGES > 2 ? K_STEPS - 1 : 1;  // k-steps 0 .. COPY_PARTS - 1 copy
  for (int kt = 0; kt < k_tiles; ++kt) {
#pragma unroll
    for (int ks = 0; ks < K_STEPS; ++ks) {
      if (ks < COPY_PARTS) {
        copy_a.issue(smem_a + write_stage * A_STAGE_BYTES, ks, COPY_PARTS);
        copy_b.issue(smem_b + write_stage * B_STAGE_BYTES, ks, COPY_PARTS);
      }
      load_fragments((ks + 1) % 2, read_stage, (ks + 1) % K_STEPS);
#pragma unroll
      for (int i = 0; i < M_FRAGS; ++i)
#pragma unroll
        for (int j = 0; j < N_FRAGS; ++j) dg_mma(acc[i][j], a_frag[ks % 2][i], b_frag[ks % 2][j]);
      if (ks == K_STEPS - 2) {
        copy_a.advance();
        copy_b.advance();
        dg_cp_async_commit();
        write_stage = write_stage + 1 == STAGES ? 0 : write_stage + 1;
        // The next k-tile must have landed (at most STAGES - 2 newer groups in flight) and be
        // visible to every warp before the last step reads its first fragments.
        dg_cp_async_wait<STAGES - 2>();
        __syncthreads();
        read_stage = read_stage + 1 == STAGES ? 0 : read_stage + 1;
      }
    }
  }
  dg_cp_async_wait<0>();

  // ---- epilogue: each thread applies the spec's expression to its accumulator fragment ----
  const int g = lane / 4, t = lane % 4;
  // Pairs (n, n+1) are stored together when every row start keeps them aligned.
  const bool paired = D_ROW && (ldd % 2 == 0) &&
                      (reinterpret_cast<unsigned long long>(gD) % (2 * sizeof(ElementD)) == 0);
#pragma unroll
  for (int i = 0; i < M_FRAGS; ++i) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int m = m0 + warp_m * WARP_TILE_M + i * 16 + g + 8 * half;
      if (m >= M) continue;
#pragma unroll
      for (int j = 0; j < N_FRAGS; ++j) {
        const int n = n0 + warp_n * WARP_TILE_N + j * 8 + 2 * t;
        const float v0 = acc[i][j][2 * half];
        const float v1 = acc[i][j][2 * half + 1];
        if (D_ROW) {
          ElementD* out = gD + (long long)m * ldd + n;
          if (paired && n + 1 < N) {
            dg_store2(out, epilogue(v0, m, n), epilogue(v1, m, n + 1));
          } else {
            if (n < N) dg_store(out, epilogue(v0, m, n));
            if (n + 1 < N) dg_store(out + 1, epilogue(v1, m, n + 1));
          }
        } else {
          ElementD* out = gD + (long long)n * ldd + m;
          if (n < N) dg_store(out, epilogue(v0, m, n));
          if (n + 1 < N) dg_store(out + ldd, epilogue(v1, m, n + 1));
        }
      }
    }
  }
}
