// The packed rows' grouped form (packed_config.h: grouped_why_not, grouped_broadcast), included by
// gemm_packed.h (so compiled once per instruction set, like it): depthwise convs and other narrow
// groups. As GEMMs each group is a problem only a few columns wide, which the blocked form packs and
// pads per group. Here the input is copied once into a zero-padded channels-last buffer in the
// accumulator type (no bounds or stride tests in the loops), and every output is computed for a
// vector of output channels at once, R * S * Ig FMAs (Ig: the channels an output reads), its reads
// either vector loads of an expanded copy (per pixel and j < Ig, the vector over output channels o
// of input group(o) * Ig + j; depthwise is Ig = 1, the pixel itself) or, where a vector of outputs
// lies within one group, scalars of a plain copy broadcast. docs/kernels/cpu.md#forms.
#pragma once

namespace tileops {
namespace cpu {
namespace {

// A conv kind's channels as the form sees them: O output channels (Og a group, padded to Op, a
// multiple of the vector), each reading Ig input channels.
struct GroupLayout {
  int64_t O, Og, Ig, Op;
  int64_t pixel() const { return Ig * Op; }  // buffer elements a pixel
  int64_t in_channel(int64_t o, int64_t j) const { return o / Og * Ig + j; }
};

// Copies src (N, ., H, W; strides (n, c, h, w) in st) into buf[n][h * step_h + off_h][w * step_w +
// off_w][j][o] = src[n, L.in_channel(o, j), h, w] (Hb x Wb pixels, zero elsewhere and past O), in
// parallel over buffer rows, reading src along its shorter stride.
template <typename T, typename Acc>
void to_channels_last(const T* src, const int64_t* st, int64_t N, int64_t H, int64_t W, const GroupLayout& L,
                      Acc* buf, int64_t Hb, int64_t Wb, int64_t step_h, int64_t step_w, int64_t off_h, int64_t off_w) {
  const bool c_inner = st[1] <= st[3];
  const int64_t px = L.pixel();
  at::parallel_for(0, N * Hb, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t n = i / Hb, hb = i % Hb - off_h, h = hb / step_h;
      Acc* row = buf + i * Wb * px;
      std::fill(row, row + Wb * px, Acc(0));
      if (hb < 0 || hb % step_h != 0 || h >= H) continue;
      const T* s = src + n * st[0] + h * st[2];
      Acc* d = row + off_w * px;
      const int64_t ws = std::min(W, (Wb - off_w + step_w - 1) / step_w);  // columns inside the buffer
      // for_channels(j, f): f(o, input channel of o's j-th read) over o, without a division per element
      auto for_channels = [&](int64_t j, auto&& f) {
        if (L.Og == 1 && L.Ig == 1) {  // a plain copy (depthwise; dY for the weight gradient): vectorizable
          for (int64_t o = 0; o < L.O; ++o) f(o, o);
          return;
        }
        for (int64_t o = 0, u = 0, ch = j; o < L.O; ++o) {
          f(o, ch);
          if (++u == L.Og) u = 0, ch += L.Ig;
        }
      };
      if (c_inner) {
        for (int64_t w = 0; w < ws; ++w) {
          const T* sw = s + w * st[3];
          Acc* dw = d + w * step_w * px;
          for (int64_t j = 0; j < L.Ig; ++j)
            for_channels(j, [&](int64_t o, int64_t ch) { dw[j * L.Op + o] = to_acc<Acc>(sw[ch * st[1]]); });
        }
      } else {
        for (int64_t j = 0; j < L.Ig; ++j)
          for_channels(j, [&](int64_t o, int64_t ch) {
            for (int64_t w = 0; w < ws; ++w) d[w * step_w * px + j * L.Op + o] = to_acc<Acc>(s[w * st[3] + ch * st[1]]);
          });
      }
    }
  });
}

// The weights as [r][s][j][o] (zero past O): w[o, j, r, s] for a forward; for an input gradient
// (transposed: o an input channel, j the j-th output channel of its group) w[group(o) * Ig + j,
// o % Og, r, s], read unflipped (taps_to_pixels walks the taps backwards instead).
template <typename T, typename Acc>
std::unique_ptr<Acc[]> weights_rsjo(const ConvOperands& c, const GroupLayout& L, bool transposed) {
  const int64_t RS = c.R * c.S;
  std::unique_ptr<Acc[]> wt(new Acc[RS * L.pixel()]);
  const T* w = static_cast<const T*>(c.w);
  for (int64_t rs = 0; rs < RS; ++rs)
    for (int64_t j = 0; j < L.Ig; ++j)
      for (int64_t o = 0; o < L.Op; ++o) {
        const int64_t wk = transposed ? L.in_channel(o, j) : o, wc = transposed ? o % L.Og : j;
        wt[(rs * L.Ig + j) * L.Op + o] =
            o < L.O ? to_acc<Acc>(w[wk * c.ws[0] + wc * c.ws[1] + (rs / c.S) * c.ws[2] + (rs % c.S) * c.ws[3]])
                    : Acc(0);
      }
  return wt;
}

// out[n, o, i, j] = epilogue(sum over (r, s, g) in order of buf[n][i * a_h + r * t_h + b_h][j * a_w
// + s * t_w + b_w][g][o] * wt[r][s][g][o]) for i < OH, j < OW; out's strides os in (n, c, h, w) order.
// Forward: a = stride, t = dilation, b = 0; input gradient: a = 1, t = -dilation, b = the offset.
// kQB neighbouring outputs of a row at once, so that each weight vector loaded serves kQB FMAs.
constexpr int64_t kQB = 4;
// bcast: buf is a plain copy (px channels a pixel), each read a scalar broadcast (the output
// vector within one group); else the expanded copy (px = L.pixel()).
template <typename T, Act A, typename Acc>
void taps_to_pixels(const Acc* buf, int64_t Hb, int64_t Wb, int64_t px, bool bcast, const GroupLayout& L,
                    const Acc* wt, const ConvOperands& c, int64_t N, int64_t OH, int64_t OW, T* out, const int64_t* os,
                    const int64_t* a, const int64_t* t, const int64_t* b, const Epilogue<T>& epi) {
  using V = at::vec::Vectorized<Acc>;
  constexpr int64_t W = V::size();
  const int64_t step = a[1] * px;  // buffer elements between neighbouring outputs
  at::parallel_for(0, N * OH, 1, [&](int64_t begin, int64_t end) {
    Acc lanes[W];
    auto finish = [&](const V& acc, T* o, int64_t o0) {
      acc.store(lanes);
      for (int64_t l = 0; l < W && o0 + l < L.O; ++l) {
        T* oc = o + (o0 + l) * os[1];
        Acc v = lanes[l];
        if (epi.bias != nullptr) v += to_acc<Acc>(epi.bias[o0 + l]);
        *oc = from_acc<T>(epi.template activated<A>(epi.add_residual(v, oc)));
      }
    };
    // NQ outputs from q0 on, NQ a constant so that the accumulators stay in registers
    // MODE 0: expanded with one read (depthwise: Ig a constant 1), 1: expanded, 2: broadcast
    auto block = [&](auto nq, auto mode, int64_t n, int64_t oh, int64_t q0) {
      constexpr int64_t NQ = decltype(nq)::value;
      constexpr int MODE = decltype(mode)::value;
      const int64_t Ig = MODE == 0 ? 1 : L.Ig;
      const Acc* pix = buf + ((n * Hb + oh * a[0] + b[0]) * Wb + q0 * a[1] + b[1]) * px;
      for (int64_t o0 = 0; o0 < L.O; o0 += W) {
        V acc[NQ];
        for (int64_t u = 0; u < NQ; ++u) acc[u] = V(Acc(0));
        // the reads of outputs o0..: expanded, vectors at o0 of each read's slice; broadcast, the
        // scalars of the group's inputs
        const int64_t x0 = MODE == 2 ? o0 / L.Og * L.Ig : o0, xj = MODE == 2 ? 1 : L.Op;
        for (int64_t r = 0; r < c.R; ++r)
          for (int64_t s = 0; s < c.S; ++s) {
            const Acc* xr = pix + (r * t[0] * Wb + s * t[1]) * px + x0;
            const Acc* wr = wt + (r * c.S + s) * L.pixel() + o0;
            for (int64_t j = 0; j < Ig; ++j) {
              const V wv = V::loadu(wr + j * L.Op);
              for (int64_t u = 0; u < NQ; ++u) {
                const V xv = MODE == 2 ? V(xr[u * step + j]) : V::loadu(xr + u * step + j * xj);
                acc[u] = at::vec::fmadd(xv, wv, acc[u]);
              }
            }
          }
        for (int64_t u = 0; u < NQ; ++u) finish(acc[u], out + n * os[0] + oh * os[2] + (q0 + u) * os[3], o0);
      }
    };
    auto rows = [&](auto mode) {
      for (int64_t i = begin; i < end; ++i) {
        const int64_t n = i / OH, oh = i % OH;
        int64_t q0 = 0;
        for (; q0 + kQB <= OW; q0 += kQB) block(std::integral_constant<int64_t, kQB>{}, mode, n, oh, q0);
        for (; q0 < OW; ++q0) block(std::integral_constant<int64_t, 1>{}, mode, n, oh, q0);
      }
    };
    if (bcast) rows(std::integral_constant<int, 2>{});
    else if (L.Ig == 1) rows(std::integral_constant<int, 0>{});
    else rows(std::integral_constant<int, 1>{});
  });
}

template <typename T, Act A>
void grouped(const GemmArgs& g) {
  using Acc = AccOf<T>;
  using V = at::vec::Vectorized<Acc>;
  constexpr int64_t W = V::size();
  const ConvOperands& c = g.conv;
  const Epilogue<T> epi = epilogue_of<T>(g);
  const bool bcast = grouped_broadcast(g);
  TORCH_INTERNAL_ASSERT(W == acc_lanes(g), "tileops: the grouped form's vector is not packed_config.h's");
  // The copy of an input with I channels that layout L reads: expanded, or plain (bcast)
  auto copy_layout = [&](const GroupLayout& L, int64_t I) { return bcast ? GroupLayout{I, 1, 1, I} : L; };
  const GroupLayout fwd{c.K, c.Kg, c.Cg, round_up(c.K, W)};  // x read per output channel (and the weight gradient)
  const GroupLayout xl = copy_layout(fwd, c.C);
  const int64_t Hb = std::max(c.H + c.ph, (c.P - 1) * c.sh + (c.R - 1) * c.dh + 1);
  const int64_t Wb = std::max(c.W + c.pw, (c.Q - 1) * c.sw + (c.S - 1) * c.dw + 1);
  if (g.kind == Kind::ConvFwd) {  // y = sum over taps of x at (p * sh + r * dh - ph, ...)
    std::unique_ptr<Acc[]> xb(new Acc[c.N * Hb * Wb * xl.pixel()]);
    to_channels_last(static_cast<const T*>(c.x), c.xs, c.N, c.H, c.W, xl, xb.get(), Hb, Wb, 1, 1, c.ph, c.pw);
    const auto wt = weights_rsjo<T, Acc>(c, fwd, false);
    const int64_t a[2] = {c.sh, c.sw}, t[2] = {c.dh, c.dw}, b[2] = {0, 0};
    taps_to_pixels<T, A>(xb.get(), Hb, Wb, xl.pixel(), bcast, fwd, wt.get(), c, c.N, c.P, c.Q, static_cast<T*>(c.y),
                         c.ys, a, t, b, epi);
  } else if (g.kind == Kind::ConvDgrad) {
    // dx at (h, w) = sum over taps of Z at (h + ph - r * dh, w + pw - s * dw), Z = dy placed at
    // (p * sh, q * sw) and zero between; Z's buffer is shifted by (oh, ow) so no index is negative.
    // Output channels are x's: each reads the Kg channels of dy of its group.
    const GroupLayout L{c.C, c.Cg, c.Kg, round_up(c.C, W)}, zl = copy_layout(L, c.K);
    const int64_t oh = std::max<int64_t>(0, (c.R - 1) * c.dh - c.ph);
    const int64_t ow = std::max<int64_t>(0, (c.S - 1) * c.dw - c.pw);
    const int64_t Hz = c.H + c.ph + oh, Wz = c.W + c.pw + ow;
    std::unique_ptr<Acc[]> zb(new Acc[c.N * Hz * Wz * zl.pixel()]);
    to_channels_last(static_cast<const T*>(c.y), c.ys, c.N, c.P, c.Q, zl, zb.get(), Hz, Wz, c.sh, c.sw, oh, ow);
    const auto wt = weights_rsjo<T, Acc>(c, L, true);
    const int64_t a[2] = {1, 1}, t[2] = {-c.dh, -c.dw}, b[2] = {c.ph + oh, c.pw + ow};
    taps_to_pixels<T, A>(zb.get(), Hz, Wz, zl.pixel(), bcast, L, wt.get(), c, c.N, c.H, c.W, static_cast<T*>(c.x),
                         c.xs, a, t, b, epi);
  } else {
    // dw[k, j, r, s] = sum over (n, p, q) in order of dy[n, k, p, q] * x[n, group(k) * Cg + j] at
    // (p * sh + r * dh - ph, ...): vectors over k, one accumulator per (tap, j) of a chunk of j's
    // (at most kGroupedMaxAcc at once), parallel over vectors of k
    const GroupLayout dyl{c.K, 1, 1, fwd.Op};
    std::unique_ptr<Acc[]> xb(new Acc[c.N * Hb * Wb * xl.pixel()]), yb(new Acc[c.N * c.P * c.Q * fwd.Op]);
    to_channels_last(static_cast<const T*>(c.x), c.xs, c.N, c.H, c.W, xl, xb.get(), Hb, Wb, 1, 1, c.ph, c.pw);
    to_channels_last(static_cast<const T*>(c.y), c.ys, c.N, c.P, c.Q, dyl, yb.get(), c.P, c.Q, 1, 1, 0, 0);
    const int64_t RS = c.R * c.S, px = xl.pixel(), jc = std::max<int64_t>(1, kGroupedMaxAcc / RS);
    T* dw = static_cast<T*>(c.w);
    at::parallel_for(0, fwd.Op / W, 1, [&](int64_t begin, int64_t end) {
      V acc[kGroupedMaxAcc];  // on the stack: aligned as V requires (std::vector's memory is not)
      Acc lanes[W];
      for (int64_t kv = begin; kv < end; ++kv) {
        const int64_t k0 = kv * W;
        // x's reads of k0..: expanded, vectors at k0 of each read's slice; broadcast, the group's scalars
        const int64_t x0 = bcast ? k0 / c.Kg * c.Cg : k0, xj = bcast ? 1 : fwd.Op;
        for (int64_t j0 = 0; j0 < c.Cg; j0 += jc) {
          const int64_t nj = std::min(jc, c.Cg - j0);
          std::fill(acc, acc + RS * nj, V(Acc(0)));
          for (int64_t n = 0; n < c.N; ++n)
            for (int64_t p = 0; p < c.P; ++p)
              for (int64_t q = 0; q < c.Q; ++q) {
                const V dy = V::loadu(yb.get() + ((n * c.P + p) * c.Q + q) * fwd.Op + k0);
                const Acc* pix = xb.get() + ((n * Hb + p * c.sh) * Wb + q * c.sw) * px + x0 + j0 * xj;
                V* a = acc;
                for (int64_t r = 0; r < c.R; ++r)
                  for (int64_t s = 0; s < c.S; ++s) {
                    const Acc* xr = pix + (r * c.dh * Wb + s * c.dw) * px;
                    if (bcast) {
                      for (int64_t j = 0; j < nj; ++j, ++a) *a = at::vec::fmadd(dy, V(xr[j]), *a);
                    } else {
                      for (int64_t j = 0; j < nj; ++j, ++a) *a = at::vec::fmadd(dy, V::loadu(xr + j * xj), *a);
                    }
                  }
              }
          for (int64_t rs = 0; rs < RS; ++rs)
            for (int64_t j = 0; j < nj; ++j) {
              acc[rs * nj + j].store(lanes);
              for (int64_t l = 0; l < W && k0 + l < c.K; ++l) {
                T* o = dw + (k0 + l) * c.ws[0] + (j0 + j) * c.ws[1] + (rs / c.S) * c.ws[2] + (rs % c.S) * c.ws[3];
                *o = from_acc<T>(epi.template activated<A>(epi.add_residual(lanes[l], o)));
              }
            }
        }
      }
    });
  }
}

}  // namespace
}  // namespace cpu
}  // namespace tileops
