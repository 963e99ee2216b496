// Probe: how long after a warpgroup's release (mbarrier arrive after wgmma.commit_group, before
// wgmma.wait_group) do its wgmma operand reads of a shared-memory stage go on, and how soon after that
// release can a producer's TMA copy (cp.async.bulk) land in the stage? The WAR race of
// specs/wgmma_release_before_wait.sync shows only if some wgmma read comes after the copy's write.
//
// One CTA per SM. Warps 0-3 (a warpgroup) are the consumer: after PREDELAY cycles they issue CHAIN
// wgmma.mma_async m64nNk32 u8 reading the stage (filled with stamp A), commit, arrive on `empty`
// (count 128), then wgmma.wait_group 0, and check the accumulators: mode 0 checks the last wgmma only
// (the others accumulate before it, scale-d 0 on the last), mode 1 accumulates all of them (CHAIN >= 2;
// each wgmma is preceded by wgmma.fence, which ptxas would otherwise inject, C7519). The
// producer warp spins on `empty`, then issues one cp.async.bulk of COPY bytes of stamp B (L2-prefetched)
// to the start of the stage. Optional load warpgroup (warps 4-7) during the window: kind 1 issues
// m64n256k32 wgmmas on a scratch area (tensor cores), kind 2 bank-conflicted ld.shared on it.
// Times are %clock64 cycles of the SM, relative to the consumer's first wgmma issue (t0):
//   t1 commit issued, t2 arrive issued, t3 wait_group returned (consumer warp 0 lane 0);
//   p1 producer saw the phase, p2 copy issued, pf first word of B visible, p3 copy complete.
// Build: nvcc -gencode=arch=compute_90a,code=sm_90a -O3 -o wgmma_war wgmma_war.cu ; run: ./wgmma_war
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

typedef unsigned int u32;
typedef unsigned long long u64;

#define STAGE_OFF 1024u
#define STAGE_BYTES 16384u
#define SCRATCH_OFF (STAGE_OFF + STAGE_BYTES)
#define SMEM_REQ (120u * 1024u)  // forces one CTA per SM
#define A_STAMP 0x04030201u      // value of one wgmma on it: 8*(1+4+9+16) = 240
#define B_STAMP 0x05050505u      // 8*4*25 = 800
#define TIMEOUT 40000000ull
#define NREC 16

__device__ __forceinline__ u32 sa(const void* p) { return (u32)__cvta_generic_to_shared(p); }
__device__ __forceinline__ u64 clk() { u64 t; asm volatile("mov.u64 %0, %%clock64;" : "=l"(t) :: "memory"); return t; }
__device__ __forceinline__ u64 desc(u32 addr) {
  return (u64)((addr & 0x3FFFFu) >> 4) | ((u64)(128u >> 4) << 16) | ((u64)(256u >> 4) << 32);
}
__device__ __forceinline__ bool try_wait(u32 bar, u32 parity) {
  u32 ok;
  asm volatile("{ .reg .pred P1; mbarrier.try_wait.parity.shared::cta.b64 P1, [%1], %2; selp.b32 %0, 1, 0, P1; }"
               : "=r"(ok) : "r"(bar), "r"(parity) : "memory");
  return ok != 0;
}
__device__ __forceinline__ void mma_n8(u32* a, u64 d, u32 sc) {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
  asm volatile("{ .reg .pred p; setp.ne.b32 p, %6, 0; wgmma.mma_async.sync.aligned.m64n8k32.s32.u8.u8 {%0, %1, %2, %3}, %4, %5, p; }"
    : "+r"(a[0]), "+r"(a[1]), "+r"(a[2]), "+r"(a[3])
    : "l"(d), "l"(d), "r"(sc) : "memory");
}

__device__ __forceinline__ void mma_n256(u32* a, u64 d, u32 sc) {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
  asm volatile("{ .reg .pred p; setp.ne.b32 p, %130, 0; wgmma.mma_async.sync.aligned.m64n256k32.s32.u8.u8 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, p; }"
    : "+r"(a[0]), "+r"(a[1]), "+r"(a[2]), "+r"(a[3]), "+r"(a[4]), "+r"(a[5]), "+r"(a[6]), "+r"(a[7]), "+r"(a[8]), "+r"(a[9]), "+r"(a[10]), "+r"(a[11]), "+r"(a[12]), "+r"(a[13]), "+r"(a[14]), "+r"(a[15]), "+r"(a[16]), "+r"(a[17]), "+r"(a[18]), "+r"(a[19]), "+r"(a[20]), "+r"(a[21]), "+r"(a[22]), "+r"(a[23]), "+r"(a[24]), "+r"(a[25]), "+r"(a[26]), "+r"(a[27]), "+r"(a[28]), "+r"(a[29]), "+r"(a[30]), "+r"(a[31]), "+r"(a[32]), "+r"(a[33]), "+r"(a[34]), "+r"(a[35]), "+r"(a[36]), "+r"(a[37]), "+r"(a[38]), "+r"(a[39]), "+r"(a[40]), "+r"(a[41]), "+r"(a[42]), "+r"(a[43]), "+r"(a[44]), "+r"(a[45]), "+r"(a[46]), "+r"(a[47]), "+r"(a[48]), "+r"(a[49]), "+r"(a[50]), "+r"(a[51]), "+r"(a[52]), "+r"(a[53]), "+r"(a[54]), "+r"(a[55]), "+r"(a[56]), "+r"(a[57]), "+r"(a[58]), "+r"(a[59]), "+r"(a[60]), "+r"(a[61]), "+r"(a[62]), "+r"(a[63]), "+r"(a[64]), "+r"(a[65]), "+r"(a[66]), "+r"(a[67]), "+r"(a[68]), "+r"(a[69]), "+r"(a[70]), "+r"(a[71]), "+r"(a[72]), "+r"(a[73]), "+r"(a[74]), "+r"(a[75]), "+r"(a[76]), "+r"(a[77]), "+r"(a[78]), "+r"(a[79]), "+r"(a[80]), "+r"(a[81]), "+r"(a[82]), "+r"(a[83]), "+r"(a[84]), "+r"(a[85]), "+r"(a[86]), "+r"(a[87]), "+r"(a[88]), "+r"(a[89]), "+r"(a[90]), "+r"(a[91]), "+r"(a[92]), "+r"(a[93]), "+r"(a[94]), "+r"(a[95]), "+r"(a[96]), "+r"(a[97]), "+r"(a[98]), "+r"(a[99]), "+r"(a[100]), "+r"(a[101]), "+r"(a[102]), "+r"(a[103]), "+r"(a[104]), "+r"(a[105]), "+r"(a[106]), "+r"(a[107]), "+r"(a[108]), "+r"(a[109]), "+r"(a[110]), "+r"(a[111]), "+r"(a[112]), "+r"(a[113]), "+r"(a[114]), "+r"(a[115]), "+r"(a[116]), "+r"(a[117]), "+r"(a[118]), "+r"(a[119]), "+r"(a[120]), "+r"(a[121]), "+r"(a[122]), "+r"(a[123]), "+r"(a[124]), "+r"(a[125]), "+r"(a[126]), "+r"(a[127])
    : "l"(d), "l"(d), "r"(sc) : "memory");
}


struct Cfg { int n, chain, mode, copy, load, relaxed, predelay; };

template <int N>
__global__ void __launch_bounds__(288, 1) probe(const u32* src, u64* out, Cfg cfg) {
  extern __shared__ __align__(1024) unsigned char sm[];
  const u32 warp = __shfl_sync(0xFFFFFFFFu, threadIdx.x / 32, 0), lane = threadIdx.x % 32;
  const u32 nwarps = blockDim.x / 32, prod = nwarps - 1;
  const u32 full = sa(sm), empty = sa(sm + 8);
  volatile u32* stop = (volatile u32*)(sm + 64);
  unsigned char* stage = sm + STAGE_OFF;
  unsigned char* scratch = sm + SCRATCH_OFF;
  u64* rec = out + (u64)blockIdx.x * NREC;
  for (u32 i = threadIdx.x; i < STAGE_BYTES / 4; i += blockDim.x) {
    ((u32*)stage)[i] = A_STAMP; ((u32*)scratch)[i] = 0x01010101u;
  }
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(full) : "memory");
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 128;" :: "r"(empty) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    *stop = 0u;
  }
  if (warp == prod && lane == 0)
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" :: "l"(src), "r"(16384u) : "memory");
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  if (warp < 4) {
    const u64 s0 = clk();
    while (clk() - s0 < (u64)cfg.predelay) {}
    u32 acc[N / 2];
    #pragma unroll
    for (int i = 0; i < N / 2; ++i) acc[i] = 0u;
    u64 d = desc(sa(stage));
    asm volatile("" : "+l"(d));
    #pragma unroll
    for (int i = 0; i < N / 2; ++i) asm volatile("" : "+r"(acc[i]) :: "memory");
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
    const u64 t0 = clk();
    #pragma unroll 1
    for (int i = 0; ; ) {  // chain >= 2: chain - 1 accumulating wgmmas, then the last
      if (N == 8) mma_n8(acc, d, 1u); else mma_n256(acc, d, 1u);
      if (++i >= cfg.chain - 1) break;
    }
    if (N == 8) mma_n8(acc, d, cfg.mode == 1 ? 1u : 0u); else mma_n256(acc, d, cfg.mode == 1 ? 1u : 0u);
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    const u64 t1 = clk();
    if (cfg.relaxed) asm volatile("mbarrier.arrive.relaxed.cta.shared::cta.b64 _, [%0];" :: "r"(empty) : "memory");
    else asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(empty) : "memory");
    const u64 t2 = clk();
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    const u64 t3 = clk();
    const u32 want = (cfg.mode == 1 ? (u32)cfg.chain : 1u) * 240u;
    u32 bad = 0, seen = 0;
    #pragma unroll
    for (int i = 0; i < N / 2; ++i) if (acc[i] != want) { if (!bad) seen = acc[i]; ++bad; }
    if (bad) { atomicAdd((unsigned long long*)&rec[8], (u64)bad); rec[9] = seen; }
    if (threadIdx.x == 0) { rec[0] = t0; rec[1] = t1; rec[2] = t2; rec[3] = t3; }
  } else if (warp == prod) {
    const u64 s0 = clk();
    while (!try_wait(empty, 0u) && clk() - s0 < TIMEOUT) {}
    const u64 p1 = clk();
    u64 p2 = 0, pf = 0;
    if (lane == 0) {
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%1], %0;" :: "r"((u32)cfg.copy), "r"(full) : "memory");
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                   :: "r"(sa(stage)), "l"(src), "r"((u32)cfg.copy), "r"(full) : "memory");
      p2 = clk();
      while (*(volatile u32*)stage == A_STAMP && clk() - p2 < TIMEOUT) {}
      pf = clk();
    }
    while (!try_wait(full, 0u) && clk() - s0 < 2 * TIMEOUT) {}
    const u64 p3 = clk();
    *stop = 1u;
    if (lane == 0) { rec[4] = p1; rec[5] = p2; rec[6] = pf; rec[7] = p3; }
  } else {  // load warpgroup (warps 4-7)
    u64 iters = 0;
    const u64 s0 = clk();
    if (cfg.load == 1) {
      u32 acc[128];
      #pragma unroll
      for (int i = 0; i < 128; ++i) acc[i] = 0u;
      u64 d = desc(sa(scratch));
      asm volatile("" : "+l"(d));
      #pragma unroll
      for (int i = 0; i < 128; ++i) asm volatile("" : "+r"(acc[i]) :: "memory");
      asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
      volatile u32* go = (volatile u32*)(sm + 68);  // the stop flag as warp 4 read it: every warp of the
      for (;;) {                                      // load warpgroup issues the same wgmmas (sync.aligned)
        if (threadIdx.x == 128) *go = (*stop == 0u && clk() - s0 < TIMEOUT) ? 1u : 0u;
        asm volatile("bar.sync 1, 128;" ::: "memory");
        const bool more = *go != 0u;
        asm volatile("bar.sync 1, 128;" ::: "memory");
        if (!more) break;
        mma_n256(acc, d, 1u); mma_n256(acc, d, 1u); mma_n256(acc, d, 1u); mma_n256(acc, d, 1u);
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
        ++iters;
      }
      asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
      u32 x = 0;
      #pragma unroll
      for (int i = 0; i < 128; ++i) x += acc[i];
      if (x == 12345u) rec[12] = x;
    } else if (cfg.load == 2) {
      volatile u32* sc = (volatile u32*)scratch;
      u32 x = 0;
      while (*stop == 0u && clk() - s0 < TIMEOUT) {
        #pragma unroll
        for (int j = 0; j < 16; ++j) x += sc[(lane * 32 + j) % 4096];
        ++iters;
      }
      if (x == 12345u) rec[12] = x;
    }
    if (threadIdx.x % 128 == 0) rec[10] = iters;
  }
}

static const u32 kSrcWords = 16384 / 4;

template <int N>
static void run(const Cfg& cfg, const u32* d_src, u64* d_out, int grid, int reps) {
  const int threads = cfg.load ? 288 : 160;
  cudaFuncSetAttribute(probe<N>, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_REQ);
  std::vector<u64> h((size_t)grid * NREC);
  std::vector<double> d1, d2, d3, dp1, dpf, dp3, margin;
  int bad_ctas = 0, total = 0; u64 bad_words = 0, seen = 0, load_it = 0;
  for (int r = 0; r < reps; ++r) {
    cudaMemset(d_out, 0, h.size() * 8);
    probe<N><<<grid, threads, SMEM_REQ>>>(d_src, d_out, cfg);
    cudaError_t err = cudaDeviceSynchronize();
    if (err != cudaSuccess) { printf("n%d chain %d: error %s\n", N, cfg.chain, cudaGetErrorString(err)); exit(1); }
    cudaMemcpy(h.data(), d_out, h.size() * 8, cudaMemcpyDeviceToHost);
    for (int c = 0; c < grid; ++c) {
      const u64* x = &h[(size_t)c * NREC];
      const double t0 = (double)x[0];
      ++total;
      if (x[8]) { ++bad_ctas; bad_words += x[8]; seen = x[9]; }
      d1.push_back(x[1] - t0); d2.push_back(x[2] - t0); d3.push_back(x[3] - t0);
      dp1.push_back(x[4] - t0); dpf.push_back(x[6] - t0); dp3.push_back(x[7] - t0);
      margin.push_back((double)x[3] - (double)x[6]);
      load_it += x[10];
    }
  }
  auto med = [](std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; };
  auto mx = [](std::vector<double> v) { return *std::max_element(v.begin(), v.end()); };
  printf("n%-3d chain %5d mode %d copy %5d load %d %s: corrupt %3d/%d (%llu words, last seen %llu) | "
         "t1 %.0f t2 %.0f t3 %.0f p1 %.0f pf %.0f p3 %.0f | t3-pf med %.0f max %.0f | load iters %llu\n",
         N, cfg.chain, cfg.mode, cfg.copy, cfg.load, cfg.relaxed ? "relaxed" : "release", bad_ctas, total,
         bad_words, seen, med(d1), med(d2), med(d3), med(dp1), med(dpf), med(dp3), med(margin), mx(margin),
         load_it / (u64)total);
}

int main(int argc, char** argv) {
  const int grid = argc > 1 ? atoi(argv[1]) : 132;
  const int reps = argc > 2 ? atoi(argv[2]) : 3;
  u32* d_src; u64* d_out;
  std::vector<u32> hs(kSrcWords, B_STAMP);
  cudaMalloc(&d_src, 16384); cudaMalloc(&d_out, (size_t)grid * NREC * 8);
  cudaMemcpy(d_src, hs.data(), 16384, cudaMemcpyHostToDevice);
  printf("== queue: consumer alone, release arrive, 16 KiB copy\n");
  for (int ch : {2, 16, 64, 1024}) run<8>({8, ch, 0, 16384, 0, 0, 4000}, d_src, d_out, grid, reps);
  for (int ch : {2, 4, 8, 16, 64, 1024}) run<256>({256, ch, 0, 16384, 0, 0, 4000}, d_src, d_out, grid, reps);
  printf("== all accumulate (every wgmma of the chain reads the stage and is checked)\n");
  for (int ch : {16, 1024}) run<256>({256, ch, 1, 16384, 0, 0, 4000}, d_src, d_out, grid, reps);
  printf("== relaxed arrive (does the release itself wait for the wgmma reads?)\n");
  for (int ch : {2, 64}) run<256>({256, ch, 1, 16384, 0, 1, 4000}, d_src, d_out, grid, reps);
  printf("== 16-byte copy (the floor of the copy's latency)\n");
  for (int ch : {2, 64}) run<256>({256, ch, 1, 16, 0, 0, 4000}, d_src, d_out, grid, reps);
  printf("== load warpgroup: 1 tensor cores, 2 shared-memory loads\n");
  for (int ld : {1, 2}) {
    for (int ch : {2, 64}) run<8>({8, ch, 0, 16384, ld, 0, 8000}, d_src, d_out, grid, reps);
    for (int ch : {2, 16}) run<256>({256, ch, 1, 16384, ld, 0, 8000}, d_src, d_out, grid, reps);
  }
  return 0;
}
