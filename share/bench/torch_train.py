#!/usr/bin/python3
"""DLH make bench: the PyTorch side of the CPU training-throughput comparison.

Trains the same model as share/bench/<model>.json (same layers, batch, SGD lr 0.01) on
random data and prints the median samples/s over the timed steps. Run with Debian's
/usr/bin/python3 (python3-torch) and OMP_WAIT_POLICY=PASSIVE (see BENCHMARKS.md).

--spec SPEC.json instead of --model: any DLH spec, built by share/bench/torch_spec.py
(layers, initialisation and optimizer as the spec says: SGD with momentum and weight decay
for the ResNets), on a fixed random batch of the spec's input shape (share/bench/resnet_cpu.sh).
--jit: the model traced by torch.jit.trace (PyTorch 1.13 has no torch.compile)."""
import argparse
import json
import os
import statistics
import sys
import time

import torch
from torch import nn


def model(name):
    if name == "cnn":
        return nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))
    if name == "cnn-deep":
        return nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(),
            nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(),
            nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(3136, 256), nn.ReLU(), nn.Linear(256, 10))
    if name == "cnn-wide":  # share/bench/quality-wide.json's layers: 5x5 convolutions, 1024 units
        return nn.Sequential(
            nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(3136, 1024), nn.ReLU(), nn.Dropout(0.4), nn.Linear(1024, 10))
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 1024), nn.ReLU(),
                             nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))
    raise SystemExit(f"unknown model {name}")


def main():
    p = argparse.ArgumentParser()
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--model")
    which.add_argument("--spec", help="a DLH spec (JSON), built by torch_spec.py")
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--channels-last", action="store_true",
                   help="parameters and input in channels_last memory format (CNNs)")
    p.add_argument("--jit", action="store_true", help="the model traced by torch.jit.trace")
    a = p.parse_args()
    torch.manual_seed(1)
    torch.set_num_threads(a.threads)
    if a.spec:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import torch_spec
        spec = json.load(open(a.spec))
        m, decayed, plain = torch_spec.build_model(spec)
        opt = torch_spec.make_optimizer(spec, decayed, plain)
        shape, classes = spec["input"], int(spec["classes"])
        shape = (int(shape["channels"]), int(shape["height"]), int(shape["width"]))
    else:
        m = model(a.model)
        opt = torch.optim.SGD(m.parameters(), lr=0.01)
        shape, classes = (1, 28, 28), 10
    if a.channels_last:
        m = m.to(memory_format=torch.channels_last)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.randn(a.batch, *shape)
    if a.channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, classes, (a.batch,))
    if a.jit:
        m = torch.jit.trace(m, x)
    rates = []
    for step in range(a.warmup + a.steps):
        t = time.perf_counter()
        opt.zero_grad()
        loss_fn(m(x), y).backward()
        opt.step()
        if step >= a.warmup:
            rates.append(a.batch / (time.perf_counter() - t))
    print(f"{statistics.median(rates):.1f}")


if __name__ == "__main__":
    main()
