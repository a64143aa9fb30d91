#!/usr/bin/env bash
# Builds binder's RPM in place from what `make` built (PROFILE, CARGO_TARGET_DIR as for
# make), with rpmbuild (on Debian: `apt-get install rpm`); prints the .rpm's path.
#   make && packaging/rpm/build-rpm.sh [OUTDIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(realpath "${1:-.}")
top=$(mktemp -d)
trap 'rm -rf "$top"' EXIT
version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)
spec_version=$(sed -n 's/^Version: *//p' packaging/rpm/binder.spec)
[ "$version" = "$spec_version" ] ||
  { echo "build-rpm: Cargo.toml says $version, binder.spec $spec_version" >&2; exit 1; }
# --nodeps: BuildRequires name Fedora/RHEL packages, which a Debian rpm database lacks;
# Debian's brp-compress is a bash script run by dash (man pages stay uncompressed here).
rpmbuild -bb --build-in-place --nodeps --quiet \
  --define "_topdir $top" --define "_build_id_links none" \
  --define "__brp_compress /bin/true" \
  --define "binder_profile ${PROFILE:-release}" \
  --define "binder_target $(realpath "${CARGO_TARGET_DIR:-target}")" \
  packaging/rpm/binder.spec >/dev/null
rpm=$(find "$top/RPMS" -name 'binder-*.rpm' | head -1)
cp "$rpm" "$out/"
echo "$out/$(basename "$rpm")"
