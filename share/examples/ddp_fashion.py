#!/usr/bin/env python3
"""Fashion-MNIST with PyTorch DistributedDataParallel, run by DLH's launcher.

A complete data-parallel training program of the kind `dlh-launch run` starts on every
rank: a small CNN, SGD with momentum, checkpoints it resumes from, a clean stop on Slurm's
signals and progress reports for DLH's stall detection and profiles. Run it under Slurm or
MPI, one rank per GPU (or per CPU socket):

    srun --mpi=pmix dlh-launch run -- python3 ddp_fashion.py --epochs 2
    mpirun -np 2 dlh-launch run -- python3 ddp_fashion.py --epochs 2

or, as any DDP program, with torchrun, or as one plain process:

    python3 ddp_fashion.py --epochs 1 --max-samples 5000

What it takes from the launcher's environment:
  RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT  the process group (init_method env://);
                     without RANK and WORLD_SIZE it trains alone, without a process group
  LOCAL_RANK         the GPU of this rank (when it has CUDA)
  DLH_RUN_DIR        the run folder: checkpoints/ and result.json (else --run-dir)
  DLH_CHECKPOINT     the newest checkpoint to resume from (unset: start afresh)
  DLH_BATCH, DLH_LR  this rank's batch and the learning rate from DLH's plan (else from
                     --batch and --lr); DLH_WARMUP_EPOCHS the plan's learning-rate warmup
  DLH_PROGRESS_FD    where share/python/dlh_progress.py reports steps (see there)
Signals: SIGUSR1 (Slurm's "the time limit is near") makes every rank stop at the same step
after rank 0 wrote a checkpoint, and exit 0, for the job script to requeue the job; SIGTERM
and SIGINT do the same and exit 143 and 130.

The data: the IDX files of Fashion-MNIST (gzipped, as Debian's dataset-fashion-mnist
package and the data set's site have them) in --data-dir.
"""

# The stop signals are caught before anything else: Slurm's SIGUSR1 may come while torch is
# still being imported, and its default action would end the program without a checkpoint.
import signal

# The stop requested so far, by severity (a rank told both SIGUSR1 and SIGTERM stops for
# SIGTERM), and the exit status each gives.
_STOP_NONE, _STOP_USR1, _STOP_INT, _STOP_TERM = 0, 1, 2, 3
_SEVERITY = {signal.SIGUSR1: _STOP_USR1, signal.SIGINT: _STOP_INT, signal.SIGTERM: _STOP_TERM}
_EXIT_STATUS = {_STOP_USR1: 0, _STOP_INT: 128 + signal.SIGINT, _STOP_TERM: 128 + signal.SIGTERM}
_STOP_NAME = {_STOP_USR1: "SIGUSR1", _STOP_INT: "SIGINT", _STOP_TERM: "SIGTERM"}
_stop_requested = _STOP_NONE


def _on_stop_signal(signum, frame):
    """Only note the request: the training loop stops at the next step boundary."""
    global _stop_requested
    _stop_requested = max(_stop_requested, _SEVERITY[signum])


for _signum in _SEVERITY:
    signal.signal(_signum, _on_stop_signal)

import argparse  # noqa: E402  (after the signal handlers, see above)
import gzip  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402
import struct  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402

DEFAULT_DATA_DIR = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.2860, 0.3530  # of Fashion-MNIST's training images, scaled to [0, 1]
MOMENTUM = 0.9


# --- Progress reports --------------------------------------------------------------------

class _NoProgress:
    """Stands in for dlh_progress where it is not installed: the example runs anywhere."""

    @staticmethod
    def step(samples=None, **fields):
        pass

    @staticmethod
    def evaluation(epoch=None, step=None, **metrics):
        pass

    @staticmethod
    def checkpoint(path, step):
        pass

    @staticmethod
    def resumed(step, path=None):
        pass

    @staticmethod
    def describe(**fields):
        pass

    @staticmethod
    def describe_model(model):
        return 0


def import_progress():
    """dlh_progress from DLH_PROGRESS_PY (its folder or the file), else from the Python
    path, else from share/python next to this file's folder; a no-op when none has it."""
    folders = []
    given = os.environ.get("DLH_PROGRESS_PY")
    if given:
        folders.append(given if os.path.isdir(given) else os.path.dirname(given))
    folders.append(None)  # the Python path as it is
    folders.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    for folder in folders:
        if folder is not None:
            sys.path.insert(0, folder)
        try:
            import dlh_progress
            return dlh_progress
        except ImportError:
            if folder is not None:
                sys.path.remove(folder)
    return _NoProgress()


progress = import_progress()


# --- Options and environment -------------------------------------------------------------

def parse_args():
    p = argparse.ArgumentParser(
        description="Train a small CNN on Fashion-MNIST with DistributedDataParallel.")
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR,
                   help="folder of the gzipped IDX files (default %(default)s)")
    p.add_argument("--epochs", type=int, default=2, help="epochs to train (default 2)")
    p.add_argument("--batch", type=int, default=128,
                   help="global batch, shared by the ranks, when DLH_BATCH is unset "
                        "(default 128)")
    p.add_argument("--lr", type=float, default=0.05,
                   help="learning rate at the global batch when DLH_LR is unset "
                        "(default 0.05)")
    p.add_argument("--warmup-epochs", type=float, default=0.0,
                   help="linear learning-rate warmup when DLH_WARMUP_EPOCHS is unset "
                        "(default 0)")
    p.add_argument("--seed", type=int, default=1,
                   help="seed of the initial weights and of the shuffling (default 1)")
    p.add_argument("--max-samples", type=int, default=0,
                   help="train on the first N training samples only (default: all 60000)")
    p.add_argument("--max-test-samples", type=int, default=0,
                   help="evaluate on the first N test samples only (default: all 10000)")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                   help="auto: this rank's GPU when CUDA is available, else the CPU")
    p.add_argument("--threads", type=int, default=0,
                   help="torch threads on the CPU (default: torch's, OMP_NUM_THREADS)")
    p.add_argument("--run-dir", default="runs/ddp_fashion",
                   help="run folder when DLH_RUN_DIR is unset (default %(default)s)")
    p.add_argument("--checkpoint-every", type=int, default=0,
                   help="also checkpoint every N steps (default: at epoch ends only)")
    p.add_argument("--keep-checkpoints", type=int, default=3,
                   help="checkpoints kept, the newest (default 3)")
    p.add_argument("--log-every", type=int, default=50,
                   help="log the training loss every N steps (default 50)")
    tests = p.add_argument_group("test hooks (DLH's own tests)")
    tests.add_argument("--crash-at-step", type=int, default=0,
                       help="rank --crash-rank exits at once with status 3 when it ends "
                            "global step N (not in a run resumed past N)")
    tests.add_argument("--stall-at-step", type=int, default=0,
                       help="rank --crash-rank stops at global step N and sleeps forever, "
                            "deaf to the stop signals like a rank stuck in a collective")
    tests.add_argument("--crash-rank", type=int, default=0,
                       help="the rank of --crash-at-step and --stall-at-step (default 0)")
    tests.add_argument("--sleep-per-step", type=float, default=0.0,
                       help="sleep S seconds after every step")
    a = p.parse_args()
    for name in ("epochs", "batch", "log_every", "keep_checkpoints"):
        if getattr(a, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    if a.lr <= 0 or a.warmup_epochs < 0 or a.sleep_per_step < 0:
        p.error("--lr must be positive, --warmup-epochs and --sleep-per-step not negative")
    return a


def from_env(name, kind, fallback, option):
    """(value, where it came from): the environment variable `name` if set, else the
    option's value."""
    text = os.environ.get(name, "").strip()
    if not text:
        return fallback, option
    try:
        value = kind(text)
    except ValueError:
        value = None
    if value is None or not (value > 0 or (name == "DLH_WARMUP_EPOCHS" and value == 0)):
        sys.exit(f"ddp_fashion: {name}={text!r} is not a valid value")
    return value, name


# --- Data --------------------------------------------------------------------------------

def read_idx(path, count):
    """The first `count` items (0: all) of a gzipped IDX file as a uint8 tensor
    (images: N x 28 x 28; labels: N). Only the bytes needed are decompressed."""
    with gzip.open(path, "rb") as f:
        magic, n = struct.unpack(">II", f.read(8))
        if magic >> 8 != 0x08:  # 0x00 0x00 0x08 (unsigned bytes) then the number of dims
            raise ValueError(f"{path}: not an IDX file of unsigned bytes")
        more = (magic & 0xFF) - 1  # the dimensions after the first
        dims = [n] + list(struct.unpack(f">{more}I", f.read(4 * more)))
        dims[0] = min(n, count) if count else n
        size = math.prod(dims)
        data = f.read(size)
    if len(data) != size:
        raise ValueError(f"{path}: truncated")
    return torch.from_numpy(np.frombuffer(data, dtype=np.uint8).reshape(dims).copy())


def load_split(data_dir, split, count, device):
    """(images, labels) of "train" or "t10k" on `device`; images stay uint8 until a batch
    is made of them (a quarter of the memory of floats)."""
    images = read_idx(os.path.join(data_dir, f"{split}-images-idx3-ubyte.gz"), count)
    labels = read_idx(os.path.join(data_dir, f"{split}-labels-idx1-ubyte.gz"), count)
    if len(images) != len(labels):
        raise ValueError(f"{data_dir}: {split}: {len(images)} images, {len(labels)} labels")
    return images.to(device), labels.long().to(device)


def as_input(images):
    """uint8 images -> normalised float batch N x 1 x 28 x 28."""
    return images.float().div_(255).sub_(MEAN).div_(STD).unsqueeze(1)


class GlobalBatchSampler:
    """Which samples this rank trains in each step: DistributedSampler's job, for ranks whose
    batches may differ.

    Each epoch shuffles the data set with a generator seeded with seed + epoch, the same
    permutation on every rank (as DistributedSampler does; call set_epoch). Step k trains
    the k-th run of global-batch samples of it, shared by the ranks in rank order, each
    taking its own batch. The last step of an epoch is filled up from the start of the
    permutation (as DistributedSampler pads), so that every rank trains its full batch in
    every step and all ranks take the same number of steps.

    Why not DistributedSampler: it gives every rank the same number of samples, which suits
    equal batches only. DLH's plan may give ranks on faster GPUs larger batches (DLH_BATCH
    differs by rank); with DistributedSampler those would run out of samples in fewer steps
    than the others, and DDP would wait forever for their gradients. Counting positions in
    samples of the epoch also lets a run resume with another number of ranks."""

    def __init__(self, size, rank_batches, rank, seed):
        self.size = size
        self.global_batch = sum(rank_batches)
        self.offset = sum(rank_batches[:rank])
        self.batch = rank_batches[rank]
        self.seed = seed
        self.epoch = 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def steps(self, start=0):
        """Steps of the epoch from `start` samples into it to its end."""
        return -(-(self.size - start) // self.global_batch)

    def batches(self, start=0):
        """This rank's sample indices of every step of the epoch from `start` samples into
        it (a resumed epoch), a LongTensor per step."""
        g = torch.Generator()
        g.manual_seed(self.seed + self.epoch)
        order = torch.randperm(self.size, generator=g)
        run = order[start:]
        needed = self.steps(start) * self.global_batch
        if len(run) < needed:  # pad the last step with the first samples of the epoch
            repeats = -(-(needed - len(run)) // self.size)
            run = torch.cat([run] + [order] * repeats)
        for k in range(self.steps(start)):
            first = k * self.global_batch + self.offset
            yield run[first:first + self.batch]


# --- The model ---------------------------------------------------------------------------

class Net(nn.Module):
    """Two 3x3 convolutions with max pooling, then two dense layers: 105,866 parameters,
    88% test accuracy on Fashion-MNIST after 2 epochs of the whole training set."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)   # 28x28 -> 28x28, pooled to 14x14
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)  # 14x14 -> 14x14, pooled to 7x7
        self.fc1 = nn.Linear(32 * 7 * 7, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(torch.flatten(x, 1)))
        return self.fc2(x)


# --- Collectives (nothing to do for a single process) ------------------------------------

def all_reduce(values, op, device):
    """The element-wise reduction of `values` (numbers) over the ranks, as floats."""
    t = torch.tensor(values, dtype=torch.float64, device=device)
    if dist.is_initialized():
        dist.all_reduce(t, op=op)
    return t.tolist()


def all_gather_int(value, device):
    """`value` of every rank, in rank order."""
    if not dist.is_initialized():
        return [value]
    t = torch.tensor([value], dtype=torch.int64, device=device)
    out = [torch.zeros_like(t) for _ in range(dist.get_world_size())]
    dist.all_gather(out, t)
    return [int(x.item()) for x in out]


def barrier():
    if dist.is_initialized():
        dist.barrier()


# --- Checkpoints -------------------------------------------------------------------------

def fsync_dir(path):
    """Make a rename in `path` durable (where the file system allows)."""
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass


def save_checkpoint(folder, state, keep):
    """Write `state` as folder/ckpt-<global step>.pt, atomically: to a .tmp name first
    (DLH_CHECKPOINT never names one), flushed to the disk, then renamed. Keeps the newest
    `keep` checkpoints. Returns the path."""
    path = os.path.join(folder, f"ckpt-{state['global_step']:08d}.pt")
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(folder)
    ours = sorted(n for n in os.listdir(folder) if n.startswith("ckpt-") and n.endswith(".pt"))
    for old in ours[:-keep]:
        os.remove(os.path.join(folder, old))
    return path


def write_json(path, data):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


# --- Training ----------------------------------------------------------------------------

def main():
    args = parse_args()

    # Ranks: torchrun's variables (the launcher's); none at all: one process, no group.
    distributed = "RANK" in os.environ and "WORLD_SIZE" in os.environ
    rank = int(os.environ.get("RANK", 0)) if distributed else 0
    world = int(os.environ.get("WORLD_SIZE", 1)) if distributed else 1
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    log = print if rank == 0 else (lambda *a, **k: None)

    # Device: this rank's GPU, or the CPU. The launcher may have narrowed
    # CUDA_VISIBLE_DEVICES to the rank's one GPU: then LOCAL_RANK counts beyond it.
    use_cuda = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
    if use_cuda:
        if not torch.cuda.is_available():
            sys.exit("ddp_fashion: --device cuda, but CUDA is not available")
        torch.cuda.set_device(local_rank % torch.cuda.device_count())
        device = torch.device("cuda", torch.cuda.current_device())
        device_text = f"{device} ({torch.cuda.get_device_name(device)})"
    else:
        device = torch.device("cpu")
        if args.threads:
            torch.set_num_threads(args.threads)
        device_text = "cpu"
    if distributed:
        dist.init_process_group("nccl" if use_cuda else "gloo", init_method="env://",
                                rank=rank, world_size=world)

    # Batches and learning rate: DLH's plan, else the options.
    default_batch = args.batch // world + (1 if rank < args.batch % world else 0)
    batch, batch_from = from_env("DLH_BATCH", int, default_batch, "--batch")
    lr, lr_from = from_env("DLH_LR", float, args.lr, "--lr")
    warmup_epochs, warmup_from = from_env("DLH_WARMUP_EPOCHS", float, args.warmup_epochs,
                                          "--warmup-epochs")
    if batch < 1:
        sys.exit(f"ddp_fashion: --batch {args.batch} leaves rank {rank} no samples")
    rank_batches = all_gather_int(batch, device)
    global_batch = sum(rank_batches)
    planned = os.environ.get("DLH_GLOBAL_BATCH", "").strip()
    if planned and planned != str(global_batch):
        log(f"warning: DLH_GLOBAL_BATCH={planned}, but the ranks' batches add up to "
            f"{global_batch}", flush=True)

    # Data, in memory on the device.
    train_x, train_y = load_split(args.data_dir, "train", args.max_samples, device)
    test_x, test_y = load_split(args.data_dir, "t10k", args.max_test_samples, device)
    samples = len(train_x)
    sampler = GlobalBatchSampler(samples, rank_batches, rank, args.seed)
    steps_per_epoch = sampler.steps()
    warmup_steps = round(warmup_epochs * steps_per_epoch)

    log(f"ddp_fashion: {world} rank(s), device {device_text}"
        + (f", {torch.get_num_threads()} threads" if not use_cuda else ""), flush=True)
    log(f"  batch {batch} per rank (from {batch_from}), global batch {global_batch}; "
        f"lr {lr:g} (from {lr_from}), warmup {warmup_epochs:g} epochs (from {warmup_from})",
        flush=True)
    log(f"  {samples} training samples, {len(test_x)} test samples, {args.epochs} epochs of "
        f"{steps_per_epoch} steps", flush=True)

    # The model: the same initial weights everywhere (DDP also broadcasts rank 0's).
    torch.manual_seed(args.seed)
    random.seed(args.seed)
    net = Net().to(device)
    model = DistributedDataParallel(net, device_ids=[device.index] if use_cuda else None) \
        if distributed else net
    optimizer = torch.optim.SGD(net.parameters(), lr=lr, momentum=MOMENTUM)
    # DDP averages the gradients of the ranks; weighting each rank's mean loss by its share
    # of the global batch makes that the gradient of the mean over the global batch, also
    # when the batches differ.
    loss_weight = batch * world / global_batch

    # Resume from the launcher's newest checkpoint.
    epoch, epoch_start, global_step, last_loss = 0, 0, 0, float("nan")
    resumed_loss_sums = [0.0, 0.0]  # of the part of the epoch trained before a resume
    checkpoint = os.environ.get("DLH_CHECKPOINT", "").strip()
    if checkpoint:
        # Our own file: it holds Python objects (RNG states) besides tensors.
        state = torch.load(checkpoint, map_location="cpu", weights_only=False)
        net.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        for group in optimizer.param_groups:  # the learning rate of this run's plan
            group["lr"] = lr
        torch.set_rng_state(state["rng"]["torch"])
        random.setstate(state["rng"]["python"])
        if use_cuda and state["rng"].get("cuda") is not None:
            torch.cuda.set_rng_state(state["rng"]["cuda"])
        epoch, epoch_start = state["epoch"], state["samples_in_epoch"]
        resumed_loss_sums = state["epoch_loss_sums"]
        global_step, last_loss = state["global_step"], state["train_loss"]
        log(f"resumed from {checkpoint} at step {global_step}", flush=True)
        progress.resumed(global_step, checkpoint)
        if state["global_batch"] != global_batch or state["world_size"] != world:
            log(f"note: the checkpoint was written by {state['world_size']} rank(s) with "
                f"global batch {state['global_batch']}; now {world} rank(s), global batch "
                f"{global_batch}", flush=True)

    # Every rank must go on from the same step (a node that sees other files would not).
    highest, minus_lowest = all_reduce([global_step, -global_step], dist.ReduceOp.MAX, device)
    if highest != -minus_lowest:
        sys.exit(f"ddp_fashion: rank {rank} starts at step {global_step} "
                 f"({checkpoint or 'no checkpoint'}), another rank at another step: all "
                 f"ranks must see the same checkpoints")

    run_dir = os.path.abspath(os.environ.get("DLH_RUN_DIR") or args.run_dir)
    ckpt_dir = os.path.join(run_dir, "checkpoints")
    if rank == 0:
        os.makedirs(ckpt_dir, exist_ok=True)

    # What the launcher's profile wants to know about this program.
    progress.describe_model(net)
    progress.describe(samples=samples, epochs=args.epochs, global_batch=global_batch, lr=lr,
                      optimizer_slots=1, device=device_text,
                      threads=None if use_cuda else torch.get_num_threads())

    def checkpoint_state(epoch, position, loss_sums):
        """What a checkpoint holds after `position` samples of `epoch` were trained, with
        the loss sums of that part of the epoch (all ranks')."""
        if position >= samples:
            epoch, position, loss_sums = epoch + 1, 0, [0.0, 0.0]
        return {
            "model": net.state_dict(),
            "optimizer": optimizer.state_dict(),
            "epoch": epoch,
            "samples_in_epoch": position,
            "step_in_epoch": position // global_batch,
            "global_step": global_step,
            "global_batch": global_batch,
            "world_size": world,
            "train_loss": last_loss,
            "epoch_loss_sums": loss_sums,
            "rng": {"torch": torch.get_rng_state(), "python": random.getstate(),
                    "cuda": torch.cuda.get_rng_state() if use_cuda else None},
            "args": vars(args),
        }

    saved_step = global_step if checkpoint else -1

    def save(epoch, position, epoch_loss):
        """Checkpoint (on rank 0) unless this step has one. Called by all ranks together."""
        nonlocal saved_step
        if saved_step != global_step:
            loss_sums = all_reduce(epoch_loss.tolist(), dist.ReduceOp.SUM, device)
            if rank == 0:
                path = save_checkpoint(ckpt_dir, checkpoint_state(epoch, position, loss_sums),
                                       args.keep_checkpoints)
                log(f"checkpoint {path}", flush=True)
                progress.checkpoint(path, global_step)  # the run's records and report name it
        saved_step = global_step

    batch_size = torch.tensor(float(batch), dtype=torch.float64, device=device)
    first_step = True
    stop = _STOP_NONE
    model.train()
    for epoch in range(epoch, args.epochs):
        sampler.set_epoch(epoch)
        position = epoch_start
        epoch_start = 0
        # Loss sums over this epoch and the current log interval (on the device: no sync).
        epoch_loss = torch.zeros(2, dtype=torch.float64, device=device)
        if rank == 0 and position:  # the epoch's loss so far, before the resume
            epoch_loss += torch.tensor(resumed_loss_sums, dtype=torch.float64, device=device)
        interval_loss = torch.zeros(2, dtype=torch.float64, device=device)
        interval_time = time.perf_counter()
        for indices in sampler.batches(position):
            indices = indices.to(device)
            x, y = as_input(train_x[indices]), train_y[indices]
            if warmup_steps:
                for group in optimizer.param_groups:
                    group["lr"] = lr * min(1.0, (global_step + 1) / warmup_steps)
            optimizer.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(x), y)
            (loss * loss_weight).backward()  # DDP allreduces the gradients meanwhile
            optimizer.step()
            global_step += 1
            position += global_batch
            # Every --log-every steps the step's loss goes into the run's records too (this
            # rank's batch; reading it waits for a GPU, so not at every step).
            logged = global_step % args.log_every == 0
            progress.step(batch, **({"loss": loss.item(), "epoch": epoch + 1} if logged else {}))

            seen = torch.stack([loss.detach().double() * batch, batch_size])
            epoch_loss += seen
            interval_loss += seen
            if first_step and use_cuda:  # the optimizer's state exists from now on
                progress.describe(memory=torch.cuda.max_memory_allocated(device))
            first_step = False

            if rank == args.crash_rank and global_step == args.crash_at_step:
                print(f"ddp_fashion: rank {rank}: --crash-at-step {global_step}: exiting 3",
                      file=sys.stderr, flush=True)
                os._exit(3)
            if rank == args.crash_rank and global_step == args.stall_at_step:
                print(f"ddp_fashion: rank {rank}: --stall-at-step {global_step}: stalling",
                      file=sys.stderr, flush=True)
                while True:
                    time.sleep(3600)
            if args.sleep_per_step:
                time.sleep(args.sleep_per_step)

            if global_step % args.log_every == 0:
                total, count = all_reduce(interval_loss.tolist(), dist.ReduceOp.SUM, device)
                rate = count / (time.perf_counter() - interval_time)
                log(f"epoch {epoch + 1}/{args.epochs} step {global_step} loss "
                    f"{total / count:.4f} lr {optimizer.param_groups[0]['lr']:.4g} "
                    f"{rate:.0f} samples/s", flush=True)
                interval_loss.zero_()
                interval_time = time.perf_counter()

            # A stop signal on any rank stops all of them at this same step. (One tiny
            # allreduce per step; on a GPU it also waits for the step to finish.)
            stop = int(all_reduce([_stop_requested], dist.ReduceOp.MAX, device)[0])
            if stop:
                log(f"{_STOP_NAME[stop]}: stopping at step {global_step}", flush=True)
                save(epoch, position, epoch_loss)
                break
            if args.checkpoint_every and global_step % args.checkpoint_every == 0:
                save(epoch, position, epoch_loss)
        if stop:
            break

        total, count = all_reduce(epoch_loss.tolist(), dist.ReduceOp.SUM, device)
        if count:
            last_loss = total / count
        log(f"epoch {epoch + 1}/{args.epochs} done: step {global_step}, train loss "
            f"{last_loss:.4f}", flush=True)
        if use_cuda:
            progress.describe(memory=torch.cuda.max_memory_allocated(device))
        save(epoch, samples, epoch_loss)

    if not stop:
        # Test accuracy, the test set shared by the ranks.
        model.eval()
        correct = 0
        with torch.no_grad():
            mine = torch.arange(rank, len(test_x), world, device=device)
            for chunk in mine.split(256):  # small chunks stay in the caches
                correct += int((net(as_input(test_x[chunk])).argmax(1) == test_y[chunk]).sum())
        correct, total = all_reduce([correct, len(mine)], dist.ReduceOp.SUM, device)
        accuracy = correct / total
        log(f"done: step {global_step}, train loss {last_loss:.4f}, test accuracy "
            f"{accuracy:.4f}", flush=True)
        if rank == 0:
            progress.evaluation(epoch=args.epochs, step=global_step, test_accuracy=accuracy)
        if rank == 0:
            param_sum = float(sum(p.detach().double().sum() for p in net.parameters()))
            write_json(os.path.join(run_dir, "result.json"), {
                "step": global_step,
                "test_accuracy": accuracy,
                "train_loss": None if math.isnan(last_loss) else last_loss,
                "param_sum": param_sum,
                "world_size": world,
                "global_batch": global_batch,
            })

    # Nobody leaves before rank 0's checkpoint and result are on the disk. Then the process
    # group goes, DDP (which holds it) first: left to the interpreter's shutdown, torch's gloo
    # threads can deadlock it.
    barrier()
    del model
    if distributed:
        dist.destroy_process_group()
    return _EXIT_STATUS[stop] if stop else 0


if __name__ == "__main__":
    sys.exit(main())
