"""DLH make bench: every goal BENCHMARKS.md judges, and how each one can fail.

A goal is stated here once, before any measurement: what is measured and the threshold it is
judged against, a threshold that does not depend on the result. The part scripts and
report.py write one record per goal and run (its id, the measured value, met or not, what
limits it); results.py puts the records of every host beside the statement.

GOALS: (id, part, goal, fails if). A fails-if of None marks a figure with no target.
RETIRED: goals of earlier runs that could not fail, kept with the reason and their records."""

GOALS = [
    ("estimator-mape", "estimator",
     "Estimator step-time MAPE < 10% on models outside the sweep, calibrated on the device it "
     "predicts",
     "the MAPE of this host's own calibration over the validation models (`dlh-estimate "
     "validate --rounds 5 --repeats 3`; runs from 2026-11-28 on: the judged set, `--set "
     "judged`, models that took no part in choosing the time model's terms; earlier runs: the "
     "seven term models) is 10% or more"),
    ("wave-scaling", "wave",
     "Wave-scaled calibration beats plain reuse and the roofline, both ways (1 ↔ 2 threads)",
     "in either direction the wave-scaled MAPE is not below the plain-reuse MAPE, or not below "
     "the roofline's MAPE with the target's measured peaks (same validation models)"),
    ("cpu-cnn", "cpu",
     "CPU training CNN conv32-pool-conv64-pool-fc128-fc10: ≥ 1.5x PyTorch's best samples/s "
     "(best round against best round)",
     "DLH's best round is below 1.5 × the best round of PyTorch's best configuration (runs from "
     "2026-11-28 on try PyTorch's thread, OpenMP and OpenBLAS settings and channels_last; "
     "earlier runs tried one configuration)"),
    ("cpu-cnn-deep", "cpu",
     "CPU training deep CNN conv32-conv32-pool-conv64-conv64-pool-fc256-fc10: ≥ 1.5x "
     "PyTorch's best samples/s (best round against best round)",
     "as the CNN's row"),
    ("cpu-cnn-wide", "cpu",
     "CPU training wide CNN conv5x5x32-pool-conv5x5x64-pool-fc1024-dropout-fc10: ≥ 1.5x "
     "PyTorch's best samples/s (best round against best round)",
     "as the CNN's row"),
    ("cpu-mlp", "cpu",
     "CPU training MLP 784-1024-1024-10: ≥ 1.5x PyTorch's best samples/s (best round against "
     "best round)",
     "as the CNN's row"),
    ("gemm-layer-flops", "cpu",
     "GEMM-layer FLOP/s ≥ 70% of OpenBLAS sgemm (inside the layers, `dlh-estimate profile`)",
     "any bench model's GEMM layers run below 70% of the sgemm GFLOP/s measured in the same "
     "run"),
    ("model-flops", "cpu",
     "Model FLOP/s ≥ 70% of OpenBLAS sgemm (whole step, GEMM FLOPs only)",
     "the slowest bench model's median training step, counted in GEMM FLOPs, runs below 70% of "
     "the same run's sgemm GFLOP/s"),
    ("quality-a", "quality",
     "Fashion-MNIST, (a) small CNN (share/bench/quality-cnn.json): DLH's final test accuracy "
     "after 5 epochs ≥ PyTorch's (within 0.3 points)",
     "DLH's final test accuracy is more than 0.3 points below PyTorch's (same network, data, "
     "epochs and seed)"),
    ("quality-b", "quality",
     "Fashion-MNIST, (b) wide CNN (share/bench/quality-wide.json): DLH's final test accuracy "
     "after 5 epochs ≥ PyTorch's (within 0.3 points)", "as (a)"),
    ("quality-c", "quality",
     "Fashion-MNIST, (c) the example spec (share/examples/fashion-mnist.json): DLH's final "
     "test accuracy after 5 epochs ≥ PyTorch's (within 0.3 points)", "as (a)"),
    ("quality-d", "quality",
     "Fashion-MNIST, (d) deep CNN (share/bench/quality-deep.json): DLH's final test accuracy "
     "after 5 epochs ≥ PyTorch's (within 0.3 points)", "as (a)"),
    ("quality-e", "quality",
     "Fashion-MNIST, (e) MLP (share/bench/quality-mlp.json): DLH's final test accuracy after 5 "
     "epochs ≥ PyTorch's (within 0.3 points)", "as (a)"),
    ("quality-f", "quality",
     "Fashion-MNIST, (f) small ResNet (share/bench/quality-resnet.json): DLH's final test "
     "accuracy after 5 epochs ≥ PyTorch's (within 0.3 points)", "as (a)"),
    ("loader-step", "loader",
     "Data larger than memory: at the measured step of the model it feeds, the step does not "
     "wait on the file",
     "the stream loader's steady-state wait per step (cold cache, in a memory cgroup smaller "
     "than the file) exceeds the in-memory loader's by more than 1% of the bench CNN's DLH "
     "step at batch 64 measured in the same run (not a fixed figure; `dlh-launch bench-loader` "
     "still sleeps that step, so the loader has the cores to itself, as it does not in training)"),
    ("ddp", "ddp",
     "2-rank data-parallel training ≥ 1.5x PyTorch DDP samples/s (best against best)",
     "DLH's best round at 2 ranks is below 1.5 × DDP's best round (runs from 2026-11-28 on "
     "alternate which side starts a round; earlier runs started each with DLH)"),
    ("fused-small", "allreduce",
     "Fused small tensors ≥ 5x faster than one call per tensor (256 x 4096 B)",
     "median time of 256 MPI_Allreduce calls of 4096 B / median time of DLH's one fused call "
     "is below 5"),
    ("comm-heldout", "allreduce",
     "Allreduce model MAPE < 10% on held-out sizes (piecewise alpha-beta fitted to every other "
     "size of the MPI_Allreduce run, scored on the sizes between, 2 ranks)",
     "the fitted model's MAPE over the sizes left out of the fit is 10% or more"),
    ("ckpt-write", "checkpoint",
     "Checkpoint write ≥ 80% of `dd conv=fsync` bandwidth",
     "at 64 or at 256 MiB of parameters DLH's median save bandwidth is below 80% of dd's "
     "median, same bytes, same folder, order rotated"),
    ("ckpt-interval", "checkpoint",
     "Checkpointing < 3.5% of training time (CheckFreq), at an interval that fires several "
     "times in the run",
     "the loop is blocked by checkpoints for 3.5% or more of the training time, or fewer than "
     "3 checkpoints of the interval fired (so the default 1800 s, which never fires in a "
     "bench-sized run, cannot pass it)"),
    ("ckpt-frequent", "ckpt_overhead",
     "Checkpoint overhead at frequent intervals ≤ 3.5% (CheckFreq), background writes",
     "in either background mode (every 100 steps, every 30 s) the blocked share or the blocked "
     "+ writer-CPU share is above 3.5%, or the median wall-clock overhead exceeds 3.5% by more "
     "than the no-checkpoint runs' own spread, or too few checkpoints fired to judge"),
    ("sbatch-added", "sbatch", "`sbatch --dlh-auto` time added to `sbatch` (no target)", None),
    ("recommender", "recommender",
     "Recommender on 1,000 nodes of 4 GPU types well under 100 ms",
     "the median of 5 runs is 100 ms or more"),
    ("recommender-10000", "recommender",
     "Recommender on 10,000 nodes of 4 GPU types at most 50 ms",
     "the median of 5 runs is over 50 ms (issue 41)"),
    ("plan-10000", "recommender",
     "Planning at 10,000 live nodes adds at most 0.2 s to sbatch",
     "the median of 5 runs of dlh-estimate slurm-plan (the plugin's planning core, whole command) "
     "with 10,000 live nodes of 4 types is over 0.2 s (issue 41)"),
    ("replay-time", "replay",
     "A replay of 100,000 jobs on 4,000 GPUs of 4 types and 1,000 CPU nodes, all five policies, in under 10 minutes",
     "`dlh-estimate replay --generate 100000` on share/cluster/replay.json with every policy "
     "(share/bench/replay.sh) takes 10 minutes or more of wall time on the bench's host, "
     "generating the trace included, or replays fewer jobs or policies"),
    ("lrfind-time", "lrfind",
     "lr-find range test (100 rates, batch 64, 2 ranks x 1 thread), whole command (no target)",
     None),
    ("lr-suggestion", "lrvalidate",
     "lr-find's suggestion reaches the hand-picked rate's test accuracy in the same epochs "
     "(Fashion-MNIST, the example batch and 4x it)",
     "at either batch the suggestion's mean test accuracy over the seeds is below the "
     "hand-picked rate's mean by more than the hand-picked rate's own spread between seeds"),
    ("jobs10-mape", "jobs",
     "Whole-job predictions within 10% MAPE (10 jobs: 1-4 ranks, three models, an evaluation "
     "and a checkpoint after every epoch, local Slurm cluster)",
     "the MAPE of predicted against measured job time over the 10 jobs is above 10%, or fewer "
     "than 10 jobs were measured"),
    ("jobs10-inside", "jobs",
     "Every planned job ends inside the time limit the plugin set",
     "any of the 10 jobs did not complete, or ran longer than its time limit"),
    ("jobs10-limit", "jobs",
     "No time limit above 1.5x the job for jobs of two minutes or more",
     "a job of 120 s or more has a limit above 1.5 × its measured time, or no job ran 120 s"),
    ("jobs10-band", "jobs",
     "The prediction's 90% band holds the job (at least 8 of 10 jobs at or under the band's "
     "upper end)",
     "fewer than 8 of the 10 jobs ended at or under the upper end of their plan's 90% band, or "
     "a plan carries no band"),
    ("repeat-5", "jobs",
     "A spec run again in the same shape on the same type is predicted within 5% from its "
     "observation (cnn-1x2-long, its epochs sized to two minutes or more, after cnn-1x2, 2 epochs)",
     "cnn-1x2-long's whole-job prediction is more than 5% from its measured time, or its plan "
     "does not say it came from earlier runs of the spec"),
    ("transfer-probe", "transfer",
     "The shipped calibration carried to a slower host by the probes predicts the judged "
     "models within 15% MAPE (the slower host simulated: a CFS CPU quota; where this host "
     "refuses the shipped calibration, another OpenBLAS core type, the one made on this host as "
     "it is is carried instead)",
     "the transferred calibration's MAPE over the judged validation models, timed under the "
     "quota, is above 15%, or check-calibration does not transfer"),
    ("transfer-recalibrated", "transfer",
     "After `dlh-estimate calibrate` on that host, the judged models within 10% MAPE",
     "the MAPE of a calibration made under the quota, over the judged models timed under the "
     "quota, is above 10%"),
    ("balance", "balance",
     "Adaptive balancing within 10% of the ideal rate (2 ranks of different speed)",
     "adaptive's median rate from the planned split is below 90% of the ideal rate measured "
     "side by side"),
    ("exported", "exported",
     "The example spec as an exported PyTorch program: final test accuracy within 0.5 points "
     "of dlh-launch train's (5 epochs)",
     "the mean over rounds of the exported program's final test accuracy (under dlh-launch "
     "run, share/bench/exported.sh) is more than 0.5 points from the mean of dlh-launch "
     "train's on the same spec, seeds and data, or a side did not finish"),
    ("suggested", "suggested",
     "A suggested network to a deadline: Fashion-MNIST, 10 minutes, ≥ 90% test accuracy "
     "inside its plan",
     "the spec `dlh-estimate suggest --deadline 10m` writes for Fashion-MNIST, submitted with "
     "`sbatch --dlh-auto` to the local cluster (share/bench/suggested.sh), ends below 90% "
     "final test accuracy, or not COMPLETED, or after its time limit or the 10 minutes"),
    ("demo-fresh", "demo",
     "`make demo` as on a fresh machine: the job within 15% of its whole-job prediction and "
     "inside its 90% band",
     "share/bench/demo.sh's first demo, run in an empty folder (no observation store, no "
     "calibration of this host: the plan comes from the shipped calibration check-calibration "
     "chooses for this host), runs a Slurm job (its RunTime: the batch script's whole run) "
     "more than 15% from the plan's whole-job prediction, or longer than the band's upper end, "
     "or its plan gives no prediction or band, or the job is requeued (issue 40)"),
    ("demo-again", "demo",
     "`make demo` again: predicted within 5% from the first demo's observation",
     "the second demo in the same folder runs a Slurm job more than 5% from its plan's "
     "prediction, or its plan does not say it came from an earlier run of the spec, or the job "
     "is requeued (issue 40)"),
    ("mixed-shares", "mixed_shares",
     "A program with shares on a mixed allocation: ≥ 85% of the ideal summed rate",
     "the median over rounds of the program's rate with the plan's shares (dlh.ShareSampler "
     "on DLH_RANK_BATCHES, 2 ranks: an alpha and a beta throttled to the estimator's speed "
     "ratio, share/bench/mixed_shares.sh) over the same round's ideal (the two ranks' own "
     "rates at the whole batch, measured side by side) is below 85%, or fewer than 3 rounds "
     "measured their ideal (runs from 2026-12-04 leave out a round whose ideal a "
     "configuration outran by more than 10%)"),
    ("faults", "faults",
     "a frozen, killed or cut-off rank ends its job within 60 s (--comm-timeout 5)",
     "the slowest of the faults takes 60 s or more from the fault to the job's end"),
    ("convergence", "convergence",
     "Same training on any rank count: 2 and 4 ranks follow the 1-rank loss curve (50-step "
     "means within 0.05) and final test accuracy (within 0.5 points), example spec across "
     "2 hosts",
     "any 50-step mean loss of 2 or 4 ranks is more than 0.05 from the 1-rank run's, or a "
     "final test accuracy more than 0.5 points from it"),
    ("time-to-accuracy", "convergence",
     "Time to 85% test accuracy, 1 / 2 / 4 ranks on 2 namespace hosts (no target)", None),
    ("local-sgd-slow-link", "local_sgd",
     "Local SGD, period 16, on a 100 Mbit/s link: at least 2x the synchronous samples/s, "
     "final test accuracy within 1 point of synchronous after the same epochs",
     "on share/bench/local_sgd.sh's shaped link (2 ranks on 2 namespace hosts, Fashion-MNIST, "
     "the example spec, 2 epochs) the period-16 run's samples/s is below 2 x the synchronous "
     "run's, or its final test accuracy is more than 1 point below the synchronous run's "
     "(issue 47)"),
    ("stale-sync-slow-link", "local_sgd",
     "Stale-synchronous, staleness 2, on a 100 Mbit/s link: at least 1.15x the synchronous "
     "samples/s, final test accuracy within 1 point of synchronous after the same epochs",
     "on share/bench/local_sgd.sh's shaped link the staleness-2 run's samples/s is below 1.15 x "
     "the synchronous run's (its allreduce no longer runs beside the next steps' compute), or "
     "its final test accuracy is more than 1 point below the synchronous run's (issue 47)"),
    ("pipeline-bubble", "pipeline",
     "Pipeline, 2 stages of 8 micro-batches: the bubble the stages measure within 0.10 of "
     "GPipe's (P - 1) / (M + P - 1)",
     "share/bench/pipeline.sh's 2-stage run of the example spec with 8 micro-batches measures "
     "a bubble more than 0.10 from (P - 1) / (M + P - 1), the model the estimator plans with "
     "(issue 47)"),
    ("pipeline-step", "pipeline",
     "Pipeline, the estimator's step: the example spec's 2-stage steps with 2, 4 and 8 "
     "micro-batches each predicted within 15% of the measured step",
     "share/bench/pipeline.sh's `dlh-estimate recommend` step of any of the three pipelined runs "
     "is more than 15% from its measured median step (stages timed by the time model layer by "
     "layer, GPipe's schedule with uneven stages; issue 47)"),
    ("pipeline-memory", "pipeline",
     "Under a 0.5 GB device cap, the widest MLP planned as a pipeline has at least 2x the "
     "parameters of the widest planned whole, and trains as planned",
     "share/bench/pipeline.sh's widest pipelined MLP has less than twice the parameters of the "
     "widest planned whole, or does not train its 20 steps as planned (issue 47)"),
    ("memory-rank", "memory",
     "A rank's memory predicted within 25% of what its model holds (peak resident memory less "
     "the process's own share), every model and batch on the CPU engine, and every stage of the "
     "two pipelines",
     "for any model and batch of share/bench/memory.sh (MLPs, CNNs, ResNet-18 and -50, one rank "
     "of the CPU engine), `dlh-estimate features`' memory_bytes is more than 25% from the run's "
     "peak resident memory less that of the same run with a 7,850-parameter model; or, for a "
     "stage of the 5632x3 MLP or ResNet-18 in 2 stages on 2 ranks, its stage_memory_bytes is "
     "more than 25% from its rank's peak less that rank's in a 2-rank run of the small model "
     "(issues 40, 47: the figure recommend fits into a device's memory and a pipeline's stages "
     "into a cap)"),
]

RETIRED = [
    ("loader-15ms", "loader",
     "Data larger than memory: at the bench CNN's rate (15 ms steps of 64) the step does not "
     "wait on the file",
     "judged against a fixed 15 ms step, not the measured step of the model the loader feeds; "
     "replaced by the row \"at the measured step of the model it feeds\""),
    ("allreduce-parity", "allreduce",
     "Allreduce ≥ MPI_Allreduce speed from 1 MiB up (2 ranks; ≥ 0.95 counts as parity)",
     "both sides timed the same MPI_Allreduce call, against a threshold lowered to 0.95, so "
     "only noise could fail it. Dropped, not replaced: DLH's real gradient path (flat "
     "buckets, overlapped with backward) is judged end to end by the data-parallel row "
     "against DDP; timing that path alone against the peer needs a bench mode of "
     "`dlh-launch` that does not exist yet"),
    ("comm-fit", "allreduce",
     "Allreduce model MAPE < 10% (piecewise alpha-beta fitted to and scored on the "
     "MPI_Allreduce run, 2 ranks)",
     "scored on the very sizes it was fitted to; replaced by the row \"on held-out sizes\""),
    ("ckpt-default-interval", "checkpoint",
     "Checkpointing < 3.5% of training time at the default interval (CheckFreq)",
     "the default 1800 s interval never fired in the run, so only the epoch-end checkpoints "
     "were timed; replaced by the row \"at an interval that fires several times\""),
    ("jobs-mape", "jobs",
     "Whole-job predictions within 10% (5 jobs, local Slurm cluster)",
     "five jobs of two models, no job longer than 76 s; replaced by the 10-job rows (issue 40: "
     "1-4 ranks, three models, jobs of two minutes and more)"),
    ("jobs-in-proportion", "jobs",
     "Every planned job finishes within its prediction plus the plugin's proportional margin "
     "(10%)",
     "judged the prediction plus a margin rather than the limit a job really gets; replaced "
     "by \"inside the time limit\" and \"no limit above 1.5x\" (the limit now comes from the "
     "prediction's band, issue 40)"),
    ("jobs-limit", "jobs",
     "Every planned job finishes inside the plugin's time limit",
     "the limit carries a fixed 180 s grace on jobs of 3-76 s; replaced by the row \"within "
     "its prediction plus the plugin's proportional margin\""),
]

BY_ID = {g[0]: g for g in GOALS + RETIRED}

# The id of a record that the part scripts wrote without one, from its goal's wording.
PREFIXES = [
    ("Estimator step-time", "estimator-mape"), ("Wave-scaled", "wave-scaling"),
    ("CPU training CNN conv32-pool", "cpu-cnn"), ("CPU training deep CNN", "cpu-cnn-deep"),
    ("CPU training wide CNN", "cpu-cnn-wide"), ("CPU training MLP", "cpu-mlp"),
    ("GEMM-layer FLOP/s", "gemm-layer-flops"), ("Model FLOP/s", "model-flops"),
    ("Fashion-MNIST, (a)", "quality-a"), ("Fashion-MNIST, (b)", "quality-b"),
    ("Fashion-MNIST, (c)", "quality-c"), ("Fashion-MNIST, (d)", "quality-d"),
    ("Fashion-MNIST, (e)", "quality-e"), ("Fashion-MNIST, (f)", "quality-f"),
    ("Training quality", "quality-c"),
    ("Data larger than memory", "loader-step"), ("2-rank data-parallel", "ddp"),
    ("Fused small tensors", "fused-small"), ("Allreduce model MAPE", "comm-heldout"),
    ("Checkpoint write", "ckpt-write"), ("Checkpointing <", "ckpt-interval"),
    ("Checkpoint overhead at frequent", "ckpt-frequent"), ("`sbatch --dlh-auto`", "sbatch-added"),
    ("Recommender on 10,000 nodes", "recommender-10000"), ("Recommender", "recommender"),
    ("Planning at 10,000 live nodes", "plan-10000"),
    ("A replay of 100,000 jobs", "replay-time"), ("lr-find range test", "lrfind-time"),
    ("lr-find's suggestion", "lr-suggestion"),
    ("Whole-job predictions within 10% MAPE", "jobs10-mape"),
    ("Whole-job predictions", "jobs-mape"), ("Every planned job ends", "jobs10-inside"),
    ("Every planned job", "jobs-in-proportion"), ("No time limit above", "jobs10-limit"),
    ("The prediction's 90% band", "jobs10-band"), ("A spec run again", "repeat-5"),
    ("The shipped calibration carried", "transfer-probe"),
    ("After `dlh-estimate calibrate` on that host", "transfer-recalibrated"), ("Adaptive balancing", "balance"),
    ("`make demo` as on a fresh machine", "demo-fresh"), ("`make demo` again", "demo-again"),
    ("A program with shares on a mixed allocation", "mixed-shares"),
    ("The example spec as an exported PyTorch program", "exported"),
    ("A suggested network to a deadline", "suggested"),
    ("a frozen", "faults"), ("Same training on any rank count", "convergence"),
    ("Time to", "time-to-accuracy"),
    ("Local SGD, period 16", "local-sgd-slow-link"),
    ("Stale-synchronous, staleness 2", "stale-sync-slow-link"),
    ("Pipeline, 2 stages of 8", "pipeline-bubble"),
    ("Pipeline, the estimator's step", "pipeline-step"),
    ("Under a 0.5 GB device cap", "pipeline-memory"),
    ("A rank's memory", "memory-rank"),
]


def goal_id(text):
    for prefix, gid in PREFIXES:
        if text.startswith(prefix):
            return gid
    raise ValueError(f"no goal statement in share/bench/goals.py for: {text}")
