"""What tiled_map's cache saves: the host time of one cuTensorMapEncodeTiled (the driver's, through
ctypes, on a 3-D bf16 map shaped as tileops' operand maps, beside a trivial driver call through
ctypes, whose cost is ctypes' own), and the host time per
call of small bf16 matmuls (the GPU kept busy by a sleep, so the loop measures the host).

    python probe_encode.py OUT.json
"""
import ctypes
import json
import sys
import time

import torch

import tileops


def encode_us(reps=20000):
    cuda = ctypes.CDLL("libcuda.so.1")
    torch.cuda.init()
    buf = torch.empty(1 << 20, device="cuda", dtype=torch.bfloat16)
    m = (ctypes.c_uint8 * 128)()
    dims = (ctypes.c_uint64 * 3)(1024, 1024, 1)
    strides = (ctypes.c_uint64 * 2)(2048, 2048 * 1024)
    box = (ctypes.c_uint32 * 3)(64, 128, 1)
    es = (ctypes.c_uint32 * 3)(1, 1, 1)
    f = cuda.cuTensorMapEncodeTiled
    args = (m, 9, 3, ctypes.c_void_p(buf.data_ptr()), dims, strides, box, es, 0, 3, 2, 0)  # bf16, 128B swizzle, L2 256B
    assert f(*args) == 0
    t0 = time.perf_counter()
    for _ in range(reps):
        f(*args)
    t = (time.perf_counter() - t0) / reps * 1e6
    # a ctypes call's own cost, to subtract: a driver call that does next to nothing, as many arguments
    v = ctypes.c_int()
    g = cuda.cuDriverGetVersion
    t0 = time.perf_counter()
    for _ in range(reps):
        g(ctypes.byref(v))
    return t, (time.perf_counter() - t0) / reps * 1e6


def host_us(fn, calls=400):
    fn()
    torch.cuda.synchronize()
    torch.cuda._sleep(int(2e9))  # ~1 s of GPU work queued ahead
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t = (time.perf_counter() - t0) / calls * 1e6
    torch.cuda.synchronize()
    return t


def main():
    enc, base = encode_us()
    rows = {"encode_us_ctypes": enc, "trivial_driver_call_us_ctypes": base}
    for n in (256, 512, 1024):
        a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        rows["matmul_%d_host_us" % n] = min(host_us(lambda a=a, b=b: tileops.matmul(a, b)) for _ in range(5))
        rows["torch_%d_host_us" % n] = min(host_us(lambda a=a, b=b: a @ b) for _ in range(5))
    print(rows)
    json.dump(rows, open(sys.argv[1], "w"), indent=1)


if __name__ == "__main__":
    main()
