"""Timing and reporting shared by the benchmarks: CUDA events, warm-up, median; JSON records."""
import datetime
import json
import os
import platform
import statistics
import sys
import time

import torch


def time_ms(fn, warmup=5, reps=30, device="cuda", lead_us=0.0):
    """Median milliseconds of fn() over `reps` timed calls after `warmup` calls.

    Each call sits between two CUDA events. With lead_us = 0 the GPU is idle when a call starts,
    so the time includes the host's cost up to the call's first launch (what one call costs when
    nothing else is queued). lead_us > 0 first queues a GPU sleep of that length, during which the
    host queues the whole call: the time is then the GPU's alone, gaps between the call's own
    launches included only where the host is slower than the GPU (as in a model whose queue
    runs ahead). lead_us should exceed the host's time per call."""
    for _ in range(warmup):
        fn()
    if device != "cuda":
        ts = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            ts.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(ts)
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    cycles = int(lead_us * cycles_per_us())
    for s, e in zip(starts, ends):
        if cycles:
            torch.cuda._sleep(cycles)
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))


SLOW_S = 0.5  # a call slower than this is timed 3 times, without more warm-up
LEAD_MAX_S = 0.002  # calls up to this long are also timed with the queue running ahead (GPU ms)


def timed(fn, device="cuda", budget_s=1.0, reps=None):
    """(GPU ms, call ms, reps) of fn, medians. reps: as given, else about budget_s of timed calls,
    between 3 and 30 of them. The first two (untimed) calls take autotuning (cuDNN's, tileops') and
    first-launch set-up; fast calls get 3 more warm-ups. Call ms: each call starts on an idle GPU,
    so host cost up to its first launch counts. GPU ms: the queue runs ahead of the GPU (time_ms's
    lead), so only the GPU's time counts. Calls over LEAD_MAX_S are timed only per call, which
    serves as both: the host's share is small there."""
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    fn()
    sync()
    t0 = time.perf_counter()
    fn()
    sync()
    one = time.perf_counter() - t0
    if one > SLOW_S:
        t = time_ms(fn, warmup=0, reps=3, device=device)
        return t, t, 3
    reps = reps or int(max(3, min(30, budget_s / max(one, 1e-6))))
    call = time_ms(fn, warmup=3 if one < 0.02 else 0, reps=reps, device=device)
    if device != "cuda" or one > LEAD_MAX_S:
        return call, call, reps
    return time_ms(fn, warmup=0, reps=reps, device=device, lead_us=1.5 * one * 1e6 + 20), call, reps


def cycles_per_us():
    """The GPU clock in cycles per microsecond (for torch.cuda._sleep), 2000 where torch does not say."""
    rate = getattr(torch.cuda.get_device_properties(0), "clock_rate", 0)  # kHz
    return rate / 1e3 if rate else 2000.0


def profiled(fn, reps=5, warmup=1):
    """torch.profiler over `reps` calls of fn (CUDA activity) after `warmup` calls: the profile."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    return prof


def kernel_table(fn, calls=5, warmup=1):
    """[(kernel name, launches per call, mean us per launch)] of `calls` calls of fn under
    torch.profiler, by total time: which kernels a call runs and where its GPU time goes."""
    prof = profiled(fn, reps=calls, warmup=warmup)
    rows = [(e.key, e.count / calls, e.device_time_total / max(e.count, 1)) for e in prof.key_averages()
            if e.device_type == torch.autograd.DeviceType.CUDA and e.count > 0]
    return sorted(rows, key=lambda r: -r[1] * r[2])


def torch_act(name):
    """The torch function of a tileops activation name (tileops.ACTIVATIONS): what the stock side
    of a fused row applies after its linear or conv."""
    return (lambda y: y) if name == "none" else getattr(torch.nn.functional, name)


def set_precision(kind):
    """TF32 flags set explicitly for every row: 'tf32' on, everything else off."""
    on = kind == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on


def gpu_name():
    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else platform.processor() or "cpu"


def gpu_dir_name():
    name = gpu_name().lower().replace("nvidia ", "")
    return "".join(c if c.isalnum() else "-" for c in name).strip("-")


def meta():
    import tileops

    return {
        "gpu": gpu_name(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "tileops": tileops.build_info(),
        "portable": tileops.routing.portable(),  # TILEOPS_PORTABLE=1: routed as before Hopper
        "python": sys.version.split()[0],
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def add_row_bench_args(ap):
    """The arguments of the row benchmarks (run_rows): --device (cpu: a dry run on tiny sizes), --budget."""
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="cpu: dry run on tiny sizes")
    ap.add_argument("--budget", type=float, default=120.0, help="seconds of timed calls to aim for in all")


def add_portable_arg(ap):
    ap.add_argument("--portable", action="store_true", help="TILEOPS_PORTABLE=1: tileops routed as on a GPU "
                    "before Hopper (no TMA, wgmma, clusters); the default output is <name>_portable.json")


def apply_portable(args, out, default_out):
    """--portable: TILEOPS_PORTABLE=1 set before tileops routes anything (it reads the switch once), and
    the default output renamed <name>_portable.json. Returns the output path."""
    if not args.portable:
        return out
    import tileops

    os.environ["TILEOPS_PORTABLE"] = "1"
    if not tileops.routing.portable():
        raise SystemExit("--portable: tileops had read TILEOPS_PORTABLE before it was set; set it in the environment")
    return os.path.splitext(out)[0] + "_portable.json" if default_out else out


def write_json(path, records, **extra):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(dict(meta(), **extra, records=records), f, indent=1)


def progress(i, n, label):
    sys.stderr.write("\r[%3d/%3d] %-60s" % (i, n, label[:60]))
    sys.stderr.flush()
    if i == n:
        sys.stderr.write("\n")


def print_table(records, cols):
    print("  ".join("%-12s" % c for c in cols))
    for r in records:
        print("  ".join(("%-12.4g" % r[c]) if isinstance(r[c], float) else "%-12s" % (r[c],) for c in cols))


def rel_err(mine, theirs):
    """||tileops - torch|| / ||torch|| of the outputs (a wrong fast kernel shows here first)."""
    a, b = mine().float(), theirs().float()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def time_row(rec, kind, build, check, device, budget_s):
    """Fills rec (a benchmark row) with both sides' times: build() -> (tileops fn, torch fn, flops);
    check: also the outputs' relative difference (rel_err). Precision flags set for `kind` first
    (fp32 rows: TF32 off for both; tf32 rows: on for both). An error is recorded, not raised: one bad
    row must not lose the others. Returns rec."""
    rec.update(tileops_ms=None, torch_ms=None, ratio=None, tileops_tflops=None, torch_tflops=None, error=None)
    try:
        set_precision(kind)
        mine, theirs, flops = build()
        if check:
            rec["rel_err"] = rel_err(mine, theirs)
        t_mine, call_mine, reps_mine = timed(mine, device, budget_s)
        t_torch, call_torch, reps_torch = timed(theirs, device, budget_s)
        rec.update(tileops_ms=t_mine, torch_ms=t_torch, ratio=t_torch / t_mine, tileops_tflops=flops / t_mine / 1e9,
                   torch_tflops=flops / t_torch / 1e9, reps=[reps_mine, reps_torch], tileops_call_ms=call_mine,
                   torch_call_ms=call_torch, call_ratio=call_torch / call_mine)
    except Exception as e:
        rec["error"] = ("%s: %s" % (type(e).__name__, e))[:500]
    return rec


def run_rows(todo, label, run_row, device, budget_s, out, print_summary):
    """Each row of `todo` through run_row(*row, device, seconds), the timing budget spread over the rows
    left (a CPU dry run: a token budget), then the JSON, the summary and a PNG beside the JSON."""
    dry = device != "cuda"
    records, t_start = [], time.perf_counter()
    for i, row in enumerate(todo):
        progress(i, len(todo), label(*row))
        left = budget_s - (time.perf_counter() - t_start)  # spread what is left over the rows left
        records.append(run_row(*row, device, 0.01 if dry else max(0.05, min(0.2, 0.5 * left / (len(todo) - i)))))
        if not dry:
            torch.cuda.empty_cache()
    progress(len(todo), len(todo), "done in %.0f s" % (time.perf_counter() - t_start))
    write_json(out, records)
    print_summary(records)
    errors = [r for r in records if r["error"]]
    if errors:
        print("\n%d rows failed (see 'error' in the JSON)" % len(errors))
    print("wrote", out)
    try:
        from plot import main as plot

        plot(out)
    except Exception as e:  # the JSON is the result; a missing matplotlib must not lose it
        print("no plot: %s: %s" % (type(e).__name__, e), file=sys.stderr)
    return records
