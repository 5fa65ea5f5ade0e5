"""A sampler like torch's DistributedSampler that honours unequal shares: on a mixed
allocation DLH's plan gives a rank on a faster GPU a larger batch (DLH_BATCH), and with
DistributedSampler's equal slices it would run out of samples in fewer steps than the
others, leaving them waiting in an allreduce for good.

Each epoch the data set's indices are shuffled (seed + epoch, the same order on every rank,
or kept in order with shuffle=False), padded from their start (as DistributedSampler pads)
to steps x global batch, where steps = ceil(len / global batch) (floor with drop_last, the
remainder left out), and cut into contiguous slices in rank order, rank r's of
steps x batch_r indices. Every rank so takes the same number of steps of its own batch."""

import random

from dlh.env import rank as _rank
from dlh.env import rank_batches as _rank_batches


def share_slice(size, rank_batches, rank, epoch=0, seed=0, shuffle=True, drop_last=False):
    """Rank `rank`'s indices of an epoch of a data set of `size` samples, as ShareSampler
    takes them (a list of ints)."""
    if size < 1:
        raise ValueError(f"dlh.share_slice: an empty data set (size {size})")
    if not rank_batches or any(int(b) < 1 for b in rank_batches):
        raise ValueError(f"dlh.share_slice: rank_batches must be positive, got {rank_batches}")
    if not 0 <= rank < len(rank_batches):
        raise ValueError(f"dlh.share_slice: rank {rank} of {len(rank_batches)}")
    global_batch = sum(rank_batches)
    steps = size // global_batch if drop_last else -(-size // global_batch)
    order = list(range(size))
    if shuffle:
        random.Random(seed + epoch).shuffle(order)
    needed = steps * global_batch
    while len(order) < needed:  # pad with the epoch's first samples, as often as needed
        order += order[:needed - len(order)]
    first = steps * sum(rank_batches[:rank])
    return order[first:first + steps * rank_batches[rank]]


class ShareSampler:
    """Use it as DataLoader(data_set, batch_size=dlh.batch(default=B), sampler=...): rank
    r's batch from DLH_RANK_BATCHES under a plan, else `batch_size` for every rank (then it
    splits as DistributedSampler does). Call set_epoch(epoch) at each epoch's start.

    dataset: a data set with len(), or its size; batch_size: this rank's batch outside a
    plan (default 1); rank, rank_batches: override RANK and the plan's batches."""

    def __init__(self, dataset, batch_size=1, shuffle=True, seed=0, drop_last=False,
                 rank=None, rank_batches=None):
        self.size = dataset if isinstance(dataset, int) else len(dataset)
        self.rank_batches = list(rank_batches or _rank_batches(default_batch=batch_size))
        self.rank = _rank() if rank is None else rank
        if self.rank >= len(self.rank_batches):
            raise ValueError(f"dlh.ShareSampler: rank {self.rank}, but batches for "
                             f"{len(self.rank_batches)} ranks: {self.rank_batches}")
        self.batch_size = self.rank_batches[self.rank]
        self.shuffle, self.seed, self.drop_last = shuffle, seed, drop_last
        self.epoch = 0
        global_batch = sum(self.rank_batches)
        self.steps = (self.size // global_batch if drop_last
                      else -(-self.size // global_batch))

    def set_epoch(self, epoch):
        """A new order for each epoch, the same on every rank."""
        self.epoch = epoch

    def __iter__(self):
        return iter(share_slice(self.size, self.rank_batches, self.rank, self.epoch,
                                self.seed, self.shuffle, self.drop_last))

    def __len__(self):
        return self.steps * self.batch_size
