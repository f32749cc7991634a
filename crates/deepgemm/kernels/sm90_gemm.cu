// ---------------------------------------------------------------------------------------------
// sm90 backend: TMA -> mbarrier ring -> wgmma, warp-specialized and persistent (sm_90a only).
//
// Warpgroup 0 is the producer: one thread issues the TMA loads of A and B into a ring of STAGES
// shared-memory stages, each guarded by a `full` mbarrier (the copy engine counts the bytes in)
// and an `empty` mbarrier (the consumers hand the stage back). Warpgroups 1..CONSUMERS are the
// consumers, which multiply with wgmma.m64nNk16 straight from the swizzled stages, keeping one
// k-tile of wgmmas in flight while they wait for the next stage. Two schedules:
// - cooperative: the consumers split each TILE_M x TILE_N tile, WG_M rows each;
// - ping-pong: each consumer computes whole tiles, the two taking turns (tiles 0, 2, 4, ... and
//   1, 3, 5, ...). The ring holds the k-tiles in tile order, so one consumer's epilogue runs while
//   the other's main loop keeps the tensor cores busy. Main loops take turns through two `turn`
//   mbarriers: a consumer starts its tile's main loop once the other has issued its last one, so
//   every stage it then waits on is at most one phase ahead of its barrier (parity waits cannot
//   tell phases two apart).
// The grid is persistent: each block (each cluster of CLUSTER_M blocks) walks the output tiles
// with a stride of the grid, so the producer fills the ring with the next tile's k-tiles while
// the consumers run the epilogue of the current one.
// With CLUSTER_M = 2, the two blocks of a cluster compute vertically adjacent tiles that share
// their B tile: each block loads half of it and the copy engine multicasts it to both.
// With PROMOTE (fp8 inputs), accumulation has two levels: wgmma sums one k-tile's products into
// `part` (its fp8 adds keep fewer bits than f32), and the consumer then adds `part` into the f32
// sums `acc` on the CUDA cores, times the k-tile's K-block scales of A and B (DeepSeek's 1x128 /
// 128x128 recipe), which the producer brings beside the k-tile's stage. (Two cooperating
// consumers wait and promote at about the same moments, while the tensor cores idle: issuing
// their k-tiles in strict turn measured slower, and so did turns per m64 slice passed on before
// the slice's last wgmma, bench/RESULTS.md 2026-12-06.) A cooperative fp8 consumer
// runs a tile's epilogue once it has issued the next tile's first k-tile (DEFERRED_EPILOGUE),
// so the tensor cores work through it.
// ---------------------------------------------------------------------------------------------

constexpr int TILE_M = {{TILE_M}};
constexpr int TILE_N = {{TILE_N}};
constexpr int TILE_K = {{TILE_K}};        // one 128-byte swizzle row of K per stage
constexpr int STAGES = {{STAGES}};
constexpr int CONSUMERS = {{CONSUMERS}};  // consumer warpgroups
constexpr bool PINGPONG = {{PINGPONG}};   // consumers alternate whole tiles (else split them)
constexpr int CLUSTER_M = {{CLUSTER_M}};  // blocks per cluster, along M, sharing B
constexpr int GROUP_M = {{GROUP_M}};      // cluster-tile rows per raster group (L2 reuse)
constexpr int THREADS = 128 * (1 + CONSUMERS);
// setmaxnreg moves registers within what the block holds from its launch (each thread the
// register file's share, in multiples of 8, at most 255): the consumers' increase must fit what
// the producer gives back, or it waits for ever.
static_assert(128 * {{PRODUCER_REGISTERS}} + 128 * CONSUMERS * {{CONSUMER_REGISTERS}} <=
                  THREADS * ((65536 / THREADS < 255 ? 65536 / THREADS : 255) / 8 * 8),
              "the warpgroups' registers exceed the block's");
constexpr int WG_M = PINGPONG ? TILE_M : TILE_M / CONSUMERS;  // rows of a tile per consumer
constexpr int TILE_STRIDE = PINGPONG ? CONSUMERS : 1;  // a consumer's tiles, in ring order
constexpr int STAGE_READERS = PINGPONG ? 1 : CONSUMERS;  // consumers that read each stage
constexpr int WG_MMAS = WG_M / 64;        // m64 wgmmas per consumer per k step
constexpr int ACC = TILE_N / 2;           // f32 accumulators per thread per m64 wgmma
constexpr bool PROMOTE = {{PROMOTE}};     // two-level accumulation (fp8)
// Cooperative fp8 with a staged epilogue: a tile's epilogue runs once the next tile's first
// k-tile of wgmmas has been issued, so the tensor cores work through it (the sums acc are free
// then: the wgmmas write the partial sums, which are promoted into acc only after the
// epilogue). Ping-pong consumers hide their epilogues under each other's main loops; 16-bit
// kernels sum into acc directly; column-major D's stores from the registers, with the partial
// sums live, spilled (backend::sm90::defers_epilogue). The first k-tile runs the epilogue, so a
// tile has at least one (the launcher rejects K = 0).
constexpr bool DEFERRED_EPILOGUE = {{DEFERRED_EPILOGUE}};
// Columns of D that share one K-block scale of B (128 for 128x128 blocks; 0: no such scale).
constexpr int B_SCALE_COLUMNS = {{B_SCALE_COLUMNS}};
// K-block scales of B a consumer thread keeps per k-tile (codegen::sm90::col_scales): 1 when a
// tile lies in one block of scale columns, 2 when it can straddle two, or (PER_COLUMN_SCALES)
// one per fragment column, TILE_N / 4.
constexpr int COL_SCALES = {{COL_SCALES}};
constexpr bool PER_COLUMN_SCALES = {{PER_COLUMN_SCALES}};
static_assert(PER_COLUMN_SCALES ? COL_SCALES == TILE_N / 4 : COL_SCALES == 1 || COL_SCALES == 2,
              "B's scales: one or two blocks per tile, or one per fragment column");
// STAGED_SCALES (codegen::sm90::staged_scales): each k-tile's K-block scales (A's of the tile's
// rows, B's of its at most two blocks of columns) go into a slot beside the k-tile's stage,
// arriving on the stage's `full` barrier, and the consumers read them from there: they spend no
// instructions on the copies, and the scales come with the operands they scale. Otherwise they
// are loaded into registers a k-tile ahead (a scale per column of B, products of scale tensors).
// A_SCALES_BY_TMA: A's scales of a k-tile are consecutive (M-major), and where M is a multiple
// of 4 (a TMA box starts on 16 bytes: at others the load is an illegal instruction) thread 0
// loads the tile's rows with one TMA load beside the operands'; otherwise the producer warp's
// lanes copy them row by row (cp.async, each lane arriving on `full` when its copies land). Two
// lanes copy B's.
constexpr bool STAGED_SCALES = {{STAGED_SCALES}};
constexpr int SCALE_ROWS = {{SCALE_ROWS}};  // A's scales per stage: one per tile row, or none
constexpr int SCALE_COLS = {{SCALE_COLS}};  // B's: COL_SCALES padded to 16 bytes, or none
constexpr bool A_SCALES_BY_TMA = {{A_SCALES_BY_TMA}};
// A slot starts where a TMA load may write (128 bytes) when A's scales come by TMA.
constexpr int SCALE_STAGE_BYTES =
    A_SCALES_BY_TMA ? ((SCALE_ROWS + SCALE_COLS) * 4 + 127) / 128 * 128
                    : (SCALE_ROWS + SCALE_COLS) * 4;
static_assert(!A_SCALES_BY_TMA || (STAGED_SCALES && SCALE_ROWS == TILE_M),
              "A's scales by TMA: a slot of the tile's rows");
// Producer threads: thread 0 issues the TMA loads; with STAGED_SCALES all of warp 0 copies
// scales, each lane arriving on `full` once its copies land, besides thread 0's arrival that
// announces the TMA bytes.
constexpr int PRODUCER_THREADS = STAGED_SCALES ? 32 : 1;
constexpr int FULL_ARRIVALS = 1 + (STAGED_SCALES ? PRODUCER_THREADS : 0);

constexpr bool A_KMAJOR = {{A_KMAJOR}};  // A[M,K] row-major: K contiguous
constexpr bool B_KMAJOR = {{B_KMAJOR}};  // B[K,N] col-major: K contiguous
constexpr bool D_ROW = {{D_ROW}};        // D[M,N] row-major (N contiguous), else col-major
// Row-major D goes through a small shared-memory buffer per warp so that global stores are whole
// 16-byte pieces of rows (a warp writes full 128-byte lines) instead of 4-byte pieces of 8 rows.
constexpr bool STAGED_EPILOGUE = {{STAGED_EPILOGUE}};
static_assert(STAGED_EPILOGUE == D_ROW, "row-major D is staged, column-major D stored directly");
static_assert(!DEFERRED_EPILOGUE || (PROMOTE && !PINGPONG && STAGED_EPILOGUE),
              "only a cooperative fp8 kernel's staged epilogue runs under the next tile's wgmmas");

typedef {{A_TYPE}} ElementA;
typedef {{B_TYPE}} ElementB;
typedef {{D_TYPE}} ElementD;
// wgmma's k: 16 (16-bit), 32 (fp8), 8 (tf32, which the TMA rounds from f32 as it loads: the
// tensor maps are TFLOAT32). Every k step reads 32 bytes of K.
constexpr int MMA_K = 32 / (int)sizeof(ElementA);
constexpr int K_STEPS = TILE_K / MMA_K;
static_assert(sizeof(ElementA) == sizeof(ElementB) && TILE_K * sizeof(ElementA) == 128,
              "a stage holds one 128-byte swizzle row of K");
static_assert(PROMOTE == (sizeof(ElementA) == 1), "fp8 products are promoted, others not");
static_assert(sizeof(ElementA) == 2 || (A_KMAJOR && B_KMAJOR),
              "wgmma reads fp8 and tf32 operands K-major only");
static_assert(WG_M % 64 == 0 && TILE_N % 8 == 0 && TILE_N <= 256, "wgmma is m64nNk, N <= 256");
static_assert(A_KMAJOR || WG_M % 64 == 0, "MN-major A is staged in 64-row boxes");
static_assert(B_KMAJOR || TILE_N % (64 * CLUSTER_M) == 0, "MN-major B is staged in 64-column boxes");
static_assert(!B_KMAJOR || (TILE_N / CLUSTER_M) % 8 == 0,
              "each block's share of B starts on an 8-row swizzle atom");

// ---- shared memory (codegen::sm90::smem_layout) ---------------------------------------------
// [1024-byte aligned] STAGES x A stage | STAGES x B stage | full[STAGES] | empty[STAGES] |
// turn[2] (ping-pong) in 1024 bytes | the staged epilogue's buffers, EPI_WARP_BUFFERS per
// consumer warp |
// STAGED_SCALES: STAGES scale slots of SCALE_STAGE_BYTES, slot s beside stage s.
// The 128-byte swizzle repeats every 8 rows of 128 bytes (1024 bytes): every stage and every
// TMA box starts on such a boundary, which is what the wgmma descriptors below assume.
// K-major operand: rows of TILE_K elements (128 bytes), one row per M (or N) index.
// MN-major operand: boxes of 64 M (or N) elements x TILE_K rows of K, one box after another.
constexpr int A_STAGE_BYTES = {{A_STAGE_BYTES}};
constexpr int B_STAGE_BYTES = {{B_STAGE_BYTES}};
constexpr int ROW_BYTES = 128;  // a K-major row of TILE_K elements
constexpr int MN_BOX_BYTES = 64 * TILE_K * 2;  // one 64-wide box of an MN-major (16-bit) operand
static_assert(A_STAGE_BYTES == TILE_M * ROW_BYTES && B_STAGE_BYTES == TILE_N * ROW_BYTES,
              "stage sizes differ from the plan");
static_assert(A_STAGE_BYTES % 1024 == 0 && B_STAGE_BYTES % 1024 == 0,
              "stages keep the 1024-byte swizzle alignment");
static_assert((2 * STAGES + 2) * 8 <= 1024, "the barriers fit their 1024 bytes");
// Staged epilogue: each consumer warp's 16 rows of an m64 slice, EPI_N columns at a time.
constexpr int EPI_N = 64;
constexpr int EPI_ROW_BYTES = EPI_N * (int)sizeof(ElementD);  // 64 (fp8 D), 128 (16-bit), 256 (f32)
constexpr int EPI_WARP_BYTES = 16 * EPI_ROW_BYTES;
constexpr int EPI_CHUNKS = EPI_ROW_BYTES / 16;  // 16-byte pieces per staged row
constexpr int EPI_ELEMS = 16 / (int)sizeof(ElementD);  // elements per 16-byte piece
// 16-bit row-major D: a staged piece is 16 rows of 128 bytes, swizzled as TMA's 128-byte
// swizzle, which a TMA store writes to D where D's address and pitch are 16-byte aligned
// (tested at run time: the launcher passes a zeroed map otherwise). Where two buffers per warp fit
// beside the ring they are used in turn: a warp stages its next piece while the copy engine reads
// the last; with one, a warp waits for the copy engine to finish reading it first.
constexpr bool TMA_STORE = {{TMA_STORE}};
static_assert(!TMA_STORE || (STAGED_EPILOGUE && EPI_ROW_BYTES == 128),
              "TMA stores take 128-byte staged rows (16-bit D)");
constexpr int EPI_WARP_BUFFERS = {{EPI_WARP_BUFFERS}};
static_assert(EPI_WARP_BUFFERS == 1 || (TMA_STORE && EPI_WARP_BUFFERS == 2),
              "a second buffer per warp only for TMA stores");
static_assert({{EPILOGUE_BYTES}} ==
                  (STAGED_EPILOGUE ? 4 * CONSUMERS * EPI_WARP_BUFFERS * EPI_WARP_BYTES : 0),
              "epilogue buffers differ from the plan");
static_assert({{SCALE_BYTES}} == (STAGED_SCALES ? STAGES * SCALE_STAGE_BYTES : 0),
              "staged scales differ from the plan");
static_assert(!STAGED_SCALES || (PROMOTE && !PER_COLUMN_SCALES &&
                                 (SCALE_ROWS == 0 || SCALE_ROWS == TILE_M) &&
                                 (SCALE_COLS == 0 || SCALE_COLS == 4)),
              "staged scales: one slot per tile row, 4 (16 bytes) for the columns");

// The first column of the second block of B's scale columns that a tile starting at n0 meets.
__device__ __forceinline__ int second_scale_block(int n0) {
  constexpr int block = B_SCALE_COLUMNS > 0 ? B_SCALE_COLUMNS : 1;
  return (n0 / block + 1) * block;
}

// ---- promotion (PROMOTE) --------------------------------------------------------------------
// Adds one m64 slice's partial sums of a k-tile into its f32 sums, times the K-block scales: the
// scale of the thread's row h times that of the column's block of B scales, col0 for the
// fragment's first FIRST_GROUPS 8-column groups and col1 for the rest. FIRST_GROUPS is a
// constant, so that no column's choice is made at run time.
template <int FIRST_GROUPS, int ACC_N>
__device__ __forceinline__ void dg_promote(float (&acc)[ACC_N], const float (&part)[ACC_N],
                                           const float (&rows)[2], float col0, float col1) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float first = rows[h] * col0, second = rows[h] * col1;
#pragma unroll
    for (int j = 0; j < TILE_N / 8; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int r = 4 * j + 2 * h + e;
        acc[r] = fmaf(j < FIRST_GROUPS ? first : second, part[r], acc[r]);
      }
  }
}
__host__ __device__ constexpr int dg_gcd(int a, int b) { return b == 0 ? a : dg_gcd(b, a % b); }
// TWO_SCALE_BLOCKS: a tile starting at n0 has min(TILE_N, second_scale_block(n0) - n0) / 8 groups
// in its first block; n0 is a multiple of TILE_N, so that count is a multiple of SPLIT_STEP.
constexpr bool TWO_SCALE_BLOCKS = !PER_COLUMN_SCALES && COL_SCALES == 2;
constexpr int SPLIT_STEP = TWO_SCALE_BLOCKS ? dg_gcd(TILE_N, B_SCALE_COLUMNS) / 8 : 1;
static_assert(SPLIT_STEP >= 1 && (TILE_N / 8) % SPLIT_STEP == 0,
              "a tile's groups in its first block of scales are a multiple of SPLIT_STEP");
// dg_promote for a tile's `first_groups`, chosen from SPLIT_STEP, 2 SPLIT_STEP, ... TILE_N / 8.
template <int FIRST_GROUPS = SPLIT_STEP, int ACC_N>
__device__ __forceinline__ void dg_promote_split(int first_groups, float (&acc)[ACC_N],
                                                 const float (&part)[ACC_N],
                                                 const float (&rows)[2], float col0, float col1) {
  if constexpr (FIRST_GROUPS >= TILE_N / 8) {
    dg_promote<TILE_N / 8>(acc, part, rows, col0, col1);
  } else if (first_groups == FIRST_GROUPS) {
    dg_promote<FIRST_GROUPS>(acc, part, rows, col0, col1);
  } else {
    dg_promote_split<FIRST_GROUPS + SPLIT_STEP>(first_groups, acc, part, rows, col0, col1);
  }
}

// ---- PTX wrappers ---------------------------------------------------------------------------
struct __align__(64) dg_tensor_map { unsigned long long opaque[16]; };  // a CUtensorMap

{{MBARRIER}}

// Arrives on the mbarrier at the same offset in the shared memory of cluster block `rank`.
// Default (CTA-scope release) semantics: what it orders are this warpgroup's wgmma reads, which
// `wgmma.wait_group` has completed; a cluster-scope release would cost a GPU-wide fence each time.
__device__ __forceinline__ void dg_mbar_arrive_cluster(unsigned bar, unsigned rank) {
  asm volatile(
      "{\n .reg .b32 remote;\n mapa.shared::cluster.u32 remote, %0, %1;\n"
      " mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n"
      :: "r"(bar), "r"(rank) : "memory");
}
__device__ __forceinline__ unsigned dg_cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
// The cluster's barrier after the blocks have made their mbarriers. The arrive is relaxed: the
// inits are released by fence.mbarrier_init (PTX ISA: the fence pairs with a relaxed arrive), and
// a releasing arrive compiles to MEMBAR.ALL.GPU in every warp, on every block's way to its first
// load.
__device__ __forceinline__ void dg_cluster_sync() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\nbarrier.cluster.wait.acquire.aligned;\n"
               ::: "memory");
}
// A 2D box of `map` at (inner, outer) into shared memory at `dst`, completing on `bar`;
// `read_once`: its L2 lines evict first (mbarrier.cuh).
__device__ __forceinline__ void dg_tma_load(unsigned dst, const dg_tensor_map* map, unsigned bar,
                                            int inner, int outer, bool read_once) {
  if (read_once) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        ".L2::cache_hint [%0], [%1, {%3, %4}], [%2], %5;\n"
        :: "r"(dst), "l"(map), "r"(bar), "r"(inner), "r"(outer), "l"(dg_l2_evict_first())
        : "memory");
  } else {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%3, %4}], [%2];\n"
        :: "r"(dst), "l"(map), "r"(bar), "r"(inner), "r"(outer) : "memory");
  }
}
// A 1-D box (of a flat map) starting at element `at`.
__device__ __forceinline__ void dg_tma_load_1d(unsigned dst, const dg_tensor_map* map, unsigned bar,
                                               int at) {
  asm volatile(
      "cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3}], [%2];\n"
      :: "r"(dst), "l"(map), "r"(bar), "r"(at) : "memory");
}
// As dg_tma_load, into the same offset of every block of the cluster in `mask`.
__device__ __forceinline__ void dg_tma_load_multicast(unsigned dst, const dg_tensor_map* map,
                                                      unsigned bar, int inner, int outer,
                                                      unsigned short mask, bool read_once) {
  if (read_once) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        ".multicast::cluster.L2::cache_hint [%0], [%1, {%3, %4}], [%2], %5, %6;\n"
        :: "r"(dst), "l"(map), "r"(bar), "r"(inner), "r"(outer), "h"(mask),
           "l"(dg_l2_evict_first())
        : "memory");
  } else {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        ".multicast::cluster [%0], [%1, {%3, %4}], [%2], %5;\n"
        :: "r"(dst), "l"(map), "r"(bar), "r"(inner), "r"(outer), "h"(mask) : "memory");
  }
}
// TMA_STORE: the box of shared memory at `src` into `map` at (inner, outer), as one bulk group of
// this thread; what lies past the tensor's extent is not written.
__device__ __forceinline__ void dg_tma_store(const dg_tensor_map* map, unsigned src, int inner,
                                             int outer) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n"
               "cp.async.bulk.commit_group;\n"
               :: "l"(map), "r"(src), "r"(inner), "r"(outer) : "memory");
}
// Until at most PENDING of this thread's bulk groups still read their shared memory.
template <int PENDING>
__device__ __forceinline__ void dg_tma_store_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" :: "n"(PENDING) : "memory");
}
// Until every bulk group of this thread is complete (its writes done).
__device__ __forceinline__ void dg_tma_store_wait_all() {
  asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
}
// Copies 4 bytes from global `src` to shared `dst`, or writes zeros when `valid` is false (src
// is then not read); dg_cp_async_arrive tells when it has landed.
__device__ __forceinline__ void dg_cp_async_4(unsigned dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n"
               :: "r"(dst), "l"(src), "r"(valid ? 4 : 0) : "memory");
}
// Arrives on `bar` once every cp.async this thread has issued so far has landed. `.noinc`: the
// barrier's expected count includes this arrival.
__device__ __forceinline__ void dg_cp_async_arrive(unsigned bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" :: "r"(bar) : "memory");
}
__device__ __forceinline__ float dg_ld_shared_f32(unsigned addr) {
  float v;
  asm volatile("ld.shared.f32 %0, [%1];\n" : "=f"(v) : "r"(addr) : "memory");
  return v;
}
__device__ __forceinline__ void dg_st_shared(unsigned addr, unsigned v) {
  asm volatile("st.shared.b32 [%0], %1;\n" :: "r"(addr), "r"(v) : "memory");
}
__device__ __forceinline__ void dg_st_shared(unsigned addr, float v0, float v1) {
  asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" :: "r"(addr), "f"(v0), "f"(v1) : "memory");
}
__device__ __forceinline__ uint4 dg_ld_shared_16(unsigned addr) {
  uint4 v;
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr) : "memory");
  return v;
}
// Two adjacent outputs, converted to D, into a staged-epilogue buffer (overloaded on D's type).
// One cvt rounds both halves to nearest even; it differs from the prelude's dg_bf16_bits only in
// the payload of a NaN (both quiet).
__device__ __forceinline__ void dg_stage_pair(const float*, unsigned at, float v0, float v1) {
  dg_st_shared(at, v0, v1);
}
__device__ __forceinline__ void dg_stage_pair(const dg_bf16*, unsigned at, float v0, float v1) {
  unsigned packed;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(packed) : "f"(v1), "f"(v0));  // v0 in the low half
  dg_st_shared(at, packed);
}
__device__ __forceinline__ void dg_stage_pair(const dg_e4m3*, unsigned at, float v0, float v1) {
  asm volatile("st.shared.u16 [%0], %1;\n" :: "r"(at), "h"(dg_e4m3x2_bits(v0, v1)) : "memory");
}
__device__ __forceinline__ void dg_stage_pair(const dg_e5m2*, unsigned at, float v0, float v1) {
  asm volatile("st.shared.u16 [%0], %1;\n" :: "r"(at), "h"(dg_e5m2x2_bits(v0, v1)) : "memory");
}
__device__ __forceinline__ void dg_stage_pair(const dg_f16*, unsigned at, float v0, float v1) {
  unsigned packed;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(packed) : "f"(v1), "f"(v0));
  dg_st_shared(at, packed);
}

{{BYTES_FROM}}
// Bytes [from, to) of the 16-byte piece of global memory at `piece` (16-byte aligned), `v` its
// bytes in place: the widest aligned stores that cover them, at most 4 up to the first 8-byte
// boundary and 3 after it.
__device__ __forceinline__ void dg_store_bytes(unsigned char* piece, uint4 v, int from, int to) {
  int b = from;
  // Stores `size` bytes at b (aligned to `size`) and moves past them.
  auto store = [&](int size) {
    const uint4 x = dg_bytes_from(v, v, b);  // byte b first
    if (size == 1) *(piece + b) = (unsigned char)x.x;
    if (size == 2) *reinterpret_cast<unsigned short*>(piece + b) = (unsigned short)x.x;
    if (size == 4) *reinterpret_cast<unsigned*>(piece + b) = x.x;
    if (size == 8) *reinterpret_cast<uint2*>(piece + b) = make_uint2(x.x, x.y);
    b += size;
  };
#pragma unroll
  for (int size = 1; size <= 8; size *= 2)
    if ((b & size) != 0 && b + size <= to) store(size);
#pragma unroll
  for (int size = 8; size >= 1; size /= 2)
    if (b + size <= to) store(size);
}
// Byte offset of byte `b` of row `r` in a staged-epilogue buffer: 16-byte pieces XOR-permuted by
// r % 8, so the 8 rows a fragment store touches at once fall in distinct banks (an fp8 row has 4
// pieces, which must stay in their row: permuted by r % 4, two of the 8 rows share banks).
__device__ __forceinline__ unsigned dg_epi_offset(int r, int b) {
  constexpr int SWIZZLE = (EPI_CHUNKS < 8 ? EPI_CHUNKS : 8) - 1;
  return r * EPI_ROW_BYTES + ((((b >> 4) ^ (r & SWIZZLE))) << 4) + (b & 15);
}
__device__ __forceinline__ void dg_prefetch_tensor_map(const dg_tensor_map* map) {
  asm volatile("prefetch.tensormap [%0];\n" :: "l"(map) : "memory");
}
template <int REGS>
__device__ __forceinline__ void dg_setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" :: "n"(REGS));
}
template <int REGS>
__device__ __forceinline__ void dg_setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" :: "n"(REGS));
}

// wgmma shared-memory matrix descriptor, 128-byte swizzle: start address, leading-dimension
// byte offset (LBO) and stride-dimension byte offset (SBO), each in 16-byte units.
// K-major: SBO = 1024 (from one 8-row swizzle atom to the next along M/N); LBO unused.
// MN-major: LBO = MN_BOX_BYTES (from one 64-element box to the next along M/N), SBO = 1024 (from
// one 8-row group of K to the next).
__device__ __forceinline__ unsigned long long dg_desc(unsigned addr, unsigned lbo, unsigned sbo) {
  return (unsigned long long)((addr & 0x3FFFF) >> 4) |
         ((unsigned long long)((lbo & 0x3FFFF) >> 4) << 16) |
         ((unsigned long long)((sbo & 0x3FFFF) >> 4) << 32) | (1ull << 62);
}
__device__ __forceinline__ void dg_wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void dg_wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int PENDING>
__device__ __forceinline__ void dg_wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(PENDING) : "memory");
}
// Keeps the compiler from moving accumulator reads or writes across an asynchronous wgmma.
__device__ __forceinline__ void dg_fence_acc(float (&d)[ACC]) {
#pragma unroll
  for (int i = 0; i < ACC; ++i) asm volatile("" : "+f"(d[i]) :: "memory");
}
{{WGMMA}}

extern "C" __global__ void __launch_bounds__(THREADS, 1) {{ENTRY}}({{PARAMS}}) {
  // First of all: the scales and vectors read below may be the repack copy's output.
  dg_wait_for_prior_grids();
{{BINDINGS}}
{{EPILOGUE}}
{{SPLIT_SCALES}}
  // TMA_STORE: the map D's staged pieces are stored through (nullptr without TMA stores).
  const dg_tensor_map* const d_map = {{D_STORE_MAP}};
  const dg_tensor_map* const a_scale_map = {{A_SCALE_MAP}};  // A_SCALES_BY_TMA

  extern __shared__ __align__(16) unsigned char dg_smem[];
  // Dynamic shared memory is only 16-byte aligned by contract: round up (the plan reserves the
  // slack in its barrier bytes).
  const unsigned smem = (dg_smem_addr(dg_smem) + 1023u) & ~1023u;
  const unsigned smem_a = smem;
  const unsigned smem_b = smem_a + STAGES * A_STAGE_BYTES;
  const unsigned bars = smem_b + STAGES * B_STAGE_BYTES;
  auto full = [&](int s) { return bars + 8u * s; };
  auto empty = [&](int s) { return bars + 8u * (STAGES + s); };
  auto turn = [&](int c) { return bars + 8u * (2 * STAGES + c); };  // consumer c may start
  const unsigned epi_buffers = bars + 1024;
  const unsigned scale_slots = epi_buffers + {{EPILOGUE_BYTES}};
  auto scale_slot = [&](int s) { return scale_slots + s * SCALE_STAGE_BYTES; };

  const int wg = threadIdx.x / 128;
  const unsigned rank = CLUSTER_M > 1 ? dg_cluster_rank() : 0u;
  // The tensor maps' prefetch from another warp than the inits': its address is a kernel
  // parameter, cold after an L2 flush, and the inits need not wait for it.
  if (threadIdx.x == 32) {
    dg_prefetch_tensor_map(&tmap_a);
    dg_prefetch_tensor_map(&tmap_b);
  }
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      // The producer's arrive.expect_tx (the bytes do the rest) and its lanes' scale copies.
      dg_mbar_init(full(s), FULL_ARRIVALS);
      dg_mbar_init(empty(s), STAGE_READERS * 4 * CLUSTER_M);  // reader warps, every block
    }
    if constexpr (PINGPONG) {
      dg_mbar_init(turn(0), 1);
      dg_mbar_init(turn(1), 1);
    }
    dg_fence_mbarrier_init();
  }
  // Every block's barriers must exist before any block's multicast or remote arrive reaches them.
  if constexpr (CLUSTER_M > 1) {
    dg_cluster_sync();
  } else {
    __syncthreads();
  }

  const int tiles_m = (M + TILE_M - 1) / TILE_M;
  const int tiles_n = (N + TILE_N - 1) / TILE_N;
  const int cluster_rows = (tiles_m + CLUSTER_M - 1) / CLUSTER_M;
  const int cluster_tiles = cluster_rows * tiles_n;
  const int cluster_id = blockIdx.x / CLUSTER_M;
  const int clusters = gridDim.x / CLUSTER_M;
  const int k_tiles = (K + TILE_K - 1) / TILE_K;
  // Both blocks of a cluster walk the same tiles (the second block's may lie below M: its loads
  // zero-fill, its stores are masked), so their rings stay in step.
  auto tile_origin = [&](int cluster_tile, int& m0, int& n0) {
    int tm, tn;
    dg_tile_coords<GROUP_M>(cluster_tile, cluster_rows, tiles_n, tm, tn);
    m0 = (tm * CLUSTER_M + (int)rank) * TILE_M;
    n0 = tn * TILE_N;
  };

  if (wg == 0) {
    // ---- producer ----
    dg_setmaxnreg_dec<{{PRODUCER_REGISTERS}}>();
    // Thread 0 produces: it issues the TMA loads. With STAGED_SCALES the rest of warp 0 joins
    // it, every lane copying a share of the k-tile's scales (their arrivals on `full` keep the
    // lanes within one lap of the ring of each other).
    const int lane = threadIdx.x;
    const bool a_scales_by_tma = A_SCALES_BY_TMA && M % 4 == 0;
    // The lanes' share of k-tile kt's scales of the tile at (m0, n0) into `slot`: A's of its
    // TILE_M rows (unless thread 0 loads them by TMA), then B's of its COL_SCALES blocks of
    // columns. Rows and columns outside D get zeros (not read).
    auto stage_scales = [&](int kt, int m0, int n0, unsigned slot) {
      const int k0 = kt * TILE_K;
      if constexpr (SCALE_ROWS > 0) {
        if (!a_scales_by_tma) {
          // Not unrolled: the addresses of every round, computed ahead, spilled the producer's
          // 40 registers.
#pragma unroll 1
          for (int round = 0; round < (TILE_M + 31) / 32; ++round) {
            const int r = 32 * round + lane;  // the lane's row of this round
            if (r >= TILE_M) break;
            const int m = m0 + r;
            dg_cp_async_4(slot + 4 * r, block_scale_a_at(m < M ? m : 0, k0), m < M);
          }
        }
      }
      if constexpr (SCALE_COLS > 0) {
        if (lane < COL_SCALES) {
          const int n = lane == 0 ? n0 : second_scale_block(n0);
          const bool inside = n < N && n < n0 + TILE_N;
          dg_cp_async_4(slot + 4 * (SCALE_ROWS + lane), block_scale_b_at(k0, inside ? n : 0),
                        inside);
        }
      }
    };
    if (threadIdx.x < PRODUCER_THREADS) {
      // An operand tile no other cluster reads (A where one tile spans N; B where one cluster
      // row spans M, as small-M weights) is read once: its L2 lines go first (mbarrier.cuh).
      const bool a_read_once = tiles_n == 1, b_read_once = cluster_rows == 1;
      int stage = 0;
      unsigned phase = 0;
      for (int ct = cluster_id; ct < cluster_tiles; ct += clusters) {
        int m0, n0;
        tile_origin(ct, m0, n0);
        for (int kt = 0; kt < k_tiles; ++kt) {
          // Fresh barriers count as having completed the phase before the first: parity 1 passes.
          dg_mbar_wait(empty(stage), phase ^ 1);
          if constexpr (STAGED_SCALES) {
            stage_scales(kt, m0, n0, scale_slot(stage));
            dg_cp_async_arrive(full(stage));
          }
          if (lane == 0) {
            dg_mbar_expect_tx(full(stage),
                              A_STAGE_BYTES + B_STAGE_BYTES + (a_scales_by_tma ? TILE_M * 4 : 0));
            const int k0 = kt * TILE_K;
            if (a_scales_by_tma) {
              // The tile's rows of A's scales of this k-tile: consecutive from (m0, k0).
              const int at = static_cast<int>(static_cast<const float*>(block_scale_a_at(m0, k0)) -
                                              static_cast<const float*>(block_scale_a_at(0, 0)));
              dg_tma_load_1d(scale_slot(stage), a_scale_map, full(stage), at);
            }
            const unsigned a_dst = smem_a + stage * A_STAGE_BYTES;
            const unsigned b_dst = smem_b + stage * B_STAGE_BYTES;
            if constexpr (A_KMAJOR) {
              dg_tma_load(a_dst, &tmap_a, full(stage), k0, m0, a_read_once);
            } else {
#pragma unroll
              for (int box = 0; box < TILE_M / 64; ++box)
                dg_tma_load(a_dst + box * MN_BOX_BYTES, &tmap_a, full(stage), m0 + 64 * box, k0,
                            a_read_once);
            }
            // This block's share of B: all of it, or one half multicast to both cluster blocks.
            if constexpr (B_KMAJOR) {
              constexpr int ROWS = TILE_N / CLUSTER_M;
              const unsigned dst = b_dst + rank * ROWS * ROW_BYTES;
              if constexpr (CLUSTER_M > 1) {
                dg_tma_load_multicast(dst, &tmap_b, full(stage), k0, n0 + rank * ROWS,
                                      (1u << CLUSTER_M) - 1, b_read_once);
              } else {
                dg_tma_load(dst, &tmap_b, full(stage), k0, n0, b_read_once);
              }
            } else {
              constexpr int BOXES = TILE_N / 64 / CLUSTER_M;
#pragma unroll
              for (int i = 0; i < BOXES; ++i) {
                const int box = rank * BOXES + i;
                if constexpr (CLUSTER_M > 1) {
                  dg_tma_load_multicast(b_dst + box * MN_BOX_BYTES, &tmap_b, full(stage),
                                        n0 + 64 * box, k0, (1u << CLUSTER_M) - 1, b_read_once);
                } else {
                  dg_tma_load(b_dst + box * MN_BOX_BYTES, &tmap_b, full(stage), n0 + 64 * box,
                              k0, b_read_once);
                }
              }
            }
          }
          if (++stage == STAGES) {
            stage = 0;
            phase ^= 1;
          }
        }
      }
      // The tail: the block leaves only once every stage's last fill has been handed back by all
      // its readers, this block's and (remote arrivals) the cluster peers'. Then no peer arrives
      // on this block's barriers after it is gone, and this block's multicast copies into the
      // peers have landed (their consumers waited for them before handing the stage back). The
      // peers' copies into this block land before its own consumers' last waits. This replaces a
      // cluster barrier at the end, whose release compiled to a GPU-wide MEMBAR.
      if constexpr (CLUSTER_M > 1) {
        for (int s = 0; s < STAGES; ++s) {
          dg_mbar_wait(empty(stage), phase ^ 1);
          if (++stage == STAGES) {
            stage = 0;
            phase ^= 1;
          }
        }
      }
    }
  } else {
    // ---- consumers ----
    dg_setmaxnreg_inc<{{CONSUMER_REGISTERS}}>();
    // A ping-pong consumer's index picks its turn barriers and tiles: as a value the compiler
    // knows is the same in the whole warp (a shuffle from lane 0), that bookkeeping stays in
    // uniform registers. (A cooperative consumer's only use on the wgmma path is its rows' A
    // descriptor, shuffled below; shuffling the index itself there made ptxas spill one register
    // of the 128x192 fp8 kernel with an fp8 D.)
    const int consumer = PINGPONG ? __shfl_sync(0xffffffffu, wg - 1, 0) : wg - 1;
    const int t = threadIdx.x % 128;
    const int warp = t / 32, lane = t % 32;
    const int first_row = PINGPONG ? 0 : consumer * WG_M;  // this consumer's rows of a tile
    unsigned turn_phase = 0;  // ping-pong: parity of this consumer's next wait on turn()
    float acc[WG_MMAS][ACC];
    // AMAX: the largest |value| of each of the thread's rows of a tile, two per m64 slice (or of
    // all it computes); flushed after each tile (per row) or at the end (per tensor).
    dg_amax<AMAX, AMAX_PER_ROW, 2 * WG_MMAS> amax(amax_out);
    // PROMOTE: one m64 slice's partial sums of a k-tile, which wgmma writes and the promotion
    // adds into acc; the slices of a consumer take turns with it (unused, and so allocated no
    // registers, otherwise).
    float part[ACC];
    // wgmma's D fragment: thread (warp, lane) holds rows warp*16 + lane/4 (+8) and columns
    // 8j + 2(lane%4) (+1) of each m64 x TILE_N result: acc[4j + 2h + e] = (row + 8h, col + e).
    const int g = lane / 4, q = lane % 4;

    // Hands a stage back to the producer of every block of the cluster: once per warp and
    // block, once the warpgroup's wgmmas have read the stage and (STAGED_SCALES) the warp's lanes
    // have read its scales, which __syncwarp orders before the arrivals; the count is
    // STAGE_READERS x 4 warps x CLUSTER_M. (Per warp, not per warpgroup: a warpgroup would have to
    // meet at a barrier every k-tile first.) In a cluster lane r arrives on block r's barrier,
    // this block's own through its cluster address (the same arrival as through its CTA
    // address): one predicated arrive, where a loop in lane 0 was a branch region on the way
    // from the k-tile's last wgmma to the next k-tile's first. Cooperative block-scaled kernels
    // whose consumers take two m64 slices (256-row tiles) keep lane 0's loop, its own barrier
    // through its CTA address first: it ran them up to 5% faster (4096x7168x16384), and the nine
    // other fp8 kernels measured 2-8% slower than the predicated arrive (bench/RESULTS.md,
    // 2026-12-07, sixth session). Why is not known.
    constexpr bool RELEASE_BY_LANE_0 =
        CLUSTER_M == 1 || (STAGED_SCALES && WG_MMAS == 2 && !PINGPONG);
    auto release = [&](int s) {
      __syncwarp();
      if constexpr (RELEASE_BY_LANE_0) {
        if (lane == 0) {
          dg_mbar_arrive(empty(s));
#pragma unroll
          for (unsigned r = 0; r < CLUSTER_M; ++r)
            if (r != rank) dg_mbar_arrive_cluster(empty(s), r);
        }
      } else if (lane < CLUSTER_M) {
        dg_mbar_arrive_cluster(empty(s), lane);
      }
    };

    // One k-tile's K-block scales, as the promotion uses them.
    struct KTileScales {
      float rows[WG_MMAS][2];
      float cols[COL_SCALES];
    };
    // Not STAGED_SCALES: k-tile kt's K-block scales straight into registers: of the thread's rows
    // (two per m64 slice) and its fragment columns, COL_SCALES of them; those outside D get 0
    // (their partial sums are zero-filled anyway).
    auto load_scales = [&](int kt, int n0, int m0, KTileScales& out) {
      const int k0 = kt * TILE_K;
#pragma unroll
      for (int i = 0; i < WG_MMAS; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int m = m0 + first_row + i * 64 + warp * 16 + g + 8 * h;
          out.rows[i][h] = m < M ? block_scale_a(m, k0) : 0.0f;
        }
      if constexpr (PER_COLUMN_SCALES) {
#pragma unroll
        for (int c = 0; c < COL_SCALES; ++c) {
          const int n = n0 + (c / 2) * 8 + 2 * q + (c % 2);  // column c of the fragment
          out.cols[c] = n < N ? block_scale_b(k0, n) : 0.0f;
        }
      } else if constexpr (COL_SCALES == 1) {
        out.cols[0] = n0 < N ? block_scale_b(k0, n0) : 0.0f;
      } else {
        const int next_n = second_scale_block(n0);
        out.cols[0] = n0 < N ? block_scale_b(k0, n0) : 0.0f;
        out.cols[1] = next_n < N && next_n < n0 + TILE_N ? block_scale_b(k0, next_n) : 0.0f;
      }
    };
    // STAGED_SCALES: the scales of the k-tile in `stage`, from its slot, as the producer copied
    // them: A's of the thread's rows, then B's COL_SCALES.
    auto read_staged_scales = [&](int stage, KTileScales& out) {
      const unsigned slot = scale_slot(stage);
#pragma unroll
      for (int i = 0; i < WG_MMAS; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          out.rows[i][h] =
              SCALE_ROWS > 0
                  ? dg_ld_shared_f32(slot + 4 * (first_row + i * 64 + warp * 16 + g + 8 * h))
                  : 1.0f;
#pragma unroll
      for (int c = 0; c < COL_SCALES; ++c)
        out.cols[c] = SCALE_COLS > 0 ? dg_ld_shared_f32(slot + 4 * (SCALE_ROWS + c)) : 1.0f;
    };

    // wgmma descriptors of stage 0 for this consumer's first rows of A and for B. A stage, a k
    // step or an m64 slice adds its byte offset / 16 to the start-address field (bits 0-13),
    // which never carries into the next field: shared-memory addresses stay below 2^18.
    // As a value the compiler knows is the same in the whole warp (a shuffle from lane 0): the
    // descriptors built from it then live in uniform registers, and the wgmmas issue back to back
    // instead of each waiting for its descriptor's R2UR moves.
    const unsigned long long a_desc0 = __shfl_sync(
        0xffffffffu,
        A_KMAJOR ? dg_desc(smem_a + first_row * ROW_BYTES, 16, 1024)
                 : dg_desc(smem_a + (first_row / 64) * MN_BOX_BYTES, MN_BOX_BYTES, 1024),
        0);
    const unsigned long long b_desc0 =
        B_KMAJOR ? dg_desc(smem_b, 16, 1024) : dg_desc(smem_b, MN_BOX_BYTES, 1024);

    // ---- epilogue: the spec's expression on each accumulator (times the outer scales) ----
    // TMA_STORE: the pieces this warp has TMA-stored so far; the p-th goes from buffer
    // p % EPI_WARP_BUFFERS.
    unsigned staged_pieces = 0;
    // The tile at (m0, n0), from acc.
    auto store_tile = [&](int m0, int n0) {
      if constexpr (STAGED_EPILOGUE) {
        // Per m64 slice and EPI_N columns: the warp writes its 16 x EPI_N results (the spec's
        // expression applied, converted to D) into its buffer, then either one lane has them
        // TMA-stored (TMA_STORE, D aligned, a whole EPI_N-wide piece) or the warp reads them
        // back as 16-byte pieces of rows and stores those: 4, 8 or 16 lanes per 64-, 128- or
        // 256-byte row.
        const unsigned warp_bufs =
            epi_buffers + (consumer * 4 + warp) * EPI_WARP_BUFFERS * EPI_WARP_BYTES;
        // The same test as the launcher's for D's map (tensor_map::readable).
        const bool wide = (reinterpret_cast<unsigned long long>(gD) % 16 == 0) &&
                          ((ldd * (long long)sizeof(ElementD)) % 16 == 0);
        // A consumer part of a tile that lies wholly inside D needs no bounds checks (most tiles
        // of a large problem): one flag for the part instead of a test per element.
        const int part_row = m0 + first_row;
        const bool inside = part_row + WG_M <= M && n0 + TILE_N <= N;
        // D's rows not all 16-byte aligned (ldd or D's address): a staged row of `cols` columns
        // from (first_m + r, n) starts `skew` bytes into a 16-byte piece of D and spans up to
        // EPI_CHUNKS + 1 pieces. The whole pieces go in 16-byte stores, each made of the two
        // staged pieces it straddles shifted by the skew, EPI_CHUNKS slots per row as in the
        // aligned case. The piece a chunk shares with the next chunk of the row is stored with
        // the next: lane r keeps row r's last staged piece (`carry`) and joins it to the next
        // chunk's first. What is left partial, the tile's first and last pieces of each row (the
        // neighbouring tiles hold the rest of them) and D's right edge, goes in the widest
        // aligned stores its bytes allow. D's address is a multiple of its element size (the
        // launcher repacks it otherwise), so the skew is too.
        auto store_skewed_rows = [&](unsigned row_buf, int first_m, int n, int cols, bool all_in,
                                     bool tile_first, bool tile_last, uint4& carry) {
          auto row_geometry = [&](int r, int& row_bytes, unsigned long long& start) {
            const int m = first_m + r;
            row_bytes = (!all_in && m >= M) ? 0
                        : (all_in ? cols : min(cols, N - n)) * (int)sizeof(ElementD);
            start = reinterpret_cast<unsigned long long>(gD + (long long)m * ldd + n);
          };
          auto staged_piece = [&](int r, int piece) {  // pieces past the row read its last
            return dg_ld_shared_16(row_buf + dg_epi_offset(r, 16 * min(piece, EPI_CHUNKS - 1)));
          };
#pragma unroll
          for (int pass = 0; pass < 16 * EPI_CHUNKS / 32; ++pass) {
            const int p = pass * 32 + lane;
            const int r = p / EPI_CHUNKS;
            int row_bytes;
            unsigned long long start;
            row_geometry(r, row_bytes, start);
            const int skew = (int)(start % 16);
            const int piece = p % EPI_CHUNKS + (skew > 0 ? 1 : 0);
            const int from = 16 * piece - skew;  // the piece's first byte in the staged row
            if (from < 0 || from + 16 > row_bytes) continue;  // partial: below
            const uint4 lo = staged_piece(r, from >> 4);
            const uint4 hi = skew > 0 ? staged_piece(r, piece) : lo;
            *reinterpret_cast<uint4*>(start - skew + 16 * piece) = dg_bytes_from(lo, hi, from & 15);
          }
          if (lane < 16) {
            const int r = lane;
            int row_bytes;
            unsigned long long start;
            row_geometry(r, row_bytes, start);
            const int skew = (int)(start % 16);
            unsigned char* const row_base = reinterpret_cast<unsigned char*>(start - skew);
            // The first piece: whole with the previous chunk's bytes, else the tile's own.
            if ((skew > 0 || row_bytes < 16) && row_bytes > 0) {
              const uint4 v =
                  skew > 0 ? dg_bytes_from(carry, staged_piece(r, 0), 16 - skew) : staged_piece(r, 0);
              const int end = min(16, skew + row_bytes);
              if (!tile_first && end == 16) {
                *reinterpret_cast<uint4*>(row_base) = v;
              } else {
                dg_store_bytes(row_base, v, tile_first ? skew : 0, end);
              }
            }
            // The last piece: kept for the next chunk while the row goes on, else stored.
            const int last = (row_bytes + skew - 1) / 16;
            const bool row_goes_on =
                !tile_last && row_bytes == EPI_ROW_BYTES && (all_in || N - n > cols);
            if (row_goes_on) {
              carry = staged_piece(r, EPI_CHUNKS - 1);
            } else if (row_bytes > 0 && last > 0 && (row_bytes + skew) % 16 != 0) {
              const int from = 16 * last - skew;
              dg_store_bytes(row_base + 16 * last,
                             dg_bytes_from(staged_piece(r, from >> 4), staged_piece(r, last),
                                           from & 15),
                             0, row_bytes - from);
            }
          }
        };
#pragma unroll
        for (int i = 0; i < WG_MMAS; ++i) {
          const int row0 = part_row + i * 64 + warp * 16;  // the warp's first row
          uint4 carry = make_uint4(0, 0, 0, 0);  // !wide: lane r's last staged piece of row r
#pragma unroll
          for (int chunk = 0; chunk < (TILE_N + EPI_N - 1) / EPI_N; ++chunk) {
            const int c0 = chunk * EPI_N;  // the chunk's first column in the tile
            // A whole EPI_N-wide piece of an aligned D leaves by a TMA store; the others by the
            // threads' stores below, from the buffer the next TMA-stored piece then reuses.
            const bool tma_piece = TMA_STORE && wide && c0 + EPI_N <= TILE_N;
            const unsigned buf = warp_bufs + (staged_pieces % EPI_WARP_BUFFERS) * EPI_WARP_BYTES;
            if constexpr (TMA_STORE) {
              // The TMA store that last read this buffer (EPI_WARP_BUFFERS TMA stores ago; only
              // they count pieces) is done reading it.
              if (lane == 0) dg_tma_store_wait_read<EPI_WARP_BUFFERS - 1>();
              __syncwarp();
            }
#pragma unroll
            for (int jj = 0; jj < EPI_N / 8; ++jj) {
              const int j = chunk * (EPI_N / 8) + jj;  // the 8-column block of the fragment
              if (j >= TILE_N / 8) break;  // a narrow last chunk (resolved at compile time)
#pragma unroll
              for (int h = 0; h < 2; ++h) {
                const int r = g + 8 * h, m = row0 + r;
                const int n = n0 + j * 8 + 2 * q;
                const float a0 = acc[i][4 * j + 2 * h], a1 = acc[i][4 * j + 2 * h + 1];
                const bool in0 = inside || (m < M && n < N), in1 = inside || (m < M && n + 1 < N);
                // Outside D the expression is not evaluated where it reads memory (C, a vector
                // or a scale there); elsewhere it is, with no test, as what it gives outside D
                // is never stored.
                const float v0 =
                    (!ELEMENT_READS || in0) ? epilogue(outer_scale(a0, m, n), m, n) : 0.0f;
                const float v1 =
                    (!ELEMENT_READS || in1) ? epilogue(outer_scale(a1, m, n + 1), m, n + 1) : 0.0f;
                if (in0) amax.add(2 * i + h, m, v0);
                if (in1) amax.add(2 * i + h, m, v1);
                dg_stage_pair((const ElementD*)nullptr,
                              buf + dg_epi_offset(r, (j * 8 - c0 + 2 * q) * (int)sizeof(ElementD)),
                              v0, v1);
              }
            }
            if (tma_piece) {
              // Rows past M and columns past N are not written (the map's extents).
              dg_fence_async_shared();
              __syncwarp();
              if (lane == 0) dg_tma_store(d_map, buf, n0 + c0, row0);
              ++staged_pieces;
              continue;
            }
            __syncwarp();
            if (!wide) {
              store_skewed_rows(buf, row0, n0 + c0, min(EPI_N, TILE_N - c0), inside, chunk == 0,
                                chunk == (TILE_N + EPI_N - 1) / EPI_N - 1, carry);
              __syncwarp();  // the buffer is rewritten by the next chunk
              continue;
            }
#pragma unroll
            for (int pass = 0; pass < 16 * EPI_CHUNKS / 32; ++pass) {
              const int p = pass * 32 + lane;
              const int r = p / EPI_CHUNKS, piece = p % EPI_CHUNKS;
              const int m = row0 + r;
              const int n = n0 + c0 + piece * EPI_ELEMS;
              if (piece * EPI_ELEMS >= TILE_N - c0) continue;  // past a narrow last chunk
              if (!inside && (m >= M || n >= N)) continue;
              const uint4 v = dg_ld_shared_16(buf + dg_epi_offset(r, piece * 16));
              ElementD* out = gD + (long long)m * ldd + n;
              // The tile's columns in this piece: all of it but in an fp8 tile whose width is an
              // odd multiple of 8, whose last piece is half outside (the next tile's columns).
              const int in_tile = TILE_N - c0 - piece * EPI_ELEMS;
              if (in_tile >= EPI_ELEMS && (inside || n + EPI_ELEMS <= N)) {
                *reinterpret_cast<uint4*>(out) = v;
              } else {
                __align__(16) ElementD parts[EPI_ELEMS];
                *reinterpret_cast<uint4*>(parts) = v;
#pragma unroll
                for (int e = 0; e < EPI_ELEMS; ++e)
                  if (e < in_tile && n + e < N) out[e] = parts[e];
              }
            }
            __syncwarp();  // the buffer is rewritten by the next chunk
          }
        }
      } else {
        // Column-major D (the only one stored from the registers): lanes of a fragment row write
        // consecutive m of two columns.
#pragma unroll
        for (int i = 0; i < WG_MMAS; ++i) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int m = m0 + first_row + i * 64 + warp * 16 + g + 8 * h;
            if (m >= M) continue;
#pragma unroll
            for (int j = 0; j < TILE_N / 8; ++j) {
              const int n = n0 + j * 8 + 2 * q;
              ElementD* out = gD + (long long)n * ldd + m;
              if (n < N) {
                const float v = epilogue(outer_scale(acc[i][4 * j + 2 * h], m, n), m, n);
                amax.add(2 * i + h, m, v);
                dg_store(out, v);
              }
              if (n + 1 < N) {
                const float v = epilogue(outer_scale(acc[i][4 * j + 2 * h + 1], m, n + 1), m, n + 1);
                amax.add(2 * i + h, m, v);
                dg_store(out + ldd, v);
              }
            }
          }
        }
      }
      // A row of a tile is spread over the 4 lanes of a fragment row (q).
      amax.flush_rows<4>();
    };
    // DEFERRED_EPILOGUE: the tile whose sums acc holds and whose epilogue is still to run.
    int epilogue_m0 = 0, epilogue_n0 = 0;
    bool epilogue_due = false;

    // The block's tiles are numbered 0, 1, ... in ring order (tile i is cluster tile
    // cluster_id + i * clusters); this consumer takes every TILE_STRIDE-th from its own.
    for (long long tile = PINGPONG ? consumer : 0; cluster_id + tile * clusters < cluster_tiles;
         tile += TILE_STRIDE) {
      int m0, n0;
      tile_origin((int)(cluster_id + tile * clusters), m0, n0);
      // Where this tile's first k-tile sits in the ring (the other consumer's tiles in between).
      const long long first_k_tile = tile * k_tiles;
      int stage = (int)(first_k_tile % STAGES);
      unsigned phase = (unsigned)((first_k_tile / STAGES) & 1);
      int prev_stage = -1;
      if (PINGPONG && tile > 0) {
        dg_mbar_wait(turn(consumer), turn_phase);  // the other consumer issued its main loop
        turn_phase ^= 1;
      }
      // PROMOTE: k-tile kt's scales in scales[kt % 2]; the sums start at zero (with
      // DEFERRED_EPILOGUE once the first k-tile has stored the previous tile's). Unless
      // STAGED_SCALES, the first k-tile's scales are loaded now, and each k-tile loads the next
      // one's.
      KTileScales scales[2];
      // TWO_SCALE_BLOCKS: the fragment's 8-column groups in the tile's first block of B scales.
      const int first_groups = min(TILE_N, second_scale_block(n0) - n0) / 8;
      if constexpr (PROMOTE && !STAGED_SCALES) {
        load_scales(0, n0, m0, scales[0]);
      }
      auto zero_sums = [&]() {
#pragma unroll
        for (int i = 0; i < WG_MMAS; ++i)
#pragma unroll
          for (int r = 0; r < ACC; ++r) acc[i][r] = 0.0f;
      };
      if constexpr (PROMOTE && !DEFERRED_EPILOGUE) zero_sums();
      // `with_epilogue` (DEFERRED_EPILOGUE, the tile's first k-tile; a constant at each call):
      // the previous tile's epilogue runs while this k-tile's wgmmas do.
      auto k_tile = [&](int kt, KTileScales& mine, KTileScales& next, bool with_epilogue) {
        dg_mbar_wait(full(stage), phase);
        // This stage's descriptors: the k steps and m64 slices below add their offsets.
        const unsigned long long a_desc_stage = a_desc0 + (unsigned)(stage * (A_STAGE_BYTES >> 4));
        const unsigned long long b_desc_stage = b_desc0 + (unsigned)(stage * (B_STAGE_BYTES >> 4));
        // m64 slice i's wgmma of k step ks: its 64 rows of A are 64 rows of 128 bytes further
        // (K-major) or the next box; B is the whole tile, K-major advancing 32 bytes per k step
        // inside the swizzled row, MN-major 16 rows of 128 bytes.
        auto desc_a = [&](int i, int ks) {
          return a_desc_stage +
                 (A_KMAJOR ? i * 64 * ROW_BYTES + ks * 32 : i * MN_BOX_BYTES + ks * 16 * 128) / 16;
        };
        auto desc_b = [&](int ks) {
          return b_desc_stage + (B_KMAJOR ? ks * 32 : ks * 16 * 128) / 16;
        };
        if constexpr (PROMOTE) {
          // The m64 slices in turn, sharing one set of partial sums: the slice's wgmmas (the
          // first k step overwrites the partial sums: scale-d = 0), a wait for them, and its
          // promotion. (Measured alternatives, not kept: a second set of partial sums, so that
          // k-tile kt - 1 is promoted while kt's wgmmas run, fits 64x128 per consumer; it ran
          // 128x128 tiles ~10% faster than without, but the 128x160 tiles this leaves room for
          // ran faster still, and 64x128 ping-pong no faster: bench/RESULTS.md, 2026-12-01
          // "overlapped promotion". ptxas keeps the wgmmas pipelined only if no wgmma stays in
          // flight across the k loop's back edge once the loop reads partial sums: C7514.
          // Without K-block scales, promoting every 4 k-tiles (one k-tile of wgmmas in flight in
          // between) ran per-tensor fp8 ~7% faster, but wgmma's longer sums put single elements
          // of a saturating e4m3 D two ulps off: bench/RESULTS.md, 2026-12-01 "promotion every
          // 512 of K". Each k-tile in two halves of TILE_N / 2 columns, one half promoted while
          // the other's wgmmas run, ran 5-8% slower: half-width wgmmas read A twice as often,
          // and each k-tile drains the wgmmas twice, bench/RESULTS.md, 2026-12-06.)
#pragma unroll
          for (int i = 0; i < WG_MMAS; ++i) {
            dg_fence_acc(part);
            dg_wgmma_fence();
#pragma unroll
            for (int ks = 0; ks < K_STEPS; ++ks) dg_wgmma(part, desc_a(i, ks), desc_b(ks), ks > 0);
            dg_wgmma_commit();
            if (i == 0) {
              // The scales are handled while the wgmmas run, off the path from the last
              // promotion to the next wgmma.
              if constexpr (STAGED_SCALES) {
                // Read before this warp hands the stage back (below) and the producer copies
                // the next scales over them.
                read_staged_scales(stage, mine);
              } else if (kt + 1 < k_tiles) {
                // The next k-tile's, a k-tile ahead (its promotion then waits for this load).
                load_scales(kt + 1, n0, m0, next);
              }
              if (DEFERRED_EPILOGUE && with_epilogue) {
                // acc still holds the previous tile's sums (if any): stored now, then zeroed
                // for this tile, while the tensor cores work on this k-tile.
                if (epilogue_due) store_tile(epilogue_m0, epilogue_n0);
                zero_sums();
              }
            }
            if (PINGPONG && i == WG_MMAS - 1 && kt == k_tiles - 1 && threadIdx.x % 128 == 0) {
              // This warpgroup waited on every stage of its tile and issued every wgmma: your
              // turn.
              dg_mbar_arrive(turn(1 - consumer));
            }
            dg_fence_acc(part);
            dg_wgmma_wait<0>();
            dg_fence_acc(part);
            if (i == WG_MMAS - 1) release(stage);
            if constexpr (!PER_COLUMN_SCALES && COL_SCALES == 1) {
              dg_promote<TILE_N / 8>(acc[i], part, mine.rows[i], mine.cols[0], mine.cols[0]);
            } else if constexpr (TWO_SCALE_BLOCKS) {
              dg_promote_split(first_groups, acc[i], part, mine.rows[i], mine.cols[0],
                               mine.cols[1]);
            } else {
              // Every fragment column has its own scale.
#pragma unroll
              for (int j = 0; j < TILE_N / 8; ++j)
#pragma unroll
                for (int h = 0; h < 2; ++h)
#pragma unroll
                  for (int e = 0; e < 2; ++e) {
                    const int r = 4 * j + 2 * h + e;
                    acc[i][r] = fmaf(mine.rows[i][h] * mine.cols[2 * j + e], part[r], acc[i][r]);
                  }
            }
          }
        } else {
#pragma unroll
          for (int i = 0; i < WG_MMAS; ++i) dg_fence_acc(acc[i]);
          dg_wgmma_fence();
#pragma unroll
          for (int ks = 0; ks < K_STEPS; ++ks)
#pragma unroll
            for (int i = 0; i < WG_MMAS; ++i)
              dg_wgmma(acc[i], desc_a(i, ks), desc_b(ks), (kt > 0 || ks > 0) ? 1 : 0);
          dg_wgmma_commit();
          if (PINGPONG && kt == k_tiles - 1 && threadIdx.x % 128 == 0) {
            // This warpgroup waited on every stage of its tile and issued every wgmma: your turn.
            dg_mbar_arrive(turn(1 - consumer));
          }
#pragma unroll
          for (int i = 0; i < WG_MMAS; ++i) dg_fence_acc(acc[i]);
          // One k-tile of wgmmas stays in flight: once the previous k-tile's have finished, its
          // stage goes back to the producer.
          dg_wgmma_wait<1>();
          if (prev_stage >= 0) release(prev_stage);
          prev_stage = stage;
        }
        if (++stage == STAGES) {
          stage = 0;
          phase ^= 1;
        }
      };
      if constexpr (DEFERRED_EPILOGUE) {
        // The first k-tile apart (it runs the previous tile's epilogue), then two per turn, the
        // two sets of scales swapping roles (register indices must be constants).
        k_tile(0, scales[0], scales[1], true);
        for (int kt = 1; kt < k_tiles; kt += 2) {
          k_tile(kt, scales[1], scales[0], false);
          if (kt + 1 < k_tiles) k_tile(kt + 1, scales[0], scales[1], false);
        }
      } else if constexpr (PROMOTE) {
        // Two k-tiles per turn, the two sets of scales swapping roles.
        for (int kt = 0; kt < k_tiles; kt += 2) {
          k_tile(kt, scales[0], scales[1], false);
          if (kt + 1 < k_tiles) k_tile(kt + 1, scales[1], scales[0], false);
        }
      } else {
        for (int kt = 0; kt < k_tiles; ++kt) k_tile(kt, scales[0], scales[1], false);
      }
      if constexpr (!PROMOTE) {
        dg_wgmma_wait<0>();
#pragma unroll
        for (int i = 0; i < WG_MMAS; ++i) dg_fence_acc(acc[i]);
        release(prev_stage);
      }
      if constexpr (DEFERRED_EPILOGUE) {
        epilogue_m0 = m0;
        epilogue_n0 = n0;
        epilogue_due = true;
      } else {
        store_tile(m0, n0);
      }
    }
    if (DEFERRED_EPILOGUE && epilogue_due) store_tile(epilogue_m0, epilogue_n0);
    // The stores read shared memory and write D after their issue: done before the block ends.
    if (TMA_STORE && lane == 0) dg_tma_store_wait_all();
    amax.finish();
  }
  // No block leaves while a cluster peer can still multicast into its shared memory or arrive
  // on its barriers: the producer's tail above waits for that.
}
