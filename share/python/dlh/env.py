"""What ``dlh-launch run`` tells the program in its environment: the rank, the run folder,
the plan's batches and rate. Outside DLH each function returns its default."""

import json
import os
import sys

_warned = set()


def _warn(name, value, need):
    if name not in _warned:
        _warned.add(name)
        print(f"dlh: {name}={value!r} ignored: needs {need}", file=sys.stderr, flush=True)


def _int(name, default, least=1):
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < least:
        _warn(name, text, f"an integer of at least {least}")
        return default
    return value


def _float(name, default, least=0.0):
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or not value >= least or value == float("inf"):
        _warn(name, text, f"a finite number of at least {least}")
        return default
    return value


def in_dlh():
    """True under ``dlh-launch run`` (it always sets DLH_RUN_DIR)."""
    return bool(os.environ.get("DLH_RUN_DIR"))


def rank():
    """This process's rank (RANK, as torchrun and dlh-launch run set it; else 0)."""
    return _int("RANK", 0, least=0)


def world_size():
    """The number of ranks (WORLD_SIZE; else 1)."""
    return _int("WORLD_SIZE", 1)


def run_dir(default=None):
    """The run folder (DLH_RUN_DIR, absolute), else `default`."""
    return os.environ.get("DLH_RUN_DIR") or default


def plan():
    """The plan the job runs with (DLH_PLAN, parsed), else {}. Only when the launcher used
    it: DLH_GLOBAL_BATCH is set and is the plan's global_batch (a plan given with --plan
    FILE leaves an unrelated DLH_PLAN of the environment unused)."""
    text = os.environ.get("DLH_PLAN", "").strip()
    used = global_batch()
    if not text or used is None:
        return {}
    try:
        parsed = json.loads(text)
    except ValueError:
        _warn("DLH_PLAN", text[:40], "JSON")
        return {}
    if not isinstance(parsed, dict) or parsed.get("global_batch") != used:
        return {}
    return parsed


def global_batch(default=None):
    """The plan's global batch (DLH_GLOBAL_BATCH), else `default`."""
    return _int("DLH_GLOBAL_BATCH", default)


def batch(default=None):
    """This rank's samples per step (DLH_BATCH: its share of the plan's global batch, larger
    on a faster GPU of a mixed allocation), else `default`."""
    return _int("DLH_BATCH", default)


def rank_batches(default_batch=None):
    """Every rank's samples per step, in rank order: DLH_RANK_BATCHES under a plan; else
    `default_batch` for each of WORLD_SIZE ranks (None when it is None)."""
    text = os.environ.get("DLH_RANK_BATCHES", "").strip()
    if text:
        try:
            values = [int(v) for v in text.split(",")]
        except ValueError:
            values = []
        if len(values) == world_size() and all(v > 0 for v in values):
            return values
        _warn("DLH_RANK_BATCHES", text, f"{world_size()} positive integers")
    return None if default_batch is None else [int(default_batch)] * world_size()


def share():
    """This rank's fraction of the global batch: DLH_BATCH / DLH_GLOBAL_BATCH under a plan,
    else 1 / WORLD_SIZE."""
    mine, everyone = batch(), global_batch()
    if mine is not None and everyone:
        return mine / everyone
    return 1.0 / world_size()


def lr(default=None):
    """The plan's learning rate at its global batch (DLH_LR), else `default`."""
    return _float("DLH_LR", default, least=0.0)


def warmup_epochs(default=0.0):
    """The plan's learning-rate warm-up in epochs (DLH_WARMUP_EPOCHS), else `default`."""
    return _float("DLH_WARMUP_EPOCHS", default, least=0.0)
