#!/usr/bin/env bash
# binder's release tarballs, as the RPM spec (Source0, Source1) and other build farms take
# them: the source of a commit (`git archive`, default HEAD) and every crate it builds
# with, vendored (`cargo vendor`, from the committed Cargo.lock), so that the build itself
# needs no network. Prints the two paths.
#   tools/dist.sh [OUTDIR] [COMMIT]
#   rpmbuild -ta binder-0.1.0.tar.gz   # with binder-0.1.0-vendor.tar.xz in SOURCES
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath "${1:-.}")
commit=${2:-HEAD}
version=$(git show "$commit:Cargo.toml" | sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p')
name=binder-$version
git archive --format=tar.gz --prefix="$name/" -o "$out/$name.tar.gz" "$commit"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git archive --format=tar --prefix="$name/" "$commit" | tar -x -C "$work"
# The vendored crates unpack beside the source as vendor/, with the .cargo/config.toml
# that points cargo at them.
(cd "$work/$name" && cargo vendor --locked --quiet vendor >"$work/config.toml")
mkdir -p "$work/$name/.cargo"
mv "$work/config.toml" "$work/$name/.cargo/config.toml"
tar -C "$work" -cJf "$out/$name-vendor.tar.xz" "$name/vendor" "$name/.cargo/config.toml"
echo "$out/$name.tar.gz"
echo "$out/$name-vendor.tar.xz"
