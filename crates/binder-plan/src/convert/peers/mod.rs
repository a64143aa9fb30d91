//! Each peer's spellings, read into a [`Want`](super::Want). Every option a peer takes that changes
//! placement is either converted or refused here with why; options that do not (`-np`,
//! `--report-bindings`, `verbose`) are skipped with a note.

use super::ConvertError;

mod hwloc;
mod impi;
mod mpich;
mod ompi;
mod slurm;
mod torch;

pub(in crate::convert) use hwloc::{hwloc_bind, numactl};
pub(in crate::convert) use impi::impi;
pub(in crate::convert) use mpich::mpich;
pub(in crate::convert) use ompi::ompi;
pub(in crate::convert) use slurm::slurm;
pub(in crate::convert) use torch::torchrun;

/// `Err` with a sentence.
pub(super) fn refuse<T>(why: impl Into<String>) -> Result<T, ConvertError> {
    Err(ConvertError(why.into()))
}

/// The words as (option, value) pairs: `--opt=value`, `--opt value` (for options in
/// `valued`), `-c2`/`-c 2` (short options in `valued`); a word that is no option is
/// `("", word)`.
pub(super) fn pairs(
    words: &[String],
    valued: &[&str],
) -> Result<Vec<(String, String)>, ConvertError> {
    let mut out = Vec::new();
    let mut it = words.iter();
    while let Some(w) = it.next() {
        if !w.starts_with('-') || w == "-" {
            out.push((String::new(), w.clone()));
            continue;
        }
        if let Some((opt, value)) = w.split_once('=') {
            out.push((opt.to_owned(), value.to_owned()));
            continue;
        }
        // A short option with its value attached: `-c2`, `-N0`.
        if let (Some(short), Some(rest)) = (w.get(..2), w.get(2..)) {
            if !w.starts_with("--")
                && !rest.is_empty()
                && !valued.contains(&w.as_str())
                && valued.contains(&short)
            {
                out.push((short.to_owned(), rest.to_owned()));
                continue;
            }
        }
        if valued.contains(&w.as_str()) {
            let Some(value) = it.next() else {
                return refuse(format!("`{w}` needs a value"));
            };
            out.push((w.clone(), value.clone()));
        } else {
            out.push((w.clone(), String::new()));
        }
    }
    Ok(out)
}

/// A count of at least 1 (at most 65,536).
pub(super) fn count(opt: &str, value: &str) -> Result<usize, ConvertError> {
    match value.trim().parse::<usize>() {
        Ok(n) if (1..=65_536).contains(&n) => Ok(n),
        _ => refuse(format!("`{opt}={value}`: a count from 1 is needed")),
    }
}

/// The MPIs' mapping and binding objects, narrowest first: a binding below the mapping
/// object is chosen inside it ("bind downward"), one above it widens the task's binding.
/// `die` sits between a NUMA node and a socket.
pub(super) fn level(kind: &str) -> u8 {
    match kind {
        "pu" => 0,
        "core" => 1,
        "l2cache" => 2,
        "l3cache" => 3,
        "numa" => 4,
        "die" => 5,
        "socket" => 6,
        _ => 7,
    }
}

/// An Open MPI or hwloc object name as a shape's container type.
pub(super) fn container(name: &str) -> Option<&'static str> {
    Some(match name.to_ascii_lowercase().as_str() {
        "socket" | "package" => "socket",
        "numa" | "numanode" => "numa",
        "l3cache" | "l3" => "l3cache",
        "l2cache" | "l2" => "l2cache",
        "die" => "die",
        _ => return None,
    })
}
