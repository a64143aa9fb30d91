#!/usr/bin/env bash
# GPU smoke check for a site's GPU node (#61): run it on the node (or inside a job's
# allocation there) with binder installed or built. It checks, and prints one line each:
#   - discovery: the GPUs binder finds and what the driver says (`nvidia-smi -L`,
#     `nvidia-smi topo -m` when present);
#   - each task's variables: N tasks of `gpu-local` (N = the GPUs binder finds), each
#     launched for real: its CUDA_VISIBLE_DEVICES (or ROCR_VISIBLE_DEVICES) and CPUs,
#     all GPUs distinct;
#   - UUID forms: a full `GPU-<uuid>` and an 8-hex-digit prefix in CUDA_VISIBLE_DEVICES
#     plan the GPU the driver gives that UUID (where the driver gives UUIDs);
#   - a CUDA probe, where Python with torch (or cupy) is present: the task sees exactly
#     one device, and its PCI bus id is the one binder planned;
#   - torchrun-style workers (LOCAL_RANK, LOCAL_WORLD_SIZE, TORCHELASTIC_RUN_ID, each in
#     a session of its own): distinct GPUs.
# Exit 0 when every check that could run passed; 1 otherwise. A check that cannot run
# here (no UUIDs, no torch) says so and is skipped.
#   tools/gpu-smoke.sh [BINDER]      (default: binder on PATH, else target/release/binder)
# BINDER_SMOKE_SHAPE: the tasks' shape (default gpu-local; gpu-devices-only where the node
# has fewer cores near a GPU than tasks there, as binder's own test of this script).
set -uo pipefail
binder=${1:-$(command -v binder || echo target/release/binder)}
shape=${BINDER_SMOKE_SHAPE:-gpu-local}
[ -x "$binder" ] || { echo "gpu-smoke: no binder at $binder; build it (cargo build --release) or pass its path"; exit 1; }
export BINDER_CACHE=off
failed=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; failed=1; }
skip() { echo "skip $*"; }

# Discovery: the GPUs this job may have (asking for more than any node has names them).
refusal=$("$binder" --dry-run --local-size 4096 gpu-devices-only 2>&1)
total=$(printf '%s\n' "$refusal" | sed -n 's/.*but this host has \([0-9]*\).*/\1/p' | head -1)
if [ "${total:-0}" -gt 0 ]; then
  ok "discovery: binder finds $total GPU(s) for this job"
  "$binder" --dry-run --local-size "$total" gpu-devices-only 2>&1 | sed 's/^/     plan: /'
else
  bad "discovery: binder finds no GPU here: $refusal"
fi
if command -v nvidia-smi >/dev/null; then
  nvidia-smi -L | sed 's/^/     driver: /'
  nvidia-smi topo -m 2>/dev/null | sed 's/^/     topo: /'
fi
[ "${total:-0}" -gt 0 ] || { echo "gpu-smoke: nothing more to check"; exit 1; }

# Each task's variables, launched for real.
probe='echo "${CUDA_VISIBLE_DEVICES:-${ROCR_VISIBLE_DEVICES:-}} $(sed -n "s/^Cpus_allowed_list:[[:space:]]*//p" /proc/self/status) ${BINDER_GPUS:-}"'
seen=""
for ((r = 0; r < total; r++)); do
  line=$("$binder" --local-rank "$r" --local-size "$total" "$shape" -- sh -c "$probe" 2>&1) || { bad "task $r/$total of $shape: $line"; continue; }
  ok "task $r/$total: devices ${line%% *}, cpus $(echo "$line" | cut -d' ' -f2), binder's gpu ${line##* }"
  seen="$seen ${line%% *}"
done
dups=$(tr ' ' '\n' <<<"$seen" | sed '/^$/d' | sort | uniq -d)
count=$(wc -w <<<"$seen")
[ -z "$dups" ] && [ "$count" = "$total" ] && ok "tasks' devices distinct:$seen" || bad "tasks' devices:$seen (repeated: ${dups:-none})"

# UUID forms.
uuid=$(cat /proc/driver/nvidia/gpus/*/information 2>/dev/null | sed -n 's/^GPU UUID:[[:space:]]*//p' | head -1)
[ -n "$uuid" ] || uuid=$(nvidia-smi --query-gpu=pci.bus_id,uuid --format=csv,noheader 2>/dev/null | head -1 | cut -d, -f2 | tr -d ' ')
if [ -n "$uuid" ]; then
  for form in "$uuid" "${uuid:0:12}"; do
    line=$(CUDA_VISIBLE_DEVICES=$form "$binder" --report "$shape" -- sh -c "$probe" 2>&1) &&
      ok "CUDA_VISIBLE_DEVICES=$form runs: $(echo "$line" | tr '\n' ' ')" ||
      bad "CUDA_VISIBLE_DEVICES=$form: $line"
  done
  line=$(CUDA_VISIBLE_DEVICES=GPU- "$binder" "$shape" -- true 2>&1)
  [ "$total" -gt 1 ] && { [[ $line == *"prefix of"* ]] && ok "an ambiguous prefix refuses: $line" || bad "an ambiguous prefix: $line"; }
else
  skip "UUID forms: the driver gives no UUID here"
fi

# A CUDA probe.
py=$(command -v python3 || true)
if [ -n "$py" ] && "$py" -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  code='import torch; p = torch.cuda.get_device_properties(0); print(torch.cuda.device_count(), "%04x:%02x:%02x.0" % (p.pci_domain_id, p.pci_bus_id, p.pci_device_id))'
  for ((r = 0; r < total; r++)); do
    want=$("$binder" --dry-run --local-rank "$r" --local-size "$total" --format json "$shape" | grep -o '"gpu_busids":\["[^"]*' | sed 's/.*"//')
    got=$("$binder" --local-rank "$r" --local-size "$total" "$shape" -- "$py" -c "$code" 2>&1)
    [ "$got" = "1 $want" ] && ok "torch in task $r sees one GPU, $want" || bad "torch in task $r: '$got', binder planned $want"
  done
elif [ -n "$py" ] && "$py" -c 'import cupy' 2>/dev/null; then
  got=$("$binder" "$shape" -- "$py" -c 'import cupy; print(cupy.cuda.runtime.getDeviceCount())' 2>&1)
  [ "$got" = 1 ] && ok "cupy in a task sees one GPU" || bad "cupy in a task: $got"
else
  skip "CUDA probe: no Python with torch or cupy"
fi

# torchrun-style workers, each in a session of its own.
dir=$(mktemp -d)
for ((r = 0; r < total; r++)); do
  LOCAL_RANK=$r RANK=$r LOCAL_WORLD_SIZE=$total WORLD_SIZE=$total TORCHELASTIC_RUN_ID=smoke \
    setsid "$binder" "$shape" -- sh -c "sleep 0.5; $probe" >"$dir/$r" 2>&1 &
done
wait
workers=$(for ((r = 0; r < total; r++)); do cut -d' ' -f1 "$dir/$r"; done | tr '\n' ' ')
dups=$(tr ' ' '\n' <<<"$workers" | sed '/^$/d' | sort | uniq -d)
[ -z "$dups" ] && [ "$(wc -w <<<"$workers")" = "$total" ] && ok "torchrun-style workers' devices: $workers" || bad "torchrun-style workers share devices: $workers ($(cat "$dir"/*))"
rm -rf "$dir"
[ "$failed" = 0 ] && echo "gpu-smoke: all checks passed" || echo "gpu-smoke: some checks failed"
exit "$failed"
