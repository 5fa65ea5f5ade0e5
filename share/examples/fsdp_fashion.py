#!/usr/bin/env python3
"""Fashion-MNIST with PyTorch FullyShardedDataParallel (FSDP), using DLH's Python module.

The FSDP counterpart of ddp_fashion.py: the same small CNN, each rank holding a shard of its
parameters, gradients and optimizer state. It takes its batch and learning rate from DLH's
plan (dlh.batch, dlh.lr; its share of a mixed allocation through dlh.ShareSampler), reports
its steps, evaluations, checkpoints and resumes through `dlh`, checkpoints into
DLH_RUN_DIR/checkpoints and resumes from DLH_CHECKPOINT, and stops every rank at the same
step on SIGUSR1/SIGTERM (dlh.should_stop(agree=True)). Outside DLH the dlh functions do
nothing, so it runs unchanged under plain torchrun:

    srun --mpi=pmix dlh-launch run -- python3 fsdp_fashion.py --epochs 1
    torchrun --nproc_per_node 2 fsdp_fashion.py --epochs 1

Needs a PyTorch whose FSDP runs on this device. PyTorch 1.13 (Debian's python3-torch) cannot
run FSDP on the CPU: its FSDP puts the compute on torch.cuda.current_device() whatever
device_id says (FullyShardedDataParallel._get_compute_device), and under Python 3.11 it cannot
even be imported (torch/distributed/_shard/sharded_tensor/metadata.py: a dataclass field
with a mutable default, which Python 3.11 refuses). It then exits 2 saying which. With CUDA
it uses NCCL; with a PyTorch whose FSDP runs on the CPU (2.x), gloo.

The data: the gzipped IDX files of Fashion-MNIST in --data-dir (Debian's
dataset-fashion-mnist), as ddp_fashion.py reads them.
"""

import os
import sys

sys.path.insert(1, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import dlh  # noqa: E402  (share/python, on PYTHONPATH after `module load dlh`)

dlh.catch_signals()  # first: SIGUSR1 may come while torch is being imported

import argparse  # noqa: E402
import gzip  # noqa: E402
import struct  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

MEAN, STD = 0.2860, 0.3530


def read_idx(path, count):
    with gzip.open(path, "rb") as f:
        magic, n = struct.unpack(">II", f.read(8))
        more = (magic & 0xFF) - 1
        dims = [n] + list(struct.unpack(f">{more}I", f.read(4 * more)))
        dims[0] = min(n, count) if count else n
        data = f.read(int(np.prod(dims)))
    return torch.from_numpy(np.frombuffer(data, dtype=np.uint8).reshape(dims).copy())


def load(data_dir, split, count):
    x = read_idx(os.path.join(data_dir, f"{split}-images-idx3-ubyte.gz"), count)
    y = read_idx(os.path.join(data_dir, f"{split}-labels-idx1-ubyte.gz"), count)
    return x, y.long()


def as_input(images):
    return images.float().div_(255).sub_(MEAN).div_(STD).unsqueeze(1)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc1 = nn.Linear(32 * 7 * 7, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(torch.flatten(x, 1))))


def give_up(text):
    """This PyTorch cannot run FSDP here: say why, exit 2."""
    print(f"fsdp_fashion: {text}", file=sys.stderr, flush=True)
    sys.exit(2)


def import_fsdp():
    """FSDP and its state-dict helpers, or exit 2 saying why this PyTorch has none."""
    try:
        from torch.distributed.fsdp import (FullyShardedDataParallel, FullStateDictConfig,
                                            StateDictType)
    except (ImportError, ValueError) as e:
        give_up(f"torch {torch.__version__} under Python "
                 f"{sys.version.split()[0]} cannot import FSDP: {e}")
    return FullyShardedDataParallel, FullStateDictConfig, StateDictType


def main():
    p = argparse.ArgumentParser(description="Train a small CNN on Fashion-MNIST with FSDP.")
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch", type=int, default=32, help="per-rank batch outside a plan")
    p.add_argument("--lr", type=float, default=0.05, help="learning rate outside a plan")
    p.add_argument("--max-samples", type=int, default=0)
    p.add_argument("--max-test-samples", type=int, default=0)
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()

    # Alone (plain python): a process group of one.
    for name, value in (("RANK", "0"), ("WORLD_SIZE", "1"), ("MASTER_ADDR", "127.0.0.1"),
                        ("MASTER_PORT", "29500")):
        os.environ.setdefault(name, value)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    FSDP, FullStateDictConfig, StateDictType = import_fsdp()
    use_cuda = torch.cuda.is_available()
    if use_cuda:
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    dist.init_process_group("nccl" if use_cuda else "gloo", init_method="env://",
                            rank=rank, world_size=world)

    def log(text):
        if rank == 0:
            print(f"fsdp_fashion: {text}", flush=True)

    train_x, train_y = load(a.data_dir, "train", a.max_samples)
    test_x, test_y = load(a.data_dir, "t10k", a.max_test_samples)
    batch = dlh.batch(default=a.batch)
    lr = dlh.lr(default=a.lr)
    sampler = dlh.ShareSampler(len(train_x), batch_size=batch, seed=a.seed)
    log(f"{world} rank(s), batch {batch} on rank 0, global batch {sampler.global_batch}, "
        f"lr {lr}, {len(train_x)} samples, {sampler.steps} steps an epoch, {device}")

    torch.manual_seed(a.seed)
    net = Net()
    step, first_epoch = 0, 1
    resume = dlh.checkpoint_path()
    if resume:  # the full model, loaded before sharding (same on every rank)
        state = torch.load(resume, map_location="cpu")
        net.load_state_dict(state["model"])
        step, first_epoch = state["step"], state["epoch"]
        dlh.resumed(step, resume)
        log(f"resumed from {resume} at step {step}")
    dlh.describe_model(net)
    dlh.describe(samples=len(train_x), epochs=a.epochs, global_batch=sampler.global_batch,
                 lr=lr, device=(f"{device} ({torch.cuda.get_device_name(device)})"
                                if device.type == "cuda" else "cpu"))
    try:
        model = FSDP(net.to(device), device_id=device if use_cuda else None)
    except (AssertionError, RuntimeError) as e:
        give_up(f"torch {torch.__version__}'s FSDP cannot run on {device}: {e}")
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)  # no state: the model is all

    def save(epoch):
        cfg = FullStateDictConfig(offload_to_cpu=True, rank0_only=True)
        with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT, cfg):
            full = model.state_dict()  # collective: every rank
        if rank == 0:
            path = dlh.save_checkpoint({"model": full, "step": step, "epoch": epoch}, step)
            log(f"checkpoint {path}")
        dist.barrier()

    loss_weight = batch * world / sampler.global_batch
    skip = step - (first_epoch - 1) * sampler.steps  # steps of a resumed epoch already done
    model.train()
    for epoch in range(first_epoch, a.epochs + 1):
        sampler.set_epoch(epoch)
        for k, indices in enumerate(sampler.batches()):
            if k < skip:
                continue
            x, y = as_input(train_x[indices]).to(device), train_y[indices].to(device)
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad()
            (loss * loss_weight).backward()
            optimizer.step()
            step += 1
            dlh.step(len(indices), loss=loss.item(), epoch=epoch, lr=lr)
            if step % a.log_every == 0:
                log(f"epoch {epoch} step {step} loss {loss.item():.4f}")
            if dlh.should_stop(agree=True):
                log(f"{dlh.stop_signal()}: stopping at step {step}")
                save(epoch if k + 1 < sampler.steps else epoch + 1)
                dist.destroy_process_group()
                return dlh.exit_code()
        skip = 0
        # Test accuracy, the test set shared by the ranks (FSDP's forward on every rank).
        model.eval()
        with torch.no_grad():
            mine = torch.arange(rank, len(test_x), world)
            # Every rank runs the same number of forwards (each one gathers the shards).
            chunks = -(-len(test_x) // (256 * world))
            correct = torch.zeros(2, dtype=torch.float64, device=device)
            for part in range(chunks):
                idx = mine[part * 256:(part + 1) * 256]
                out = model(as_input(test_x[idx]).to(device))
                correct[0] += (out.argmax(1).cpu() == test_y[idx]).sum().item()
                correct[1] += len(idx)
            dist.all_reduce(correct)
        model.train()
        accuracy = (correct[0] / correct[1]).item()
        dlh.evaluation(epoch=epoch, step=step, test_accuracy=accuracy)
        log(f"epoch {epoch} done: step {step}, test accuracy {accuracy:.4f}")
        save(epoch + 1)
    log(f"done: step {step}")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
