"""Tell DLH's launcher (``dlh-launch run``) how a training program progresses.

Two lines in a training script are enough::

    import dlh_progress
    ...
        optimizer.step()
        dlh_progress.step(len(batch))     # after every optimizer step

what the step gave, and the evaluations and checkpoints, for the run's records (metrics.jsonl
and summary.json in the run folder, which ``dlh-report`` shows)::

    dlh_progress.step(len(batch), loss=loss.item(), epoch=epoch, compute=0.21, allreduce=0.03)
    dlh_progress.evaluation(epoch=epoch, test_loss=0.41, test_accuracy=0.853)
    dlh_progress.checkpoint(path, step)      # once the file is complete
    dlh_progress.resumed(step, path)         # at start, after loading a checkpoint

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

    step SAMPLES [NAME=VALUE ...]
                        one training step ended; this rank trained SAMPLES samples in it;
                        NAME: loss, accuracy (0 to 1), lr, samples_per_s, epoch (counted
                        from 1), data, compute, allreduce (this rank's seconds in them)
    eval [epoch=N] [step=N] NAME=VALUE ...
                        an evaluation's metrics (test_loss, test_accuracy, any other name
                        of letters, digits and _)
    checkpoint STEP PATH
                        a checkpoint of step STEP is complete at PATH
    resume STEP [PATH]  the program resumed at step STEP (from PATH)
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
--stall-timeout) and to time steps (--profile); rank 0 writes the step, eval, checkpoint and
resume lines of its program into the run's records, and every rank's mean data, compute and
allreduce seconds into summary.json. The description lines describe the program, and when
one is written again the last value counts. A shell script writes the same lines:
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

__all__ = ["step", "evaluation", "checkpoint", "resumed", "describe", "describe_model",
           "enabled"]

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
    data = (line + "\n").encode("utf-8", "replace")  # ASCII but for a path's own characters
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


# A checkpoint's path goes through as it is (spaces, accents: UTF-8) in a line below PIPE_BUF;
# the run's records and summary.json keep it, and it was once cut at _MAX_TEXT characters and
# its accents turned into spaces.
_MAX_PATH_BYTES = 4000


def _path_text(value):
    """`value`, a path, as the rest of a line: its text, or None when it is empty, holds a
    control character (a newline would end the line), is not valid Unicode or is longer than
    _MAX_PATH_BYTES in UTF-8."""
    text = os.fspath(value)
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            return None
    if not text or any(ord(c) < 32 or ord(c) == 127 for c in text):
        return None
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:  # a name of undecodable bytes (surrogate escapes)
        return None
    return text if size <= _MAX_PATH_BYTES else None


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


# step()'s fields: (how the value is read, what a wrong one needs).
_STEP_FIELDS = {
    "loss": (lambda v: _finite(v), "a finite number"),
    "accuracy": (lambda v: _finite(v, 0, 1), "a fraction from 0 to 1"),
    "lr": (lambda v: _finite(v, 0), "a non-negative number"),
    "samples_per_s": (_float_text, "a positive number"),
    "epoch": (lambda v: _count(v, False), "a non-negative integer"),
    "data": (lambda v: _finite(v, 0), "non-negative seconds"),
    "compute": (lambda v: _finite(v, 0), "non-negative seconds"),
    "allreduce": (lambda v: _finite(v, 0), "non-negative seconds"),
}


def _finite(value, least=None, most=None):
    """`value` (a float, or a one-element tensor) as the text of a finite float in
    [least, most], or None."""
    if isinstance(value, bool):
        return None
    try:
        f = float(value)
    except (TypeError, ValueError, RuntimeError):
        return None
    if not math.isfinite(f) or (least is not None and f < least) or (
            most is not None and f > most):
        return None
    return repr(f)


def _fields(line, fields, table, kind):
    """`line` with ` name=value` for each field `table` can read; a value it cannot read is
    left out with one warning per field."""
    for name, value in fields.items():
        if value is None:
            continue
        read, need = table[name]
        text = read(value)
        if text is None:
            _warn(f"{kind}.{name}", value, need)
        else:
            line += f" {name}={text}"
    return line


def step(samples=None, **fields):
    """Report that a training step ended, in which this rank trained `samples` samples
    (its batch; None: the count is unknown, the step still counts for stall detection).

    Optional keywords go into the run's records: loss, accuracy (0 to 1), lr,
    samples_per_s (the whole job's), epoch (the step's, counted from 1), and this rank's
    seconds of the step in data, compute and allreduce. A tensor is read with float(), which
    waits for the device: pass the loss every few steps if that costs.

    Call it after every optimizer step. It costs one write(2) of a few bytes."""
    unknown = sorted(set(fields) - set(_STEP_FIELDS))
    if unknown:
        raise TypeError(f"dlh_progress.step(): unknown field(s) {', '.join(unknown)}; "
                        f"known: {', '.join(_STEP_FIELDS)}")
    if _channel() < 0:
        return
    line = "step"
    if samples is not None:
        n = _count(samples, True)
        if n is None:
            _warn("step", samples, "a positive integer")
        else:
            line += f" {n}"
    _write(_fields(line, fields, _STEP_FIELDS, "step"))


def _metric_name(name):
    return (0 < len(name) <= 64 and not name[0].isdigit() and name not in ("event", "t")
            and all(c == "_" or (c.isascii() and c.isalnum()) for c in name))


def evaluation(epoch=None, step=None, **metrics):
    """Report an evaluation: its metrics by name (test_loss=..., test_accuracy=... are the
    ones dlh-report draws and summary.json names; any name of letters, digits and _), after
    `epoch` epochs (counted from 1) and at `step` (None: the last step reported)."""
    if _channel() < 0:
        return
    line = "eval"
    for name, value in (("epoch", epoch), ("step", step)):
        if value is not None:
            n = _count(value, False)
            if n is None:
                _warn(f"eval.{name}", value, "a non-negative integer")
            else:
                line += f" {name}={n}"
    written = 0
    for name, value in metrics.items():
        text = _finite(value) if _metric_name(name) else None
        if value is None:
            continue
        if text is None:
            _warn(f"eval.{name}", value, "a name of letters, digits and _ and a finite number")
        else:
            line += f" {name}={text}"
            written += 1
    if written:
        _write(line)


def checkpoint(path, step):
    """Report that the checkpoint of step `step` is complete at `path` (after the rename
    that makes it whole): the run's records and summary.json name it."""
    if _channel() < 0:
        return
    n = _count(step, False)
    text = _path_text(path) if path is not None else None
    if n is None or text is None:
        _warn("checkpoint", (path, step), "a path and a non-negative step")
        return
    _write(f"checkpoint {n} {text}")


def stopping(signal_name):
    """Report that the program is stopping for `signal_name` ("SIGUSR1" or "SIGTERM"), which
    may have been sent to another rank only (the ranks agreed on it): this rank's launcher
    then takes the program's exit as obeying a stop, not as a crash."""
    if _channel() < 0 or signal_name not in ("SIGUSR1", "SIGTERM"):
        return
    _write(f"stop {signal_name}")


def resumed(step, path=None):
    """Report that the program resumed at step `step` (from checkpoint `path`): the run's
    step count goes on from there."""
    if _channel() < 0:
        return
    n = _count(step, False)
    if n is None:
        _warn("resume", step, "a non-negative integer")
        return
    text = _path_text(path) if path is not None else None
    _write(f"resume {n}" + (f" {text}" if text else ""))


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
