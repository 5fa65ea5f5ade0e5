# Sourced by the make bench parts that submit jobs with `sbatch --dlh-auto` to a local Slurm
# cluster of fake-GPU nodes on this machine (whole_jobs.sh, suggested.sh). The sourcing script
# sets `root` (the checkout), `so` (spank_dlh.so) and defines `unavailable MESSAGE`, and runs
# in the folder where start.txt may be written.

# bench_cluster_start NODES CLUSTER_JSON: share/slurm/start-cluster.sh with SLURM_TEST_NODES
# NODES and the plugin planning from CLUSTER_JSON, in a fresh /tmp folder that is stopped and
# removed when the script exits; variables of any job this shell runs in are unset (they would
# steer sbatch), then the cluster's env.sh is sourced.
bench_cluster_start() {
  bench_cluster=$(mktemp -d /tmp/dlhb-XXXX)
  trap 'bash "$root/share/slurm/stop-cluster.sh" "$bench_cluster" >/dev/null 2>&1 || true; rm -rf "$bench_cluster"' EXIT
  SLURM_TEST_NODES="$1" SLURM_TEST_PLUGSTACK="required $so cluster=$2" \
    bash "$root/share/slurm/start-cluster.sh" "$bench_cluster" >start.txt 2>&1 ||
    unavailable "share/slurm/start-cluster.sh failed: $(tail -1 start.txt)"
  while read -r v; do unset "$v"; done < <(compgen -e | grep -E '^(SLURM|SBATCH|SALLOC|SRUN|DLH)_' || true)
  # shellcheck source=/dev/null
  source "$bench_cluster/env.sh"
}

# bench_wait_job JOB SECONDS: until the job is no longer pending, configuring, running or
# completing, at most SECONDS; $state is the state it was last seen in.
bench_wait_job() {
  local _
  for _ in $(seq "$2"); do
    state=$(scontrol show job "$1" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2)
    [[ $state == PENDING || $state == RUNNING || $state == CONFIGURING || $state == COMPLETING ]] || return 0
    sleep 1
  done
}
