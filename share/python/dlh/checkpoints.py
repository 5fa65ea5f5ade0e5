"""Checkpoints where ``dlh-launch run`` looks for them: DLH_RUN_DIR/checkpoints, whose newest
file the next run (a requeued job) gets as DLH_CHECKPOINT."""

import os

from dlh import _progress
from dlh.env import run_dir


def checkpoint_path():
    """The checkpoint to resume from (DLH_CHECKPOINT: the newest file of the run folder's
    checkpoints/ when the job started), else None: start afresh."""
    return os.environ.get("DLH_CHECKPOINT") or None


def checkpoint_dir(default="checkpoints"):
    """Where to write checkpoints: DLH_RUN_DIR/checkpoints under DLH, else `default`.
    Created when missing."""
    folder = os.path.join(run_dir(), "checkpoints") if run_dir() else default
    os.makedirs(folder, exist_ok=True)
    return folder


def _fsync_dir(path):
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass


def save_checkpoint(state, step, folder=None, keep=3, prefix="ckpt-"):
    """torch.save(`state`) as FOLDER/<prefix><step, 8 digits>.pt (FOLDER: checkpoint_dir()),
    atomically: to a .tmp name (which DLH_CHECKPOINT never names), flushed, then renamed.
    Keeps the newest `keep` of this prefix, reports the checkpoint on the progress channel
    and returns its path. Call it on one rank (rank 0) for a DDP model."""
    import torch
    folder = folder or checkpoint_dir()
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{prefix}{int(step):08d}.pt")
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(folder)
    ours = sorted(n for n in os.listdir(folder) if n.startswith(prefix) and n.endswith(".pt"))
    for old in ours[:-keep] if keep > 0 else []:
        os.remove(os.path.join(folder, old))
    _progress.checkpoint_saved(path, step)
    return path
