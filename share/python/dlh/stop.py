"""A stop asked for by a signal: ``dlh-launch run`` passes SIGUSR1 (Slurm's warning before the
time limit, which the job script turns into a requeue) and SIGTERM (scancel, the time limit)
on to the program. The program checkpoints at a step boundary and exits."""

import signal

# By severity: a rank told both SIGUSR1 and SIGTERM stops for SIGTERM.
_SEVERITY = {signal.SIGUSR1: 1, signal.SIGTERM: 2}
_NAMES = {0: None, 1: "SIGUSR1", 2: "SIGTERM"}
_requested = 0  # this process's, from the handler
_agreed = 0     # the last should_stop(agree=True)'s, over every rank
_told = 0       # the stop level the launcher was told of ("stop SIGNAME" on the channel)
_installed = False

# should_stop(agree=True)'s schedule, alike on every rank: the ranks agree about every
# AGREE_SECONDS (rank 0 times its calls and proposes, with each agreement, the calls to the
# next; every rank reads the agreement at the same call, so all take it).
AGREE_SECONDS = 0.25
_calls = 0          # calls so far
_next = 0           # the call at which the next agreement starts
_pending = None     # the agreement in flight: (work, its tensor, the call it started at)
_since = None       # rank 0: (perf_counter, calls) when the last agreement started


def _on_signal(signum, frame):
    """Only note it: the training loop stops at its next step boundary."""
    global _requested
    _requested = max(_requested, _SEVERITY.get(signum, 0))


def catch_signals():
    """Under DLH, SIGUSR1 and SIGTERM set the flag should_stop() reads instead of ending the
    program. Call it first, before importing torch: the signal may come early, and SIGUSR1's
    default action ends a process without a checkpoint. Outside DLH it does nothing (plain
    torchrun ends its workers with SIGTERM, which must end them) and returns False."""
    global _installed
    from dlh.env import in_dlh
    if not in_dlh():
        return False
    if not _installed:
        for signum in _SEVERITY:
            signal.signal(signum, _on_signal)
        _installed = True
    return True


def should_stop(agree=False):
    """True once a stop signal came. With `agree` (call it at the same point on every rank,
    once a step), the ranks decide together when torch.distributed is initialized, so that
    every rank stops at the same step (a rank that stopped alone would leave the others
    waiting in their next allreduce).

    The agreement is one all_reduce (MAX) of two numbers, started asynchronously and read at
    the next call, so the step never waits on it (a blocking one cost 1-2 ms a step on 2 CPU
    ranks over gloo, 7% of the step). Even so each costs every rank CPU time (0.3-0.6 ms on
    this project's 2-core VMs) and, on a GPU, a wait for the stream at the read; so the ranks
    agree only about every AGREE_SECONDS (0.25 s): rank 0 proposes the number of calls that
    takes, from its own calls' pace, with each agreement. A stop then comes within about
    0.25 s and one step of the signal, at the same step on every rank.

    A stop the ranks agreed on stands: every later call returns True, with `agree` or without
    (no collective: every rank read the agreement at the same call), also on a rank that
    learned of it only from the others. A loop that breaks on should_stop(agree=True) and
    then asks should_stop() again, say at the end of its epoch, sees the same answer on
    every rank."""
    global _agreed
    if _agreed > 0:
        return True
    level = _requested
    if agree:
        try:
            import torch.distributed as dist
        except ImportError:
            dist = None
        if dist is not None and dist.is_available() and dist.is_initialized():
            level = _agree(dist, level)
        _agreed = max(_agreed, level)
    _tell(level)
    return level > 0


def _tell(level):
    """The launcher learns of a stop the program obeys, once a level: its own rank may not
    have been sent the signal (the ranks agreed on another's)."""
    global _told
    if level > _told:
        _told = level
        from dlh._progress import stopping
        stopping(_NAMES[level])


def _agree(dist, level):
    """should_stop(agree=True)'s collective part: the stop level every rank agreed on at the
    last agreement read (0 until one says stop)."""
    global _pending, _calls, _next, _since
    import time
    import torch
    call, _calls = _calls, _calls + 1
    agreed = 0
    if _pending is not None:
        work, flag, started = _pending
        work.wait()
        agreed, proposed = (int(v) for v in flag.tolist())
        _pending = None
        _next = started + max(1, proposed)
    if agreed == 0 and call >= _next:  # not stopping yet: this call's flag for the next
        device = "cpu"
        if dist.get_backend() == "nccl":
            device = torch.device("cuda", torch.cuda.current_device())
        proposal = 0
        if dist.get_rank() == 0:
            now = time.perf_counter()
            if _since is not None and call > _since[1]:
                pace = (now - _since[0]) / (call - _since[1])
                proposal = int(min(1000, max(1, AGREE_SECONDS / max(pace, 1e-9))))
            else:
                proposal = 1
            _since = (now, call)
        flag = torch.tensor([level, proposal], dtype=torch.int64, device=device)
        _pending = (dist.all_reduce(flag, op=dist.ReduceOp.MAX, async_op=True), flag, call)
    return agreed


def stop_signal():
    """"SIGUSR1" or "SIGTERM": the stop asked for (by any rank, after should_stop(agree=True));
    None: none."""
    return _NAMES[max(_requested, _agreed)]


def exit_code():
    """The exit status after a stop, as the job script reads it: 0 after SIGUSR1 (saved:
    requeue), 143 (128 + SIGTERM) after SIGTERM, 0 without a stop."""
    return 128 + signal.SIGTERM if stop_signal() == "SIGTERM" else 0
