// The 16 bytes that start at byte `at` (0..15) of lo:hi, by selects and funnel shifts: lanes with
// different `at` take no divergent paths, and nothing is indexed at run time (which would put
// the words in local memory). Shared by the sm90 epilogue (rows of D at any alignment) and the
// repack copy kernel (sources at any alignment), which hold both words in registers already.
__device__ __forceinline__ uint4 dg_bytes_from(uint4 lo, uint4 hi, int at) {
  const unsigned w[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
  const int first = at >> 2, shift = (at & 3) * 8;
  unsigned v[5];
#pragma unroll
  for (int i = 0; i < 5; ++i)
    v[i] = first == 0 ? w[i] : first == 1 ? w[i + 1] : first == 2 ? w[i + 2] : w[i + 3];
  return make_uint4(__funnelshift_r(v[0], v[1], shift), __funnelshift_r(v[1], v[2], shift),
                    __funnelshift_r(v[2], v[3], shift), __funnelshift_r(v[3], v[4], shift));
}
