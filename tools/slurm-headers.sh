#!/usr/bin/env bash
# Slurm's public headers from a release tarball, without building it: slurm/*.h as
# released, and slurm_version.h written from the tarball's META as configure writes it.
# CI checks binder-spank's hand-kept FFI against them (crates/binder-spank/tests/header.rs,
# BINDER_SPANK_HEADERS), beside the installed Slurm's.
#   tools/slurm-headers.sh third_party/slurm/slurm-25.11.7.tar.xz OUTDIR   # prints OUTDIR
set -euo pipefail
tarball=$1; out=$2
mkdir -p "$out/slurm"
top=$(tar -tJf "$tarball" | sed -n 1p | cut -d/ -f1)
tar -xJf "$tarball" -C "$out" --strip-components=1 --wildcards "$top/slurm/*.h" "$top/slurm/slurm_version.h.in" "$top/META"
field() { sed -n "s/^ *$1:[[:space:]]*//p" "$out/META"; }
major=$(field Major); minor=$(field Minor); micro=$(field Micro)
[ -n "$major" ] && [ -n "$minor" ] && [ -n "$micro" ] || { echo "slurm-headers: no version in $tarball's META" >&2; exit 1; }
sed "s/#undef SLURM_VERSION_NUMBER/#define SLURM_VERSION_NUMBER 0x$(printf '%02x%02x%02x' "$major" "$minor" "$micro")/" \
  "$out/slurm/slurm_version.h.in" >"$out/slurm/slurm_version.h"
rm -f "$out/slurm/slurm_version.h.in" "$out/META"
echo "$out"
