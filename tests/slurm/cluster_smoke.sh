#!/bin/bash
# The local Slurm test cluster (share/slurm/start-cluster.sh) works: both fake-GPU nodes come
# up idle, srun steps span both nodes, a batch job asking for gpu:alpha:2 sees
# CUDA_VISIBLE_DEVICES=0,1, a second cluster runs side by side on other ports and survives
# the first one being stopped, and dlh-launch runs as 2 MPI ranks under srun --mpi=pmix.
# Needs root and the Debian slurm-wlm/munge packages; about 10 s.
# shellcheck source=tests/slurm/slurm.bash
source "$(dirname "$0")/slurm.bash"
need_slurm munged slurmctld slurmd srun sbatch sinfo scontrol
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
START=$ROOT/share/slurm/start-cluster.sh
STOP=$ROOT/share/slurm/stop-cluster.sh

[[ -x $BINDIR/dlh-launch ]] || fail "no $BINDIR/dlh-launch (build first)"

# Not inside someone else's job: srun would join that allocation.
while read -r v; do unset "$v"; done < <(compgen -e | grep -E '^(SLURM|SBATCH|SALLOC|SRUN)_' || true)

C1=$WORK/c1 C2=$WORK/c2
cleanup() {
  local rc=$?
  "$STOP" "$C1" >/dev/null 2>&1 || true
  "$STOP" "$C2" >/dev/null 2>&1 || true
  rm -rf "$WORK"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM
cd "$WORK" || exit 1

on() { local c=$1; shift; SLURM_CONF=$c/etc/slurm.conf timeout -k 5 60 "$@"; }  # on CLUSTER CMD...
now() { echo "$EPOCHREALTIME"; }
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }'; }
pids_of() { cat "$1"/run/*.pid 2>/dev/null | sort -un; }
live() {  # live PID...: prints those that are running (zombies do not count)
  local p
  for p in "$@"; do
    running "$p" && echo "$p"
  done
  return 0
}
strays() {  # strays DIR: live munged/slurm* processes whose command line or open files name DIR
  local p comm cmd fd
  for p in /proc/[0-9]*; do
    comm=$(cat "$p/comm" 2>/dev/null) || continue
    [[ $comm == munged || $comm == slurm* ]] || continue
    [[ $(live "${p#/proc/}") ]] || continue
    cmd=$(tr '\0' ' ' <"$p/cmdline" 2>/dev/null) || continue
    if [[ $cmd == *"$1/"* ]]; then echo "${p#/proc/} $cmd"; continue; fi
    for fd in "$p"/fd/*; do
      if [[ $(readlink "$fd" 2>/dev/null) == "$1/"* ]]; then echo "${p#/proc/} $cmd"; break; fi
    done
  done | paste -sd';'
}
ports_of() { grep -hE '^(SlurmctldPort|NodeName)=' "$1/etc/slurm.conf" | grep -oE '(SlurmctldPort|Port)=[0-9]+' | cut -d= -f2; }

# ---- cluster 1 -----------------------------------------------------------------------------
t=$(now)
out=$("$START" "$C1") || fail "start-cluster.sh $C1 failed"
echo "  $out"
check "start-cluster.sh took $(since "$t") s"
[[ $out =~ ^cluster\ up\ in\ [0-9.]+s:\ SLURM_CONF=$C1/etc/slurm.conf\ nodes\ alpha1,beta1\ ports\ [0-9]+-[0-9]+$ ]] ||
  fail "unexpected start line: $out"
for f in env.sh etc/slurm.conf etc/gres.conf etc/plugstack.conf dev/nvidia0 dev/nvidia3 run/slurmctld.pid \
  run/munged.pid run/slurmd-alpha1.pid run/slurmd-beta1.pid; do
  [[ -e $C1/$f ]] || fail "no $C1/$f"
done
[[ -c $C1/dev/nvidia0 ]] || fail "$C1/dev/nvidia0 is not a character device"
# shellcheck disable=SC1091
source "$C1/env.sh"
[[ $SLURM_CONF == "$C1/etc/slurm.conf" && ${OMPI_MCA_btl:-} == self,tcp ]] || fail "env.sh: SLURM_CONF/OMPI_MCA_btl"

nodes=$(sinfo -h -N -o '%N %T %G' | sort -u | tr -s ' ' | paste -sd';')
[[ $nodes == "alpha1 idle gpu:alpha:2;beta1 idle gpu:beta:2" ]] || fail "sinfo: '$nodes'"
check "nodes idle: $nodes"

got=$(on "$C1" srun -N2 -n2 bash -c 'echo $SLURM_NODEID/$SLURMD_NODENAME/$SLURM_NTASKS' | sort | paste -sd' ')
[[ $got == "0/alpha1/2 1/beta1/2" ]] || fail "srun -N2 -n2: '$got'"
check "srun -N2 -n2: $got"

got=$(on "$C1" srun --gres=gpu:beta:1 bash -c 'echo $SLURMD_NODENAME CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES')
[[ $got == "beta1 CUDA_VISIBLE_DEVICES=0" ]] || fail "srun --gres=gpu:beta:1: '$got'"
check "srun --gres=gpu:beta:1: $got"

# ---- MPI under srun ------------------------------------------------------------------------
t=$(now)
on "$C1" srun --mpi=pmix -N2 --ntasks-per-node=1 "$BINDIR/dlh-launch" bench-allreduce --max-bytes 64K --repeats 1 \
  >"$WORK/mpi.out" 2>&1 || { cat "$WORK/mpi.out" >&2; fail "srun --mpi=pmix dlh-launch bench-allreduce"; }
# (srun exits 0 even when a step fails to launch, so look at the output)
if ! grep -q '2 ranks' "$WORK/mpi.out" || ! grep -qE '^ +65536 ' "$WORK/mpi.out"; then
  cat "$WORK/mpi.out" >&2
  fail "bench-allreduce output"
fi
check "srun --mpi=pmix -N2 --ntasks-per-node=1 dlh-launch bench-allreduce: 2 ranks on 2 nodes ($(since "$t") s)"

# ---- a batch job with GPUs ------------------------------------------------------------------
# (the first scheduling pass comes about 3 s after slurmctld starts; srun allocations do not wait for it)
tb=$(now)
job=$(sbatch --parsable --gres=gpu:alpha:2 -o "$WORK/gpu.out" --wrap env) || fail "sbatch failed"
state=
for ((i = 0; i < 300; i++)); do
  state=$(scontrol show job "$job" 2>/dev/null | grep -oE 'JobState=[A-Z_]+' | cut -d= -f2 || true)
  [[ $state == COMPLETED || $state == FAILED || $state == CANCELLED || $state == NODE_FAIL ]] && break
  sleep 0.1
done
[[ $state == COMPLETED ]] || { cat "$WORK/gpu.out" >&2 || true; fail "batch job $job: state '$state'"; }
for want in CUDA_VISIBLE_DEVICES=0,1 SLURM_JOB_GPUS=0,1 SLURM_JOB_NODELIST=alpha1; do
  grep -qx "$want" "$WORK/gpu.out" || { grep -E 'GPU|CUDA|NODELIST' "$WORK/gpu.out" >&2; fail "batch job: no $want"; }
done
check "sbatch --gres=gpu:alpha:2 (job $job, done $(since "$tb") s after submission): CUDA_VISIBLE_DEVICES=0,1 SLURM_JOB_GPUS=0,1 on alpha1"

# ---- a second cluster side by side -------------------------------------------------------
out=$("$START" "$C2") || fail "start-cluster.sh $C2 failed"
echo "  $out"
p1=$(ports_of "$C1" | paste -sd,) p2=$(ports_of "$C2" | paste -sd,)
[[ -z $(comm -12 <(tr , '\n' <<<"$p1" | sort) <(tr , '\n' <<<"$p2" | sort)) ]] || fail "clusters share ports: $p1 / $p2"
# the same job step on both at the same time (both have nodes alpha1 and beta1)
step='sleep 0.5; echo $SLURMD_NODENAME/$SLURM_JOB_ID/$SLURM_SUBMIT_HOST'
on "$C1" srun -N2 -n2 bash -c "$step" >"$WORK/side1.out" 2>&1 &
j1=$!
on "$C2" srun -N2 -n2 bash -c "$step" >"$WORK/side2.out" 2>&1 &
j2=$!
wait $j1 || { cat "$WORK/side1.out" >&2; fail "srun on cluster 1 beside cluster 2"; }
wait $j2 || { cat "$WORK/side2.out" >&2; fail "srun on cluster 2 beside cluster 1"; }
for f in side1 side2; do
  got=$(cut -d/ -f1 "$WORK/$f.out" | sort | paste -sd' ')
  [[ $got == "alpha1 beta1" ]] || { cat "$WORK/$f.out" >&2; fail "$f: '$got'"; }
done
check "two clusters side by side (ports $p1 and $p2): steps on both at once"

mapfile -t old1 < <(pids_of "$C1")
t=$(now)
"$STOP" "$C1" || fail "stop-cluster.sh $C1 failed"
check "stop-cluster.sh took $(since "$t") s"
left=$(live "${old1[@]}" | paste -sd' ')$(strays "$C1")
[[ -z $left ]] || fail "cluster 1 processes still running: $left"
[[ -z $(compgen -G "$C1/run/*.pid" || true) ]] || fail "pid files left in $C1/run"
ctld1=$(grep -oE '^SlurmctldPort=[0-9]+' "$C1/etc/slurm.conf" | cut -d= -f2)
(exec 3<>"/dev/tcp/127.0.0.1/$ctld1") 2>/dev/null && fail "cluster 1's port $ctld1 still answers after stop"
nodes=$(on "$C2" sinfo -h -N -o '%N %T' | sort -u | paste -sd' ')
[[ $nodes == "alpha1 idle beta1 idle" ]] || fail "cluster 2 after stopping cluster 1: '$nodes'"
got=$(on "$C2" srun -N2 -n2 bash -c 'echo $SLURMD_NODENAME' | sort | paste -sd' ')
[[ $got == "alpha1 beta1" ]] || fail "cluster 2 srun after stopping cluster 1: '$got'"
check "cluster 1 stopped (all ${#old1[@]} daemons gone), cluster 2 still runs steps"

mapfile -t old2 < <(pids_of "$C2")
"$STOP" "$C2" || fail "stop-cluster.sh $C2 failed"
left=$(live "${old2[@]}" | paste -sd' ')$(strays "$C2")
[[ -z $left ]] || fail "cluster 2 processes still running: $left"
"$STOP" "$C2" || fail "stop-cluster.sh on a stopped cluster failed"
check "cluster 2 stopped; stopping it again is a no-op"

# ---- a cluster that cannot start -----------------------------------------------------------
C3=$WORK/c3
rc=0
SLURM_TEST_EXTRA_CONF='NoSuchOption=1' "$START" "$C3" >"$WORK/bad.out" 2>&1 || rc=$?
[[ $rc -ne 0 ]] || fail "start-cluster.sh with a bad slurm.conf succeeded"
grep -q 'NoSuchOption' "$WORK/bad.out" || { cat "$WORK/bad.out" >&2; fail "no log tail naming the bad option"; }
[[ -z $(compgen -G "$C3/run/*.pid" || true) ]] || fail "pid files left in $C3/run after a failed start"
left=$(strays "$C3")
[[ -z $left ]] || fail "processes of the failed cluster left: $left"
check "bad slurm.conf: start-cluster.sh exits $rc, shows '$(grep -m1 NoSuchOption "$WORK/bad.out" | cut -c1-60)', leaves nothing running"
