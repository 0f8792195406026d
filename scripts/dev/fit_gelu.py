"""The fast GELU's polynomial (csrc/common/epilogue.h, gelu_fast): a degree-7 fit of log2 Phi(-t) on
[0, 6] (Phi the standard normal CDF), near-minimax by iteratively reweighted least squares, then
the whole form evaluated in float32 against float64 GELU over [-12, 12]. CPU only (numpy).

    python scripts/dev/fit_gelu.py        # prints the coefficients (c0 first) and the errors
"""
import math

import numpy as np

T, DEG = 6.0, 7


def log2_phi_neg(t):
    return np.array([math.log2(0.5 * math.erfc(v / math.sqrt(2.0))) for v in np.atleast_1d(t)])


def fit():
    t = np.cos(np.linspace(0, np.pi, 8000)) * T / 2 + T / 2  # Chebyshev-like nodes
    f = log2_phi_neg(t)
    w = np.ones_like(t)
    for _ in range(200):  # reweight toward the largest errors: approaches the minimax fit
        c = np.polynomial.polynomial.polyfit(t, f, DEG, w=w)
        e = np.polynomial.polynomial.polyval(t, c) - f
        w = w * np.abs(e) ** 0.2 + 1e-30
        w /= w.max()
    return [np.float32(v) for v in c]


def gelu_fast(x, c):
    """The kernel's arithmetic in float32 (exp2 exact: MUFU.EX2's error is ~2^-22)."""
    t = np.minimum(np.abs(x), np.float32(T))
    p = np.full_like(t, c[-1])
    for k in range(DEG - 1, -1, -1):
        p = (p * t + c[k]).astype(np.float32)
    h = np.exp2(p.astype(np.float64)).astype(np.float32)
    # x Phi(x) = max(x, 0) - |x| Phi(-|x|), with t for |x| (past 6 the term is below 1e-9 |x|): one
    # FFMA, rounded once
    return (np.maximum(x, 0).astype(np.float64) - t.astype(np.float64) * h.astype(np.float64)).astype(np.float32)


def main():
    c = fit()
    print("coefficients c0..c7:", ", ".join("%.9ef" % v for v in c))
    x = np.concatenate([np.linspace(-12, 12, 400001), -np.logspace(-8, 1, 4000), np.logspace(-8, 1, 4000)])
    x = x.astype(np.float32)
    xd = x.astype(np.float64)
    ref = xd * np.array([0.5 * math.erfc(-v / math.sqrt(2.0)) for v in xd])
    got = gelu_fast(x, c).astype(np.float64)
    inner = (np.abs(xd) <= 6) & (ref != 0)
    print("max relative error, |x| <= 6: %.2e" % np.max(np.abs(got - ref)[inner] / np.abs(ref)[inner]))
    print("max absolute error, |x| <= 12: %.2e" % np.max(np.abs(got - ref)))


if __name__ == "__main__":
    main()
