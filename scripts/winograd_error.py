"""fp32 Winograd F(2x2,3x3) and F(4x4,3x3) against a float64 direct 3x3 conv, on the CPU: each error
measured as the tests measure it (tests/utils.py check: per element against 1e-5 * |x| * |w|, and the
relative norm against 1e-5), to choose a tile size before writing a Winograd kernel (NOTES 47).
Transforms as in Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks" (2015); everything
after the inputs is rounded to fp32 at each stage, sums over channels accumulate in fp32.

    python scripts/winograd_error.py
"""
import numpy as np

# Lavin & Gray's transforms: Y = AT [(G g G^T) * (BT d B)] A for an a x a input tile d, a = m + 2
F23 = dict(
    BT=np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], float),
    G=np.array([[1, 0, 0], [.5, .5, .5], [.5, -.5, .5], [0, 0, 1]], float),
    AT=np.array([[1, 1, 1, 0], [0, 1, -1, -1]], float), m=2)
F43 = dict(
    BT=np.array([[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0], [0, -2, -1, 2, 1, 0],
                 [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]], float),
    G=np.array([[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6], [1 / 24, 1 / 12, 1 / 6],
                [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]], float),
    AT=np.array([[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]], float), m=4)


def direct(x, w):  # x (C, H, W) padded already; w (K, C, 3, 3); valid conv
    C, H, W = x.shape
    K = w.shape[0]
    out = np.zeros((K, H - 2, W - 2), x.dtype)
    for r in range(3):
        for s in range(3):
            out += np.einsum("kc,chw->khw", w[:, :, r, s], x[:, r:r + H - 2, s:s + W - 2])
    return out


def wino(x, w, T, dt):
    BT, G, AT, m = T["BT"].astype(dt), T["G"].astype(dt), T["AT"].astype(dt), T["m"]
    a = m + 2
    C, H, W = x.shape
    K = w.shape[0]
    P, Q = H - 2, W - 2
    U = np.einsum("ij,kcjl,ml->kcim", G, w.astype(dt), G).astype(dt)  # K C a a
    out = np.zeros((K, P, Q), dt)
    for ty in range(0, P, m):
        for tx in range(0, Q, m):
            d = x[:, ty:ty + a, tx:tx + a].astype(dt)
            V = np.einsum("ij,cjl,ml->cim", BT, d, BT).astype(dt)  # C a a
            Mx = np.einsum("kcim,cim->kim", U, V).astype(dt)  # fp32 accumulation over C
            Y = np.einsum("ij,kjl,ml->kim", AT, Mx, AT).astype(dt)
            out[:, ty:ty + m, tx:tx + m] = Y
    return out


def main():
    rng = np.random.default_rng(0)
    for C, K, HW in [(64, 16, 18), (128, 16, 18), (512, 16, 10)]:
        x = rng.standard_normal((C, HW, HW)).astype(np.float32)
        w = (rng.standard_normal((K, C, 3, 3)) / np.sqrt(9 * C)).astype(np.float32)
        ref = direct(x.astype(float), w.astype(float))
        mag = direct(np.abs(x).astype(float), np.abs(w).astype(float))
        d32 = direct(x, w)
        for name, T in [("direct fp32", None), ("F(2x2,3x3)", F23), ("F(4x4,3x3)", F43)]:
            out = d32 if T is None else wino(x, w, T, np.float32)
            err = np.abs(out - ref)
            print("C=%4d %-12s max err/mag %.2e (bound 1e-5)  rel norm %.2e (bound 1e-5)" % (
                C, name, (err / mag).max(), np.linalg.norm(out - ref) / np.linalg.norm(ref)))


if __name__ == "__main__":
    main()
