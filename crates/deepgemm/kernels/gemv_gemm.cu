// ---------------------------------------------------------------------------------------------
// gemv backend: D = A · B where one of M and N is a few (at most 8 per block): decode-sized M,
// or a handful of output columns. Such a GEMM is a stream of the large operand ("X": rows of K
// contiguous elements) against the few rows of the small one ("Y"), bound by DRAM, so this
// kernel does not tile for reuse: it reads X once, at any alignment, and sums in f32.
//   - The block owns ROWS rows of X and SMALL rows of Y (one tile of D). K goes through a ring of
//     STAGES chunks in shared memory: each row's chunk is copied as the aligned 16-byte words it
//     overlaps, so a row that does not start on 16 bytes (ld = K + 1, an odd base) needs no
//     repack; words the operand's extent only partly covers are copied element by element, after
//     the other copies are on their way, so nothing outside it is touched. On sm_90 (BULK) each
//     row's chunk is one bulk copy of the copy engine, issued by a lane of one of the warps (a
//     few rows each) and counted in by the stage's mbarrier; before sm_90 every thread issues
//     16-byte cp.async copies.
//   - The sums: with 16-bit inputs and 8 rows of Y on the tensor cores (mma.sync m16n8k16, the
//     warps splitting K, their tiles added in shared memory at the end). Otherwise in f32 FFMA:
//     each of the 8 warps takes ROWS_PER_WARP rows of X, each lane one 16-byte word of a row per
//     step (the words it overlaps funnel-shifted into place, dg_staged_word) against the same
//     word of every row of Y, and a transposing butterfly (N - 1 + 5 - log2 N shuffles for N
//     sums) leaves each output's sum in one lane.
//   - One thread per output applies the spec's epilogue and stores it.
// ---------------------------------------------------------------------------------------------

constexpr int TILE_M = {{TILE_M}};
constexpr int TILE_N = {{TILE_N}};
constexpr int TILE_K = {{TILE_K}};    // K per chunk of the ring
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
// How the sums are made. 16-bit inputs against 8 rows of Y (MMA): on the tensor cores, mma.sync
// m16n8k16 with X's rows as the 16 rows and Y's as the 8 columns, the 8 warps splitting each
// chunk's K and their 16 x 8 tiles summed through shared memory at the end. Fewer rows of Y, and
// 4-byte inputs (f32, and tf32 summed at f32 precision): FFMA on the CUDA cores, each warp owning
// ROWS_PER_WARP rows of X, its lanes splitting K, and the sums reduced across the warp (a
// launch-bound tile then skips the mma path's pass through shared memory).
constexpr bool MMA = {{MMA}};
constexpr int ROWS_PER_WARP = ROWS / WARPS;      // FFMA: X rows per warp
constexpr int VALUES = ROWS_PER_WARP * SMALL;    // FFMA: partial sums per lane
constexpr int M_TILES = ROWS / 16;               // MMA: 16-row tiles of X
constexpr int ACC = MMA ? 4 * M_TILES : VALUES;  // sums per lane
template <bool C, typename T, typename F> struct dg_pick { typedef T type; };
template <typename T, typename F> struct dg_pick<false, T, F> { typedef F type; };
typedef typename dg_pick<X_IS_A, ElementA, ElementB>::type ElementX;
typedef typename dg_pick<X_IS_A, ElementB, ElementA>::type ElementY;
constexpr int ELEM_BYTES = sizeof(ElementA);  // A and B have one element size (the check)
constexpr int ELEMS_PER_WORD = 16 / ELEM_BYTES;
constexpr int STEP_K = 32 * ELEMS_PER_WORD;      // K one warp-wide load of a row covers
constexpr int STEPS = TILE_K / STEP_K;

static_assert(sizeof(ElementA) == sizeof(ElementB) && (ELEM_BYTES == 2 || ELEM_BYTES == 4),
              "A and B have one element size, 2 or 4 bytes");
static_assert(A_ROW && !B_ROW, "both operands are K-major");
static_assert(!MMA || ELEM_BYTES == 2, "the tensor cores sum 16-bit inputs");
static_assert(MMA || (VALUES <= 32 && (VALUES & (VALUES - 1)) == 0), "the butterfly takes 2^n <= 32");
static_assert(!MMA || (ROWS % 16 == 0 && SMALL == 8), "mma tiles are 16 rows of X by 8 of Y");
static_assert(TILE_K % STEP_K == 0, "a chunk is whole warp-wide steps");
static_assert(!MMA || (TILE_K / 16) % WARPS == 0, "every warp takes as many k-steps of a chunk");
static_assert(!MMA || WARPS * ACC * 32 * 4 <= {{STAGES}} * ({{A_STAGE_BYTES}} + {{B_STAGE_BYTES}}),
              "the warps' tiles are summed in the ring's shared memory");

{{CP_ASYNC}}

{{MBARRIER}}

// ---- the ring of K chunks ---------------------------------------------------------------------
// A stage holds one chunk of K (TILE_K elements) of each of the block's ROWS rows of X and
// SMALL rows of Y, each row as the aligned 16-byte words its bytes overlap: CHUNK_WORDS of
// them, one more where the row does not start on 16 bytes (its `skew`, the same in every chunk
// since a chunk is a multiple of 512 bytes). The copies are asynchronous (bulk copies on sm_90,
// cp.async before it), so as many chunks are in flight as the ring has stages ahead, at no cost
// in registers.
constexpr int STAGES = {{STAGES}};
constexpr bool BULK = {{BULK}};  // sm_90: the rows come by bulk copy (dg_bulk_loader)
constexpr int CHUNK_WORDS = TILE_K / ELEMS_PER_WORD;  // 16-byte words of one row's chunk
constexpr int ROW_WORDS = CHUNK_WORDS + 1;            // and the word a skewed chunk runs into
constexpr int STAGE_ROWS = ROWS + SMALL;              // X's rows first, then Y's
constexpr int STAGE_WORDS = STAGE_ROWS * ROW_WORDS;
static_assert(STAGES >= 2, "the ring needs at least two stages");
static_assert(ROWS * ROW_WORDS * 16 == (X_IS_A ? {{A_STAGE_BYTES}} : {{B_STAGE_BYTES}}) &&
                  SMALL * ROW_WORDS * 16 == (X_IS_A ? {{B_STAGE_BYTES}} : {{A_STAGE_BYTES}}),
              "a stage differs from the plan's");

// X and Y as bytes: `ld*` bytes per row, [base, *_last) spanned (the last row ends at column K).
struct dg_gemv_view {
  const char* x;
  const char* y;
  long long ldx, ldy;
  const char* x_last;
  const char* y_last;
  int x_rows, y_rows, x0, y0, K;
  // The first element of row i of a stage (X's rows first, then Y's). Rows past the operand's
  // extent stand for its last row (their skew is its skew); the ring does not copy them, and
  // whatever their stage rows hold reaches only sums that are not stored (each output is the sum
  // over K of one row of X with one row of Y, on the tensor cores as in FFMA).
  __device__ __forceinline__ const char* row_start(int i) const {
    if (i < ROWS) return x + (long long)min(x0 + i, x_rows - 1) * ldx;
    return y + (long long)min(y0 + i - ROWS, y_rows - 1) * ldy;
  }
  __device__ __forceinline__ int skew(int i) const {
    return (int)(reinterpret_cast<unsigned long long>(row_start(i)) & 15);
  }
  __device__ __forceinline__ bool beyond(int i) const {
    return i < ROWS ? x0 + i >= x_rows : y0 + i - ROWS >= y_rows;
  }
};

// A word the operand's extent only partly covers (at its first or last byte), read element by
// element with plain loads and stored synchronously: nothing outside [first, last) is touched
// (a cp.async or bulk copy of part of a word still reads all 16 bytes). A turn's __syncthreads
// publishes it. Not inlined: a few words per operand take it, and the copies of it would crowd
// the instruction cache.
__device__ __noinline__ void dg_copy_edge_word(uint4* dst, const char* src, const char* first,
                                                  const char* last) {
  unsigned u[4] = {0u, 0u, 0u, 0u};
#pragma unroll
  for (int e = 0; e < ELEMS_PER_WORD; ++e) {
    const char* p = src + e * ELEM_BYTES;
    if (p >= first && p + ELEM_BYTES <= last) {
      const unsigned bits = ELEM_BYTES == 2 ? *reinterpret_cast<const unsigned short*>(p)
                                            : *reinterpret_cast<const unsigned*>(p);
      u[e * ELEM_BYTES / 4] |= bits << (8 * (e * ELEM_BYTES % 4));
    }
  }
  *dst = make_uint4(u[0], u[1], u[2], u[3]);
}

// The ring's copies before sm_90, as each warp issues them: warp w copies stage rows w,
// w + WARPS, ..., its lanes a row's consecutive words. ROWS is a multiple of WARPS, so which of a
// warp's rows are X's is known at compile time; what does not change from chunk to chunk (a
// row's first aligned word, its skew, and which of its chunks need no test per word) is worked
// out once. A word is
// copied only if some byte of it is the row's within K: words past the row's end (in K's last
// chunk) and a word-aligned row's extra word are left as they are, since the stream never reads
// them into a sum.
constexpr int LOADER_ROWS = (STAGE_ROWS + WARPS - 1) / WARPS;  // stage rows per warp
constexpr int WORDS_PER_LANE = (ROW_WORDS + 31) / 32;
constexpr long long CHUNK_BYTES = (long long)TILE_K * ELEM_BYTES;
static_assert(ROWS % WARPS == 0, "X's rows fill whole turns of the warps' row loop");
static_assert(CHUNK_BYTES >= 16, "a word starting before a row's operand is in its first chunk");

struct dg_ring_loader {
  const char* aligned[LOADER_ROWS];  // each row's chunk 0, from the aligned word it starts in
  int skew[LOADER_ROWS];
  // Chunks fast_first..fast_last of a row end short of K's end and have all their words inside
  // the operand (all but the operand's first and last few): they are copied without a test per
  // word, which was most of the loader's work.
  int fast_first[LOADER_ROWS], fast_last[LOADER_ROWS];
  unsigned beyond = 0;  // bit u: the row lies past its operand's extent and is not copied
  const char *x_first, *x_last, *y_first, *y_last;
  long long row_bytes;  // K's bytes

  // (The cp.async groups need no barriers: dg_bulk_loader's signature.)
  __device__ __forceinline__ dg_ring_loader(const dg_gemv_view& v, unsigned)
      : x_first(v.x), x_last(v.x_last), y_first(v.y), y_last(v.y_last),
        row_bytes((long long)v.K * ELEM_BYTES) {
    const int warp = threadIdx.x / 32;
#pragma unroll
    for (int u = 0; u < LOADER_ROWS; ++u) {
      const int i = min(warp + WARPS * u, STAGE_ROWS - 1);
      const char* start = v.row_start(i);
      skew[u] = (int)(reinterpret_cast<unsigned long long>(start) & 15);
      aligned[u] = start - skew[u];
      if (v.beyond(i)) beyond |= 1u << u;
      const char *first, *last;
      bounds(u, first, last);
      // A row's aligned start lies less than 16 bytes before the operand, so only its chunk 0
      // can begin outside it.
      fast_first[u] = aligned[u] >= first ? 0 : 1;
      const long long room = (long long)(last - aligned[u]) - 16 * words(u);
      const long long inside = room < 0 ? -1 : room / CHUNK_BYTES;  // chunks 0..inside end in it
      fast_last[u] = (int)min(inside, row_bytes / CHUNK_BYTES - 1);
    }
  }

  // The words of a row's chunk: one more than the chunk where the row does not start on 16 bytes.
  __device__ __forceinline__ int words(int u) const { return skew[u] ? ROW_WORDS : CHUNK_WORDS; }

  // The bytes [first, last) of the operand a warp's row u belongs to (known at compile time).
  __device__ __forceinline__ void bounds(int u, const char*& first, const char*& last) const {
    const bool of_x = u < ROWS / WARPS;
    first = of_x ? x_first : y_first;
    last = of_x ? x_last : y_last;
  }

  // Issues chunk `chunk`'s copies into its stage of `ring`, as one cp.async group. A word that
  // starts before its operand is copied with plain loads that wait, so that happens after every
  // cp.async is on its way.
  __device__ __forceinline__ void load(uint4* ring, int chunk) const {
    uint4* stage = ring + (chunk % STAGES) * STAGE_WORDS;
    if (copy<false>(stage, chunk)) copy<true>(stage, chunk);
    dg_cp_async_commit();
  }

  // Every copy of chunk `chunk` has landed, this thread's (the turn's __syncthreads: everyone's).
  __device__ __forceinline__ void wait(int) const { dg_cp_async_wait<STAGES - 2>(); }

  // EDGES = false: the cp.async copies; returns whether some word of the lane starts before its
  // operand. EDGES = true: those words.
  template <bool EDGES>
  __device__ __forceinline__ bool copy(uint4* stage, int chunk) const {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    bool edge = false;
#pragma unroll
    for (int u = 0; u < LOADER_ROWS; ++u) {
      const int i = warp + WARPS * u;
      if (i >= STAGE_ROWS) break;  // the same in the whole warp
      if (beyond & (1u << u)) continue;
      const bool fast = chunk >= fast_first[u] && chunk <= fast_last[u];
      const char* base = aligned[u] + chunk * CHUNK_BYTES + 16 * lane;
      uint4* row = stage + i * ROW_WORDS + lane;
      if (fast) {
        if (!EDGES) {
#pragma unroll
          for (int q = 0; q < WORDS_PER_LANE; ++q)
            if (lane + 32 * q < words(u)) dg_cp_async<16>(dg_smem_addr(row + 32 * q), base + 512 * q, 16);
        }
        continue;
      }
      const char *first, *last;
      bounds(u, first, last);
      const char* end = aligned[u] + skew[u] + row_bytes;
#pragma unroll
      for (int q = 0; q < WORDS_PER_LANE; ++q) {
        const char* src = base + 512 * q;
        if (lane + 32 * q < words(u) && src < end) {
          const bool inside = src >= first && src + 16 <= last;
          if (EDGES && !inside) dg_copy_edge_word(row + 32 * q, src, first, last);
          if (!EDGES && inside) dg_cp_async<16>(dg_smem_addr(row + 32 * q), src, 16);
          edge |= !inside;
        }
      }
    }
    return edge;
  }
};

// The ring's copies on sm_90: lane u of warp w copies stage row w + WARPS * u's chunk, the
// aligned 16-byte words it overlaps that lie wholly inside the operand, with one bulk copy, and
// the stage's `full` mbarrier counts their bytes in (each warp arrives once, registering its
// rows' bytes before it copies them). (The cp.async ring's per-word copies and their bookkeeping
// were a quarter of every warp's instructions at 3001x7x3001.) A bulk copy is issued from the
// uniform datapath, one lane at a time: spread over the warps, a chunk's copies leave in a few
// issues per warp, where warp 0 alone took one per stage row, at each turn on the block's
// critical path. The operand's first and last words, when it does not start or end on 16 bytes,
// are read element by element (dg_copy_edge_word); the __syncthreads of a later turn than the
// one that copies them, and before their chunk is read, publishes them. Where the block's SMALL
// rows of Y are all of Y, no other block reads its rows of X: their copies mark their L2 lines
// evict-first (mbarrier.cuh), Y's stay normal (every block reads them).
struct dg_bulk_loader {
  const char* aligned;  // the thread's stage row: its chunk 0, from the aligned word it starts in
  const char* end;      // the row's end (column K)
  const char* first;    // the bytes [first, last) of the row's operand
  const char* last;
  int words;            // words of a chunk: one more than CHUNK_WORDS where the row is skewed
  int row;              // the thread's stage row
  bool copies;          // the thread has a stage row, inside its operand's extent
  bool read_once;       // the thread's row is of X, and no other block reads it
  unsigned full;        // the ring's STAGES `full` mbarriers, 8 bytes apart

  __device__ __forceinline__ dg_bulk_loader(const dg_gemv_view& v, unsigned full_barriers)
      : full(full_barriers) {
    const int lane = threadIdx.x % 32;
    row = threadIdx.x / 32 + WARPS * lane;
    const int i = min(row, STAGE_ROWS - 1);
    const char* start = v.row_start(i);
    const int skew = (int)(reinterpret_cast<unsigned long long>(start) & 15);
    aligned = start - skew;
    end = start + (long long)v.K * ELEM_BYTES;
    words = skew ? ROW_WORDS : CHUNK_WORDS;
    first = i < ROWS ? v.x : v.y;
    last = i < ROWS ? v.x_last : v.y_last;
    copies = row < STAGE_ROWS && !v.beyond(i);
    read_once = i < ROWS && v.y_rows <= SMALL;
  }

  static __device__ __forceinline__ const char* down16(const char* p) {
    return reinterpret_cast<const char*>(reinterpret_cast<unsigned long long>(p) & ~15ull);
  }
  static __device__ __forceinline__ const char* up16(const char* p) { return down16(p + 15); }
  // Compared as addresses: `up16(end)` and a skewed first row's `aligned` lie outside the
  // operand, where comparing pointers is undefined.
  static __device__ __forceinline__ bool before(const char* a, const char* b) {
    return reinterpret_cast<unsigned long long>(a) < reinterpret_cast<unsigned long long>(b);
  }
  static __device__ __forceinline__ const char* lower(const char* a, const char* b) {
    return before(a, b) ? a : b;
  }
  static __device__ __forceinline__ const char* higher(const char* a, const char* b) {
    return before(a, b) ? b : a;
  }

  __device__ __forceinline__ void load(uint4* ring, int chunk) const {
    const int s = chunk % STAGES;
    // The chunk's words, but none past the row's end: those never reach a sum.
    const char* lo = aligned + chunk * CHUNK_BYTES;
    const char* hi = lower(lo + 16 * words, up16(end));
    // The words wholly inside the operand: [inside_lo, inside_hi).
    const char* inside_lo = higher(lo, up16(first));
    const char* inside_hi = higher(inside_lo, lower(hi, down16(last)));
    const unsigned bytes = copies ? (unsigned)(inside_hi - inside_lo) : 0u;
    const unsigned bar = full + 8 * s;
    // The phase waits for every warp's arrival and every byte it registers: the warp's bytes are
    // counted before any of its copies can land.
    const unsigned warp_bytes = __reduce_add_sync(0xffffffffu, bytes);
    if (threadIdx.x % 32 == 0) dg_mbar_expect_tx(bar, warp_bytes);
    __syncwarp();
    uint4* dst = ring + s * STAGE_WORDS + row * ROW_WORDS;
    if (bytes)
      dg_bulk_copy(dg_smem_addr(dst + (inside_lo - lo) / 16), inside_lo, bytes, bar, read_once);
    // A hand-copied word's stage word is a bulk copy's destination again STAGES chunks later:
    // the fence orders the plain store before that copy.
    const bool first_edge = copies && before(lo, inside_lo);
    const bool last_edge = copies && before(inside_hi, hi);
    if (first_edge) dg_copy_edge_word(dst, lo, first, last);
    if (last_edge) dg_copy_edge_word(dst + (inside_hi - lo) / 16, inside_hi, first, last);
    if (first_edge || last_edge) dg_fence_async_shared();
  }

  __device__ __forceinline__ void wait(int chunk) const {
    dg_mbar_wait(full + 8 * (chunk % STAGES), (chunk / STAGES) & 1);
  }
};
typedef typename dg_pick<BULK, dg_bulk_loader, dg_ring_loader>::type dg_loader;

// Keeps the first `valid` elements of a word and zeroes the rest (past K: bytes of the next
// row, or of no row, which may hold anything, a NaN among them).
__device__ __forceinline__ uint4 dg_keep_elements(uint4 w, int valid) {
  unsigned u[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int kept = min(max(valid * ELEM_BYTES - 4 * j, 0), 4);  // bytes of word j kept
    u[j] &= kept == 4 ? ~0u : (1u << (8 * kept)) - 1u;
  }
  return make_uint4(u[0], u[1], u[2], u[3]);
}

// The lane's 16 bytes of staged row `row` at word `q` of the chunk, shifted by the row's skew:
// the five 32-bit words they overlap, funnel-shifted into four (the skew is the same for the
// whole warp, so the branch does not diverge). Reading the words at the skew's word offset costs
// 5 loads and 4 shifts; the aligned pair and dg_bytes_from's selects cost 2 loads and 19.
__device__ __forceinline__ uint4 dg_staged_word(const uint4* row, int q, int skew) {
  if (!skew) return row[q];
  const unsigned* w = reinterpret_cast<const unsigned*>(row + q) + (skew >> 2);
  const int shift = (skew & 3) * 8;
  return make_uint4(__funnelshift_r(w[0], w[1], shift), __funnelshift_r(w[1], w[2], shift),
                    __funnelshift_r(w[2], w[3], shift), __funnelshift_r(w[3], w[4], shift));
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

// FFMA: one chunk into the lane's partial sums. Step s covers columns [s * STEP_K, (s + 1) *
// STEP_K) of the chunk: the lane's 16-byte word of each of the warp's X rows against the same word
// of every Y row. TAIL: the chunk runs past K, so elements from K on are zeroed on both sides.
struct dg_ffma_sums {
  int x_skew[ROWS_PER_WARP], y_skew[SMALL];

  __device__ __forceinline__ explicit dg_ffma_sums(const dg_gemv_view& v) {
    const int warp = threadIdx.x / 32;
#pragma unroll
    for (int r = 0; r < ROWS_PER_WARP; ++r) x_skew[r] = v.skew(warp * ROWS_PER_WARP + r);
#pragma unroll
    for (int s = 0; s < SMALL; ++s) y_skew[s] = v.skew(ROWS + s);
  }

  template <bool TAIL>
  __device__ __forceinline__ void chunk(const uint4* stage, int k0, int K, float (&acc)[ACC]) const {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll 1  // one step's words and floats live at a time, beside the loader's addresses
    for (int s = 0; s < STEPS; ++s) {
      const int q = s * 32 + lane;
      const int valid = TAIL ? K - (k0 + q * ELEMS_PER_WORD) : ELEMS_PER_WORD;
      float x[ROWS_PER_WARP][ELEMS_PER_WORD];
#pragma unroll
      for (int r = 0; r < ROWS_PER_WARP; ++r) {
        uint4 w = dg_staged_word(stage + (warp * ROWS_PER_WARP + r) * ROW_WORDS, q, x_skew[r]);
        if (TAIL) w = dg_keep_elements(w, valid);
        dg_word_floats<ElementX>(w, x[r]);
      }
#pragma unroll
      for (int y_row = 0; y_row < SMALL; ++y_row) {
        uint4 w = dg_staged_word(stage + (ROWS + y_row) * ROW_WORDS, q, y_skew[y_row]);
        if (TAIL) w = dg_keep_elements(w, valid);
        float y[ELEMS_PER_WORD];
        dg_word_floats<ElementY>(w, y);
#pragma unroll
        for (int r = 0; r < ROWS_PER_WARP; ++r)
#pragma unroll
          for (int e = 0; e < ELEMS_PER_WORD; ++e) acc[r * SMALL + y_row] += x[r][e] * y[e];
      }
    }
  }
};

// d += a * b for one 16 x 8 tile (PTX ISA "Matrix Fragments for mma.m16n8k16"): with g = lane / 4
// and q = lane % 4, a holds X rows g and g + 8 at k = 2q, 2q + 1 and 2q + 8, 2q + 9; b holds Y row
// g at the same k; d[0..1] = (X row g, Y rows 2q, 2q + 1), d[2..3] = (X row g + 8, ...). The
// instruction is the inputs' (FFMA plans never call it).
__device__ __forceinline__ void dg_mma(float* d, const unsigned (&a)[4], const unsigned (&b)[2]) {
  asm volatile(
      "{{MMA_INSTRUCTION}} "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// MMA: one chunk into the warp's 16 x 8 tiles. Warp w takes k-steps w, w + WARPS, ... of the
// chunk. Each fragment register is two elements of one staged row at byte `skew + 4q + 2k`: one
// 32-bit word where that is 4-byte aligned, else the two words it straddles, funnel-shifted by 16
// bits (SKEWED: some row of the block's tiles has a skew of 2 mod 4; the same in every thread).
// Where a lane's pairs lie in its rows is worked out once: per k-step the reads are the row's
// word pointer plus a constant, not a fresh byte address per pair (that arithmetic was half of
// the sums' instructions at 3001x7x3001).
struct dg_mma_sums {
  // This lane's rows (X rows g and g + 8 of each 16-row tile, Y row g): the word of a stage
  // that holds the first byte of its pair at k = 0 (warp 0's first k-step), and the bits a pair
  // is shifted by in the two words it spans (0 or 16).
  int x_word[M_TILES][2], x_shift[M_TILES][2];
  int y_word, y_shift;
  bool skewed;

  __device__ __forceinline__ explicit dg_mma_sums(const dg_gemv_view& v) {
    const int lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
    auto place = [&](int row, int& word, int& shift) {
      const int byte = v.skew(row) + 4 * q;
      word = row * ROW_WORDS * 4 + (byte >> 2);
      shift = (byte & 3) * 8;
    };
#pragma unroll
    for (int t = 0; t < M_TILES; ++t)
#pragma unroll
      for (int h = 0; h < 2; ++h) place(16 * t + g + 8 * h, x_word[t][h], x_shift[t][h]);
    place(ROWS + g, y_word, y_shift);
    // Lane i asks of stage row i (a loop over the rows cost a sixth of a short kernel's time).
    static_assert(STAGE_ROWS <= 32, "one lane per stage row");
    skewed = __any_sync(0xffffffffu, lane < STAGE_ROWS && v.skew(lane) % 4 != 0);
  }

  template <bool TAIL>
  __device__ __forceinline__ void chunk(const uint4* stage, int k0, int K, float (&acc)[ACC]) const {
    if (skewed) steps<true, TAIL>(stage, k0, K, acc);
    else steps<false, TAIL>(stage, k0, K, acc);
  }

  // The two elements whose first byte is `shift` bits into words[0], zeroed from element `valid`
  // on.
  template <bool SKEWED, bool TAIL>
  __device__ __forceinline__ static unsigned pair(const unsigned* words, int shift, int valid) {
    unsigned p = words[0];
    if (SKEWED) p = __funnelshift_r(p, words[1], shift);
    if (TAIL) p = valid >= 2 ? p : valid == 1 ? p & 0xFFFFu : 0u;
    return p;
  }

  template <bool SKEWED, bool TAIL>
  __device__ __forceinline__ void steps(const uint4* stage, int k0, int K, float (&acc)[ACC]) const {
    const int warp = threadIdx.x / 32, q = threadIdx.x % 4;
    // The warp's first k-step starts 16 * warp elements, 8 * warp words, into each row.
    const unsigned* words = reinterpret_cast<const unsigned*>(stage) + 8 * warp;
    const unsigned* y = words + y_word;
#pragma unroll 4  // the k-steps' shared-memory reads issue together, four at a time
    for (int j = 0; j < TILE_K / 16 / WARPS; ++j) {
      const int k = 16 * (warp + j * WARPS);  // the k-step's first column in the chunk
      const int w = 8 * WARPS * j;            // its words past the warp's first k-step
      const int valid = TAIL ? K - (k0 + k + 2 * q) : 16;  // of this lane's first pair
      // Columns 2q, 2q + 1 of the k-step, then 2q + 8, 2q + 9: 16 bytes, 4 words on.
      const unsigned b[2] = {pair<SKEWED, TAIL>(y + w, y_shift, valid),
                             pair<SKEWED, TAIL>(y + w + 4, y_shift, valid - 8)};
#pragma unroll
      for (int t = 0; t < M_TILES; ++t) {
        const unsigned* lo = words + x_word[t][0] + w;
        const unsigned* hi = words + x_word[t][1] + w;
        const unsigned a[4] = {pair<SKEWED, TAIL>(lo, x_shift[t][0], valid),
                               pair<SKEWED, TAIL>(hi, x_shift[t][1], valid),
                               pair<SKEWED, TAIL>(lo + 4, x_shift[t][0], valid - 8),
                               pair<SKEWED, TAIL>(hi + 4, x_shift[t][1], valid - 8)};
        dg_mma(&acc[4 * t], a, b);
      }
    }
  }
};

// The whole of K through the ring. On sm_90 (BULK) every stage is in flight: the ring starts
// with STAGES chunks on their way, and once every thread has summed chunk c (the __syncthreads
// that ends the turn) its stage takes chunk c + STAGES. With two stages and three chunks (K =
// 3001) a block then waits two round trips of DRAM instead of three (bench/RESULTS.md,
// 2026-12-07 "Where 3001x7x3001 goes"). Before sm_90 a cp.async ring keeps STAGES - 1 in flight: chunk
// c + STAGES - 1 is issued at the start of turn c, into the stage every thread finished summing
// before this turn's __syncthreads (each thread's wait counts its own groups, so the barrier
// must follow it).
template <typename Sums>
__device__ __forceinline__ void dg_gemv_stream(const dg_gemv_view& v, uint4* ring,
                                               const dg_loader& loader, float (&acc)[ACC]) {
  constexpr int AHEAD = BULK ? STAGES : STAGES - 1;  // chunks in flight
  const Sums sums(v);
  const int chunks = (v.K + TILE_K - 1) / TILE_K;
#pragma unroll 1  // one copy of the loader's code for the prologue, one for the loop
  for (int c = 0; c < AHEAD; ++c) {
    if (c < chunks) loader.load(ring, c);
    else if (!BULK) dg_cp_async_commit();  // an empty group: the waits count groups
  }
  // BULK: the words the prologue copied by hand, published before anyone sums them (the bulk
  // copies are counted in by the stage barriers).
  if constexpr (BULK) __syncthreads();
  for (int c = 0; c < chunks; ++c) {
    loader.wait(c);  // this thread's copies of chunk c have landed (sm_90: all of them)
    const int next = c + AHEAD;
    if constexpr (!BULK) {
      __syncthreads();  // and every thread's; chunk c - 1's stage is free
      if (next < chunks) loader.load(ring, next);
      else dg_cp_async_commit();
    }
    const uint4* stage = ring + (c % STAGES) * STAGE_WORDS;
    if ((c + 1) * TILE_K <= v.K) sums.template chunk<false>(stage, c * TILE_K, v.K, acc);
    else sums.template chunk<true>(stage, c * TILE_K, v.K, acc);
    if constexpr (BULK) {
      // Every thread has summed chunk c: its stage takes chunk c + STAGES, whose hand-copied
      // words a later turn's barrier publishes before that chunk is summed.
      __syncthreads();
      if (next < chunks) loader.load(ring, next);
    }
  }
}

extern "C" __global__ void __launch_bounds__(THREADS, 2) {{ENTRY}}({{PARAMS}}) {
  // First of all: the vectors read below may be an earlier kernel's output.
  dg_wait_for_prior_grids();
{{BINDINGS}}
{{EPILOGUE}}

  extern __shared__ __align__(16) unsigned char dg_smem[];
  uint4* ring = reinterpret_cast<uint4*>(dg_smem);  // [STAGES][STAGE_ROWS][ROW_WORDS] words
  // sm_90: each stage's `full` mbarrier, after the ring.
  const unsigned full = dg_smem_addr(ring + STAGES * STAGE_WORDS);
  if constexpr (BULK) {
    if (threadIdx.x == 0) {
      for (int s = 0; s < STAGES; ++s) dg_mbar_init(full + 8 * s, WARPS);  // one per warp
      dg_fence_mbarrier_init();
    }
    __syncthreads();
  }

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
  // The bytes each operand spans (its last row ends at column K): the ring copies no aligned
  // word beyond them.
  const char* x_last = gX + (long long)(x_rows - 1) * ldx + (long long)K * ELEM_BYTES;
  const char* y_last = gY + (long long)(y_rows - 1) * ldy + (long long)K * ELEM_BYTES;
  float acc[ACC];
#pragma unroll
  for (int i = 0; i < ACC; ++i) acc[i] = 0.0f;
  const dg_gemv_view view{gX, gY, ldx, ldy, x_last, y_last, x_rows, y_rows, x0, y0, K};
  const dg_loader loader(view, full);
  dg_amax<AMAX, AMAX_PER_ROW, 1> amax(amax_out);
  // One thread per output applies the spec's expression to its sum of X row x with Y row y.
  auto store = [&](float sum, int x, int y) {
    if (x < x_rows && y < y_rows) {
      const int m = X_IS_A ? x : y, n = X_IS_A ? y : x;
      const long long offset = D_ROW ? (long long)m * ldd + n : (long long)n * ldd + m;
      const float v = epilogue(sum, m, n);
      amax.add(0, m, v);
      dg_store(gD + offset, v);
    }
  };
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  if constexpr (MMA) {
    dg_gemv_stream<dg_mma_sums>(view, ring, loader, acc);

    // ---- epilogue: the warps' tiles summed through shared memory (the ring is done with) ----
    if constexpr (!BULK) dg_cp_async_wait<0>();  // no cp.async group left in flight
    __syncthreads();
    float* partial = reinterpret_cast<float*>(dg_smem);  // [WARPS][ACC][32]
#pragma unroll
    for (int i = 0; i < ACC; ++i) partial[(warp * ACC + i) * 32 + lane] = acc[i];
    __syncthreads();
    // Thread t sums value i = t / 32 of lane t % 32 over the warps.
    for (int t = threadIdx.x; t < ACC * 32; t += THREADS) {
      const int i = t / 32, l = t % 32;
      float sum = 0.0f;
#pragma unroll
      for (int w = 0; w < WARPS; ++w) sum += partial[(w * ACC + i) * 32 + l];
      // Value i of lane l: tile i / 4, X row g (+ 8 for i % 4 >= 2), Y row 2q (+ 1 if odd).
      const int g = l / 4, y = 2 * (l % 4) + i % 2;
      store(sum, x0 + 16 * (i / 4) + g + 8 * ((i % 4) / 2), y0 + y);
    }
  } else {
    dg_gemv_stream<dg_ffma_sums>(view, ring, loader, acc);
    // ---- epilogue: one lane per output, after the transposing butterfly ----
    const float sum = dg_warp_transpose_sum<VALUES>(acc);
    constexpr int LANES_PER_VALUE = 32 / VALUES;
    const int value = lane / LANES_PER_VALUE;
    if (lane % LANES_PER_VALUE == 0)
      store(sum, x0 + warp * ROWS_PER_WARP + value / SMALL, y0 + value % SMALL);
  }
  amax.flush_rows<1>();
  amax.finish();
}
