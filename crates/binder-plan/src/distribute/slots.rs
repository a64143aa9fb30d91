//! Which slot each task gets (SEMANTICS §10): pure arithmetic over the slots' parents.
//!
//! `packed` gives slots in selection order (parent by parent); `scatter` goes round robin
//! over the parents (the first slot of every parent, then the second, ...), which is
//! Open MPI's `--map-by socket:PE=k` and Slurm's `-m block:cyclic`. `reverse` reverses
//! the slot list first, as it reverses the pool without slots.

use crate::shape::Pattern;

/// The order in which slots are handed out, given each slot's parent number (in
/// selection order, as `select` numbers them).
pub(crate) fn order(parents: &[usize], pattern: Pattern, reverse: bool) -> Vec<usize> {
    let mut slots: Vec<usize> = (0..parents.len()).collect();
    if reverse {
        slots.reverse();
    }
    // Slots are dealt whole: packed and interleave hand them out in order.
    match pattern {
        Pattern::Scatter => {}
        Pattern::Packed | Pattern::Interleave => return slots,
    }
    // Round robin: each slot's position among its parent's slots, then parent order.
    let mut seen: Vec<(usize, usize)> = Vec::new(); // (parent, slots so far)
    let mut keyed: Vec<(usize, usize, usize)> = Vec::with_capacity(slots.len());
    for slot in slots {
        let parent = parents[slot];
        let (rank, place) = match seen.iter().position(|(p, _)| *p == parent) {
            Some(place) => {
                seen[place].1 += 1;
                (seen[place].1 - 1, place)
            }
            None => {
                seen.push((parent, 1));
                (0, seen.len() - 1)
            }
        };
        keyed.push((rank, place, slot));
    }
    keyed.sort_unstable();
    keyed.into_iter().map(|(_, _, slot)| slot).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_is_selection_order() {
        assert_eq!(order(&[0, 0, 1, 1], Pattern::Packed, false), [0, 1, 2, 3]);
        assert_eq!(order(&[0, 0, 1, 1], Pattern::Packed, true), [3, 2, 1, 0]);
    }

    #[test]
    fn scatter_goes_round_robin_over_parents() {
        // Two sockets with 3 and 2 slots: socket 0's first, socket 1's first, ...
        assert_eq!(
            order(&[0, 0, 0, 1, 1], Pattern::Scatter, false),
            [0, 3, 1, 4, 2]
        );
        // Reversed: socket 1 comes first, and its last slot first.
        assert_eq!(
            order(&[0, 0, 0, 1, 1], Pattern::Scatter, true),
            [4, 2, 3, 1, 0]
        );
        // One parent: scatter and packed agree.
        assert_eq!(order(&[5, 5, 5], Pattern::Scatter, false), [0, 1, 2]);
    }
}
