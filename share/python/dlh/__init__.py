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

What it reads: RANK and WORLD_SIZE (torchrun's), DLH_RUN_DIR, DLH_CHECKPOINT,
DLH_GLOBAL_BATCH, DLH_BATCH, DLH_RANK_BATCHES, DLH_LR, DLH_WARMUP_EPOCHS, DLH_PLAN and
DLH_PROGRESS_FD, as ``dlh-launch run`` sets them (docs/reference/run.md).
"""

from dlh._progress import (step, evaluation, checkpoint_saved, resumed, describe,
                           describe_model, reporting)
from dlh.env import (in_dlh, rank, world_size, run_dir, plan, global_batch, batch,
                     rank_batches, share, lr, warmup_epochs)
from dlh.stop import catch_signals, should_stop, stop_signal, exit_code
from dlh.checkpoints import checkpoint_path, checkpoint_dir, save_checkpoint
from dlh.sampler import ShareSampler, share_slice

__all__ = ["step", "evaluation", "checkpoint_saved", "resumed", "describe", "describe_model",
           "reporting", "in_dlh", "rank", "world_size", "run_dir", "plan", "global_batch",
           "batch", "rank_batches", "share", "lr", "warmup_epochs", "catch_signals",
           "should_stop", "stop_signal", "exit_code", "checkpoint_path", "checkpoint_dir",
           "save_checkpoint", "ShareSampler", "share_slice"]
