// mbarriers and the copy engine's bulk copies (sm_90 and later): a barrier in shared memory that
// counts arrivals and the bytes of the copies it tracks. Shared by the sm90 ring (TMA) and the
// gemv ring on sm_90 (one bulk copy per row); their templates' MBARRIER placeholder.

__device__ __forceinline__ void dg_mbar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(bar), "r"(count));
}
// Makes the initialized barriers visible to the copy engine and the cluster's other blocks.
__device__ __forceinline__ void dg_fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// Makes this thread's shared-memory writes visible to the copy engine (the async proxy), ordered
// before its later copies into the same bytes.
__device__ __forceinline__ void dg_fence_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
// Arrives once and adds `bytes` to the transaction count the phase waits for.
__device__ __forceinline__ void dg_mbar_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n"
               :: "r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void dg_mbar_wait(unsigned bar, unsigned parity) {
  unsigned done;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        " selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done) : "r"(bar), "r"(parity) : "memory");
  } while (!done);
}
__device__ __forceinline__ void dg_mbar_arrive(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(bar) : "memory");
}
// The L2 cache policy of a copy's `.L2::cache_hint` for a stream read once: the lines it brings
// into L2 are the first their set gives up to later fills, so the stream evicts its own clean
// lines rather than dirty ones (a previous kernel's output), whose eviction costs a write to DRAM
// first (bench/RESULTS.md, 2026-12-07's stream probe). Copies of data that is read again carry no
// hint at all: an explicit evict-normal would also demote lines a caller marked evict-last or
// persisting. (Not volatile: the same value every time, so a loop may make it once.)
__device__ __forceinline__ unsigned long long dg_l2_evict_first() {
  unsigned long long policy;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
  return policy;
}
// `bytes` (a multiple of 16) from global `src` to shared `dst` (both 16-byte aligned) by the copy
// engine, counted in on `bar` as they land; `read_once`: its L2 lines evict first.
__device__ __forceinline__ void dg_bulk_copy(unsigned dst, const void* src, unsigned bytes,
                                             unsigned bar, bool read_once) {
  if (read_once) {
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
        " [%0], [%1], %2, [%3], %4;\n"
        :: "r"(dst), "l"(src), "r"(bytes), "r"(bar), "l"(dg_l2_evict_first()) : "memory");
  } else {
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
        :: "r"(dst), "l"(src), "r"(bytes), "r"(bar) : "memory");
  }
}
