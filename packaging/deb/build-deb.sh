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
# Debian's policy, checked by lintian in CI (.ci/package): stripped objects, compressed
# man pages, the upstream changelog as changelog.gz (a native package), the licences in
# a DEP-5 copyright file (the two texts stay beside it: both licences ask to travel with
# copies), the lintian overrides below, and Depends from dpkg-shlibdeps.
strip --strip-unneeded --remove-section=.comment --remove-section=.note \
  "$stage/usr/bin/binder" "$stage/usr/bin/binder-full" "$stage"/usr/lib/binder/*.so
gzip -9n "$stage"/usr/share/man/man1/*.1 "$stage"/usr/share/man/man5/*.5
doc="$stage/usr/share/doc/binder"
gzip -9n "$doc/CHANGELOG.md"
# A native package's changelog.gz is in Debian's format: one entry, pointing at binder's.
printf 'binder (%s) unstable; urgency=medium\n\n  * Release %s; what changed is in /usr/share/doc/binder/CHANGELOG.md.gz.\n\n -- binder developers <binder@users.noreply.github.com>  %s\n' \
  "$version" "$version" "$(date -R -d "@$(git log -1 --format=%ct 2>/dev/null || date +%s)")" >"$doc/changelog"
gzip -9n "$doc/changelog"
{
  cat <<'COPYRIGHT'
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: binder
Source: https://github.com/binder-hpc/binder

Files: *
Copyright: 2025-2026 The binder developers
License: MIT or Apache-2.0

License: MIT
COPYRIGHT
  sed -n '/^Permission is hereby granted/,$p' LICENSE-MIT | sed 's/^$/./; s/^/ /'
  cat <<'COPYRIGHT'

License: Apache-2.0
 Licensed under the Apache License, Version 2.0 (the "License"); you may not use
 this file except in compliance with the License. You may obtain a copy of the
 License at http://www.apache.org/licenses/LICENSE-2.0
 .
 On Debian systems, the complete text of the Apache License, Version 2.0 can be
 found in "/usr/share/common-licenses/Apache-2.0".
COPYRIGHT
  # The crates compiled into binder-full and the plugins, one stanza per licence as
  # THIRD-PARTY-NOTICES.md (cargo-about, from Cargo.lock) gives it, with every licence
  # besides binder's own two written out (#65).
  python3 - THIRD-PARTY-NOTICES.md <<'STANZAS'
import re, sys
text = open(sys.argv[1]).read()
own = {"MIT", "Apache-2.0"}
for m in re.finditer(r"^### .*? \(([^)]+)\)\n\nUsed by: (.*?)\n\n```text\n(.*?)\n```", text, re.M | re.S):
    lid, used, body = m.group(1), m.group(2), m.group(3)
    crates = re.findall(r"`([^`]+)` (\S+?)(?:,|$)", used)
    files = " ".join(f"vendor/{name}-{version}/*" for name, version in crates)
    print(f"\nFiles: {files}")
    print("Copyright: the authors of each crate, as its licence text below and in")
    print(" /usr/share/doc/binder/THIRD-PARTY-NOTICES.md say")
    print(f"License: {lid}")
    print(" Rust crates compiled into /usr/bin/binder-full and the plugins in /usr/lib/binder.")
    if lid not in own:
        own.add(lid)
        lines = [l.rstrip() for l in body.splitlines()]
        print(f"\nLicense: {lid}")
        for l in lines:
            print(" " + (l if l.strip() else "."))
STANZAS
} >"$doc/copyright"
chmod 644 "$doc/copyright"
# What lintian cannot know: yaml_serde's YAML parser is a Rust crate (a translation of
# libyaml, linked as every Rust dependency is), not an embedded copy of the C library;
# `binder` is a static-pie executable on purpose (no interpreter, no NEEDED: a warm launch
# loads nothing), which lintian takes for a shared library.
mkdir -p "$stage/usr/share/lintian/overrides"
{
  for f in usr/bin/binder-full $(cd "$stage" && ls usr/lib/binder/*.so); do
    echo "binder: embedded-library libyaml [$f]"
  done
  echo "binder: shared-library-lacks-prerequisites [usr/bin/binder]"
} >"$stage/usr/share/lintian/overrides/binder"
chmod 644 "$stage/usr/share/lintian/overrides/binder"
# Depends: what dpkg-shlibdeps reads off the objects (libc6 (>= 2.34), libhwloc15, …),
# with hwloc at 2.8 or newer (hwlocality's hwloc-2_8_0), which no symbol tells.
shlib=$(mktemp -d)
mkdir "$shlib/debian"
printf 'Source: binder\n\nPackage: binder\nArchitecture: any\n' >"$shlib/debian/control"
objects=(-e"$stage/usr/bin/binder-full")
for so in "$stage"/usr/lib/binder/*.so; do objects+=(-e"$so"); done
deps=$(cd "$shlib" && dpkg-shlibdeps -O "${objects[@]}" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
rm -rf "$shlib"
deps=$(echo "$deps" | sed 's/libhwloc15 ([^)]*)/libhwloc15 (>= 2.8.0)/; s/libhwloc15\(,\|$\)/libhwloc15 (>= 2.8.0)\1/')
[ -n "$deps" ] || { echo "build-deb: dpkg-shlibdeps found no dependency for binder's objects" >&2; exit 1; }
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
 binder computes each task's cpuset (and GPUs, NICs) from the node's hwloc
 topology and a small YAML shape, then execs the task bound to it. It runs in
 launch lines (mpirun, srun, flux run, mpiexec), as a Slurm SPANK plugin and as
 a Flux shell plugin, and keeps jobs that share a node off each other's cores.
CONTROL
# The plugins' configuration files are conffiles (the Slurm one only with its plugin:
# `make install` leaves out a plugin built without Slurm's headers, and says so).
(cd "$stage" && ls etc/slurm/plugstack.conf.d/binder.conf etc/flux/shell/lua.d/binder.lua 2>/dev/null) |
  sed 's|^|/|' >"$stage/DEBIAN/conffiles"
# md5sums of every installed file but the conffiles (dpkg keeps theirs), as debhelper's
# packages carry (debsums, dpkg --verify).
(cd "$stage" && find . -type f ! -path './DEBIAN/*' ! -path './etc/*' -printf '%P\0' | sort -z | xargs -0 md5sum) >"$stage/DEBIAN/md5sums"
chmod 644 "$stage/DEBIAN/md5sums"
deb="$out/binder_${version}_${arch}.deb"
dpkg-deb --root-owner-group --build "$stage" "$deb" >/dev/null
echo "$deb"
