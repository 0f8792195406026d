// The packed rows' depthwise form (packed_config.h: depthwise_why_not), included by gemm_packed.h
// (so compiled once per instruction set, like it). A depthwise conv (groups = C = K) is, as GEMMs,
// one N = 1 problem per channel, and on a channels_last image each channel's walk touches a new
// cache line per element. Here the operands are copied once into zero-padded channels-last buffers
// in the accumulator type (no bounds or stride tests in the loops), and each output is computed
// for a vector of channels at once. docs/kernels/cpu.md#forms.
#pragma once

namespace tileops {
namespace cpu {
namespace {

// Copies src (N, C, H, W; strides (n, c, h, w) in st) into buf[n][h * step_h + off_h][w * step_w +
// off_w][c] (Hb x Wb pixels, Cp channels an image, zero elsewhere), in parallel over buffer rows,
// reading src along its shorter stride.
template <typename T, typename Acc>
void to_channels_last(const T* src, const int64_t* st, int64_t N, int64_t C, int64_t H, int64_t W, Acc* buf,
                      int64_t Hb, int64_t Wb, int64_t Cp, int64_t step_h, int64_t step_w, int64_t off_h,
                      int64_t off_w) {
  const bool c_inner = st[1] <= st[3];
  at::parallel_for(0, N * Hb, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t n = i / Hb, hb = i % Hb - off_h, h = hb / step_h;
      Acc* row = buf + i * Wb * Cp;
      std::fill(row, row + Wb * Cp, Acc(0));
      if (hb < 0 || hb % step_h != 0 || h >= H) continue;
      const T* s = src + n * st[0] + h * st[2];
      Acc* d = row + off_w * Cp;
      if (c_inner) {
        for (int64_t w = 0; w < W && off_w + w * step_w < Wb; ++w)
          for (int64_t c = 0; c < C; ++c) d[w * step_w * Cp + c] = to_acc<Acc>(s[w * st[3] + c * st[1]]);
      } else {
        for (int64_t c = 0; c < C; ++c)
          for (int64_t w = 0; w < W && off_w + w * step_w < Wb; ++w)
            d[w * step_w * Cp + c] = to_acc<Acc>(s[w * st[3] + c * st[1]]);
      }
    }
  });
}

// The weights (C, 1, R, S) as [r][s][c], zero past C. The input gradient reads them unflipped and
// walks the taps backwards instead (a negative tap step in taps_to_pixels).
template <typename T, typename Acc>
std::unique_ptr<Acc[]> weights_rsc(const ConvOperands& c, int64_t Cp) {
  std::unique_ptr<Acc[]> wt(new Acc[c.R * c.S * Cp]);
  const T* w = static_cast<const T*>(c.w);
  for (int64_t rs = 0; rs < c.R * c.S; ++rs)
    for (int64_t ch = 0; ch < Cp; ++ch)
      wt[rs * Cp + ch] = ch < c.C ? to_acc<Acc>(w[ch * c.ws[0] + (rs / c.S) * c.ws[2] + (rs % c.S) * c.ws[3]]) : Acc(0);
  return wt;
}

// out[n, c, i, j] = epilogue(sum over (r, s) in order of buf[n][i * a_h + r * t_h + b_h][j * a_w +
// s * t_w + b_w][c] * wt[r][s][c]) for i < OH, j < OW; out's strides os in (n, c, h, w) order.
// Forward: a = stride, t = dilation, b = 0; input gradient: a = 1, t = -dilation, b = the offset.
template <typename T, Act A, typename Acc>
void taps_to_pixels(const Acc* buf, int64_t Hb, int64_t Wb, int64_t Cp, const Acc* wt, const ConvOperands& c,
                    int64_t N, int64_t OH, int64_t OW, T* out, const int64_t* os, const int64_t* a, const int64_t* t,
                    const int64_t* b, const Epilogue<T>& epi) {
  using V = at::vec::Vectorized<Acc>;
  constexpr int64_t W = V::size();
  at::parallel_for(0, N * OH, 1, [&](int64_t begin, int64_t end) {
    Acc lanes[W];
    for (int64_t i = begin; i < end; ++i) {
      const int64_t n = i / OH, oh = i % OH;
      for (int64_t q = 0; q < OW; ++q) {
        T* o = out + n * os[0] + oh * os[2] + q * os[3];
        const Acc* px = buf + ((n * Hb + oh * a[0] + b[0]) * Wb + q * a[1] + b[1]) * Cp;
        for (int64_t c0 = 0; c0 < c.C; c0 += W) {
          V acc(Acc(0));
          for (int64_t r = 0; r < c.R; ++r) {
            const Acc* xr = px + r * t[0] * Wb * Cp + c0;
            const Acc* wr = wt + r * c.S * Cp + c0;
            for (int64_t s = 0; s < c.S; ++s)
              acc = at::vec::fmadd(V::loadu(xr + s * t[1] * Cp), V::loadu(wr + s * Cp), acc);
          }
          acc.store(lanes);
          for (int64_t l = 0; l < W && c0 + l < c.C; ++l) {
            T* oc = o + (c0 + l) * os[1];
            Acc v = lanes[l];
            if (epi.bias != nullptr) v += to_acc<Acc>(epi.bias[c0 + l]);
            *oc = from_acc<T>(epi.template activated<A>(epi.add_residual(v, oc)));
          }
        }
      }
    }
  });
}

template <typename T, Act A>
void depthwise(const GemmArgs& g) {
  using Acc = AccOf<T>;
  using V = at::vec::Vectorized<Acc>;
  constexpr int64_t W = V::size();
  const ConvOperands& c = g.conv;
  const Epilogue<T> epi = epilogue_of<T>(g);
  const int64_t Cp = round_up(c.C, W);
  const int64_t Hb = std::max(c.H + c.ph, (c.P - 1) * c.sh + (c.R - 1) * c.dh + 1);
  const int64_t Wb = std::max(c.W + c.pw, (c.Q - 1) * c.sw + (c.S - 1) * c.dw + 1);
  if (g.kind == Kind::ConvFwd) {  // y = sum over taps of x at (p * sh + r * dh - ph, ...)
    std::unique_ptr<Acc[]> xb(new Acc[c.N * Hb * Wb * Cp]);
    to_channels_last(static_cast<const T*>(c.x), c.xs, c.N, c.C, c.H, c.W, xb.get(), Hb, Wb, Cp, 1, 1, c.ph, c.pw);
    const auto wt = weights_rsc<T, Acc>(c, Cp);
    const int64_t a[2] = {c.sh, c.sw}, t[2] = {c.dh, c.dw}, b[2] = {0, 0};
    taps_to_pixels<T, A>(xb.get(), Hb, Wb, Cp, wt.get(), c, c.N, c.P, c.Q, static_cast<T*>(c.y), c.ys, a, t, b, epi);
  } else if (g.kind == Kind::ConvDgrad) {
    // dx at (h, w) = sum over taps of Z at (h + ph - r * dh, w + pw - s * dw), Z = dy placed at
    // (p * sh, q * sw) and zero between; Z's buffer is shifted by (oh, ow) so no index is negative
    const int64_t oh = std::max<int64_t>(0, (c.R - 1) * c.dh - c.ph);
    const int64_t ow = std::max<int64_t>(0, (c.S - 1) * c.dw - c.pw);
    const int64_t Hz = c.H + c.ph + oh, Wz = c.W + c.pw + ow;
    std::unique_ptr<Acc[]> zb(new Acc[c.N * Hz * Wz * Cp]);
    to_channels_last(static_cast<const T*>(c.y), c.ys, c.N, c.C, c.P, c.Q, zb.get(), Hz, Wz, Cp, c.sh, c.sw, oh, ow);
    const auto wt = weights_rsc<T, Acc>(c, Cp);
    const int64_t a[2] = {1, 1}, t[2] = {-c.dh, -c.dw}, b[2] = {c.ph + oh, c.pw + ow};
    taps_to_pixels<T, A>(zb.get(), Hz, Wz, Cp, wt.get(), c, c.N, c.H, c.W, static_cast<T*>(c.x), c.xs, a, t, b, epi);
  } else {
    // dw[c, r, s] = sum over (n, p, q) in order of dy[n, c, p, q] * x at (p * sh + r * dh - ph, ...):
    // one accumulator vector per tap, parallel over channel vectors
    std::unique_ptr<Acc[]> xb(new Acc[c.N * Hb * Wb * Cp]), yb(new Acc[c.N * c.P * c.Q * Cp]);
    to_channels_last(static_cast<const T*>(c.x), c.xs, c.N, c.C, c.H, c.W, xb.get(), Hb, Wb, Cp, 1, 1, c.ph, c.pw);
    to_channels_last(static_cast<const T*>(c.y), c.ys, c.N, c.C, c.P, c.Q, yb.get(), c.P, c.Q, Cp, 1, 1, 0, 0);
    const int64_t RS = c.R * c.S;
    T* dw = static_cast<T*>(c.w);
    at::parallel_for(0, Cp / W, 1, [&](int64_t begin, int64_t end) {
      V acc[kDepthwiseMaxTaps];  // on the stack: aligned as V requires (std::vector's memory is not)
      Acc lanes[W];
      for (int64_t cv = begin; cv < end; ++cv) {
        const int64_t c0 = cv * W;
        std::fill(acc, acc + RS, V(Acc(0)));
        for (int64_t n = 0; n < c.N; ++n)
          for (int64_t p = 0; p < c.P; ++p)
            for (int64_t q = 0; q < c.Q; ++q) {
              const V dy = V::loadu(yb.get() + ((n * c.P + p) * c.Q + q) * Cp + c0);
              const Acc* px = xb.get() + ((n * Hb + p * c.sh) * Wb + q * c.sw) * Cp + c0;
              for (int64_t r = 0; r < c.R; ++r)
                for (int64_t s = 0; s < c.S; ++s) {
                  V& a = acc[r * c.S + s];
                  a = at::vec::fmadd(dy, V::loadu(px + (r * c.dh * Wb + s * c.dw) * Cp), a);
                }
            }
        for (int64_t rs = 0; rs < RS; ++rs) {
          acc[rs].store(lanes);
          for (int64_t l = 0; l < W && c0 + l < c.C; ++l) {
            T* o = dw + (c0 + l) * c.ws[0] + (rs / c.S) * c.ws[2] + (rs % c.S) * c.ws[3];
            *o = from_acc<T>(epi.template activated<A>(epi.add_residual(lanes[l], o)));
          }
        }
      }
    });
  }
}

}  // namespace
}  // namespace cpu
}  // namespace tileops
