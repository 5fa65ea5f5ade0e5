#!/usr/bin/env python3
"""DLH GPU check: the PyTorch side of the GPU throughput comparison.

Builds the model of a DLH spec (the same layers, shapes and SGD settings) as a
torch.nn.Sequential, trains it on the GPU on a fixed random batch and prints the median
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


def build(spec):
    c, h, w = spec["input"]["channels"], spec["input"]["height"], spec["input"]["width"]
    layers, flat = [], None
    for layer in spec["layers"]:
        kind = layer["type"]
        if kind == "conv2d":
            k, s, p = layer["kernel"], layer.get("stride", 1), layer.get("padding", 0)
            layers.append(nn.Conv2d(c, layer["filters"], k, s, p))
            c, h, w = layer["filters"], (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
        elif kind == "maxpool2d":
            k = layer["kernel"]
            s, p = layer.get("stride", k), layer.get("padding", 0)
            layers.append(nn.MaxPool2d(k, s, p))
            h, w = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
        elif kind == "relu":
            layers.append(nn.ReLU())
        elif kind == "flatten":
            layers.append(nn.Flatten())
            flat = c * h * w
        elif kind == "dense":
            n_in = flat if flat is not None else c * h * w
            layers.append(nn.Linear(n_in, layer["units"]))
            flat = layer["units"]
        elif kind == "dropout":
            layers.append(nn.Dropout(layer["rate"]))
        elif kind == "batchnorm":
            layers.append(nn.BatchNorm2d(c) if flat is None else nn.BatchNorm1d(flat))
        else:
            raise SystemExit(f"unknown layer type {kind}")
    return nn.Sequential(*layers)


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
    loss_fn = nn.CrossEntropyLoss()
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
