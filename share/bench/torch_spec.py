#!/usr/bin/python3
"""DLH make bench: a DLH training spec trained in PyTorch (the PyTorch side of
share/bench/quality.sh, "Training quality: DLH against PyTorch on Fashion-MNIST").

    /usr/bin/python3 share/bench/torch_spec.py --spec SPEC.json --epochs N --threads T \
        --seed S --out RESULT.json [--train-limit N] [--data-dir DIR]

The model, initialisation, optimizer, learning-rate schedule, batch and data follow the spec
as dlh-launch train reads it (common/spec.cpp, launcher/nn, launcher/data):

  * layers: conv2d, maxpool2d, avgpool2d (padded cells count, as nn.AvgPool2d's default),
    globalavgpool2d (nn.AdaptiveAvgPool2d(1)), dense (a flat view of any input), relu, gelu
    (exact, erf), silu, flatten, dropout (inverted), batchnorm (BatchNorm2d on a spatial
    input, BatchNorm1d on a flat one; the running variance is the unbiased one and momentum
    the weight of the new batch, as in DLH), residual (the main path plus the shortcut, or
    plus the input itself: class Residual); softmax cross-entropy with the spec's
    label_smoothing, the mean over the batch, after the last dense layer (the test loss too).
  * load_dlh_checkpoint() copies a DLH checkpoint's parameters and batch-norm buffers into
    the model (tests/scripts/torch_spec.sh checks DLH's test loss and a training step with it).
  * init: the spec's "init" (default for every conv2d and dense layer) and each layer's
    "init" / "bias_init" (see INITS below); without any, PyTorch's own default.
  * optimizer: sgd (momentum, nesterov, L2 weight decay) or adam (decoupled weight decay,
    i.e. AdamW); weight decay on conv2d/dense weights only, never on biases or batchnorm.
  * schedule: LearningRate of common/spec.cpp, set on every step.
  * augment: the spec's random crop and flip of each training batch (augment_batch).
  * data: the gzipped IDX files of Fashion-MNIST, scaled to [0, 1] and standardised with
    the training pixels' mean and population std, computed and applied exactly as
    `dlh-data import-fashion-mnist` + the loader do (float32 x * (1/255/std) - mean/std).
  * order: a fresh random permutation of the training set every epoch; the last partial
    batch of an epoch is dropped (steps per epoch = floor(N / batch), as DLH's loader).

Writes one JSON file: per epoch the mean training loss and accuracy over its steps, the
test loss and accuracy (eval mode, the whole test set), the training seconds since the
start (evaluations excluded), the same with evaluations included, and the evaluation's
seconds; the first step's loss; every step's loss. Run with Debian's /usr/bin/python3
(python3-torch) and OMP_WAIT_POLICY=PASSIVE (see share/bench/bench.sh)."""
import argparse
import gzip
import json
import math
import os
import sys
import time

import numpy as np
import torch
from torch import nn

DATA_DIR = "/usr/share/datasets/fashion-mnist"

# Weight initialisations by name: fan_in = in_channels*k*k (conv2d) or in_features (dense),
# fan_out = filters*k*k or units, which is how torch.nn.init computes its fans too.
INITS = ("he_normal", "he_uniform", "glorot_normal", "glorot_uniform", "torch_default")
BIAS_INITS = ("zeros", "torch_default")
DEFAULT_INIT = "torch_default"


class SpecError(Exception):
    pass


def init_weight(w, kind):
    if kind == "he_normal":  # N(0, sqrt(2 / fan_in))
        nn.init.kaiming_normal_(w, mode="fan_in", nonlinearity="relu")
    elif kind == "he_uniform":  # U(±sqrt(6 / fan_in))
        nn.init.kaiming_uniform_(w, mode="fan_in", nonlinearity="relu")
    elif kind == "glorot_normal":  # N(0, sqrt(2 / (fan_in + fan_out)))
        nn.init.xavier_normal_(w)
    elif kind == "glorot_uniform":  # U(±sqrt(6 / (fan_in + fan_out)))
        nn.init.xavier_uniform_(w)
    elif kind == "torch_default":  # U(±1/sqrt(fan_in)): what nn.Linear / nn.Conv2d do
        nn.init.kaiming_uniform_(w, a=math.sqrt(5))
    else:
        raise SpecError(f"unknown init {kind!r} (one of {', '.join(INITS)})")


def init_bias(b, kind, fan_in):
    if kind == "zeros":
        nn.init.zeros_(b)
    elif kind == "torch_default":  # U(±1/sqrt(fan_in))
        bound = 1.0 / math.sqrt(fan_in)
        nn.init.uniform_(b, -bound, bound)
    else:
        raise SpecError(f"unknown bias_init {kind!r} (one of {', '.join(BIAS_INITS)})")


class Residual(nn.Module):
    """A DLH residual block: the main path and the shortcut (an empty nn.Sequential: the
    identity) both take the block's input, and their outputs are added. A path that ends flat
    (after a dense or flatten layer) and one that ends N x C x 1 x 1 hold the same values in
    the same order, so the shortcut's output is viewed in the main path's shape."""

    def __init__(self, main, shortcut):
        super().__init__()
        self.main, self.shortcut = main, shortcut

    def forward(self, x):
        m = self.main(x)
        return m + self.shortcut(x).reshape(m.shape)


def build_model(spec):
    """An nn.Sequential for a DLH spec (a dict). Returns (model, decayed, not_decayed): the
    conv2d/dense weights, which take weight decay, and every other parameter. The model's
    attribute dlh_params lists (DLH array name, tensor) for every parameter and batch-norm
    buffer, named as DLH's checkpoints name them (see load_dlh_checkpoint)."""
    inp = spec["input"]
    default_init = spec.get("init", DEFAULT_INIT)
    if default_init not in INITS:
        raise SpecError(f"init: unknown {default_init!r} (one of {', '.join(INITS)})")
    decayed, plain, names = [], [], []
    shape = (int(inp["channels"]), int(inp["height"]), int(inp["width"]))  # C, H, W
    # flat: whether the tensor is N x features; the data come as N x C x H x W.
    mods, shape, flat = build_path(spec["layers"], shape, False, default_init, "layers", "",
                                   decayed, plain, names)
    if not flat or shape[0] != int(spec["classes"]):
        raise SpecError(f"the last layer must output {spec['classes']} values")
    model = nn.Sequential(*mods)
    model.dlh_params = names
    return model, decayed, plain


def build_path(layers, shape, flat, default_init, path, prefix, decayed, plain, names):
    """The modules of a list of layers from a C x H x W `shape` (flat or not): (modules,
    shape, flat) after the last. `path` names the list in messages ("layers",
    "layers[3].layers"); `prefix` starts the DLH names of its arrays ("", "03.residual/main.")."""
    mods = []

    def features():
        return shape[0] * shape[1] * shape[2]

    for i, l in enumerate(layers):
        kind = l["type"]
        at = f"{path}[{i}]"
        name = f"{prefix}{i:02d}.{kind}/"
        if kind in ("conv2d", "maxpool2d", "avgpool2d", "globalavgpool2d") and flat:
            raise SpecError(f"{at}: {kind} needs a spatial input")
        if kind == "conv2d":
            k, s, p = int(l["kernel"]), int(l.get("stride", 1)), int(l.get("padding", 0))
            m = nn.Conv2d(shape[0], int(l["filters"]), k, stride=s, padding=p)
            fan_in = shape[0] * k * k
            shape = (int(l["filters"]), (shape[1] + 2 * p - k) // s + 1, (shape[2] + 2 * p - k) // s + 1)
        elif kind in ("maxpool2d", "avgpool2d"):
            k = int(l["kernel"])
            s, p = int(l.get("stride", k)), int(l.get("padding", 0))
            if kind == "maxpool2d":
                mods.append(nn.MaxPool2d(k, stride=s, padding=p))  # padded cells never win, as in DLH
            else:  # padded cells count as zeros in the mean, as in DLH (count_include_pad)
                mods.append(nn.AvgPool2d(k, stride=s, padding=p))
            shape = (shape[0], (shape[1] + 2 * p - k) // s + 1, (shape[2] + 2 * p - k) // s + 1)
            continue
        elif kind == "globalavgpool2d":
            mods.append(nn.AdaptiveAvgPool2d(1))
            shape = (shape[0], 1, 1)
            continue
        elif kind == "dense":
            if not flat:
                mods.append(nn.Flatten())
                flat = True
            m = nn.Linear(features(), int(l["units"]))
            fan_in = features()
            shape = (int(l["units"]), 1, 1)
        elif kind in ("relu", "gelu", "silu"):
            # GELU: the exact one, x * Phi(x) with erf, as DLH computes it.
            mods.append({"relu": nn.ReLU, "gelu": nn.GELU, "silu": nn.SiLU}[kind]())
            continue
        elif kind == "flatten":
            if not flat:
                mods.append(nn.Flatten())
            shape, flat = (features(), 1, 1), True
            continue
        elif kind == "dropout":
            mods.append(nn.Dropout(float(l["rate"])))
            continue
        elif kind == "batchnorm":
            bn = nn.BatchNorm1d if flat else nn.BatchNorm2d
            m = bn(shape[0], eps=float(l.get("epsilon", 1e-5)), momentum=float(l.get("momentum", 0.1)))
            mods.append(m)
            plain.extend(m.parameters())
            names.extend([(name + "gamma", m.weight), (name + "beta", m.bias),
                          (name + "running_mean", m.running_mean), (name + "running_var", m.running_var)])
            continue
        elif kind == "residual":
            if not l.get("layers"):
                raise SpecError(f"{at}.layers: must be a non-empty array of layers")
            main, main_shape, main_flat = build_path(
                l["layers"], shape, flat, default_init, at + ".layers", name + "main.",
                decayed, plain, names)
            short, short_shape, _ = build_path(
                l.get("shortcut", []), shape, flat, default_init, at + ".shortcut",
                name + "shortcut.", decayed, plain, names)
            if main_shape != short_shape:
                raise SpecError(f"{at}: the main path outputs {main_shape}, the shortcut {short_shape}")
            mods.append(Residual(nn.Sequential(*main), nn.Sequential(*short)))
            shape, flat = main_shape, flat or main_flat
            continue
        else:
            raise SpecError(f"{at}.type: unknown {kind!r}")
        # conv2d or dense: its initialisation.
        w_init = l.get("init", default_init)
        b_init = l.get("bias_init", "torch_default" if w_init == "torch_default" else "zeros")
        init_weight(m.weight, w_init)
        init_bias(m.bias, b_init, fan_in)
        mods.append(m)
        decayed.append(m.weight)
        plain.append(m.bias)
        names.extend([(name + "weight", m.weight), (name + "bias", m.bias)])
    return mods, shape, flat


def load_dlh_checkpoint(model, path):
    """Copies a DLH checkpoint's parameters and batch-norm buffers (HDF5 /params and /buffers,
    docs/reference/checkpoint.md) into a model of build_model() for the same spec; every array
    of either side must have its counterpart with the same number of values. Returns the
    checkpoint's root attributes (step, input_mean, ...)."""
    import h5py
    with h5py.File(path, "r") as f:
        stored = {}
        for group in ("params", "buffers"):
            if group in f:
                f[group].visititems(lambda n, o, g=group: stored.__setitem__(n, o[()])
                                    if isinstance(o, h5py.Dataset) else None)
        wanted = {n for n, _ in model.dlh_params}
        if set(stored) != wanted:
            raise SpecError(f"{path}: arrays {sorted(set(stored) - wanted)} have no place in the "
                            f"model, {sorted(wanted - set(stored))} are missing")
        with torch.no_grad():
            for n, t in model.dlh_params:
                a = torch.from_numpy(np.asarray(stored[n], dtype=np.float32))
                if a.numel() != t.numel() or (a.dim() == t.dim() and a.shape != t.shape):
                    raise SpecError(f"{path}: {n} is {tuple(a.shape)}, the model's {tuple(t.shape)}")
                t.copy_(a.reshape(t.shape))
        return {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}


def make_optimizer(spec, decayed, plain):
    o = spec["optimizer"]
    wd = float(o.get("weight_decay", 0))
    groups = [{"params": decayed, "weight_decay": wd}, {"params": plain, "weight_decay": 0.0}]
    lr = float(o["lr"])
    if o["type"] == "sgd":
        return torch.optim.SGD(groups, lr=lr, momentum=float(o.get("momentum", 0)),
                               nesterov=bool(o.get("nesterov", False)))
    if o["type"] == "adam":
        return torch.optim.AdamW(groups, lr=lr, betas=(float(o.get("beta1", 0.9)), float(o.get("beta2", 0.999))),
                                 eps=float(o.get("epsilon", 1e-8)))
    raise SpecError(f"optimizer.type: unknown {o['type']!r}")


def learning_rate(spec, epochs, step, steps_per_epoch):
    """common/spec.cpp LearningRate: the rate at a 0-based global step."""
    o, s = spec["optimizer"], spec.get("schedule", {})
    lr = float(o["lr"])
    spe = max(1, steps_per_epoch)
    step = max(0, step)
    total = epochs * spe
    warmup = int(math.floor(float(s.get("warmup_epochs", 0)) * spe + 0.5))  # llround, x >= 0
    if step < warmup:
        return lr * (step + 1) / warmup
    decay = s.get("decay", "constant")
    if decay == "step":
        period = float(s["step_epochs"]) * spe
        if not period > 0:
            return lr
        return lr * float(s.get("gamma", 0.1)) ** math.floor(step / period)
    if decay == "cosine":
        min_lr = float(s.get("min_lr", 0))
        t, T = step - warmup, max(1, total - warmup)
        return min_lr + (lr - min_lr) * 0.5 * (1 + math.cos(math.pi * min(t, T) / T))
    if decay == "onecycle":  # torch.optim.lr_scheduler.OneCycleLR, cosine, two phases
        def anneal(a, b, x):
            return b + (a - b) * 0.5 * (1 + math.cos(math.pi * x))
        lo = lr / float(s.get("div_factor", 25))
        end = lo / float(s.get("final_div_factor", 1e4))
        up, last = float(s.get("pct_start", 0.3)) * total - 1, total - 1.0
        if step <= up:
            return anneal(lo, lr, step / up if up > 0 else 1.0)
        if not last > up:
            return end
        return anneal(lr, end, min(1.0, (step - up) / (last - up)))
    return lr


def augment_batch(xb, spec, rng):
    """The spec's "augment" on a training batch (N x C x H x W): a random crop of the image
    zero-padded by crop_padding on each side, then a random horizontal flip, per sample, as
    torchvision's RandomCrop(padding) and RandomHorizontalFlip (DLH draws its own offsets:
    the same distribution, not the same samples)."""
    a = spec.get("augment", {})
    pad, flip = int(a.get("crop_padding", 0)), bool(a.get("flip", False))
    if pad == 0 and not flip:
        return xb
    n, _, h, w = xb.shape
    if pad > 0:
        padded = nn.functional.pad(xb, (pad, pad, pad, pad))
        dy = torch.randint(0, 2 * pad + 1, (n,), generator=rng)
        dx = torch.randint(0, 2 * pad + 1, (n,), generator=rng)
        xb = torch.stack([padded[i, :, dy[i]:dy[i] + h, dx[i]:dx[i] + w] for i in range(n)])
    if flip:
        mirror = torch.rand(n, generator=rng) < 0.5
        xb = torch.where(mirror[:, None, None, None], xb.flip(3), xb)
    return xb


def read_idx(path):
    with gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb") as f:
        raw = f.read()
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def find_idx(data_dir, stem):
    for name in (stem + ".gz", stem):
        if os.path.exists(os.path.join(data_dir, name)):
            return os.path.join(data_dir, name)
    raise FileNotFoundError(f"{data_dir}: no {stem}(.gz)")


def load_fashion_mnist(data_dir=DATA_DIR):
    """(train_x, train_y, test_x, test_y, mean, std), images N x 1 x 28 x 28 float32,
    normalised as dlh-data import-fashion-mnist + the DLH loader do."""
    parts = {}
    for split, prefix in (("train", "train"), ("test", "t10k")):
        images = read_idx(find_idx(data_dir, f"{prefix}-images-idx3-ubyte"))
        labels = read_idx(find_idx(data_dir, f"{prefix}-labels-idx1-ubyte"))
        parts[split] = (images, labels)
    # Statistics of all training pixels after /255, in double, population std (ImportFashionMnist).
    # A histogram, summed in the same order, gives the same doubles as DLH.
    hist = np.bincount(parts["train"][0].ravel(), minlength=256).tolist()
    n = total = total_sq = 0.0
    for v, count in enumerate(hist):
        x = v / 255.0
        n += float(count)
        total += float(count) * x
        total_sq += float(count) * x * x
    mean = total / n
    std = math.sqrt(max(0.0, total_sq / n - mean * mean))
    # LoadSplit: one float32 multiply-add per value, v * (1/255/std) + (-mean/std).
    a, b = np.float32(1.0 / 255.0 / std), np.float32(-mean / std)
    out = []
    for split in ("train", "test"):
        images, labels = parts[split]
        v = images.astype(np.float32) * a + b
        out.append(torch.from_numpy(v.reshape(len(images), 1, images.shape[1], images.shape[2])))
        out.append(torch.from_numpy(labels.astype(np.int64)))
    return (*out, mean, std)


def evaluate(model, x, y, batch=256, label_smoothing=0.0):  # DLH evaluates in chunks of 256 too (kEvalChunk)
    model.eval()
    loss_sum, correct = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(x), batch):
            logits = model(x[i:i + batch])
            loss_sum += float(nn.functional.cross_entropy(logits, y[i:i + batch], reduction="sum",
                                                          label_smoothing=label_smoothing))
            correct += int((logits.argmax(1) == y[i:i + batch]).sum())
    model.train()
    return loss_sum / len(x), correct / len(x)


def train(spec, epochs, seed, train_x, train_y, test_x, test_y, log=None):
    torch.manual_seed(seed)  # initialisation and dropout masks
    order = torch.Generator().manual_seed(seed)  # data order
    model, decayed, plain = build_model(spec)
    opt = make_optimizer(spec, decayed, plain)
    batch = int(spec["batch_size"])
    smoothing = float(spec.get("label_smoothing", 0))
    n = len(train_x)
    spe = n // batch  # the last partial batch is dropped, as DLH's loader does
    if spe < 1:
        raise SpecError(f"batch_size {batch} exceeds the {n} training samples")
    model.train()
    step, train_s, eval_total = 0, 0.0, 0.0
    step_loss, per_epoch = [], []
    t_start = time.perf_counter()
    for epoch in range(1, epochs + 1):
        t_epoch = time.perf_counter()
        perm = torch.randperm(n, generator=order)
        loss_sum = acc_sum = 0.0
        for s in range(spe):
            idx = perm[s * batch:(s + 1) * batch]
            xb, yb = augment_batch(train_x[idx], spec, order), train_y[idx]
            lr = learning_rate(spec, epochs, step, spe)
            for g in opt.param_groups:
                g["lr"] = lr
            opt.zero_grad(set_to_none=True)
            logits = model(xb)
            loss = nn.functional.cross_entropy(logits, yb, label_smoothing=smoothing)
            loss.backward()
            opt.step()
            lv = float(loss.detach())
            step_loss.append(lv)
            loss_sum += lv
            acc_sum += float((logits.detach().argmax(1) == yb).float().mean())
            step += 1
        train_s += time.perf_counter() - t_epoch
        t_eval = time.perf_counter()
        test_loss, test_acc = evaluate(model, test_x, test_y, label_smoothing=smoothing)
        eval_s = time.perf_counter() - t_eval
        eval_total += eval_s
        rec = {"epoch": epoch, "step": step, "train_loss": loss_sum / spe, "train_accuracy": acc_sum / spe,
               "test_loss": test_loss, "test_accuracy": test_acc, "seconds": train_s,
               "seconds_with_eval": time.perf_counter() - t_start, "eval_seconds": eval_s}
        per_epoch.append(rec)
        if log:
            print(f"epoch {epoch}/{epochs}: train loss {rec['train_loss']:.4f}, test accuracy "
                  f"{100 * test_acc:.2f}%, {train_s:.1f} s training", file=log, flush=True)
    return {"steps_per_epoch": spe, "first_step_loss": step_loss[0], "epochs": per_epoch,
            "step_loss": step_loss, "train_seconds": train_s, "eval_seconds": eval_total}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--spec", required=True)
    p.add_argument("--epochs", type=int, help="default: the spec's")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, help="default: the spec's")
    p.add_argument("--out", required=True)
    p.add_argument("--train-limit", type=int, default=0, help="train on the first N samples only")
    p.add_argument("--data-dir", default=DATA_DIR)
    a = p.parse_args()
    with open(a.spec) as f:
        spec = json.load(f)
    epochs = a.epochs if a.epochs is not None else int(spec["epochs"])
    seed = a.seed if a.seed is not None else int(spec.get("seed", 0))
    torch.set_num_threads(a.threads)
    t0 = time.perf_counter()
    train_x, train_y, test_x, test_y, mean, std = load_fashion_mnist(a.data_dir)
    load_s = time.perf_counter() - t0
    if a.train_limit > 0:
        train_x, train_y = train_x[:a.train_limit], train_y[:a.train_limit]
    try:
        r = train(spec, epochs, seed, train_x, train_y, test_x, test_y, log=sys.stderr)
    except SpecError as e:
        sys.exit(f"{a.spec}: {e}")
    result = {"framework": "pytorch", "torch": torch.__version__, "spec": a.spec,
              "spec_name": spec.get("name"), "epochs_trained": epochs, "seed": seed,
              "threads": a.threads, "batch_size": int(spec["batch_size"]),
              "train_samples": len(train_x), "test_samples": len(test_x),
              "data_mean": mean, "data_std": std, "load_seconds": load_s,
              "init": spec.get("init", DEFAULT_INIT), **r}
    tmp = a.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f)
    os.replace(tmp, a.out)


if __name__ == "__main__":
    main()
