"""A sampler like torch's DistributedSampler that honours unequal shares: on a mixed
allocation DLH's plan gives a rank on a faster GPU a larger batch (DLH_BATCH), and with
DistributedSampler's equal slices it would run out of samples in fewer steps than the
others, leaving them waiting in an allreduce for good.

Each epoch the data set's indices are shuffled (seed + epoch, the same order on every rank,
or kept in order with shuffle=False) and padded from their start (as DistributedSampler pads)
to steps x global batch, where steps = ceil(len / global batch) (floor with drop_last, the
remainder left out). Step k of the epoch trains the order's k-th global batch, cut in rank
order: rank r takes batch_r indices after the batches of the ranks before it (as the built-in
trainer cuts its global batch). Every rank so takes the same number of steps of its own batch,
and the whole job trains what one process would with the global batch.

The split may change between two steps (dlh.Balancer, set_batches): each step still takes
the next global batch of the order, only cut differently, so an epoch neither loses nor
repeats a sample, and has as many steps, whatever the splits. That needs the batches to come
from batches() (DataLoader(batch_sampler=...)): a DataLoader's batch_size is fixed."""

import random

from dlh.env import rank as _rank
from dlh.env import rank_batches as _rank_batches


def _epoch_order(size, global_batch, epoch, seed, shuffle, drop_last):
    """The epoch's order, padded (or cut) to steps x global batch, and the steps."""
    steps = size // global_batch if drop_last else -(-size // global_batch)
    order = list(range(size))
    if shuffle:
        random.Random(seed + epoch).shuffle(order)
    needed = steps * global_batch
    while len(order) < needed:  # pad with the epoch's first samples, as often as needed
        order += order[:needed - len(order)]
    return order[:needed], steps


def _check(size, rank_batches, rank, who):
    if size < 1:
        raise ValueError(f"dlh.{who}: an empty data set (size {size})")
    if not rank_batches or any(int(b) < 1 for b in rank_batches):
        raise ValueError(f"dlh.{who}: rank_batches must be positive, got {rank_batches}")
    if not 0 <= rank < len(rank_batches):
        raise ValueError(f"dlh.{who}: rank {rank}, but batches for {len(rank_batches)} "
                         f"ranks: {rank_batches}")


def share_slice(size, rank_batches, rank, epoch=0, seed=0, shuffle=True, drop_last=False):
    """Rank `rank`'s indices of an epoch of a data set of `size` samples under a fixed split,
    in the order ShareSampler gives them (a list of ints: its steps' batches one after the
    other)."""
    _check(size, rank_batches, rank, "share_slice")
    g = sum(rank_batches)
    order, steps = _epoch_order(size, g, epoch, seed, shuffle, drop_last)
    first, mine = sum(rank_batches[:rank]), rank_batches[rank]
    return [i for k in range(steps) for i in order[k * g + first:k * g + first + mine]]


class ShareSampler:
    """Use it as DataLoader(data_set, batch_size=dlh.batch(default=B), sampler=...): rank
    r's batch from DLH_RANK_BATCHES under a plan, else `batch_size` for every rank (then it
    splits as DistributedSampler does, but pads an epoch with its first samples to whole
    global batches, where DistributedSampler pads to a multiple of the ranks; drop_last=True
    pads nothing). Call set_epoch(epoch) at each epoch's start.

    With dlh.Balancer (a split that changes), give the DataLoader its batches instead:
    DataLoader(data_set, batch_sampler=sampler.batches()).

    dataset: a data set with len(), or its size; batch_size: this rank's batch outside a
    plan (default 1); rank, rank_batches: override RANK and the plan's batches."""

    def __init__(self, dataset, batch_size=1, shuffle=True, seed=0, drop_last=False,
                 rank=None, rank_batches=None):
        self.size = dataset if isinstance(dataset, int) else len(dataset)
        batches = list(rank_batches or _rank_batches(default_batch=batch_size))
        self.rank = _rank() if rank is None else rank
        _check(self.size, batches, self.rank, "ShareSampler")
        self.shuffle, self.seed, self.drop_last = shuffle, seed, drop_last
        self.epoch = 0
        self.global_batch = sum(batches)
        self.steps = (self.size // self.global_batch if drop_last
                      else -(-self.size // self.global_batch))
        # The splits by the batch (counted over the process's life, every epoch's) from
        # which each holds: [(first batch, rank batches)], the oldest first.
        self._splits = [(0, batches)]
        self.yielded = 0  # batches handed out by batches() so far
        self._balanced = False  # a Balancer drives it: only batches() may be used

    @property
    def rank_batches(self):
        """The split of the next batch batches() hands out."""
        return list(self._split_at(self.yielded))

    @property
    def batch_size(self):
        """This rank's batch in the next batch batches() hands out."""
        return self._split_at(self.yielded)[self.rank]

    def _split_at(self, index):
        for first, batches in reversed(self._splits):
            if first <= index:
                return batches
        return self._splits[0][1]

    def set_batches(self, rank_batches, from_batch=None):
        """Cut the global batch as `rank_batches` (rank order, the same sum) from batch
        `from_batch` of batches() on (counted from the first batch it ever gave; None: the
        next). Call it alike on every rank, with a `from_batch` no rank's DataLoader has
        fetched yet (dlh.Balancer does)."""
        batches = [int(b) for b in rank_batches]
        if len(batches) != len(self._splits[-1][1]) or sum(batches) != self.global_batch or \
                min(batches) < 1:
            raise ValueError(f"dlh.ShareSampler.set_batches: {batches} must be "
                             f"{len(self._splits[-1][1])} positive batches summing to "
                             f"{self.global_batch}")
        first = self.yielded if from_batch is None else int(from_batch)
        if first < self.yielded:
            raise ValueError(f"dlh.ShareSampler.set_batches: batch {first} was already given "
                             f"out (next: {self.yielded})")
        self._splits = [s for s in self._splits if s[0] < first]
        # Keep only what a batch still to come may need.
        while len(self._splits) > 1 and self._splits[1][0] <= self.yielded:
            self._splits.pop(0)
        self._splits.append((first, batches))

    def set_epoch(self, epoch):
        """A new order for each epoch, the same on every rank."""
        self.epoch = epoch

    def batches(self):
        """A batch sampler for DataLoader(batch_sampler=...): each step's indices for this
        rank, cut by the split in force for that step (which a Balancer may change)."""
        return _ShareBatches(self)

    def _iter_batches(self):
        order, steps = _epoch_order(self.size, self.global_batch, self.epoch, self.seed,
                                    self.shuffle, self.drop_last)
        g = self.global_batch
        for k in range(steps):
            batches = self._split_at(self.yielded)
            self.yielded += 1
            first = sum(batches[:self.rank])
            yield order[k * g + first:k * g + first + batches[self.rank]]

    def __iter__(self):
        if self._balanced:
            raise TypeError("dlh.ShareSampler: a Balancer changes the batches: give the "
                            "DataLoader batch_sampler=sampler.batches(), not sampler=sampler")
        return iter(share_slice(self.size, self._splits[0][1], self.rank, self.epoch,
                                self.seed, self.shuffle, self.drop_last))

    def __len__(self):
        return self.steps * self._splits[0][1][self.rank]


class _ShareBatches:
    """ShareSampler.batches(): a batch sampler of the epoch's steps."""

    def __init__(self, sampler):
        self.sampler = sampler

    def __iter__(self):
        return self.sampler._iter_batches()

    def __len__(self):
        return self.sampler.steps
