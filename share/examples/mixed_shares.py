#!/usr/bin/env python3
"""A PyTorch DDP program that uses the dlh module's shares on a mixed allocation (issue 44).

On a plan that mixes GPU types (`sbatch --dlh-auto=...,profile=SET,mixed -N 2`), each rank
trains on its own share of the global batch (DLH_RANK_BATCHES through dlh.ShareSampler),
optionally rebalanced while it runs (dlh.Balancer, --balance-every K), and the allreduce of
each step is timed (dlh.AllreduceTimer). SIGUSR1/SIGTERM: every rank stops at the same step,
rank 0 checkpoints with the sampler's split, and the requeued job resumes from that step.
Outside DLH it runs as a plain torchrun program with an even split.

    srun dlh-launch run -- python3 mixed_shares.py --balance-every 10
    torchrun --nproc_per_node 2 mixed_shares.py

The data set is synthetic (images of 1x28x28, 10 classes from a fixed random teacher), so
the program needs nothing but torch. --result FILE: each rank writes FILE.rankR.json (its
batch at every step, the balancer's history, and rank 0's samples/s after --warm-steps),
what tests/slurm/mixed_shares_test.sh and share/bench/mixed_shares.sh read.
"""

import dlh

dlh.catch_signals()  # first: SIGUSR1/SIGTERM only set a flag from here on

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402


class Net(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.c1 = torch.nn.Conv2d(1, width, 3, padding=1)
        self.c2 = torch.nn.Conv2d(width, 2 * width, 3, padding=1)
        self.fc = torch.nn.Linear(2 * width * 7 * 7, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.c1(x)), 2)
        x = F.max_pool2d(F.relu(self.c2(x)), 2)
        return self.fc(x.flatten(1))


def main():
    p = argparse.ArgumentParser(description="DDP with the dlh module's shares and balancing.")
    p.add_argument("--samples", type=int, default=6144, help="synthetic training samples")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch", type=int, default=64, help="per rank outside a plan")
    p.add_argument("--lr", type=float, default=0.05, help="outside a plan")
    p.add_argument("--width", type=int, default=16, help="filters of the first convolution")
    p.add_argument("--balance-every", type=int, default=0,
                   help="rebalance the split every K steps (>= 3; 0: the plan's split)")
    p.add_argument("--max-steps", type=int, default=0, help="stop after N steps in all")
    p.add_argument("--warm-steps", type=int, default=0, help="steps not timed in --result")
    p.add_argument("--log-every", type=int, default=20)
    p.add_argument("--sleep-per-step", type=float, default=0.0,
                   help="sleep S seconds after every step (a test hook: a longer run)")
    p.add_argument("--sleep-per-sample", type=float, default=0.0,
                   help="sleep S seconds per sample of the rank's batch (a slower device)")
    p.add_argument("--result", default="", help="each rank writes FILE.rankR.json")
    a = p.parse_args()
    if a.balance_every and a.balance_every < 3:
        p.error("--balance-every must be 0 or at least 3")

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1") or 1))
    distributed = "RANK" in os.environ and int(os.environ.get("WORLD_SIZE", "1")) > 1
    if distributed:
        dist.init_process_group("gloo", init_method="env://")
    rank, world = dlh.rank(), dlh.world_size()
    log = (lambda *x, **k: print(*x, **k, flush=True)) if rank == 0 else (lambda *x, **k: None)

    g = torch.Generator().manual_seed(7)
    x_all = torch.randn(a.samples, 1, 28, 28, generator=g)
    teacher = torch.randn(7 * 7, 10, generator=g)  # the class: a linear map of 4x4 means
    y_all = (F.avg_pool2d(x_all, 4).flatten(1) @ teacher).argmax(1)

    sampler = dlh.ShareSampler(a.samples, batch_size=dlh.batch(default=a.batch), seed=1)
    batches = sampler.rank_batches
    global_batch = sum(batches)
    lr = dlh.lr(default=a.lr)
    where = os.environ.get("SLURMD_NODENAME") or os.uname().nodename
    print(f"mixed_shares: rank {rank}/{world} on {where}: "
          f"batch {sampler.batch_size} of global {global_batch} (rank batches {batches}, "
          f"share {dlh.share():.4f}), lr {lr:g}", flush=True)

    torch.manual_seed(1)
    net = Net(a.width)
    model = DistributedDataParallel(net) if distributed else net
    timer = dlh.AllreduceTimer()
    if distributed:
        model.register_comm_hook(timer, dlh.timed_allreduce_hook)
    opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9)
    dlh.describe_model(net)
    dlh.describe(samples=a.samples, epochs=a.epochs, global_batch=global_batch, lr=lr,
                 device="cpu", threads=torch.get_num_threads())

    step, epoch0, skip, state = 0, 0, 0, None
    if dlh.checkpoint_path():
        state = torch.load(dlh.checkpoint_path(), map_location="cpu")
        net.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        step, epoch0, skip = state["step"], state["epoch"], state["step_in_epoch"]
        dlh.resumed(step, dlh.checkpoint_path())
        log(f"mixed_shares: resumed from {dlh.checkpoint_path()} at step {step} "
            f"(epoch {epoch0 + 1}, step {skip} of it, split {state['balance']['rank_batches']})")

    balancer, record, ends, t_warm = None, [], [], None
    steps_per_epoch = sampler.steps
    stopped = False
    for epoch in range(epoch0, a.epochs):
        sampler.set_epoch(epoch)
        it = iter(sampler.batches())
        for _ in range(skip if epoch == epoch0 else 0):  # the steps the checkpoint has
            next(it)
        if balancer is None and a.balance_every:
            balancer = dlh.Balancer(sampler, every=a.balance_every)
            if state is not None:
                balancer.load_state_dict(state["balance"])
        for k, idx in enumerate(it, start=skip if epoch == epoch0 else 0):
            t0 = time.perf_counter()
            xb, yb = x_all[idx], y_all[idx]
            if a.sleep_per_sample:
                time.sleep(a.sleep_per_sample * len(idx))
            # DDP averages the ranks' gradients: weighting each rank's mean loss by its share
            # makes that the gradient of the global batch's mean, also with unequal batches.
            loss = F.cross_entropy(model(xb), yb)
            opt.zero_grad(set_to_none=True)
            (loss * (len(idx) * world / global_batch)).backward()
            opt.step()
            step += 1
            dlh.step(len(idx), loss=loss.item(), epoch=epoch + 1,
                     compute=time.perf_counter() - t0)
            record.append(len(idx))
            ends.append(time.perf_counter())
            if step == a.warm_steps:
                t_warm = time.perf_counter()
            if step % a.log_every == 0:
                log(f"mixed_shares: epoch {epoch + 1} step {step} loss {loss.item():.4f} "
                    f"rank batches {sampler.rank_batches}")
            if a.sleep_per_step:
                time.sleep(a.sleep_per_step)
            if balancer is not None:
                balancer.step()
            last = a.max_steps and step >= a.max_steps
            if dlh.should_stop(agree=distributed):
                log(f"mixed_shares: {dlh.stop_signal()}: stopping at step {step}")
                if rank == 0:
                    dlh.save_checkpoint({
                        "model": net.state_dict(), "optimizer": opt.state_dict(),
                        "step": step, "epoch": epoch + (k + 1) // steps_per_epoch,
                        "step_in_epoch": (k + 1) % steps_per_epoch,
                        "balance": balancer.state_dict() if balancer else
                        {"rank_batches": sampler.rank_batches, "history": []}}, step)
                stopped = True
            if stopped or last:
                break
        if stopped or (a.max_steps and step >= a.max_steps):
            break
    t_end = time.perf_counter()
    if a.result:
        timed = step - a.warm_steps
        with open(f"{a.result}.rank{rank}.json", "w") as f:
            json.dump({"rank": rank, "batches": record, "step": step, "stopped": stopped,
                       "global_batch": global_batch, "planned": batches,
                       "history": balancer.history if balancer else [(0, batches)],
                       "step_ends": ends,
                       "rate": global_batch * timed / (t_end - t_warm)
                       if t_warm and timed > 0 else None}, f)
    # What the Balancer weighed, so a split that never moved says whether the ranks were even
    # or the window's noise hid the difference.
    weighed = ""
    if balancer is not None and balancer.decisions:
        at, d = balancer.decisions[-1]
        weighed = (f"; {len(balancer.decisions)} balance decisions, the last at step {at}: "
                   f"slowest rank {100 * d.imbalance:.0f}% behind the ideal step, dead band "
                   f"{100 * (balancer.dead_band + d.noise):.0f}% ({100 * d.noise:.0f}% of it "
                   "the window's noise)")
    log(f"mixed_shares: {'stopped' if stopped else 'done'}: step {step}, split "
        f"{sampler.rank_batches}{weighed}")
    if distributed:
        dist.barrier()
        del model
        dist.destroy_process_group()
    return dlh.exit_code() if stopped else 0


if __name__ == "__main__":
    sys.exit(main())
