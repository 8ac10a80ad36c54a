// Small-M fp32 matmuls for the JAX engine's decode step, as XLA FFI custom calls (CPU).
//
//   lg_matmul_nn: y[M,N] = x[M,K] @ w[K,N]     (w row-major: the layer weights wqkv/wo/w13/w2/lm_head)
//   lg_matmul_nt: y[M,N] = x[M,K] @ e[N,K]^T   (dot products along e's rows: tied-embedding logits)
//
// Threads: y's columns (NN at M = 1: w's rows, partial sums added) are cut into one part per thread
// the process's CPU affinity allows (or lg_set_threads(n)); the caller and XLA's own intra-op pool
// threads (the FFI ThreadPool) claim the parts (run_parts, below). Pinned to one core: one thread.
// AVX2 + FMA intrinsics, register-blocked so that each weight byte is loaded from memory once per call:
//   NN (row streaming): y's columns are cut into blocks of NB = kBlockFloats/M (y[:, block] stays in
//       L1); for each block, KU rows of w at a time are read as sequential runs of NB floats and
//       folded into y: x[m, k..k+KU) is held broadcast in registers for MR rows of x, each 8-float
//       vector of the KU rows is loaded once and used for the MR rows (MR*KU FMAs per y load/store).
//       Measured here (bench/ffi_matmul.py; docs/kernels.md) against an MR x NR register-tile over
//       strided K-long panels of w: that tile streamed DRAM at half the rate (one 64-128 B piece per
//       row, rows N*4 bytes apart: the hardware prefetcher and L1 sets suffer for N = 768, 6144).
//   NN (packed tile, M >= LG_PK_MIN_M, where the FMAs bound the time): w is copied block by block
//       (LG_PK_KC rows x LG_PK_NB columns, read row by row, prefetched 4 rows ahead) into 16-column
//       panels, and 6 rows of x at a time run a 6 x 16 register tile (12 ymm accumulators, 2 panel
//       loads + 6 broadcasts per 12 FMAs) over each panel, adding into y block after block.
//       Measured against 4 x 24 and 5 x 16 tiles: 6 x 16 was fastest at M = 32..96.
//   NT, M >= LG_PK_MIN_M_T: the same packed tile, the panels being 16 rows of e transposed
//       (8 x 8 in-register transposes while packing).
//   NT (dot products, smaller M): e's rows are taken NR at a time; every block of MR rows of x runs
//       a K-long dot with MR*NR ymm accumulators (horizontal sums at the end); the NR rows stay in L1
//       for the later blocks, and consecutive rows are contiguous, so the hardware streams them.
// Tails: N (NN) or K (NT) not a multiple of 8 use masked loads/stores; M not a multiple of MR
// uses a smaller MR for the last block; K % KU rows run with KU = 1. The packed tile keeps one
// 192 KiB buffer per thread that runs it (allocated on first use, never freed).
// The "GCC unroll" pragmas make GCC unroll the small constant loops before scalar replacement, so
// the accumulator arrays live in registers (without them GCC 12 kept them on the stack).
#include <immintrin.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>

#include <atomic>
#include <memory>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

#ifndef LG_PFD
#define LG_PFD 2   // NN: software-prefetch the w rows this many KU-row steps ahead (0: none)
#endif
#ifndef LG_PK_MIN_M
#define LG_PK_MIN_M 24  // NN: rows from which the packed register tile replaces row streaming
#endif
#ifndef LG_PK_MIN_M_T
#define LG_PK_MIN_M_T 24  // NT: rows from which e is packed (transposed) for the register tile
#endif
#ifndef LG_BLOCK
#define LG_BLOCK 4096
#endif
constexpr int64_t kBlockFloats = LG_BLOCK;  // M x NB floats of y per block: 16 KiB, half of L1

inline __m256i tail_mask(int64_t n) {  // first n (0..8) lanes on
  alignas(32) static const int32_t m[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(m + 8 - n));
}

// ---- NN, row-streaming: KU rows of w at a time, read as long sequential runs; y[:, block] in L1. ----
// G > 1: the KU rows are G groups of KU/G consecutive rows, the groups `seg` rows apart (G streams).
template <int MR, int KU, bool PF, int G = 1>
inline void rs_step(const float* x, int64_t ldx, const float* w, int64_t ldw, float* y, int64_t ldy,
                    int64_t nvec, int64_t tail, const float* pf, int64_t seg = 0) {
  constexpr int U = KU / G;
  static_assert(U * G == KU, "KU must be a multiple of G");
  const float* wr[KU];
  __m256 xb[MR][KU];
  _Pragma("GCC unroll 16") for (int u = 0; u < KU; ++u) wr[u] = w + ((u / U) * seg + u % U) * ldw;
  _Pragma("GCC unroll 16") for (int i = 0; i < MR; ++i)
    _Pragma("GCC unroll 16") for (int u = 0; u < KU; ++u)
      xb[i][u] = _mm256_broadcast_ss(x + i * ldx + (u / U) * seg + u % U);
  for (int64_t v = 0; v < nvec; ++v) {
    if (PF && (v & 1) == 0) {  // one 64-byte line of each of the KU rows, LG_PFD steps ahead
      _Pragma("GCC unroll 16") for (int u = 0; u < KU; ++u)
        _mm_prefetch(reinterpret_cast<const char*>(pf + u * ldw + 8 * v), _MM_HINT_T0);
    }
    __m256 wv[KU];
    _Pragma("GCC unroll 16") for (int u = 0; u < KU; ++u) wv[u] = _mm256_loadu_ps(wr[u] + 8 * v);
    _Pragma("GCC unroll 16") for (int i = 0; i < MR; ++i) {
      float* yp = y + i * ldy + 8 * v;
      __m256 a = _mm256_loadu_ps(yp);
      _Pragma("GCC unroll 16") for (int u = 0; u < KU; ++u) a = _mm256_fmadd_ps(xb[i][u], wv[u], a);
      _mm256_storeu_ps(yp, a);
    }
  }
  if (tail) {
    const __m256i mask = tail_mask(tail);
    __m256 wv[KU];
    _Pragma("GCC unroll 16") for (int u = 0; u < KU; ++u) wv[u] = _mm256_maskload_ps(wr[u] + 8 * nvec, mask);
    _Pragma("GCC unroll 16") for (int i = 0; i < MR; ++i) {
      float* yp = y + i * ldy + 8 * nvec;
      __m256 a = _mm256_maskload_ps(yp, mask);
      _Pragma("GCC unroll 16") for (int u = 0; u < KU; ++u) a = _mm256_fmadd_ps(xb[i][u], wv[u], a);
      _mm256_maskstore_ps(yp, mask, a);
    }
  }
}

template <int MR, int KU>
inline void rs_rows(const float* x, int64_t M, int64_t K, const float* w, int64_t ldw, float* y,
                    int64_t ldy, int64_t nvec, int64_t tail, const float* pf) {
  int64_t m = 0;
  if (pf && M >= MR) {  // the first block streams w from memory: it prefetches the rows ahead
    rs_step<MR, KU, true>(x, K, w, ldw, y, ldy, nvec, tail, pf);
    m = MR;
  } else if (pf) {
    rs_step<1, KU, true>(x, K, w, ldw, y, ldy, nvec, tail, pf);
    m = 1;
  }
  for (; m + MR <= M; m += MR) rs_step<MR, KU, false>(x + m * K, K, w, ldw, y + m * ldy, ldy, nvec, tail, nullptr);
  for (; m < M; ++m) rs_step<1, KU, false>(x + m * K, K, w, ldw, y + m * ldy, ldy, nvec, tail, nullptr);
}

// Columns of y per block: M x NB floats stay in L1 (at least 64, a multiple of 8).
inline int64_t block_cols(int64_t nb_floats, int64_t M) {
  const int64_t NB = nb_floats / M;
  return NB < 64 ? 64 : (NB & ~int64_t(7));
}

inline void zero_cols(float* y, int64_t M, int64_t ld, int64_t n0, int64_t nb) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t j = 0; j < nb; ++j) y[m * ld + n0 + j] = 0.f;
}

// N: the columns computed here; ld: the row stride of w and y (N, or more for a part of the columns).
template <int MR, int KU>
void rs_run(const float* x, const float* w, float* y, int64_t M, int64_t K, int64_t N, int64_t ld,
            int64_t nb_floats, int64_t pfd) {
  const int64_t NB = block_cols(nb_floats, M);
  for (int64_t n0 = 0; n0 < N; n0 += NB) {
    const int64_t nb = N - n0 < NB ? N - n0 : NB;
    zero_cols(y, M, ld, n0, nb);
    int64_t k = 0;
    for (; k + KU <= K; k += KU) {
      const int64_t kp = k + pfd * KU;
      const float* pf = (pfd > 0 && kp + KU <= K) ? w + kp * ld + n0 : nullptr;
      rs_rows<MR, KU>(x + k, M, K, w + k * ld + n0, ld, y + n0, ld, nb / 8, nb % 8, pf);
    }
    for (; k < K; ++k) rs_rows<MR, 1>(x + k, M, K, w + k * ld + n0, ld, y + n0, ld, nb / 8, nb % 8, nullptr);
  }
}

// NN, row streaming from G places at once: K is cut into G segments of `seg` rows and each step
// folds KU/G consecutive rows of every segment into y, so the core streams G sequential runs of w
// at a time. Measured here (a plain sum over 400 MB on one core): 1 stream 13.5-15.6 GB/s, 2 streams
// 16.5-20.7, 4 streams 20.9-23.7, 8 streams 19.4-23.0, 16 streams 12.4-16.8; software prefetch
// lowered every one of them, so none here.
template <int MR, int KU, int G>
void rs_run_streams(const float* x, const float* w, float* y, int64_t M, int64_t K, int64_t N, int64_t ld,
                    int64_t nb_floats) {
  constexpr int U = KU / G;
  const int64_t seg = (K / G) / U * U;  // rows per segment, a multiple of U
  const int64_t NB = block_cols(nb_floats, M);
  for (int64_t n0 = 0; n0 < N; n0 += NB) {
    const int64_t nb = N - n0 < NB ? N - n0 : NB;
    zero_cols(y, M, ld, n0, nb);
    for (int64_t k = 0; k < seg; k += U) {
      int64_t m = 0;
      for (; m + MR <= M; m += MR)
        rs_step<MR, KU, false, G>(x + m * K + k, K, w + k * ld + n0, ld, y + m * ld + n0, ld, nb / 8,
                                  nb % 8, nullptr, seg);
      for (; m < M; ++m)
        rs_step<1, KU, false, G>(x + m * K + k, K, w + k * ld + n0, ld, y + m * ld + n0, ld, nb / 8,
                                 nb % 8, nullptr, seg);
    }
    for (int64_t k = G * seg; k < K; ++k)
      rs_rows<MR, 1>(x + k, M, K, w + k * ld + n0, ld, y + n0, ld, nb / 8, nb % 8, nullptr);
  }
}

// ---- NN, packed register tile (larger M, where the FMAs rather than DRAM bound the time) ----
// w[k0:k0+kc, n0:n0+nb] is copied into buf as NR-column panels ([kc][NR] each, zero-padded), row by
// row (nb contiguous floats per row: sequential reads); then every MR rows of x run an MR x NR
// register tile over each panel (NV vector loads + MR broadcasts per MR*NV FMAs), adding into y.
#ifndef LG_PK_KC
#define LG_PK_KC 256
#endif
#ifndef LG_PK_NB
#define LG_PK_NB 192
#endif
#ifndef LG_PK_MR
#define LG_PK_MR 6      // register tile LG_PK_MR x 8*LG_PK_NV: 6 x 16 (12 accumulators, 2 + 6 loads per 12 FMAs)
#endif
#ifndef LG_PK_NV
#define LG_PK_NV 2
#endif

template <int MR, int NV>
inline void pk_tile(const float* x, int64_t ldx, const float* p, int64_t kc, float* y, int64_t ldy,
                    bool first, int64_t ncols) {
  constexpr int NR = 8 * NV;
  __m256 acc[MR][NV];
  _Pragma("GCC unroll 16") for (int i = 0; i < MR; ++i)
    _Pragma("GCC unroll 4") for (int j = 0; j < NV; ++j) acc[i][j] = _mm256_setzero_ps();
  for (int64_t k = 0; k < kc; ++k) {
    __m256 wv[NV];
    _Pragma("GCC unroll 4") for (int j = 0; j < NV; ++j) wv[j] = _mm256_load_ps(p + k * NR + 8 * j);
    _Pragma("GCC unroll 16") for (int i = 0; i < MR; ++i) {
      const __m256 xv = _mm256_broadcast_ss(x + i * ldx + k);
      _Pragma("GCC unroll 4") for (int j = 0; j < NV; ++j) acc[i][j] = _mm256_fmadd_ps(xv, wv[j], acc[i][j]);
    }
  }
  _Pragma("GCC unroll 16") for (int i = 0; i < MR; ++i)
    _Pragma("GCC unroll 4") for (int j = 0; j < NV; ++j) {
      float* yp = y + i * ldy + 8 * j;
      const int64_t left = ncols - 8 * j;
      if (left <= 0) break;
      __m256 a = acc[i][j];
      if (left >= 8) {
        if (!first) a = _mm256_add_ps(a, _mm256_loadu_ps(yp));
        _mm256_storeu_ps(yp, a);
      } else {
        const __m256i mask = tail_mask(left);
        if (!first) a = _mm256_add_ps(a, _mm256_maskload_ps(yp, mask));
        _mm256_maskstore_ps(yp, mask, a);
      }
    }
}

template <int MR, int NV>
inline void pk_rows(const float* x, int64_t M, int64_t K, const float* pp, int64_t kc, float* yb, int64_t ld,
                    bool first, int64_t cn) {
  int64_t m = 0;
  for (; m + MR <= M; m += MR) pk_tile<MR, NV>(x + m * K, K, pp, kc, yb + m * ld, ld, first, cn);
  for (; m + 3 <= M; m += 3) pk_tile<3, NV>(x + m * K, K, pp, kc, yb + m * ld, ld, first, cn);
  switch (M - m) {
    case 1: pk_tile<1, NV>(x + m * K, K, pp, kc, yb + m * ld, ld, first, cn); break;
    case 2: pk_tile<2, NV>(x + m * K, K, pp, kc, yb + m * ld, ld, first, cn); break;
    default: break;
  }
}

inline void transpose8(const float* src, int64_t lds, float* dst, int64_t ldd) {  // dst[c][r] = src[r][c]
  __m256 r0 = _mm256_loadu_ps(src), r1 = _mm256_loadu_ps(src + lds), r2 = _mm256_loadu_ps(src + 2 * lds),
         r3 = _mm256_loadu_ps(src + 3 * lds), r4 = _mm256_loadu_ps(src + 4 * lds),
         r5 = _mm256_loadu_ps(src + 5 * lds), r6 = _mm256_loadu_ps(src + 6 * lds),
         r7 = _mm256_loadu_ps(src + 7 * lds);
  __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1), t2 = _mm256_unpacklo_ps(r2, r3),
         t3 = _mm256_unpackhi_ps(r2, r3), t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
         t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE),
         u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE),
         u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE),
         u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  _mm256_storeu_ps(dst + 0 * ldd, _mm256_permute2f128_ps(u0, u4, 0x20));
  _mm256_storeu_ps(dst + 1 * ldd, _mm256_permute2f128_ps(u1, u5, 0x20));
  _mm256_storeu_ps(dst + 2 * ldd, _mm256_permute2f128_ps(u2, u6, 0x20));
  _mm256_storeu_ps(dst + 3 * ldd, _mm256_permute2f128_ps(u3, u7, 0x20));
  _mm256_storeu_ps(dst + 4 * ldd, _mm256_permute2f128_ps(u0, u4, 0x31));
  _mm256_storeu_ps(dst + 5 * ldd, _mm256_permute2f128_ps(u1, u5, 0x31));
  _mm256_storeu_ps(dst + 6 * ldd, _mm256_permute2f128_ps(u2, u6, 0x31));
  _mm256_storeu_ps(dst + 7 * ldd, _mm256_permute2f128_ps(u3, u7, 0x31));
}

// TRANS = false: w is [K, N] (row k of a block is nb contiguous floats);
// TRANS = true:  w is e [N, K] (the panel is the transpose of NR rows of e: 8 x 8 in-register transposes).
// N: the columns of y computed here; ld: y's row stride (and w's when !TRANS).
// Returns false (nothing done) when the packing buffer cannot be allocated.
template <bool TRANS>
bool pk_run(const float* x, const float* w, float* y, int64_t M, int64_t K, int64_t N, int64_t ld) {
  constexpr int64_t KC = LG_PK_KC, NB = LG_PK_NB, NR = 8 * LG_PK_NV;
  static_assert(NB % NR == 0, "NB must be a multiple of the panel width");
  static thread_local float* buf = nullptr;  // KC*NB floats, 64-byte aligned, one per thread, kept
  if (!buf) buf = static_cast<float*>(aligned_alloc(64, KC * NB * sizeof(float)));
  if (!buf) return false;
  for (int64_t n0 = 0; n0 < N; n0 += NB) {
    const int64_t nb = N - n0 < NB ? N - n0 : NB;
    const int64_t panels = (nb + NR - 1) / NR;
    for (int64_t k0 = 0; k0 < K; k0 += KC) {
      const int64_t kc = K - k0 < KC ? K - k0 : KC;
      if (!TRANS) {
        for (int64_t k = 0; k < kc; ++k) {  // pack: row k of the block into every panel
          const float* src = w + (k0 + k) * ld + n0;
          if (k + 4 < kc) {
            const char* ahead = reinterpret_cast<const char*>(src + 4 * ld);
            for (int64_t b = 0; b < nb * 4; b += 64) _mm_prefetch(ahead + b, _MM_HINT_T0);
          }
          for (int64_t p = 0; p < panels; ++p) {
            float* dst = buf + (p * kc + k) * NR;
            const int64_t c0 = p * NR, cn = nb - c0 < NR ? nb - c0 : NR;
            if (cn == NR) {
              _Pragma("GCC unroll 4") for (int j = 0; j < LG_PK_NV; ++j)
                _mm256_store_ps(dst + 8 * j, _mm256_loadu_ps(src + c0 + 8 * j));
            } else {
              for (int64_t j = 0; j < NR; ++j) dst[j] = j < cn ? src[c0 + j] : 0.f;
            }
          }
        }
      } else {
        for (int64_t p = 0; p < panels; ++p) {  // pack: NR rows of e, columns k0..k0+kc, transposed
          float* dst = buf + p * kc * NR;
          const int64_t c0 = p * NR, cn = nb - c0 < NR ? nb - c0 : NR;
          const float* src = w + (n0 + c0) * K + k0;
          int64_t k = 0;
          if (cn == NR)
            for (; k + 8 <= kc; k += 8)
              _Pragma("GCC unroll 4") for (int j = 0; j < LG_PK_NV; ++j)
                transpose8(src + 8 * j * K + k, K, dst + k * NR + 8 * j, NR);
          for (; k < kc; ++k)
            for (int64_t j = 0; j < NR; ++j) dst[k * NR + j] = j < cn ? src[j * K + k] : 0.f;
        }
      }
      for (int64_t p = 0; p < panels; ++p) {
        const int64_t c0 = p * NR, cn = nb - c0 < NR ? nb - c0 : NR;
        pk_rows<LG_PK_MR, LG_PK_NV>(x + k0, M, K, buf + p * kc * NR, kc, y + n0 + c0, ld, k0 == 0, cn);
      }
    }
  }
  return true;
}

// ---- NT: y[m, n] = dot(x[m, :], e[n, :]); one [MR, NR] block of y. ----
inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

template <int MR, int NR>
inline void nt_block(const float* x, const float* e, float* y, int64_t ldy, int64_t K) {
  __m256 acc[MR][NR];
  _Pragma("GCC unroll 16") for (int i = 0; i < MR; ++i)
    _Pragma("GCC unroll 16") for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) {
    __m256 ev[NR];
    _Pragma("GCC unroll 16") for (int j = 0; j < NR; ++j) ev[j] = _mm256_loadu_ps(e + j * K + k);
    _Pragma("GCC unroll 16") for (int i = 0; i < MR; ++i) {
      __m256 xv = _mm256_loadu_ps(x + i * K + k);
      _Pragma("GCC unroll 16") for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_fmadd_ps(xv, ev[j], acc[i][j]);
    }
  }
  if (k < K) {
    const __m256i mask = tail_mask(K - k);
    __m256 ev[NR];
    _Pragma("GCC unroll 16") for (int j = 0; j < NR; ++j) ev[j] = _mm256_maskload_ps(e + j * K + k, mask);
    _Pragma("GCC unroll 16") for (int i = 0; i < MR; ++i) {
      __m256 xv = _mm256_maskload_ps(x + i * K + k, mask);
      _Pragma("GCC unroll 16") for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_fmadd_ps(xv, ev[j], acc[i][j]);
    }
  }
  _Pragma("GCC unroll 16") for (int i = 0; i < MR; ++i)
    _Pragma("GCC unroll 16") for (int j = 0; j < NR; ++j) y[i * ldy + j] = hsum(acc[i][j]);
}

template <int MR, int NR>
void nt_rows(const float* x, const float* e, float* y, int64_t M, int64_t K, int64_t ld) {
  int64_t m = 0;
  for (; m + MR <= M; m += MR) nt_block<MR, NR>(x + m * K, e, y + m * ld, ld, K);
  switch (M - m) {
    case 0: break;
    case 1: nt_block<1, NR>(x + m * K, e, y + m * ld, ld, K); break;
    case 2: nt_block<2, NR>(x + m * K, e, y + m * ld, ld, K); break;
    default: nt_block<3, NR>(x + m * K, e, y + m * ld, ld, K); break;  // MR <= 4: at most 3 rows left
  }
}

template <int MR, int NR>
void nt_run(const float* x, const float* e, float* y, int64_t M, int64_t K, int64_t N, int64_t ld) {
  int64_t n = 0;
  for (; n + NR <= N; n += NR) nt_rows<MR, NR>(x, e + n * K, y + n, M, K, ld);
  for (; n < N; ++n) nt_rows<MR, 1>(x, e + n * K, y + n, M, K, ld);
}

// ---- One part of y's columns: y[:, 0:N] of a y whose rows are ld floats apart (w's too for NN) ----
void nn_cols(const float* x, const float* w, float* y, int64_t M, int64_t K, int64_t N, int64_t ld) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) { zero_cols(y, M, ld, 0, N); return; }
  // M = 1: no software prefetch (the hardware prefetcher alone streamed faster, measured); a row
  // that fits one block (N <= kBlockFloats: wqkv, wo, w13, w2) is one sequential run per step, so
  // read 4 segments of w at once (4 streams); a wider w (lm_head) is already read as 8 runs of a
  // block each, rows N*4 bytes apart. M >= 2: LG_PFD steps ahead; more streams gave nothing there.
  if (M == 1 && N <= kBlockFloats) rs_run_streams<1, 4, 4>(x, w, y, M, K, N, ld, kBlockFloats);
  else if (M == 1) rs_run<1, 8>(x, w, y, M, K, N, ld, kBlockFloats, 0);
  else if (M < LG_PK_MIN_M) rs_run<2, 4>(x, w, y, M, K, N, ld, kBlockFloats, LG_PFD);
  else if (!pk_run<false>(x, w, y, M, K, N, ld)) rs_run<2, 4>(x, w, y, M, K, N, ld, kBlockFloats, LG_PFD);
}

void nt_cols(const float* x, const float* e, float* y, int64_t M, int64_t K, int64_t N, int64_t ld) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) { zero_cols(y, M, ld, 0, N); return; }
  if (M >= LG_PK_MIN_M_T && pk_run<true>(x, e, y, M, K, N, ld)) return;
  switch (M) {
    case 1: nt_run<1, 8>(x, e, y, M, K, N, ld); break;
    case 2: nt_run<2, 6>(x, e, y, M, K, N, ld); break;
    case 3: nt_run<3, 4>(x, e, y, M, K, N, ld); break;
    default: nt_run<4, 3>(x, e, y, M, K, N, ld); break;
  }
}

// ---- Threads: y's columns cut into T parts (16-column aligned), one per thread ----
// T = the forced count (lg_set_threads(n > 0)) or the CPUs this thread may run on
// (sched_getaffinity: a server pinned to one core stays single-threaded), at most kMaxThreads, and
// 1 for products under kMinSplitFloats weights (the hand-off costs more than it saves) unless forced.
// The helpers are XLA's own intra-op threads (the FFI ThreadPool: the Eigen pool XLA:CPU runs its
// own parallel work on; no thread of ours). Parts are claimed from an atomic counter by the caller
// and by every helper that gets to run: the caller waits only for parts a helper has claimed and
// is running, so a pool that runs nothing (busy, or size 1) costs nothing but the caller's time.
#ifndef LG_KSPLIT_M1
#define LG_KSPLIT_M1 1   // NN, M = 1: threads take rows of w (K) rather than columns (N)
#endif
constexpr int kMaxThreads = 8;
constexpr int64_t kMinSplitFloats = 1 << 18;   // 1 MiB of weights
constexpr int64_t kPartAlign = 16;

std::atomic<int> g_force_threads{0};

int affinity_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  const int n = CPU_COUNT(&set);
  return n < 1 ? 1 : n;
}

int threads_for(int64_t M, int64_t K, int64_t N, int64_t pool_threads, int32_t site = 0) {
  if (site == 1) return 1;   // the call site asked for one thread (auto mode timed it faster)
  const int forced = g_force_threads.load(std::memory_order_relaxed);
  if (forced == 0 && (pool_threads < 1 || K * N < kMinSplitFloats)) return 1;
  int t = forced > 0 ? forced : affinity_cpus();
  if (t > kMaxThreads) t = kMaxThreads;
  const int64_t most = (N + kPartAlign - 1) / kPartAlign;   // every part at least kPartAlign columns
  return t > most ? static_cast<int>(most) : t;
}

struct Job {
  const float *x, *w;
  float* y;
  int64_t M, K, N;
  bool nt, ksplit;
  int parts;
  std::atomic<int> next{0}, done{0};
  float* partial = nullptr;   // ksplit: (parts - 1) x N partial sums, parts 1.. (part 0 writes y)

  ~Job() { free(partial); }

  void part(int p) const {
    if (ksplit) {   // NN, M = 1: rows [k0, k1) of w, one contiguous run of memory per thread
      const int64_t per = (K + parts - 1) / parts, k0 = p * per, k1 = k0 + per < K ? k0 + per : K;
      float* out = p == 0 ? y : partial + (p - 1) * N;
      if (k0 >= k1) zero_cols(out, 1, N, 0, N);
      else nn_cols(x + k0, w + k0 * N, out, 1, k1 - k0, N, N);
      return;
    }
    const int64_t per = (N / parts + kPartAlign - 1) / kPartAlign * kPartAlign;
    const int64_t n0 = p * per, n1 = p + 1 == parts ? N : (n0 + per < N ? n0 + per : N);
    if (n0 >= n1) return;
    if (nt) nt_cols(x, w + n0 * K, y + n0, M, K, n1 - n0, N);
    else nn_cols(x, w + n0, y + n0, M, K, n1 - n0, N);
  }
  void work() {
    for (int p; (p = next.fetch_add(1, std::memory_order_relaxed)) < parts;) {
      part(p);
      done.fetch_add(1, std::memory_order_release);
    }
  }
};

template <typename Pool>
void run_parts(Pool* pool, int64_t pool_threads, int32_t site, bool nt, const float* x, const float* w,
               float* y, int64_t M, int64_t K, int64_t N) {
  const int t = threads_for(M, K, N, pool_threads, site);
  if (t <= 1 || pool == nullptr) {
    if (nt) nt_cols(x, w, y, M, K, N, N);
    else nn_cols(x, w, y, M, K, N, N);
    return;
  }
  auto job = std::make_shared<Job>();
  job->x = x; job->w = w; job->y = y; job->M = M; job->K = K; job->N = N; job->nt = nt; job->parts = t;
  // M = 1, NN: split K (each thread streams a contiguous half of w; partial sums added at the end):
  // y's columns split would give each thread runs of N/t floats, rows N*4 bytes apart
  job->ksplit = !nt && M == 1 && K >= 2 * t && LG_KSPLIT_M1;
  if (job->ksplit) {
    job->partial = static_cast<float*>(malloc(sizeof(float) * N * (t - 1)));
    if (!job->partial) job->ksplit = false;
  }
  for (int i = 1; i < t; ++i) pool->Schedule([job] { job->work(); });   // a late helper finds no part
  job->work();
  for (int spins = 0; job->done.load(std::memory_order_acquire) < t; ++spins) {
    if (spins < 20000) _mm_pause();
    else sched_yield();
  }
  if (job->ksplit)
    for (int p = 1; p < t; ++p) {
      const float* src = job->partial + (p - 1) * N;
      for (int64_t j = 0; j < N; ++j) y[j] += src[j];
    }
}

}  // namespace

extern "C" {

// Plain C entry points, single-threaded (the FFI handlers below split the columns over threads).
void lg_matmul_nn(const float* x, const float* w, float* y, int64_t M, int64_t K, int64_t N) {
  nn_cols(x, w, y, M, K, N, N);
}

void lg_matmul_nt(const float* x, const float* e, float* y, int64_t M, int64_t K, int64_t N) {
  nt_cols(x, e, y, M, K, N, N);
}

// n > 0: every FFI call uses n threads (even for small products); 0: follow the CPU affinity.
void lg_set_threads(int n) { g_force_threads.store(n < 0 ? 0 : n, std::memory_order_relaxed); }
int lg_affinity_cpus() { return affinity_cpus(); }
// The threads a call of this shape gets when XLA's pool has pool_threads threads (for the tests).
int lg_threads_for(int64_t M, int64_t K, int64_t N, int64_t pool_threads) {
  return threads_for(M, K, N, pool_threads);
}

}  // extern "C"

// ---- XLA FFI handlers ----
using Mat = ffi::Buffer<ffi::F32, 2>;  // (an alias: the macro below would split the template's comma)
using OutMat = ffi::ResultBuffer<ffi::F32, 2>;

// NT false: w is w[K,N] (x @ w); true: w is e[N,K] (x @ e^T, e not transposed).
// threads: the call site's attribute, 0 = the process policy above, 1 = one thread.
template <bool NT>
static ffi::Error Matmul(ffi::ThreadPool pool, Mat x, Mat w, OutMat y, int32_t threads) {
  auto xd = x.dimensions(), wd = w.dimensions(), yd = y->dimensions();
  const int64_t k = NT ? wd[1] : wd[0], n = NT ? wd[0] : wd[1];
  if (k != xd[1] || yd[0] != xd[0] || yd[1] != n)
    return ffi::Error::InvalidArgument(NT ? "lg_matmul_nt: shapes do not match x[M,K] @ e[N,K]^T -> y[M,N]"
                                          : "lg_matmul_nn: shapes do not match x[M,K] @ w[K,N] -> y[M,N]");
  run_parts(&pool, pool.num_threads(), threads, NT, x.typed_data(), w.typed_data(), y->typed_data(), xd[0], xd[1],
            n);
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(LgMatmulNN, Matmul<false>,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>().Arg<Mat>().Arg<Mat>().Ret<Mat>().Attr<int32_t>("threads"));
XLA_FFI_DEFINE_HANDLER_SYMBOL(LgMatmulNT, Matmul<true>,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>().Arg<Mat>().Arg<Mat>().Ret<Mat>().Attr<int32_t>("threads"));
