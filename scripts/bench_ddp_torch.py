#!/usr/bin/python3
"""The libtorch reference of scripts/bench.sh --data-parallel: the same MLP training step
(784-256-256-10, LayerNorm or SyncBatchNorm, GELU, Adam; global batch 64 split between the ranks)
under torch.nn.parallel.DistributedDataParallel over gloo on CPU, and gloo's all_reduce bandwidth.
Run with /usr/bin/python3 (Debian's python3-torch). Usage: bench_ddp_torch.py RANKS [REPS]"""
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F


def median(v):
    v = sorted(v)
    return v[len(v) // 2]


def timed(fn, reps, warmup):
    times = []
    for r in range(-warmup, reps):
        dist.barrier()
        start = time.perf_counter()
        fn()
        t = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        if r >= 0:
            times.append(t.item() * 1e3)
    return median(times)


def worker(rank, world, reps):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = "29531"
    torch.set_num_threads(1)
    torch.set_default_dtype(torch.float64)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    batch = 64 // world
    for sync_bn in (False, True):
        if sync_bn and world > 1:
            if rank == 0:
                print("torch  %d ranks  SyncBatchNorm: not on CPU in torch 1.13 ('SyncBatchNorm layers only work "
                      "with GPU modules')" % world)
            continue
        torch.manual_seed(1)
        norm = (lambda: nn.SyncBatchNorm(256)) if sync_bn else (lambda: nn.LayerNorm(256))
        model = nn.Sequential(nn.Linear(784, 256), norm(), nn.GELU(), nn.Linear(256, 256), norm(), nn.GELU(),
                              nn.Linear(256, 10))
        if sync_bn and world == 1:
            model = nn.Sequential(*[nn.BatchNorm1d(256) if isinstance(m, nn.SyncBatchNorm) else m for m in model])
        ddp = nn.parallel.DistributedDataParallel(model)
        adam = torch.optim.Adam(model.parameters(), lr=1e-3)
        g = torch.Generator().manual_seed(11 + rank)
        x = torch.randn(batch, 784, generator=g)
        targets = torch.tensor([(i * 7) % 10 for i in range(batch)])

        def step():
            adam.zero_grad()
            F.cross_entropy(ddp(x), targets).backward()
            adam.step()

        ms = timed(step, reps, 5)
        if rank == 0:
            note = "BN (1 rank)"
            print("torch  %d rank%s  MLP step 784-256-256-10 %s+GELU, global b64 (%d per rank): %.3f ms"
                  % (world, "s" if world > 1 else " ", note if sync_bn else "LN", batch, ms))
    for mb in (1, 16):
        a = torch.ones((mb << 20) // 8, dtype=torch.float64)
        ms = timed(lambda: dist.all_reduce(a), reps // 5 + 5, 3)
        nbytes = mb << 20
        bus = 2.0 * (world - 1) / world * nbytes / (ms * 1e-3) / 1e9 if world > 1 else 0.0
        if rank == 0:
            print("torch  %d rank%s  all_reduce %2d MiB (gloo): %.3f ms, algorithm bandwidth %.2f GB/s, bus %.2f GB/s"
                  % (world, "s" if world > 1 else " ", mb, ms, nbytes / (ms * 1e-3) / 1e9, bus))
    dist.barrier()  # no rank tears gloo down while another still talks to it (a rank was left spinning)
    dist.destroy_process_group()


if __name__ == "__main__":
    world = int(sys.argv[1])
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 50
    mp.spawn(worker, args=(world, reps), nprocs=world)
