// The launch contract's smoke test (tests/gpu_runtime.rs, issue #10): a persistent grid of 2x1
// clusters walks the 64x64 tiles of A (bf16, row-major M x K) in vertically adjacent pairs, as
// the sm90 GEMM pairs its cluster blocks. Each block loads its tile with one TMA box through the
// tensor map the runtime encoded (rows and columns past the matrix arrive as zeros), waits on an
// mbarrier for the box's bytes, and after a cluster barrier writes its *peer's* tile to D (row-major
// M x K, packed), read from the peer's shared memory through the cluster window. D equals A only
// if the tensor map, the box, the transaction count, the cluster launch, the persistent tile
// walk and the distributed shared memory all work.

struct __align__(64) dg_tensor_map { unsigned long long opaque[16]; };  // a CUtensorMap

constexpr int BOX = 64;       // rows and columns of a tile
constexpr int THREADS = 128;
constexpr unsigned TILE_BYTES = BOX * BOX * 2;

__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n"
               ::: "memory");
}

extern "C" __global__ void __launch_bounds__(THREADS, 1) deepgemm_tma_cluster_smoke(
    const unsigned short* __restrict__ a, unsigned short* __restrict__ d, int m, int k,
    const __grid_constant__ dg_tensor_map tmap_a) {
  (void)a;  // read through `tmap_a`; the pointer is the operand the map was encoded from
  extern __shared__ __align__(1024) unsigned char smem[];
  const unsigned tile = (unsigned)__cvta_generic_to_shared(smem);
  const unsigned bar = tile + TILE_BYTES;  // one mbarrier after the tile
  unsigned rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" :: "r"(bar));
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  const int tiles_m = (m + BOX - 1) / BOX, tiles_k = (k + BOX - 1) / BOX;
  const int pairs = (tiles_m + 1) / 2 * tiles_k;
  const int clusters = gridDim.x / 2;
  unsigned parity = 0;
  for (int pair = blockIdx.x / 2; pair < pairs; pair += clusters) {
    const int top = pair / tiles_k * 2, col = pair % tiles_k;  // the pair's upper tile row
    if (top + (int)rank < tiles_m) {
      if (threadIdx.x == 0) {
        // The peer's reads of the last tile (generic proxy) come before this TMA write.
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n"
                     :: "r"(bar), "r"(TILE_BYTES) : "memory");
        asm volatile(
            "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
            " [%0], [%1, {%3, %4}], [%2];\n"
            :: "r"(tile), "l"(&tmap_a), "r"(bar), "r"(col * BOX), "r"((top + (int)rank) * BOX)
            : "memory");
      }
      unsigned done = 0;
      while (!done) {
        asm volatile(
            "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
            " selp.u32 %0, 1, 0, p;\n}\n"
            : "=r"(done) : "r"(bar), "r"(parity) : "memory");
      }
      parity ^= 1;
    }
    // Both tiles are in shared memory before either block reads its peer's.
    cluster_sync();
    const unsigned peer = rank ^ 1;
    const int peer_row = top + (int)peer;
    if (peer_row < tiles_m) {
      unsigned remote;
      asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(tile), "r"(peer));
      for (int i = threadIdx.x; i < BOX * BOX / 8; i += THREADS) {  // 16-byte pieces
        unsigned v[4];
        asm volatile("ld.shared::cluster.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3]) : "r"(remote + i * 16));
        const int r = peer_row * BOX + i / (BOX / 8), c = col * BOX + i % (BOX / 8) * 8;
        if (r >= m) continue;
#pragma unroll  // constant indices keep `v` in registers
        for (int j = 0; j < 8; ++j) {
          if (c + j < k) d[(long long)r * k + c + j] = (unsigned short)(v[j / 2] >> (16 * (j % 2)));
        }
      }
    }
    // The peer has read this block's tile before the next box overwrites it (and before either
    // block exits).
    cluster_sync();
  }
}
