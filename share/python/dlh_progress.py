"""Tell DLH's launcher (``dlh-launch run``) how a training program progresses.

Two lines in a training script are enough::

    import dlh_progress
    ...
        optimizer.step()
        dlh_progress.step(len(batch))     # after every optimizer step

and, optionally, a description of the program for a profile (``dlh-launch run --profile``)::

    dlh_progress.describe_model(model)
    dlh_progress.describe(samples=len(train_set), epochs=args.epochs, global_batch=256,
                          lr=0.1, optimizer_slots=1, device="cpu", threads=8)

The protocol
------------
The launcher gives its rank's program the write end of a pipe and names its descriptor in
the environment variable DLH_PROGRESS_FD. The program writes lines of ASCII to it, each line
with one write(2) call (a write of less than PIPE_BUF bytes to a pipe arrives whole, even
when several threads or processes write at once)::

    step SAMPLES        one training step ended; this rank trained SAMPLES samples in it
    params N            trained parameter count of the model
    samples N           training samples per epoch (the whole data set, all ranks)
    epochs N            epochs the run trains
    global_batch N      the global batch
    lr X                the learning rate at that global batch
    optimizer_slots N   optimizer state arrays per weight (SGD with momentum 1, Adam 2)
    memory BYTES        peak device memory (GPU only)
    device TEXT         e.g. "cpu" or "cuda:0 (NVIDIA H100 80GB HBM3)"
    threads N           CPU threads the program computes with (on CPU)

The launcher uses the step lines to notice a stalled program (no step for
--stall-timeout) and to time steps (--profile); the other lines describe the program, and
when one is written again the last value counts. A shell script writes the same lines:
``echo "step 64" >&$DLH_PROGRESS_FD``.

Never in the way of the training
--------------------------------
* Run without the launcher (DLH_PROGRESS_FD unset, or not an open descriptor), every
  function does nothing.
* When a write fails (EPIPE: the launcher is gone; EBADF: the descriptor was closed; ...)
  the module stops reporting, silently, for the rest of the process. Python ignores SIGPIPE
  unless the program restores its default action, so a pipe without reader gives EPIPE
  rather than killing the program.
* A value the protocol cannot carry (step(0), memory=0, lr="fast") is not written: one
  warning per field goes to stderr, and step() still reports the step, without a count.
  Only a field name that does not exist raises (TypeError), as any wrong keyword would.

The module needs nothing but Python's standard library; describe_model() works with any
object that has PyTorch's ``parameters()`` without importing torch.
"""

import math
import os
import sys

__all__ = ["step", "describe", "describe_model", "enabled"]

# The descriptor lines go to: None until the first call looks at DLH_PROGRESS_FD, then the
# descriptor, or -1 when there is none or a write to it failed.
_fd = None
_warned = set()  # fields a warning was printed for

# Lines stay well below PIPE_BUF (at least 512 bytes on every POSIX system).
_MAX_TEXT = 256


def _channel():
    """The descriptor to write to, or -1 when there is none."""
    global _fd
    if _fd is None:
        _fd = -1
        value = os.environ.get("DLH_PROGRESS_FD", "").strip()
        if value.isdigit():
            try:
                os.fstat(int(value))  # open?
                _fd = int(value)
            except (OSError, ValueError, OverflowError):
                pass
    return _fd


def enabled():
    """True while lines go to a launcher (DLH_PROGRESS_FD names an open descriptor and no
    write to it has failed)."""
    return _channel() >= 0


def _write(line):
    """Write one line with one write call; on failure stop reporting for good."""
    global _fd
    fd = _channel()
    if fd < 0:
        return
    data = (line + "\n").encode("ascii", "replace")
    try:
        # A pipe takes a line below PIPE_BUF whole; the loop only matters for a descriptor
        # that is not a pipe (a file, when someone tests with DLH_PROGRESS_FD=3 3>log).
        while data:
            data = data[os.write(fd, data):]
    except InterruptedError:  # only if a signal handler raised; Python retries otherwise
        pass
    except BlockingIOError:  # a non-blocking pipe that is full: drop this line only
        pass
    except OSError:  # EPIPE, EBADF, EIO, ...: the launcher is no longer listening
        _fd = -1


def _warn(field, value, need):
    if field not in _warned:
        _warned.add(field)
        print(f"dlh_progress: {field}={value!r} not reported: needs {need}",
              file=sys.stderr, flush=True)


def _count(value, positive):
    """`value` as an int (int, numpy or torch integer, or an integral float), or None."""
    if isinstance(value, bool):
        return None
    try:
        n = value.__index__()
    except (AttributeError, TypeError, ValueError, RuntimeError):
        try:
            f = float(value)
        except (TypeError, ValueError, RuntimeError):
            return None
        if not math.isfinite(f) or f != int(f):
            return None
        n = int(f)
    return n if n > 0 or (n == 0 and not positive) else None


def _number(value):
    """`value` as a finite positive float, or None."""
    if isinstance(value, bool):
        return None
    try:
        f = float(value)
    except (TypeError, ValueError, RuntimeError):
        return None
    return f if math.isfinite(f) and f > 0 else None


def _float_text(value):
    """`value` as the shortest text of a finite positive float, or None."""
    f = _number(value)
    return None if f is None else repr(f)


def _bytes(value):
    """`value` as a positive whole number of bytes (a float is rounded), or None."""
    f = _number(value)
    return None if f is None or round(f) < 1 else round(f)


def _text(value):
    """`value` as one line of printable ASCII, or None when empty."""
    text = "".join(c if " " <= c <= "~" else " " for c in str(value))
    text = " ".join(text.split())[:_MAX_TEXT]
    return text or None


# describe()'s fields: (how the value is read, what a wrong one needs).
_FIELDS = {
    "params": (lambda v: _count(v, True), "a positive integer"),
    "samples": (lambda v: _count(v, True), "a positive integer"),
    "epochs": (lambda v: _count(v, True), "a positive integer"),
    "global_batch": (lambda v: _count(v, True), "a positive integer"),
    "lr": (_float_text, "a positive number"),
    "optimizer_slots": (lambda v: _count(v, False), "a non-negative integer"),
    "memory": (_bytes, "a positive number of bytes"),
    "device": (_text, "some text"),
    "threads": (lambda v: _count(v, True), "a positive integer"),
}


def step(samples=None):
    """Report that a training step ended, in which this rank trained `samples` samples
    (its batch; None: the count is unknown, the step still counts for stall detection).

    Call it after every optimizer step. It costs one write(2) of a few bytes."""
    if _channel() < 0:
        return
    if samples is None:
        _write("step")
        return
    n = _count(samples, True)
    if n is None:
        _warn("step", samples, "a positive integer")
        _write("step")
    else:
        _write(f"step {n}")


def describe(**fields):
    """Describe the program for the launcher's profile, with any of the keywords
    params, samples, epochs, global_batch, lr, optimizer_slots, memory, device, threads
    (see the module's documentation). A field given None is left out; call it again when
    a value changes (peak memory after some steps): the last value counts."""
    unknown = sorted(set(fields) - set(_FIELDS))
    if unknown:
        raise TypeError(f"dlh_progress.describe(): unknown field(s) {', '.join(unknown)}; "
                        f"known: {', '.join(_FIELDS)}")
    if _channel() < 0:
        return
    for name, value in fields.items():
        if value is None:
            continue
        read, need = _FIELDS[name]
        text = read(value)
        if text is None:
            _warn(name, value, need)
        else:
            _write(f"{name} {text}")


def describe_model(model):
    """Report the trainable parameter count of `model` (a torch.nn.Module, also one
    wrapped in DistributedDataParallel: anything with parameters()) and return it."""
    count = sum(p.numel() for p in model.parameters() if p.requires_grad)
    if count > 0:
        describe(params=count)
    return count
