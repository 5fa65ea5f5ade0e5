#!/usr/bin/python3
"""DLH make bench: the PyTorch DDP side of the data-parallel training comparison.

Launched by torchrun (python3 -m torch.distributed.run --standalone --nproc_per_node N);
every rank trains the model of share/bench/torch_train.py under DistributedDataParallel
(gloo backend: CPU tensors) on its own fixed random batch of --batch samples, SGD lr 0.01.
Rank 0 prints the median global samples/s (ranks x batch / step time) of the timed steps.
Run with OMP_WAIT_POLICY=PASSIVE and OPENBLAS_NUM_THREADS set to --threads (torch.mm uses
OpenBLAS's own thread pool)."""
import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_train import model  # noqa: E402  (the same layers as the single-process side)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--batch", type=int, required=True, help="samples per rank and step")
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    a = p.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)  # DDP also broadcasts rank 0's parameters at construction
    m = DistributedDataParallel(model(a.model))
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(100 + rank)
    x = torch.randn(a.batch, 1, 28, 28, generator=g)
    y = torch.randint(0, 10, (a.batch,), generator=g)
    rates = []
    for step in range(a.warmup + a.steps):
        t = time.perf_counter()
        opt.zero_grad()
        loss_fn(m(x), y).backward()  # DDP's bucketed allreduce overlaps the backward pass
        opt.step()
        if step >= a.warmup:
            rates.append(world * a.batch / (time.perf_counter() - t))
    if rank == 0:
        print(f"{statistics.median(rates):.1f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
