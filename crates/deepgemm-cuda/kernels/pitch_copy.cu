// Repacks a pitched matrix into a 16-byte-aligned workspace for the fast copy path of a GEMM
// kernel: line y of `width` bytes moves from src + y * src_pitch to dst + y * dst_pitch.
// dst and dst_pitch are multiples of 16, so every thread writes one aligned 16-byte chunk; the
// source is read in UNIT-byte loads, UNIT being the largest power of two (up to 16) dividing
// both src and src_pitch, so any source alignment works. A warp reads 512 contiguous bytes per
// group of loads, which L1 merges into full lines: close to DRAM speed, where cuMemcpy2D moves a
// 2-byte-aligned bf16 matrix at about a quarter of it on the H200.

template <int UNIT, typename T>
__device__ __forceinline__ void pitch_copy(const unsigned char* src, unsigned long long src_pitch,
                                           unsigned char* dst, unsigned long long dst_pitch,
                                           unsigned long long width, unsigned long long height) {
  const unsigned long long chunks = (width + 15) / 16;
  const unsigned long long chunk_step = (unsigned long long)gridDim.x * blockDim.x;
  for (unsigned long long y = blockIdx.y; y < height; y += gridDim.y) {
    const unsigned char* line_src = src + y * src_pitch;
    unsigned char* line_dst = dst + y * dst_pitch;
    for (unsigned long long c = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
         c < chunks; c += chunk_step) {
      const unsigned long long x = c * 16;
      if (x + 16 <= width) {
        uint4 chunk;
        T* parts = reinterpret_cast<T*>(&chunk);
        const T* from = reinterpret_cast<const T*>(line_src + x);
#pragma unroll
        for (int i = 0; i < 16 / UNIT; ++i) parts[i] = from[i];
        *reinterpret_cast<uint4*>(line_dst + x) = chunk;
      } else {
        // The line's last, partial chunk: byte by byte, never past `width`.
        for (unsigned long long b = x; b < width; ++b) line_dst[b] = line_src[b];
      }
    }
  }
}

#define DEEPGEMM_PITCH_COPY(UNIT, T)                                                          \
  extern "C" __global__ void deepgemm_pitch_copy_##UNIT(                                       \
      const unsigned char* src, unsigned long long src_pitch, unsigned char* dst,              \
      unsigned long long dst_pitch, unsigned long long width, unsigned long long height) {     \
    pitch_copy<UNIT, T>(src, src_pitch, dst, dst_pitch, width, height);                        \
  }

DEEPGEMM_PITCH_COPY(1, unsigned char)
DEEPGEMM_PITCH_COPY(2, unsigned short)
DEEPGEMM_PITCH_COPY(4, unsigned int)
DEEPGEMM_PITCH_COPY(8, unsigned long long)
DEEPGEMM_PITCH_COPY(16, uint4)
