#!/usr/bin/env python3
"""DLH GPU check: the PyTorch side of the GPU throughput comparison.

Builds the model of a DLH spec (the same layers, residual blocks included, shapes, label
smoothing and SGD settings) as a torch.nn.Sequential, trains it on the GPU on a fixed random batch and prints the median
samples/s of the timed steps. Each step does what a DLH step does: it copies the batch
from pinned host memory to the GPU (non_blocking, as DLH's copy stream does), runs
forward, backward and the SGD update, reads the loss on the host (loss.item(), as DLH
reads the loss every step) and is synchronised before the next starts.

--compute-rate adds a second line, "compute-only <samples/s>": the same steps on a batch
that stays on the GPU (no copy). DLH's nearest figure is batch_size / time.compute of
metrics.jsonl, which still includes DLH's copy of the batch to the GPU."""
import argparse
import json
import statistics
import time

import torch
from torch import nn


class Residual(nn.Module):
    """A DLH residual block: main path + shortcut (empty: the identity), as in
    share/bench/torch_spec.py."""

    def __init__(self, main, shortcut):
        super().__init__()
        self.main, self.shortcut = main, shortcut

    def forward(self, x):
        m = self.main(x)
        return m + self.shortcut(x).reshape(m.shape)


def build_path(layers, c, h, w, flat):
    """The modules of a list of layers from C x H x W (flat: the number of features once flat,
    else None): (modules, c, h, w, flat) after the last."""
    mods = []
    for layer in layers:
        kind = layer["type"]
        if kind == "conv2d":
            k, s, p = layer["kernel"], layer.get("stride", 1), layer.get("padding", 0)
            mods.append(nn.Conv2d(c, layer["filters"], k, s, p))
            c, h, w = layer["filters"], (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
        elif kind in ("maxpool2d", "avgpool2d"):
            k = layer["kernel"]
            s, p = layer.get("stride", k), layer.get("padding", 0)
            mods.append((nn.MaxPool2d if kind == "maxpool2d" else nn.AvgPool2d)(k, s, p))
            h, w = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
        elif kind == "globalavgpool2d":
            mods.append(nn.AdaptiveAvgPool2d(1))
            h = w = 1
        elif kind in ("relu", "gelu", "silu"):
            mods.append({"relu": nn.ReLU, "gelu": nn.GELU, "silu": nn.SiLU}[kind]())
        elif kind == "flatten":
            mods.append(nn.Flatten())
            flat = c * h * w
        elif kind == "dense":
            if flat is None:
                mods.append(nn.Flatten())
            n_in = flat if flat is not None else c * h * w
            mods.append(nn.Linear(n_in, layer["units"]))
            flat = layer["units"]
        elif kind == "dropout":
            mods.append(nn.Dropout(layer["rate"]))
        elif kind == "batchnorm":
            mods.append(nn.BatchNorm2d(c) if flat is None else nn.BatchNorm1d(flat))
        elif kind == "residual":
            main, c2, h2, w2, flat2 = build_path(layer["layers"], c, h, w, flat)
            short = build_path(layer.get("shortcut", []), c, h, w, flat)[0]
            mods.append(Residual(nn.Sequential(*main), nn.Sequential(*short)))
            c, h, w, flat = c2, h2, w2, flat2
        else:
            raise SystemExit(f"unknown layer type {kind}")
    return mods, c, h, w, flat


def build(spec):
    i = spec["input"]
    return nn.Sequential(*build_path(spec["layers"], i["channels"], i["height"], i["width"], None)[0])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("spec")
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--compute-rate", action="store_true",
                   help="also print the rate without the host-to-device copy")
    a = p.parse_args()
    spec = json.load(open(a.spec))
    torch.manual_seed(1)
    dev = torch.device("cuda")
    model = build(spec).to(dev)
    o = spec.get("optimizer", {})
    opt = torch.optim.SGD(model.parameters(), lr=o.get("lr", 0.01), momentum=o.get("momentum", 0),
                          nesterov=o.get("nesterov", False), weight_decay=o.get("weight_decay", 0))
    loss_fn = nn.CrossEntropyLoss(label_smoothing=spec.get("label_smoothing", 0.0))
    i = spec["input"]
    shape = (a.batch, i["channels"], i["height"], i["width"])
    x_host = torch.randn(*shape).pin_memory()
    y_host = torch.randint(0, spec["classes"], (a.batch,)).pin_memory()
    x = torch.empty(shape, device=dev)
    y = torch.empty((a.batch,), dtype=y_host.dtype, device=dev)

    def median_rate(copy):
        rates = []
        for step in range(a.warmup + a.steps):
            torch.cuda.synchronize()
            t = time.perf_counter()
            if copy:
                x.copy_(x_host, non_blocking=True)
                y.copy_(y_host, non_blocking=True)
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            loss.item()  # the host waits for the loss, as DLH's step does
            torch.cuda.synchronize()
            if step >= a.warmup:
                rates.append(a.batch / (time.perf_counter() - t))
        return statistics.median(rates)

    print(f"{median_rate(copy=True):.1f}")
    if a.compute_rate:
        x.copy_(x_host)
        y.copy_(y_host)
        print(f"compute-only {median_rate(copy=False):.1f}")


if __name__ == "__main__":
    main()
