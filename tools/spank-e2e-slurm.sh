#!/usr/bin/env bash
# The SPANK plugin's end-to-end tests against another Slurm release than the machine's
# (#56): by default Slurm 25.11.7, built from third_party/slurm by its build-slurm.sh into
# /opt/slurm-25.11 (10-15 minutes on 2 CPUs, once). The plugin is built against that
# Slurm's headers (so its plugin_version is 25.11's), the Slurm e2e tests run with that
# Slurm's daemons and commands first on PATH, and the plugin is built again against the
# machine's headers afterwards. The two-node test is left out: several slurmd on one host
# need a Slurm configured with --enable-multiple-slurmd, which build-slurm.sh does not do.
# Not part of CI (the build is too long); run as root:
#   tools/spank-e2e-slurm.sh [PREFIX]
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=${1:-/opt/slurm-25.11}
vendor=third_party/slurm
if [ ! -x "$prefix/sbin/slurmctld" ]; then
  [ "$prefix" = /opt/slurm-25.11 ] || { echo "no Slurm in $prefix" >&2; exit 1; }
  bash "$vendor/build-slurm.sh" "$prefix"
fi
number=$(sed -n 's/#define SLURM_VERSION_NUMBER //p' "$prefix/include/slurm/slurm_version.h")
version="Slurm $((number >> 16)).$(((number >> 8) & 255)).$((number & 255))"
restore() { cargo build --profile ci -p binder-spank --quiet; }
trap restore EXIT
SLURM_INCLUDE_DIR="$prefix/include" cargo build --profile ci --quiet
echo "spank-e2e: $version, plugin_version $number"
SLURM_INCLUDE_DIR="$prefix/include" PATH="$prefix/bin:$prefix/sbin:$PATH" BINDER_KERNEL_VIEW=in-sight CI=true \
  cargo nextest run --cargo-profile ci --profile ci --test e2e \
  -E 'test(/slurm_srun|slurm_as_sites_run_it|stderr_lines|make_install_then_both_plugins/)'
