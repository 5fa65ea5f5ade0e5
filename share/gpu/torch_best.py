#!/usr/bin/env python3
"""DLH GPU check: PyTorch at its best on the GPU (issue 43, "a comparison an expert would
accept"): the training throughput of the models DLH is compared on, in every setting PyTorch
users reach for, so that DLH is set against the best of them and not against eager defaults.

    python3 share/gpu/torch_best.py --out RESULT.json [--rounds 3] [--budget 480]
        [--models fashion-mnist,cnn-large,resnet50,resnet18] [--variants NAME,...]
        [--batch MODEL=N ...] [--measure-seconds 1.0] [--row-seconds 150]
    python3 share/gpu/torch_best.py --smoke --out RESULT.json   (the CPU, tiny batches, 1 round:
        the logic is tested in make check, tests/scripts/torch_best_smoke.sh)

Models (DLH specs, built by share/bench/torch_spec.py: the same layers, initialisation, SGD
settings and label smoothing as dlh-launch trains): the Fashion-MNIST CNN
(share/examples/fashion-mnist.json), cnn-large (share/gpu/cnn-large.json), ResNet-18 at 32x32
(share/examples/resnet18-cifar.json) and ResNet-50 at 224x224
(share/examples/resnet50-imagenet.json), on a fixed random batch that stays on the GPU (the
compute-only rate: no loader, no host copy), at batches that fill the GPU (BATCHES below).

Variants (VARIANTS below), each a row per model: precision fp32 (TF32 off), tf32 (TF32 on for
cuBLAS and cuDNN) or bf16 (torch.autocast, FP32 master weights and optimizer state); layout
NCHW or channels_last; mode eager, graph (the whole step, forward, backward and the SGD update,
captured once as a CUDA graph on a static batch and replayed), compile (torch.compile of the
model, default mode; the optimizer eager) or compile-graphs (mode="reduce-overhead").
cudnn.benchmark is on for every row; the optimizer is SGD as the spec says, fused where this
PyTorch has it, else foreach.

Timing: a row is set up once (model, optimizer, compilation or capture, warm-up steps), then
the rows of a model alternate for --rounds rounds (the order reversed every other round); each
round times N steps between two CUDA events with no synchronisation or host read inside (N
from the warm-up: about --measure-seconds of steps). images/s per round; min / median / max
over the rounds. Achieved TFLOP/s: FLOPs per image of a training step (forward and backward:
torch.utils.flop_counter over one step, convolutions and matrix products; beside it the DLH
estimator's count of every layer, `dlh-estimate features SPEC --json`, from --features or
where dlh-estimate is on PATH) times images/s, against the GPU's published dense peak for the
precision (PEAKS).

Each row runs under a time limit (--row-seconds, SIGALRM) and in try/except: a variant that
fails, or is not supported here, is a row with its error and the others still run. --budget:
seconds for the whole run; models that no longer fit are "not run" rows. Prints a short
table last; writes every figure to --out."""
import argparse
import gc
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "share", "bench"))
import torch_spec  # noqa: E402  (share/bench/torch_spec.py: DLH specs as torch modules)

# name: (spec, batch that fills an H100/H200, smoke batch). In the order they run: the two
# small models first (seconds each), then ResNet-50 (the figure everyone knows), then
# ResNet-18; what the budget leaves out is last.
MODELS = {
    "fashion-mnist": ("share/examples/fashion-mnist.json", 4096, 8),
    "cnn-large": ("share/gpu/cnn-large.json", 2048, 4),
    "resnet50": ("share/examples/resnet50-imagenet.json", 256, 2),  # smoke: at 64x64
    "resnet18": ("share/examples/resnet18-cifar.json", 1024, 4),
}
BATCHES = {m: b for m, (_, b, _) in MODELS.items()}

# (name, precision, channels_last, mode). Order: the setup order within a model.
VARIANTS = [
    ("fp32-nchw-eager", "fp32", False, "eager"),
    ("fp32-cl-eager", "fp32", True, "eager"),
    ("fp32-cl-graph", "fp32", True, "graph"),
    ("tf32-cl-eager", "tf32", True, "eager"),
    ("tf32-cl-graph", "tf32", True, "graph"),
    ("tf32-cl-compile", "tf32", True, "compile"),
    ("bf16-cl-eager", "bf16", True, "eager"),
    ("bf16-cl-graph", "bf16", True, "graph"),
    ("bf16-cl-compile", "bf16", True, "compile"),
    # torch.compile(mode="reduce-overhead"): Inductor's kernels replayed as CUDA graphs (the
    # optimizer stays eager, fused).
    ("bf16-cl-compile-graphs", "bf16", True, "compile-graphs"),
]
SMOKE_VARIANTS = ["fp32-nchw-eager", "fp32-cl-eager", "bf16-cl-eager", "fp32-cl-graph",
                  "bf16-cl-compile"]

# Published dense peaks, TFLOP/s, by the GPU's name as torch.cuda.get_device_name gives it
# (first match wins). fp32: the CUDA cores (TF32 off); tf32 and bf16: the tensor cores, dense
# (NVIDIA's datasheets print the tensor-core rates "with sparsity": half of each is dense).
#   H100 SXM5: NVIDIA H100 Tensor Core GPU datasheet, SXM column: FP32 67, TF32 Tensor Core
#     989 (sparse), BF16 Tensor Core 1,979 (sparse) teraFLOPS; the H100 whitepaper's table
#     (NVIDIA H100 Tensor Core GPU Architecture, H100 SXM5): FP32 66.9, TF32 494.7 dense /
#     989.4 sparse, BF16 989.4 dense / 1978.9 sparse (as https://glennklockwood.com/garden/processors/h100
#     tabulates it). Also share/gpu/specs/h100-sxm.json.
#   H200 SXM: NVIDIA H200 Tensor Core GPU datasheet: the H100 SXM's compute rates (FP32 67,
#     TF32 989 sparse, BF16 1,979 sparse), 141 GB HBM3e at 4.8 TB/s; share/gpu/specs/h200-sxm.json.
#   H100 PCIe: same datasheet, PCIe column: FP32 51, TF32 756 (sparse), BF16 1,513 (sparse).
#   A100 80GB: NVIDIA A100 Tensor Core GPU datasheet: FP32 19.5, TF32 156 and BF16 312 dense.
PEAKS = [
    ("H100 PCIe", {"fp32": 51.2, "tf32": 378.0, "bf16": 756.5}, "NVIDIA H100 datasheet, PCIe column (sparse rates halved)"),
    ("H100", {"fp32": 66.9, "tf32": 494.7, "bf16": 989.4}, "NVIDIA H100 datasheet and whitepaper, SXM5 (sparse rates halved)"),
    ("H200", {"fp32": 66.9, "tf32": 494.7, "bf16": 989.4}, "NVIDIA H200 datasheet, SXM: the H100 SXM's rates (sparse rates halved)"),
    ("A100", {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0}, "NVIDIA A100 datasheet (dense)"),
]

# The published ResNet-50 figures to set beside the measured ones (ImageNet, 224x224, v1.5).
# NVIDIA DeepLearningExamples, PyTorch/Classification/ConvNets/resnet50v1.5/README.md,
# "Training performance: NVIDIA DGX A100 (8x A100 80GB)", pytorch-21.03 NGC container, 1 GPU:
# 2470 img/s mixed precision, 938 img/s TF32. MLPerf Training v3.0, closed division,
# ResNet-50 v1.5 on 8x H100-SXM5-80GB (MLPerf-ID 3.0-2053, Dell XE9680, MXNet, mixed
# precision): 13.466 minutes to 75.90% top-1 (developer.nvidia.com/deep-learning-performance-
# training-inference/training). NVIDIA's per-GPU H100 images/s table on that page was not in
# the sources this script's author could read: add it here with its source when it is.
ANCHORS = [
    {"figure": "ResNet-50 v1.5 training, 1x A100 80GB, mixed precision", "images_per_s": 2470,
     "source": "NVIDIA DeepLearningExamples PyTorch resnet50v1.5 README, DGX A100, pytorch-21.03"},
    {"figure": "ResNet-50 v1.5 training, 1x A100 80GB, TF32", "images_per_s": 938,
     "source": "NVIDIA DeepLearningExamples PyTorch resnet50v1.5 README, DGX A100, pytorch-21.03"},
    {"figure": "ResNet-50 v1.5 MLPerf Training v3.0, 8x H100 SXM5 80GB, time to 75.9% top-1",
     "minutes": 13.466, "source": "MLPerf Training v3.0 closed, ID 3.0-2053 (Dell XE9680, MXNet, mixed)"},
]


class RowTimeout(Exception):
    pass


def _alarm(_sig, _frame):
    raise RowTimeout()


class limit:
    """SIGALRM after `seconds`: raises RowTimeout in the main thread (CUDA calls finish first)."""

    def __init__(self, seconds):
        self.seconds = int(max(1, math.ceil(seconds)))

    def __enter__(self):
        signal.signal(signal.SIGALRM, _alarm)
        signal.alarm(self.seconds)

    def __exit__(self, *exc):
        signal.alarm(0)
        return False


def set_precision(precision, cuda):
    if cuda:
        tf32 = precision == "tf32"
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32


def make_sgd(spec, decayed, plain, fused):
    """The spec's SGD (torch_spec.make_optimizer's groups: no decay on norms and biases), fused
    where asked and this PyTorch has fused SGD, else foreach."""
    o = spec["optimizer"]
    if o["type"] != "sgd":
        return torch_spec.make_optimizer(spec, decayed, plain), "as torch_spec"
    wd = float(o.get("weight_decay", 0))
    groups = [{"params": decayed, "weight_decay": wd}, {"params": plain, "weight_decay": 0.0}]
    kw = dict(lr=float(o["lr"]), momentum=float(o.get("momentum", 0)),
              nesterov=bool(o.get("nesterov", False)))
    for extra, name in (({"fused": True}, "fused"), ({"foreach": True}, "foreach"), ({}, "default")):
        if extra.get("fused") and not fused:
            continue
        try:
            return torch.optim.SGD(groups, **kw, **extra), name
        except (TypeError, RuntimeError, ValueError):
            continue
    raise RuntimeError("no SGD")


def flops_per_image(model, x, y, loss_fn, batch):
    """FLOPs of one training step (forward and backward) per image, by PyTorch's own FLOP
    counter (convolutions and matrix products), or None where this PyTorch has none."""
    try:
        from torch.utils.flop_counter import FlopCounterMode
    except ImportError:
        return None
    counter = FlopCounterMode(display=False)
    with counter:
        loss_fn(model(x), y).backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops() / batch


def dlh_flops(spec_path):
    """The DLH estimator's training FLOPs per sample (every layer), where dlh-estimate runs."""
    exe = shutil.which("dlh-estimate")
    if not exe:
        return None
    try:
        out = subprocess.run([exe, "features", spec_path, "--json"], capture_output=True,
                             text=True, timeout=60, check=True).stdout
        return float(json.loads(out)["flops_train"])
    except (subprocess.SubprocessError, OSError, ValueError, KeyError):
        return None


class Row:
    """One model in one variant: set up once, then timed in rounds."""

    def __init__(self, model_name, spec, spec_path, batch, variant, dev):
        self.model_name, self.spec, self.batch = model_name, spec, batch
        self.name, self.precision, self.cl, self.mode = variant
        self.dev = dev
        self.cuda = dev.type == "cuda"
        i = spec["input"]
        self.out = {"model": model_name, "spec": spec_path, "batch": batch,
                    "input": f"{i['channels']}x{i['height']}x{i['width']}",
                    "variant": self.name, "precision": self.precision,
                    "layout": "channels_last" if self.cl else "NCHW", "mode": self.mode,
                    "status": "set up", "images_per_s": [], "steps": None}

    def setup(self, warmup):
        t0 = time.perf_counter()
        if self.mode == "graph" and not self.cuda:
            raise NotImplementedError("CUDA graphs need a GPU")
        if self.mode.startswith("compile") and not hasattr(torch, "compile"):
            raise NotImplementedError(f"torch.compile is not in PyTorch {torch.__version__}")
        if self.precision == "tf32" and not self.cuda:
            raise NotImplementedError("TF32 is a GPU setting")
        set_precision(self.precision, self.cuda)
        torch.manual_seed(1)
        model, decayed, plain = torch_spec.build_model(self.spec)
        model = model.to(self.dev)
        i = self.spec["input"]
        x = torch.randn(self.batch, int(i["channels"]), int(i["height"]), int(i["width"]),
                        device=self.dev)
        y = torch.randint(0, int(self.spec["classes"]), (self.batch,), device=self.dev)
        if self.cl:
            model = model.to(memory_format=torch.channels_last)
            x = x.contiguous(memory_format=torch.channels_last)
        # Fused SGD in eager and compiled steps; in a captured graph the launches it saves are
        # gone anyway, and foreach is the optimizer PyTorch's whole-network capture example uses.
        self.opt, self.out["optimizer"] = make_sgd(self.spec, decayed, plain,
                                                   self.cuda and self.mode != "graph")
        loss_fn = nn.CrossEntropyLoss(label_smoothing=float(self.spec.get("label_smoothing", 0.0)))
        fwd = (torch.compile(model) if self.mode == "compile" else
               torch.compile(model, mode="reduce-overhead") if self.mode == "compile-graphs" else
               model)
        bf16 = self.precision == "bf16"
        dev_type = self.dev.type

        mark_step = (getattr(getattr(torch, "compiler", None), "cudagraph_mark_step_begin", None)
                     if self.mode == "compile-graphs" else None)

        def step():
            if mark_step:  # a new training iteration for the compiled graphs' memory
                mark_step()
            self.opt.zero_grad(set_to_none=self.mode != "graph")
            # No autocast weight cache inside a captured graph (PyTorch's CUDA graphs notes).
            with torch.autocast(dev_type, dtype=torch.bfloat16, enabled=bf16,
                                cache_enabled=self.mode != "graph"):
                loss = loss_fn(fwd(x), y)
            loss.backward()
            self.opt.step()
            return loss

        self.model, self.x, self.y = model, x, y
        if self.mode == "graph":
            # The whole step as one graph (PyTorch's "whole network capture"): warm-up on a side
            # stream (cuDNN's benchmark, the momentum buffers), then capture; gradients stay
            # allocated (zero_grad writes zeros) so the graph's addresses hold.
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(max(3, warmup)):
                    step()
            torch.cuda.current_stream().wait_stream(side)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.static_loss = step()
            self.run = self.graph.replay
            for _ in range(2):
                self.run()
        else:
            self.last = None

            def run():
                self.last = step()
            self.run = run
            for _ in range(warmup):
                self.run()
        self.sync()
        # Steps per round: about measure_seconds of them, from two timed steps.
        t = time.perf_counter()
        for _ in range(2):
            self.run()
        self.sync()
        self.step_s = (time.perf_counter() - t) / 2
        self.out["setup_s"] = round(time.perf_counter() - t0, 2)
        self.out["status"] = "ok"

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize()

    def loss(self):
        t = self.static_loss if self.mode == "graph" else self.last
        return float(t.detach().float()) if t is not None else None

    def measure(self, measure_seconds):
        """One round: images/s over N steps, no synchronisation inside."""
        set_precision(self.precision, self.cuda)
        if self.out["steps"] is None:
            self.out["steps"] = int(min(500, max(3, math.ceil(measure_seconds / max(self.step_s, 1e-6)))))
        n = self.out["steps"]
        self.sync()
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(n):
                self.run()
            end.record()
            end.synchronize()
            seconds = start.elapsed_time(end) / 1e3
        else:
            t = time.perf_counter()
            for _ in range(n):
                self.run()
            seconds = time.perf_counter() - t
        self.out["images_per_s"].append(n * self.batch / seconds)
        loss = self.loss()  # outside the timed region: the row computes a finite loss
        self.out["loss_last"] = loss
        if loss is None or not math.isfinite(loss):
            raise FloatingPointError(f"loss {loss}")

    def release(self):
        for a in ("model", "opt", "x", "y", "graph", "static_loss", "last", "run"):
            if hasattr(self, a):
                delattr(self, a)


def peaks_for(name):
    for key, peaks, source in PEAKS:
        if key in name:
            return peaks, source
    return None, None


def summarise(row, peaks):
    v = row["images_per_s"]
    if not v:
        return
    row["min"], row["median"], row["max"] = min(v), statistics.median(v), max(v)
    fl = row.get("flops_per_image")
    if fl:
        row["tflops_median"] = row["median"] * fl / 1e12
        if peaks:
            row["peak_tflops"] = peaks[row["precision"]]
            row["peak_fraction"] = row["tflops_median"] / row["peak_tflops"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--smoke", action="store_true",
                   help="CPU, tiny batches, 1 round, CUDA-only variants skipped")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--budget", type=float, default=480, help="seconds for the whole run")
    p.add_argument("--row-seconds", type=float, default=150,
                   help="time limit of one row's setup (compilation, capture) or round")
    p.add_argument("--measure-seconds", type=float, default=1.0)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--variants", default=None, help="comma-separated names (default: all)")
    p.add_argument("--batch", action="append", default=[], metavar="MODEL=N")
    p.add_argument("--features", action="append", default=[], metavar="MODEL=FILE",
                   help="`dlh-estimate features SPEC --json` of a model, made beforehand (else "
                        "dlh-estimate is run where it is on PATH)")
    a = p.parse_args()
    features = dict(f.split("=", 1) for f in a.features)
    began = time.perf_counter()
    tmp = tempfile.TemporaryDirectory(prefix="torch-best-")
    if a.smoke:
        dev = torch.device("cpu")
        a.rounds, a.measure_seconds, a.warmup = 1, 0.05, 1
        torch.set_num_threads(min(2, os.cpu_count() or 1))
    else:
        if not torch.cuda.is_available():
            raise SystemExit("torch_best.py: no CUDA device (use --smoke on a CPU)")
        dev = torch.device("cuda")
        torch.backends.cudnn.benchmark = True
    names = (a.variants.split(",") if a.variants else
             SMOKE_VARIANTS if a.smoke else [v[0] for v in VARIANTS])
    unknown = [n for n in names if n not in {v[0] for v in VARIANTS}]
    if unknown:
        raise SystemExit(f"torch_best.py: unknown variants {unknown}")
    variants = [v for v in VARIANTS if v[0] in names]
    batches = {m: (MODELS[m][2] if a.smoke else MODELS[m][1]) for m in MODELS}
    for b in a.batch:
        m, n = b.split("=")
        batches[m] = int(n)
    device_name = torch.cuda.get_device_name(0) if dev.type == "cuda" else "cpu"
    peaks, peak_source = peaks_for(device_name) if dev.type == "cuda" else (None, None)
    result = {"tool": "share/gpu/torch_best.py", "smoke": a.smoke,
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "torch": torch.__version__, "cuda": torch.version.cuda,
              "cudnn": torch.backends.cudnn.version() if dev.type == "cuda" else None,
              "device": device_name, "peaks_tflops": peaks, "peak_source": peak_source,
              "anchors": ANCHORS, "rounds": a.rounds, "measure_seconds": a.measure_seconds,
              "cudnn_benchmark": dev.type == "cuda", "rows": []}

    def save():
        with open(a.out + ".tmp", "w") as f:
            json.dump(result, f, indent=1)
        os.replace(a.out + ".tmp", a.out)

    for m in a.models.split(","):
        spec_path = MODELS[m][0]
        spec = json.load(open(os.path.join(ROOT, spec_path)))
        full_path = os.path.join(ROOT, spec_path)
        if a.smoke and spec["input"]["height"] > 64:
            # The smoke run tests the logic, not the speed: ResNet-50 at 64x64 (its global
            # pooling takes any size), the estimator's FLOPs counted at that size too.
            spec["input"] = dict(spec["input"], height=64, width=64)
            full_path = os.path.join(tmp.name, os.path.basename(spec_path))
            with open(full_path, "w") as f:
                json.dump(spec, f)
        batch = batches[m]
        rows = [Row(m, spec, spec_path, batch, v, dev) for v in variants]
        result["rows"] += [r.out for r in rows]
        if time.perf_counter() - began > a.budget:
            for r in rows:
                r.out["status"] = f"not run: the {a.budget:.0f} s budget was spent"
            save()
            continue
        # FLOPs per image: PyTorch's counter on a small batch (on this device), and DLH's.
        fl = None
        if m in features:
            fl_dlh = float(json.load(open(features[m]))["flops_train"])
        else:
            fl_dlh = dlh_flops(full_path)
        try:
            torch.manual_seed(1)
            model = torch_spec.build_model(spec)[0].to(dev)
            i = spec["input"]
            xs = torch.randn(2, int(i["channels"]), int(i["height"]), int(i["width"]), device=dev)
            ys = torch.randint(0, int(spec["classes"]), (2,), device=dev)
            fl = flops_per_image(model, xs, ys, nn.CrossEntropyLoss(), 2)
            del model, xs, ys
        except Exception as e:  # noqa: BLE001  (the counter is a convenience)
            print(f"torch_best: {m}: FLOP counter failed: {e}", file=sys.stderr)
        for r in rows:
            r.out["flops_per_image"] = fl if fl else fl_dlh
            r.out["flops_source"] = ("torch.utils.flop_counter" if fl else
                                     "dlh-estimate features" if fl_dlh else None)
            r.out["flops_per_image_dlh"] = fl_dlh
        live = []
        for r in rows:
            if time.perf_counter() - began > a.budget:
                r.out["status"] = f"not run: the {a.budget:.0f} s budget was spent"
                continue
            try:
                with limit(a.row_seconds):
                    r.setup(a.warmup)
                live.append(r)
            except NotImplementedError as e:
                r.out["status"] = f"skipped: {e}"
                r.release()
            except RowTimeout:
                r.out["status"] = f"failed: setup past {a.row_seconds:.0f} s"
                r.release()
            except Exception as e:  # noqa: BLE001  (one variant's failure is its row's)
                r.out["status"] = f"failed in setup: {type(e).__name__}: {str(e)[:300]}"
                r.release()
                if dev.type == "cuda":
                    torch.cuda.empty_cache()
            print(f"torch_best: {m} {r.name}: {r.out['status']}", file=sys.stderr, flush=True)
            save()
        for k in range(a.rounds):
            # The rows of a model alternate, the order reversed every other round.
            for r in (live if k % 2 == 0 else live[::-1]):
                if r.out["status"] != "ok":
                    continue
                if time.perf_counter() - began > a.budget and k > 0:
                    r.out["note"] = f"{k} of {a.rounds} rounds: the budget was spent"
                    continue
                try:
                    with limit(a.row_seconds):
                        r.measure(a.measure_seconds)
                except RowTimeout:
                    r.out["status"] = f"failed: round {k + 1} past {a.row_seconds:.0f} s"
                except Exception as e:  # noqa: BLE001
                    r.out["status"] = f"failed in round {k + 1}: {type(e).__name__}: {str(e)[:300]}"
            save()
        for r in rows:
            summarise(r.out, peaks)
            r.release()
        del rows, live
        gc.collect()
        if dev.type == "cuda":
            if hasattr(torch, "_dynamo"):
                torch._dynamo.reset()
            torch.cuda.empty_cache()
        save()
    # The best row of each model and precision class: what DLH is set against.
    best = {}
    for r in result["rows"]:
        if r.get("median"):
            key = f"{r['model']} {r['precision']}"
            if key not in best or r["median"] > best[key]["median"]:
                best[key] = {"variant": r["variant"], "median": r["median"]}
    result["best"] = best
    result["seconds"] = round(time.perf_counter() - began, 1)
    save()
    print(f"\nPyTorch {torch.__version__} on {device_name}, {a.rounds} round(s), images/s "
          f"min / median / max, TFLOP/s and % of the dense peak (median):")
    print(f"{'model':<14} {'batch':>5} {'variant':<18} {'images/s':>28} {'TFLOP/s':>8} {'peak':>6}  status")
    for r in result["rows"]:
        ips = (f"{r['min']:.0f} / {r['median']:.0f} / {r['max']:.0f}" if r.get("median") else "-")
        tf = f"{r['tflops_median']:.1f}" if r.get("tflops_median") else "-"
        pk = f"{100 * r['peak_fraction']:.0f}%" if r.get("peak_fraction") else "-"
        print(f"{r['model']:<14} {r['batch']:>5} {r['variant']:<18} {ips:>28} {tf:>8} {pk:>6}  {r['status']}")
    print(f"took {result['seconds']} s; {a.out}")


if __name__ == "__main__":
    main()
