#!/usr/bin/env bash
# Coverage-guided fuzzing with libFuzzer on the stable toolchain.
#
#   benches/fuzz.sh [TARGET] [SECONDS]    TARGET: shape | plan | ge | all (default all, 60 s each)
#
# cargo-fuzz needs nightly for its sanitizer flags; libfuzzer-sys itself does not, so this
# script builds fuzz/ with the same coverage instrumentation cargo-fuzz uses (`-s none`),
# passing --target so build scripts and proc macros stay uninstrumented. Debug assertions
# and overflow checks are on (fuzz/Cargo.toml), so an arithmetic overflow is a crash.
# Each run starts from the committed seeds (fuzz/corpus/TARGET) and a scratch copy
# grows in target/fuzz-corpus; any crash, timeout (10 s) or RSS over 2 GiB fails the run,
# and the reproducer is left in target/fuzz-artifacts/TARGET/.
set -euo pipefail
cd "$(dirname "$0")/.."
targets=${1:-all}
seconds=${2:-60}
[ "$targets" = all ] && targets="shape plan ge"
host=$(rustc -vV | sed -n 's/^host: //p')
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing"
cargo build --release --quiet --manifest-path fuzz/Cargo.toml --target "$host" \
  --target-dir target/fuzz-build
for t in $targets; do
  corpus=target/fuzz-corpus/$t
  artifacts=target/fuzz-artifacts/$t/
  mkdir -p "$corpus" "$artifacts"
  echo "== fuzzing $t for ${seconds}s"
  log=target/fuzz-artifacts/$t.log
  status=0
  # The Grid Engine codec promises 2 s and 256 MiB per input (issue #22).
  limits="-timeout=10 -rss_limit_mb=2048"
  [ "$t" = ge ] && limits="-timeout=2 -rss_limit_mb=256"
  # shellcheck disable=SC2086
  "target/fuzz-build/$host/release/$t" "$corpus" "fuzz/corpus/$t" \
    -max_total_time="$seconds" $limits -max_len=65536 \
    -artifact_prefix="$artifacts" -print_final_stats=1 >"$log" 2>&1 || status=$?
  grep -E '^(stat::(number_of_executed_units|average_exec_per_sec|new_units_added|peak_rss_mb)|SUMMARY|ERROR|Test unit written|thread .* panicked)' "$log" || true
  if [ "$status" -ne 0 ]; then
    tail -40 "$log" >&2
    echo "fuzz target $t failed (exit $status); reproducer in $artifacts" >&2
    exit 1
  fi
done
