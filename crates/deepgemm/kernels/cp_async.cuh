// cp.async (sm_80 and later): 16-byte and smaller copies from global into shared memory that
// the issuing thread does not wait for; groups of them are committed and waited for by age.
// Shared by the sm80 main loop and the gemv stream (their templates' CP_ASYNC placeholder).

// Copies BYTES from global to shared memory; only `src_bytes` are read, the rest is zero-filled
// (the edge predication: 0 outside the matrix, a partial count at an odd K or M/N tail).
template <int BYTES>
__device__ __forceinline__ void dg_cp_async(unsigned dst, const void* src, int src_bytes) {
  if constexpr (BYTES == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(dst), "l"(src), "r"(src_bytes));
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n"
                 :: "r"(dst), "l"(src), "n"(BYTES), "r"(src_bytes));
  }
}
__device__ __forceinline__ void dg_cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int PENDING>
__device__ __forceinline__ void dg_cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" :: "n"(PENDING) : "memory");
}
