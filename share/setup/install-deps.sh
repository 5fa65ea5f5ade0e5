#!/bin/bash
# Installs the Debian 12 packages DLH needs. Idempotent: when every package is
# already installed it only runs dpkg-query and exits in well under a second.
#
#   install-deps.sh [build|demo|bench|all]   (default: build = build + make check, which
#                                            runs a real local Slurm cluster and checks the
#                                            format with the pinned clang-format 14)
set -euo pipefail

profile=${1:-build}

build_pkgs=(
  build-essential pkg-config
  openmpi-bin libopenmpi-dev libpmix-dev
  libhdf5-openmpi-dev hdf5-tools
  libboost-program-options-dev
  libgtest-dev
  nlohmann-json3-dev
  libopenblas-dev libeigen3-dev
  libpng-dev libjpeg62-turbo-dev libzip-dev
  dataset-fashion-mnist
  libslurm-dev
  pandoc
)
# iproute2 and util-linux (nsenter): the Slurm tests whose nodes are hosts of their own
slurm_pkgs=(slurm-wlm slurmctld slurmd libslurm-dev munge environment-modules iproute2 util-linux)
check_pkgs=(clang-format-14 clang-14 chromium python3-torch python3-h5py python3-pil python3-onnx man-db)  # make
# check-format / make format (share/setup/format.sh); the report pages loaded in a headless
# browser (tests/scripts/report_browser.sh); a user's PyTorch DDP program under dlh-launch run
# (tests/slurm/run_torch_test.sh); ONNX's checker for the exported models
# (tests/scripts/export.sh); real NumPy, h5py and image files written the way users
# write them (tests/scripts/data_import.sh); man, to read the installed man pages
# (tests/scripts/module_install.sh); clang 14's libFuzzer for `make fuzz`, which .ci/run
# runs after make check. pandoc (build_pkgs) writes them: docs/man/*.md.
bench_pkgs=(python3-torch)

case "$profile" in
  build) want=("${build_pkgs[@]}" "${slurm_pkgs[@]}" "${check_pkgs[@]}") ;;
  demo)  want=("${build_pkgs[@]}" "${slurm_pkgs[@]}") ;;
  bench) want=("${build_pkgs[@]}" "${slurm_pkgs[@]}" "${bench_pkgs[@]}") ;;
  all)   want=("${build_pkgs[@]}" "${slurm_pkgs[@]}" "${bench_pkgs[@]}" "${check_pkgs[@]}") ;;
  *) echo "install-deps.sh: unknown profile '$profile' (build|demo|bench|all)" >&2; exit 2 ;;
esac

missing=()
for p in "${want[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
  echo "install-deps.sh: missing packages: ${missing[*]} (run as root, or install them yourself)" >&2
  exit 1
fi

echo "install-deps.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps.sh: done"
