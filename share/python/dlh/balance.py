"""Adaptive balancing for a program's own process group: the built-in balancer's rule
(launcher/train/balancer.cpp, docs/reference/dlh-launch.md "Adaptive balancing"), ported
as is, and a Balancer that measures each rank's busy time per step, lets rank 0 decide every
`every` steps and broadcasts the split to every rank's ShareSampler.

The rule. A data-parallel step ends when the slowest rank is done, so it is fastest with
batches proportional to the ranks' rates (samples/s). From the busy seconds per step of each
rank over a window, the split moves
  - damped: `damping` (0.5) of the way to the rate-proportional split;
  - bounded: no rank's batch moves by more than `max_move` (25%) of it (at least one
    sample), every move scaled by one factor, which keeps the sum;
  - not at all while the slowest rank is within `dead_band` (5%) of the ideal step;
  - and when the damped moves round to nothing, one sample leaves the slowest rank for the
    rank the rule would give most, if that rank would still finish first.
The sum stays the global batch, every rank keeps between 1 and max_batch samples.

Where the Balancer departs from the built-in trainer: a rank's seconds are the window's mean
(window_seconds()), not its median, and the dead band grows by the window's own noise. A
program's steps are often short next to the bursts in which a shared or throttled node runs
(a CPU quota's 10 ms period against a 15 ms step): the median then says the shorter of a
rank's two kinds of step, and a window of a few steps calls a balanced split unbalanced. On
make bench's mixed allocation (share/bench/mixed_shares.sh) the median rule moved the plan's
split 8-9 times a run and ran below it; the figures since: BENCHMARKS.md, "A program with
shares on a mixed allocation"."""

import math
import statistics
import sys
import time

from dlh import env as _env

_active = None  # the active Balancer created last


def active_balancer():
    """The active Balancer created last (dlh.step() reports the job's samples/s while one
    balances), or None."""
    return _active


class Decision:
    """propose_split()'s answer: `batches` (the next split; the current one when
    unchanged), `changed`, `rates` (samples/s of each rank as measured) and `imbalance`
    (the slowest rank's seconds / the ideal step - 1)."""

    def __init__(self, batches, changed, rates, imbalance):
        self.batches, self.changed, self.rates, self.imbalance = batches, changed, rates, imbalance
        self.noise = 0.0  # a Balancer's: how much of the dead band was the window's noise

    def __repr__(self):
        return (f"Decision(batches={self.batches}, changed={self.changed}, "
                f"imbalance={self.imbalance:.3f})")


def max_batch(global_batch, ranks, start):
    """The most samples a balanced rank may take (the built-in's BalanceMaxBatch): twice the
    mean batch, or the largest batch of the starting split when that is more, and never so
    many that another rank would have none."""
    n = max(int(ranks), 1)
    cap = max([2 * (-(-global_batch // n))] + [int(b) for b in start])
    return max(1, min(cap, global_batch - (n - 1)))


def _proportional_target(global_batch, most, rates):
    """clamp(k * rate, 1, most) summing to the global batch, k found by bisection."""
    def split(k):
        return [min(max(k * r, 1.0), float(most)) for r in rates]
    lo, hi = 0.0, float(most) / min(rates)
    for _ in range(200):
        if not lo < hi:
            break
        mid = lo + (hi - lo) / 2
        if mid <= lo or mid >= hi:
            break
        if sum(split(mid)) < float(global_batch):
            lo = mid
        else:
            hi = mid
    return split(hi)


def _round_keeping_sum(real, total, lo, hi):
    """Integers summing to `total` within one of `real`: floors, then one more to the
    largest fractional parts (ties to the lower rank), inside [lo, hi]."""
    n = len(real)
    out, frac = [], []
    for i in range(n):
        x = min(max(real[i], float(lo[i])), float(hi[i]))
        out.append(int(math.floor(x)))
        frac.append(x - out[-1])
    order = sorted(range(n), key=lambda i: -frac[i])  # stable: ties keep rank order
    s = sum(out)
    k = 0
    while s < total and k < 2 * n:
        i = order[k % n]
        if out[i] < hi[i]:
            out[i] += 1
            s += 1
        k += 1
    k = 0
    while s > total and k < 2 * n:
        i = order[n - 1 - k % n]
        if out[i] > lo[i]:
            out[i] -= 1
            s -= 1
        k += 1
    if s != total:
        raise RuntimeError("dlh.propose_split: rounding lost the global batch (internal error)")
    return out


def propose_split(batches, seconds, global_batch=None, max_batch=None, damping=0.5,
                  max_move=0.25, dead_band=0.05):
    """The split after `batches` (rank order) given each rank's busy `seconds` per step
    with it: the built-in balancer's ProposeSplit. global_batch: sum(batches) when None;
    max_batch: dlh.balance.max_batch(global_batch, ranks, batches) when None. Returns a
    Decision. Raises ValueError on inputs out of range."""
    batches = [int(b) for b in batches]
    seconds = [float(s) for s in seconds]
    n = len(batches)
    g = sum(batches) if global_batch is None else int(global_batch)
    most = globals()["max_batch"](g, n, batches) if max_batch is None else int(max_batch)
    if not n or len(seconds) != n:
        raise ValueError(f"dlh.propose_split: {n} batches and {len(seconds)} times")
    if not 0 < damping <= 1 or not 0 < max_move <= 1 or not (dead_band >= 0 and
                                                             math.isfinite(dead_band)):
        raise ValueError("dlh.propose_split: damping and max_move must be in (0, 1], "
                         "dead_band >= 0")
    if not (g >= n and 1 <= most <= g and most >= -(-g // n)):
        raise ValueError(f"dlh.propose_split: global batch {g} and max_batch {most} cannot "
                         f"hold {n} ranks")
    if any(not 1 <= b <= most for b in batches) or sum(batches) != g:
        raise ValueError(f"dlh.propose_split: batches {batches} must be in [1, {most}] and "
                         f"sum to {g}")
    if any(not (math.isfinite(s) and s > 0) for s in seconds):
        raise ValueError(f"dlh.propose_split: times {seconds} must be finite and positive")
    rates = [b / s for b, s in zip(batches, seconds)]
    imbalance = max(0.0, max(seconds) * sum(rates) / g - 1)
    if imbalance <= dead_band:
        return Decision(list(batches), False, rates, imbalance)
    target = _proportional_target(g, most, rates)
    move, lo, hi, scale = [], [], [], 1.0
    for i, b in enumerate(batches):
        move.append(damping * (target[i] - b))
        limit = max(1, int(math.floor(max_move * b)))
        lo.append(max(1, b - limit))
        hi.append(min(most, b + limit))
        if abs(move[i]) > limit:
            scale = min(scale, limit / abs(move[i]))
    nxt = [b + scale * m for b, m in zip(batches, move)]
    out = _round_keeping_sum(nxt, g, lo, hi)
    changed = out != batches
    if not changed:  # the nudge (NudgeSlowest)
        slow = max(range(n), key=lambda i: (seconds[i], -i))
        gain = max(range(n), key=lambda i: (move[i], -i))
        if (slow != gain and move[slow] < 0 and move[gain] > 0 and batches[slow] > 1 and
                batches[gain] < most and (batches[gain] + 1) / rates[gain] < seconds[slow]):
            out[slow] -= 1
            out[gain] += 1
            changed = True
    return Decision(out, changed, rates, imbalance)


def busy_times(walls, allreduces):
    """Each rank's busy seconds in each step of a window: walls[r][k] is rank r's time of
    step k (from one Balancer.step() to the next), allreduces[r][k] the seconds its
    allreduces of that step were in flight (0 without an AllreduceTimer). A step's
    allreduces end together on every rank, so a rank's time in flight beyond the shortest
    of the step's is its wait for the others, and only that is taken off. Taking off all of
    it would also take off the slowest rank's own time in the transfer, and any time that
    rank was held up (descheduled, throttled) while its allreduce was in flight, which makes
    the slowest rank look faster than it is."""
    steps = len(walls[0]) if walls else 0
    if len(allreduces) != len(walls) or any(len(x) != steps for x in list(walls) + list(allreduces)):
        raise ValueError("dlh.balance.busy_times: every rank needs one wall and one allreduce "
                         "time per step")
    shortest = [min(x[k] for x in allreduces) for k in range(steps)]
    return [[max(0.0, w - (a - shortest[k])) for k, (w, a) in enumerate(zip(wall, allreduce))]
            for wall, allreduce in zip(walls, allreduces)]


def window_seconds(busy):
    """A rank's busy seconds per step over a window, and how sure that figure is: (mean,
    standard error of the mean). The mean, not the median: a rate is samples over time, and
    a rank held up in bursts (a CPU quota's period, a neighbour's job) takes steps of one or
    two bursts, whose median is the shorter and makes it look faster than it runs. Each step
    counts at most 3x the window's median, so one long pause (a collection, a page-in) moves
    it little."""
    steps = [float(s) for s in busy]
    if not steps:
        raise ValueError("dlh.balance.window_seconds: no steps")
    cap = 3 * statistics.median(steps)
    steps = [min(s, cap) for s in steps]
    mean = statistics.fmean(steps)
    se = statistics.stdev(steps) / math.sqrt(len(steps)) if len(steps) > 1 else mean
    return mean, se


def _dist(group):
    """torch.distributed when it is initialized, else None."""
    try:
        import torch.distributed as dist
    except ImportError:
        return None
    if dist.is_available() and dist.is_initialized():
        return dist
    return None


class Balancer:
    """Adaptive balancing of a ShareSampler's split over the program's process group::

        sampler = dlh.ShareSampler(data, batch_size=dlh.batch(default=B))
        loader = DataLoader(data, batch_sampler=sampler.batches())
        balancer = dlh.Balancer(sampler, every=20)
        for x, y in loader:
            ...; optimizer.step()
            dlh.step(len(x), loss=...)
            balancer.step()             # every rank, after every step

    step() records the time since its last call and, when an AllreduceTimer is registered
    as the DDP communication hook, the step's allreduce seconds, from the first `every` steps
    on (those are its warm-up: no decision is made on them). Every `every` steps (>= 3)
    the ranks all_gather these windows (one collective) and every rank decides alike: a
    rank's busy time in a step is its time less its wait for the others, the wait being its
    allreduce seconds beyond the shortest of that step's (busy_times()); propose_split()
    takes each rank's mean over the window (window_seconds()), with the dead band widened by
    two standard errors of the least certain mean, and the split applies from the first
    batch no rank's DataLoader has fetched yet (a DataLoader with workers fetches ahead).
    Collective: call it on every rank.

    Active only under DLH (or with force=True) with more than one rank and
    torch.distributed initialized; otherwise step() does nothing. Create it before the
    DataLoader fetches its first batch. `history`: the splits, [(steps of this process
    before it, rank batches)], the first (0, the plan's); `decisions` (every rank alike):
    [(step, Decision)]; state_dict()/load_state_dict() carry the split through a
    checkpoint."""

    def __init__(self, sampler, every=20, timer=None, group=None, damping=0.5, max_move=0.25,
                 dead_band=0.05, force=False):
        if int(every) < 3:
            raise ValueError(f"dlh.Balancer: every must be at least 3, got {every}")
        self.sampler, self.every, self.group = sampler, int(every), group
        self.damping, self.max_move, self.dead_band = damping, max_move, dead_band
        self._timer = timer
        sampler._balanced = True
        self.max_batch = max_batch(sampler.global_batch, len(sampler.rank_batches),
                                   sampler.rank_batches)
        self.active = (force or _env.in_dlh()) and _dist(group) is not None and \
            _dist(group).get_world_size(group) > 1
        if self.active:
            ranks = _dist(group).get_world_size(group)
            if ranks != len(sampler.rank_batches):
                raise ValueError(f"dlh.Balancer: the process group has {ranks} ranks, the "
                                 f"sampler's split {len(sampler.rank_batches)}")
            global _active
            _active = self
        self.steps = 0
        self._consumed0 = sampler.yielded  # batches the loader had before the first step
        self._last = None
        # The steps of the split in force, the last 4 windows' worth: while a split stands,
        # each decision sees more of it, and the noise of a few steps moves it less.
        self._window = []
        self._longest = 4 * self.every
        self._window_split = None
        self._timer_seen = None
        self.history = [(0, sampler.rank_batches)]
        self.decisions = []  # (step, Decision) of rank 0's decisions
        self._said = 0

    def _timer_now(self):
        if self._timer is not None:
            return self._timer
        from dlh import comm
        return comm.current_timer()

    def step(self):
        """One step ended on this rank: measure it and, every `every` steps, rebalance
        (collective). Returns the split the next step uses."""
        now = time.perf_counter()
        self.steps += 1
        if not self.active:
            return self.sampler.rank_batches
        # The first `every` steps (of the run, or after a resume) are no window's: they pay for
        # allocations, lazy initialisation and cold caches. On make bench's mixed allocation a
        # decision on them at step 10 moved the plan's [98, 30] to [91, 37], toward the slower
        # rank, and 60 steps of steady windows only partly undid it.
        if self._last is not None and self.steps > self.every:
            allreduce = 0.0
            timer = self._timer_now()
            if timer is not None and timer.generation != self._timer_seen:
                self._timer_seen = timer.generation
                allreduce = timer.seconds()
            split = self.sampler._split_at(self._consumed0 + self.steps - 1)
            if split != self._window_split:  # a window measures one split only
                self._window, self._window_split = [], split
            self._window.append((now - self._last, allreduce))
            del self._window[:-self._longest]
        if self.steps % self.every == 0 and len(self._window) >= (self.every + 1) // 2:
            self._decide()
        self._last = time.perf_counter()  # the decision's collectives are no step's
        return self.sampler.rank_batches

    def _decide(self):
        import torch
        dist = _dist(self.group)
        device = "cpu"
        if dist.get_backend(self.group) == "nccl":
            device = torch.device("cuda", torch.cuda.current_device())
        ranks = dist.get_world_size(self.group)
        # One message a rank: [steps in the window, batches fetched ahead, its steps' seconds,
        # their allreduce seconds], padded to the longest a window can be.
        ahead = self.sampler.yielded - (self._consumed0 + self.steps)
        window, most = self._window, self._longest
        mine = torch.zeros(2 + 2 * most, dtype=torch.float64)
        mine[0], mine[1] = float(len(window)), float(ahead)
        for k, (wall, allreduce) in enumerate(window):
            mine[2 + k], mine[2 + most + k] = wall, allreduce
        gathered = [torch.zeros_like(mine, device=device) for _ in range(ranks)]
        dist.all_gather(gathered, mine.to(device), group=self.group)
        rows = [t.cpu().tolist() for t in gathered]
        first = self._consumed0 + self.steps + max(0, max(int(r[1]) for r in rows))
        current = self._window_split
        if self.sampler._split_at(first) != current:
            return  # a change still to come (a DataLoader far ahead): decide after it
        # Every rank has the same numbers and decides alike: no second collective.
        n = min(int(r[0]) for r in rows)
        if n == 0:
            return
        walls = [r[2 + int(r[0]) - n:2 + int(r[0])] for r in rows]
        allreduces = [r[2 + most + int(r[0]) - n:2 + most + int(r[0])] for r in rows]
        stats = [window_seconds(b) for b in busy_times(walls, allreduces)]
        seconds = [max(m, 1e-9) for m, _ in stats]
        # The dead band widens by the window's own noise (two standard errors of the least
        # certain rank's mean, relative): a split that only noise calls unbalanced stays.
        noise = 2 * max(se / s for (_, se), s in zip(stats, seconds))
        d = propose_split(current, seconds, self.sampler.global_batch, self.max_batch,
                          self.damping, self.max_move, self.dead_band + noise)
        d.noise = noise
        self.decisions.append((self.steps, d))
        if d.batches != current:
            self.sampler.set_batches(d.batches, from_batch=first)
            step = first - self._consumed0  # the steps before the new split
            self.history.append((step, list(d.batches)))
            if dist.get_rank(self.group) == 0 and self._said < 10:
                self._said += 1
                print(f"dlh: balance: from step {step} rank batches {d.batches} (the slowest "
                      f"rank was {100 * d.imbalance:.0f}% behind the ideal step)"
                      + ("; further changes only in Balancer.history" if self._said == 10
                         else ""), file=sys.stderr, flush=True)

    def state_dict(self):
        """The split to resume with and the history so far."""
        return {"rank_batches": self.sampler._split_at(self._consumed0 + self.steps),
                "history": [(s, list(b)) for s, b in self.history]}

    def load_state_dict(self, state):
        """Resume with a checkpoint's split (every rank loads the same), from the next batch
        the sampler gives."""
        batches = list(state["rank_batches"])
        if batches != self.sampler.rank_batches:
            self.sampler.set_batches(batches)
        self.history = [(int(s), list(b)) for s, b in state.get("history", [])] or \
            [(0, batches)]
