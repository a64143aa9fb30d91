#!/usr/bin/env bash
# Builds binder_VERSION_ARCH.deb from what `make` built, through the one install step
# sites, RPM and Spack call (`make install PREFIX=/usr DESTDIR=…`), so the package holds
# exactly what `make install` installs:
#
#   make && packaging/deb/build-deb.sh [OUTDIR]       # PROFILE, CARGO_TARGET_DIR as for make
#   apt-get install ./binder_0.1.0_amd64.deb
#
# Depends is read from the shared libraries the executables and plugins load (their
# packages, as dpkg knows them); hwloc must be 2.8 or newer (hwlocality's hwloc-2_8_0).
# The plugins' configuration files are conffiles and inert until a job asks (see the
# guide's "Installing binder on a site").
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(realpath "${1:-.}")
profile=${PROFILE:-release}
target=${CARGO_TARGET_DIR:-target}
version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)
arch=$(dpkg --print-architecture)
stage=$(mktemp -d)
chmod 755 "$stage"
trap 'rm -rf "$stage"' EXIT
make --no-print-directory install PREFIX=/usr DESTDIR="$stage" PROFILE="$profile" \
  CARGO_TARGET_DIR="$target" >/dev/null
libs=$(for f in "$stage/usr/bin/binder-full" "$stage"/usr/lib/binder/*.so; do ldd "$f"; done |
  awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u)
deps=$(for lib in $libs; do dpkg -S "$lib" 2>/dev/null || dpkg -S "$(realpath "$lib")"; done |
  cut -d: -f1 | sort -u | sed 's/^libhwloc15$/libhwloc15 (>= 2.8.0)/' | paste -sd, | sed 's/,/, /g')
[ -n "$deps" ] || { echo "build-deb: no package found for the libraries binder loads" >&2; exit 1; }
mkdir -p "$stage/DEBIAN"
cat >"$stage/DEBIAN/control" <<CONTROL
Package: binder
Version: $version
Architecture: $arch
Maintainer: binder developers <binder@users.noreply.github.com>
Installed-Size: $(du -sk --exclude=DEBIAN "$stage" | cut -f1)
Depends: $deps
Suggests: hwloc, slurm-wlm, flux-core
Section: admin
Priority: optional
Description: pin every task of a parallel job to the right CPUs and GPUs of its node
 binder computes each task's cpuset (and GPUs, NICs) from the node's hwloc topology
 and a small YAML shape, then execs the task bound to it. It runs in launch lines
 (mpirun, srun, flux run, mpiexec), as a Slurm SPANK plugin and as a Flux shell
 plugin, and keeps jobs that share a node off each other's cores.
CONTROL
printf '%s\n' /etc/slurm/plugstack.conf.d/binder.conf /etc/flux/shell/lua.d/binder.lua \
  >"$stage/DEBIAN/conffiles"
deb="$out/binder_${version}_${arch}.deb"
dpkg-deb --root-owner-group --build "$stage" "$deb" >/dev/null
echo "$deb"
