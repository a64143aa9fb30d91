//! SGE 6.2u5's `-binding` strategies (linear, striding, explicit): which cores of the
//! tree the job gets, counted per socket as SGE counts them.

use std::cmp::Reverse;

use super::super::codec::{Letter, Tree};
use super::super::request::Strategy;
use super::super::GeError;
use super::refuse;

/// Every core with its socket and its index in the socket, in string order.
pub fn numbered_cores(tree: &Tree) -> Vec<(usize, usize, usize)> {
    let mut out = Vec::new();
    // Before the first S (a string without sockets) everything is socket 0.
    let mut socket: Option<usize> = None;
    let mut in_socket = 0;
    for (n, node) in tree.nodes.iter().enumerate() {
        if node.letter == Letter::S {
            socket = Some(socket.map_or(0, |s| s + 1));
            in_socket = 0;
        }
        if node.letter.is_core() {
            out.push((n, socket.unwrap_or(0), in_socket));
            in_socket += 1;
        }
    }
    out
}

/// SGE 6.2u5: a core is busy only when all its threads are taken (its letter lowercase);
/// a socket is empty when none of its cores is busy.
pub(super) fn sge_cores(tree: &Tree, strategy: &Strategy) -> Result<Vec<usize>, GeError> {
    let cores = numbered_cores(tree);
    let busy = |n: usize| tree.threads(n).iter().all(|&t| tree.nodes[t].used);
    let find = |(s, c): (usize, usize)| {
        cores
            .iter()
            .position(|&(_, cs, cc)| cs == s && cc == c)
            .ok_or_else(|| refuse(format!("core {s},{c} does not exist here")))
    };
    match *strategy {
        Strategy::Explicit(ref pairs) => pairs
            .iter()
            .map(|&p| {
                let i = find(p)?;
                if busy(cores[i].0) {
                    return Err(refuse(format!("core {},{} is taken", p.0, p.1)));
                }
                Ok(cores[i].0)
            })
            .collect(),
        Strategy::Striding {
            amount,
            step,
            start,
        } => {
            let firsts: Vec<usize> = match start {
                Some(p) => vec![find(p)?],
                None => (0..cores.len()).collect(),
            };
            for first in firsts {
                let picks: Vec<usize> = (0..amount).map(|k| first + k * step).collect();
                if picks.iter().all(|&i| i < cores.len() && !busy(cores[i].0)) {
                    return Ok(picks.into_iter().map(|i| cores[i].0).collect());
                }
            }
            Err(refuse(format!(
                "no {amount} free cores {step} apart{}",
                start.map_or(String::new(), |(s, c)| format!(" from core {s},{c}"))
            )))
        }
        Strategy::Linear {
            amount,
            start: Some(p),
        } => {
            let first = find(p)?;
            let picks: Vec<usize> = (first..first + amount).collect();
            if picks.iter().all(|&i| i < cores.len() && !busy(cores[i].0)) {
                Ok(picks.into_iter().map(|i| cores[i].0).collect())
            } else {
                Err(refuse(format!(
                    "the {amount} cores from {},{} are not all free",
                    p.0, p.1
                )))
            }
        }
        Strategy::Linear {
            amount,
            start: None,
        } => {
            let sockets = cores.iter().map(|c| c.1).max().map_or(0, |m| m + 1);
            let mut taken = vec![false; cores.len()];
            let free_in = |s: usize, taken: &[bool]| -> Vec<usize> {
                (0..cores.len())
                    .filter(|&i| cores[i].1 == s && !taken[i] && !busy(cores[i].0))
                    .collect()
            };
            let mut need = amount;
            let mut out = Vec::new();
            // Empty sockets first, in order, as many cores as each has.
            for s in 0..sockets {
                if need == 0 {
                    break;
                }
                let empty = (0..cores.len()).all(|i| cores[i].1 != s || !busy(cores[i].0));
                if empty {
                    for i in free_in(s, &taken).into_iter().take(need) {
                        taken[i] = true;
                        out.push(cores[i].0);
                        need -= 1;
                    }
                }
            }
            // Then the socket with the most free cores, again and again.
            while need > 0 {
                let best = (0..sockets)
                    .map(|s| (free_in(s, &taken).len(), Reverse(s)))
                    .max()
                    .filter(|&(n, _)| n > 0);
                let Some((_, Reverse(s))) = best else {
                    return Err(refuse(format!(
                        "only {} of {amount} cores are free",
                        amount - need
                    )));
                };
                for i in free_in(s, &taken).into_iter().take(need) {
                    taken[i] = true;
                    out.push(cores[i].0);
                    need -= 1;
                }
            }
            Ok(out)
        }
        Strategy::Packed(_) => unreachable!("packed is walked by `packed`"),
    }
}
