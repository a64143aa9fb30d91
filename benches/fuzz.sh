#!/usr/bin/env bash
# Coverage-guided fuzzing with libFuzzer on the stable toolchain.
#
#   benches/fuzz.sh [TARGET] [SECONDS]    TARGET: shape | plan | ge | all (default all, 60 s each)
#   benches/fuzz.sh build                  only builds the targets (CI builds them early)
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
[ "$targets" = build ] && exit 0
# The targets fuzz at the same time, each for SECONDS (CI's wall time is one target's,
# not three; on a 2-CPU machine each target gets two thirds of a CPU).
fuzz_one() {
  local t=$1 corpus=target/fuzz-corpus/$1 artifacts=target/fuzz-artifacts/$1/
  mkdir -p "$corpus" "$artifacts"
  # The Grid Engine codec promises 2 s and 256 MiB per input (issue #22).
  local limits="-timeout=10 -rss_limit_mb=2048"
  [ "$t" = ge ] && limits="-timeout=2 -rss_limit_mb=256"
  # shellcheck disable=SC2086
  "target/fuzz-build/$host/release/$t" "$corpus" "fuzz/corpus/$t" \
    -max_total_time="$seconds" $limits -max_len=65536 \
    -artifact_prefix="$artifacts" -print_final_stats=1 >"target/fuzz-artifacts/$t.log" 2>&1
}
pids=()
for t in $targets; do
  echo "== fuzzing $t for ${seconds}s"
  fuzz_one "$t" &
  pids+=($!)
done
failed=0
# shellcheck disable=SC2086
set -- $targets
for pid in "${pids[@]}"; do
  t=$1; shift
  status=0
  wait "$pid" || status=$?
  log=target/fuzz-artifacts/$t.log
  echo "== $t"
  grep -E '^(stat::(number_of_executed_units|average_exec_per_sec|new_units_added|peak_rss_mb)|SUMMARY|ERROR|Test unit written|thread .* panicked)' "$log" || true
  if [ "$status" -ne 0 ]; then
    tail -40 "$log" >&2
    echo "fuzz target $t failed (exit $status); reproducer in target/fuzz-artifacts/$t/" >&2
    failed=1
  fi
done
exit "$failed"
