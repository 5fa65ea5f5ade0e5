#!/usr/bin/env python3
"""A torchrun-style DistributedDataParallel program that knows nothing of DLH.

It reads only what torchrun (and `dlh-launch run`) sets: RANK, WORLD_SIZE, MASTER_ADDR and
MASTER_PORT, joins a gloo process group, trains a tiny linear model on random data for a
few steps and exits 0. No progress reports, no checkpoints: DLH must run it as it is
(tests/slurm/run_torch_test.sh runs it under `sbatch --dlh-auto=...`).

    torchrun --nproc_per_node 2 plain_torchrun.py --steps 20
    srun dlh-launch run -- python3 plain_torchrun.py --steps 20
"""

import argparse
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def main():
    p = argparse.ArgumentParser(description="A tiny DDP loop on random data.")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--sleep-per-step", type=float, default=0.0)
    a = p.parse_args()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    print(f"plain_torchrun: rank {rank}/{world}, master "
          f"{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}", flush=True)
    dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(16, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(rank + 1)
    target = torch.randn(16, 4, generator=g)
    for step in range(1, a.steps + 1):
        x = torch.randn(a.batch, 16, generator=g)
        loss = torch.nn.functional.mse_loss(model(x), x @ target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if a.sleep_per_step:
            time.sleep(a.sleep_per_step)
    t = loss.detach().clone()
    dist.all_reduce(t)
    if rank == 0:
        print(f"plain_torchrun: done: {a.steps} steps, mean loss {t.item() / world:.4f}",
              flush=True)
    dist.barrier()
    del model
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
