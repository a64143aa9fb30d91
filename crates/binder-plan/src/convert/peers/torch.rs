//! torchrun's (torch.distributed.run's) launch options: `--numa-binding MODE` becomes
//! `options.numa-binding`, PyTorch's rules inside binder (SEMANTICS §9, ML launchers);
//! `--nproc-per-node N` is the node's worker count, which binder reads from
//! `LOCAL_WORLD_SIZE` at launch. The rendezvous and logging options do not place workers.

use super::{count, pairs, refuse};
use crate::convert::{ConvertError, Want};

/// torchrun's options that take a value (both spellings it accepts: `-` and `_`).
const VALUED: [&str; 38] = [
    "--nproc-per-node",
    "--nproc_per_node",
    "--numa-binding",
    "--numa_binding",
    "--nnodes",
    "--node-rank",
    "--node_rank",
    "--rdzv-backend",
    "--rdzv_backend",
    "--rdzv-endpoint",
    "--rdzv_endpoint",
    "--rdzv-id",
    "--rdzv_id",
    "--rdzv-conf",
    "--rdzv_conf",
    "--master-addr",
    "--master_addr",
    "--master-port",
    "--master_port",
    "--local-addr",
    "--local_addr",
    "--max-restarts",
    "--max_restarts",
    "--monitor-interval",
    "--monitor_interval",
    "--start-method",
    "--start_method",
    "--role",
    "--log-dir",
    "--log_dir",
    "--redirects",
    "-r",
    "--tee",
    "-t",
    "--local-ranks-filter",
    "--local_ranks_filter",
    "--logs-specs",
    "--logs_specs",
];

/// The modes of `--numa-binding`, as PyTorch's `AffinityMode` names them.
const MODES: [&str; 4] = ["node", "socket", "exclusive", "core-complex"];

/// Reads torchrun's options (those before the training script).
pub(in crate::convert) fn torchrun(
    words: &[String],
    notes: &mut Vec<String>,
) -> Result<Want, ConvertError> {
    let mut want = Want {
        bind: Some("none"),
        ..Want::default()
    };
    for (opt, value) in pairs(words, &VALUED)? {
        match opt.as_str() {
            "--numa-binding" | "--numa_binding" => {
                let Some(mode) = MODES.iter().find(|m| **m == value.trim()) else {
                    return refuse(format!(
                        "`{opt} {value}`: PyTorch's modes are {}",
                        MODES.join(", ")
                    ));
                };
                want.numa_binding = Some(mode);
                want.bind = None;
            }
            "--nproc-per-node" | "--nproc_per_node" => {
                let n = match value.trim() {
                    "gpu" | "auto" => None,
                    "cpu" | "xpu" => {
                        return refuse(format!("`{opt} {value}`: PyTorch's NUMA binding places GPU workers; give the worker count, or convert the CPU job's binding from the launcher that runs it"))
                    }
                    other => Some(count(&opt, other)?),
                };
                notes.push(format!(
                    "`{opt} {value}`: binder reads the node's workers from LOCAL_WORLD_SIZE at launch; start them as `torchrun {opt} {value} --no-python binder SHAPE -- python train.py` (without `--numa-binding`: binder binds){}",
                    n.map_or_else(String::new, |n| format!(", one GPU each: the job needs {n} GPU(s) on the node"))
                ));
            }
            "--standalone" | "--no-python" | "--no_python" | "-m" | "--module" | "--run-path"
            | "--run_path" | "--nnodes" | "--node-rank" | "--node_rank" | "--rdzv-backend"
            | "--rdzv_backend" | "--rdzv-endpoint" | "--rdzv_endpoint" | "--rdzv-id"
            | "--rdzv_id" | "--rdzv-conf" | "--rdzv_conf" | "--master-addr" | "--master_addr"
            | "--master-port" | "--master_port" | "--local-addr" | "--local_addr"
            | "--max-restarts" | "--max_restarts" | "--monitor-interval"
            | "--monitor_interval" | "--start-method" | "--start_method" | "--role"
            | "--log-dir" | "--log_dir" | "--redirects" | "-r" | "--tee" | "-t"
            | "--local-ranks-filter" | "--local_ranks_filter" | "--logs-specs"
            | "--logs_specs" => {
                notes.push(format!("`{opt}` does not change placement: left out"));
            }
            "" => {
                return refuse(format!(
                    "`{value}`: give torchrun's options only, without the training script"
                ))
            }
            other => {
                return refuse(format!(
                    "`{other}` is not a torchrun option binder knows; it converts `--numa-binding` and `--nproc-per-node`"
                ))
            }
        }
    }
    if want.numa_binding.is_none() {
        notes.push("without `--numa-binding` torchrun binds nothing: the shape leaves each worker the job's CPUs (`bind: none`); add `--numa-binding node` for PyTorch's binding".to_owned());
    }
    Ok(want)
}
