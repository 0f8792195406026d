"""DDP check: a training step of a tileops-converted model gives the stock model's gradients.

Run under torchrun (scripts/device/ddp_run.sh does, with NCCL on 2 GPUs):
    torchrun --standalone --nproc_per_node 2 scripts/device/ddp_check.py --out OUTDIR/ddp.json
CPU dry run (gloo):  torchrun --standalone --nproc_per_node 2 scripts/device/ddp_check.py --device cpu

Every rank builds the same small model (a few Conv2d and Linear layers, seeded), a stock copy
and a tileops-converted copy, wraps both in DistributedDataParallel and trains both on the same
per-rank batches. Before each step the tileops model (and a float64 single-process copy fed the
batches of every rank: what DDP's averaged gradient must equal, computed exactly) takes the
stock model's parameters, so all three gradients are taken at the same point; otherwise
bfloat16 rounding differences compound through the optimizer steps and the comparison
measures the drift, not the step. Checked per step and parameter:
- float32 (TF32 off): tileops against stock within 1e-4, and both against float64;
- bfloat16 autocast: each model's error against the float64 gradient; tileops passes if its
  error is at most twice stock's own plus 1e-3 (bf16 has 8 mantissa bits, so stock itself is
  a few % off on small, cancelling sums such as a conv bias gradient).
After each optimizer step the parameters must be identical on every rank. Rank 0 writes the
JSON report; the exit code is 0 only if every check passed on every rank.
"""
import argparse
import copy
import datetime
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import tileops  # noqa: E402


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(16, 32, 3, stride=2, padding=1, groups=2)
        self.conv3 = torch.nn.Conv2d(32, 32, 1)
        self.fc1 = torch.nn.Linear(32 * 8 * 8, 64)
        self.fc2 = torch.nn.Linear(64, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.gelu(self.conv2(x))
        x = F.relu(self.conv3(x))
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def log(rank, msg):
    print("[rank %d %.1fs] %s" % (rank, time.time() - T0, msg), flush=True)


def rel_err(a, b):
    return float((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-30))


def batches(rank, world, step, batch, device):
    """Every rank's batch for this step (seeded), so any rank can rebuild the global batch."""
    xs, ys = [], []
    for r in range(world):
        g = torch.Generator().manual_seed(1000 * step + r)
        xs.append(torch.randn(batch, 3, 16, 16, generator=g))
        ys.append(torch.randint(0, 10, (batch,), generator=g))
    return xs[rank].to(device), ys[rank].to(device), torch.cat(xs).to(device), torch.cat(ys).to(device)


def run_config(name, autocast_dtype, tol, args, rank, world, device):
    torch.manual_seed(0)
    stock = Net().to(device)
    exact = copy.deepcopy(stock).double()           # one process, the global batch, float64
    tile = tileops.convert(copy.deepcopy(stock))
    assert isinstance(tile.conv1, tileops.nn.Conv2d) and isinstance(tile.fc1, tileops.nn.Linear)
    ids = [device.index] if device.type == "cuda" else None
    ddp_stock, ddp_tile = DDP(stock, device_ids=ids), DDP(tile, device_ids=ids)
    models = {"stock": ddp_stock, "tileops": ddp_tile, "exact": exact}
    opts = {k: torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9) for k, m in models.items() if k != "exact"}
    worst = {"tileops_vs_stock": 0.0, "tileops_vs_exact": 0.0, "stock_vs_exact": 0.0}
    worst_param = {}
    in_sync, bound_ok = True, True
    for step in range(args.steps):
        x, y, gx, gy = batches(rank, world, step, args.batch, device)
        with torch.no_grad():  # every model at the stock parameters
            for p_tile, p_exact, p in zip(tile.parameters(), exact.parameters(), stock.parameters()):
                p_tile.copy_(p)
                p_exact.copy_(p)
        for k, m in models.items():
            if k in opts:
                opts[k].zero_grad(set_to_none=True)
            else:
                m.zero_grad(set_to_none=True)
            inp, tgt = (gx.double(), gy) if k == "exact" else (x, y)
            on = autocast_dtype is not None and k != "exact"
            with torch.autocast(device.type, dtype=autocast_dtype or torch.bfloat16, enabled=on):
                loss = F.cross_entropy(m(inp), tgt)
            loss.backward()
        grads = {k: dict((n.replace("module.", ""), p.grad) for n, p in m.named_parameters()) for k, m in models.items()}
        for n in grads["exact"]:
            errs = {}
            for pair in worst:
                a, b = pair.split("_vs_")
                errs[pair] = e = rel_err(grads[a][n], grads[b][n])
                if e > worst[pair]:
                    worst[pair], worst_param[pair] = e, "%s (step %d)" % (n, step)
            if autocast_dtype is None:
                bound_ok &= errs["tileops_vs_stock"] <= tol
            else:
                bound_ok &= errs["tileops_vs_exact"] <= 2 * errs["stock_vs_exact"] + tol
        for o in opts.values():
            o.step()
        # parameters identical on every rank after the step
        for p in list(ddp_tile.parameters()) + list(ddp_stock.parameters()):
            ref = p.detach().clone()
            dist.broadcast(ref, 0)
            in_sync &= bool(torch.equal(ref, p.detach()))
        log(rank, "%s step %d: tileops vs stock %.2e; vs float64: tileops %.2e, stock %.2e" % (
            name, step, worst["tileops_vs_stock"], worst["tileops_vs_exact"], worst["stock_vs_exact"]))
    rule = ("tileops vs stock <= %g per parameter" % tol if autocast_dtype is None else
            "tileops vs float64 <= 2 * (stock vs float64) + %g per parameter" % tol)
    return {"name": name, "autocast": str(autocast_dtype) if autocast_dtype else None, "rule": rule,
            "max_rel_grad_error": worst, "worst_parameter": worst_param, "params_in_sync": in_sync,
            "pass": bound_ok and in_sync}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="ddp.json")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--backend", default=None, help="default: nccl on cuda, gloo on cpu")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--timeout", type=int, default=120, help="seconds for any collective")
    args = ap.parse_args()
    backend = args.backend or ("nccl" if args.device == "cuda" else "gloo")
    rank = int(os.environ.get("RANK", "0"))
    if args.device == "cuda":
        local = int(os.environ.get("LOCAL_RANK", "0"))
        if torch.cuda.device_count() <= local:
            print("rank %d: needs GPU %d, only %d visible" % (rank, local, torch.cuda.device_count()), flush=True)
            return 2
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
    else:
        device = torch.device("cpu")
    log(rank, "init %s on %s (NCCL_NVLS_ENABLE=%s)" % (backend, device, os.environ.get("NCCL_NVLS_ENABLE")))
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=args.timeout))
    world = dist.get_world_size()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    results = [run_config("float32", None, 1e-4, args, rank, world, device),
               run_config("bfloat16-autocast", torch.bfloat16, 1e-3, args, rank, world, device)]
    ok = torch.tensor([int(all(r["pass"] for r in results))], device=device)
    dist.all_reduce(ok, op=dist.ReduceOp.MIN)  # pass only if every rank passed
    passed = bool(ok.item())
    if rank == 0:
        report = {"world_size": world, "backend": backend, "device": device.type, "torch": torch.__version__,
                  "tileops": tileops.build_info().get("git_sha"), "steps": args.steps, "batch_per_rank": args.batch,
                  "max_rel_grad_error": max(max(r["max_rel_grad_error"].values()) for r in results),
                  "configs": results, "pass": passed}
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
        log(rank, "%s: %s" % ("PASS" if passed else "FAIL", json.dumps({r["name"]: r["max_rel_grad_error"] for r in results})))
    dist.barrier()
    dist.destroy_process_group()
    return 0 if passed else 1


T0 = time.time()
if __name__ == "__main__":
    sys.exit(main())
