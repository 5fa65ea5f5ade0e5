"""DLH for a PyTorch program of your own, under ``dlh-launch run`` (docs/researcher-guide.md,
"Your own PyTorch program").

Pure Python: it needs torch only for save_checkpoint() and should_stop(agree=True), and
imports it only there. Outside DLH (plain ``python``, ``torchrun``) every function does
nothing or returns the plain default, so the same program runs anywhere::

    import dlh
    dlh.catch_signals()                     # first: SIGUSR1/SIGTERM only set a flag
    import torch, torch.distributed as dist
    ...
    batch = dlh.batch(default=64)           # this rank's share of the plan's global batch
    lr = dlh.lr(default=0.1)
    sampler = dlh.ShareSampler(train_set, batch_size=batch, seed=1)
    loader = torch.utils.data.DataLoader(train_set, batch_size=batch, sampler=sampler)
    start = 0
    if dlh.checkpoint_path():               # DLH_CHECKPOINT: resume
        state = torch.load(dlh.checkpoint_path())
        start = state["step"]
        dlh.resumed(start, dlh.checkpoint_path())
    for epoch in range(1, epochs + 1):
        sampler.set_epoch(epoch)
        for x, y in loader:
            ...
            step += 1
            dlh.step(len(x), loss=loss.item(), epoch=epoch)
            if dlh.should_stop(agree=True):   # every rank stops at the same step
                dlh.save_checkpoint(state, step)
                raise SystemExit(dlh.exit_code())
        dlh.evaluation(epoch=epoch, test_loss=test_loss, test_accuracy=accuracy)

Optional: adaptive balancing of the split (dlh.Balancer, with the DataLoader given
batch_sampler=sampler.batches()) and the allreduce time of every step (a DDP communication
hook: model.register_comm_hook(dlh.AllreduceTimer(), dlh.timed_allreduce_hook)); see
docs/reference/run.md.

What it reads: RANK and WORLD_SIZE (torchrun's), DLH_RUN_DIR, DLH_CHECKPOINT,
DLH_GLOBAL_BATCH, DLH_BATCH, DLH_RANK_BATCHES, DLH_LR, DLH_WARMUP_EPOCHS, DLH_PLAN and
DLH_PROGRESS_FD, as ``dlh-launch run`` sets them (docs/reference/run.md).
"""

from dlh._progress import (evaluation, checkpoint_saved, resumed, describe, describe_model,
                           reporting)
from dlh._progress import step as _report_step
from dlh.env import (in_dlh, rank, world_size, run_dir, plan, global_batch, batch,
                     rank_batches, share, lr, warmup_epochs)
from dlh.stop import catch_signals, should_stop, stop_signal, exit_code
from dlh.checkpoints import checkpoint_path, checkpoint_dir, save_checkpoint
from dlh.sampler import ShareSampler, share_slice
from dlh.balance import Balancer, propose_split
from dlh.comm import AllreduceTimer, timed_allreduce_hook
from dlh import comm as _comm
from dlh import balance as _balance
import time as _time

_last_step = [None]  # when step() reported last, while a Balancer is active


def step(samples=None, **fields):
    """Report a training step (dlh_progress.step: loss, accuracy, lr, samples_per_s, epoch,
    data, compute, allreduce). Without `allreduce`, the seconds of the step's allreduces as
    the AllreduceTimer created last measured them, when a backward completed since the
    last step() (timed_allreduce_hook)."""
    if "allreduce" not in fields and reporting():
        timer = _comm.current_timer()
        seconds = timer.take_new() if timer is not None else None
        if seconds is not None:
            fields["allreduce"] = seconds
    balancer = _balance.active_balancer()
    if balancer is not None and reporting():
        # The launcher scales rank 0's samples by the plan's share, which balancing moves.
        now = _time.perf_counter()
        if "samples_per_s" not in fields and _last_step[0] is not None and now > _last_step[0]:
            fields["samples_per_s"] = balancer.sampler.global_batch / (now - _last_step[0])
        _last_step[0] = now
    _report_step(samples, **fields)


__all__ = ["step", "evaluation", "checkpoint_saved", "resumed", "describe", "describe_model",
           "reporting", "in_dlh", "rank", "world_size", "run_dir", "plan", "global_batch",
           "batch", "rank_batches", "share", "lr", "warmup_epochs", "catch_signals",
           "should_stop", "stop_signal", "exit_code", "checkpoint_path", "checkpoint_dir",
           "save_checkpoint", "ShareSampler", "share_slice", "Balancer", "propose_split",
           "AllreduceTimer", "timed_allreduce_hook"]
