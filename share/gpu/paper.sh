#!/bin/bash
# DLH — BENCHMARKS.md's on-paper section for 8-GPU nodes (issue 42): how the example spec,
# cnn-large and a ResNet-50-sized gradient would scale on 1-64 H100s, 8 per node, with the GPU
# engine's two allreduce algorithms, from `dlh-estimate scaling` (the H100 calibration's step
# time and the communication model) on share/cluster/h100-hgx-ndr.json.
#
#   share/gpu/paper.sh [BINDIR] > share/gpu/paper/scaling-8gpu.md
#
# tests/scripts/estimate_cli.sh renders it again and fails when the committed file differs, so
# the tables follow the model, the cluster file and the calibration they come from.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${1:-$root/build/bin}
hgx=share/cluster/h100-hgx-ndr.json
scaling() {  # scaling SPEC [options]: the command, then its output (the table as it is)
  echo '```'
  echo "\$ dlh-estimate scaling $1 --cluster $hgx --node-type hgx-h100${2:+ $2}"
  echo '```'
  echo
  (cd "$root" && "$bin/dlh-estimate" scaling "$1" --cluster "$hgx" --node-type hgx-h100 ${2:-}) |
    sed -E -e 's/measured with engine [0-9a-f]+, this build.s engine is [0-9a-f]+: recalibrate .*/measured with an earlier build of the GPU engine (stale until a GPU visit measures it again)/' \
      -e '/^\|/!s/$/  /'
}
cat <<'TEXT'
## On paper: data-parallel scaling on 8-GPU H100 nodes, flat NCCL against the hybrid

Not a measurement: no DLH job has run on more than one GPU (README.md). The step time is the
H100 calibration's (share/calibration/h100-80gb-hbm3.json, one rank), the allreduce times the
communication model's (`dlh-estimate scaling`, estimator/model/comm_model.hpp) on
share/cluster/h100-hgx-ndr.json: HGX H100 nodes of 8 GPUs on NVLink 4 and 4 x 400 Gb/s
InfiniBand NDR. Its links are NCCL's published bus bandwidths, not line rates: 370 GB/s for an
8-GPU ring allreduce on H100 (NVIDIA/nccl-tests issue 212; NVLink's line rate is 450 GB/s) and
46-48 GB/s per 400 Gb/s NIC (NVIDIA/nccl-tests issue 290), so 188 GB/s per node. Latencies of
2.5 us per NVLink message and 5 us per network message, and 50 GB/s with 10 us per copy for
the hybrid's pinned staging over PCIe, are assumptions. Weak scaling: the spec's batch on
every GPU. "step" adds the whole allreduce to the compute (no overlap with backward, the upper
bound); "efficiency" is compute over step.

- **flat NCCL** (the GPU default): one ring over every GPU, each step as slow as the node's
  network: 2 (p-1) (latency + n/p bytes per bandwidth).
- **hybrid** (`--allreduce hierarchical`): reduce-scatter and all-gather in the node over
  NVLink, the 1/8 shard copied to the host and back, and the 8 shards' rings across the nodes
  sharing the node's network: 2 (m-1) (latency + n/m bytes per bandwidth) for m nodes.

Where the hybrid would win: in this model, only where the gradient is small enough for
latency to rule (below), because the flat ring pays 2 (p-1) network latencies and the hybrid
2 (m-1). NCCL does not run a ring there: across few nodes and for small messages it picks
its tree algorithm and low-latency protocols, which the model leaves out, so the flat rows
are its upper bound and the small models' "hybrid" verdicts are not evidence for the hybrid.
With a ResNet-50-sized gradient (c), bandwidth rules and flat NCCL wins at every node count:
the hybrid's staging copies and NVLink phases cost more than the network traffic it saves.
So `auto` is flat on GPUs, and the hybrid stays an explicit mode.

### (a) the example spec (share/examples/fashion-mnist.json)

TEXT
scaling share/examples/fashion-mnist.json
echo
echo "### (b) cnn-large (share/gpu/cnn-large.json)"
echo
scaling share/gpu/cnn-large.json
echo
echo "### (c) cnn-large's step with a ResNet-50-sized gradient (25.6 M parameters)"
echo
scaling share/gpu/cnn-large.json "--gradient-mb 102.4"
