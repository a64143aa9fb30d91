//! Which slot each task gets (SEMANTICS §10): pure arithmetic over the slots' parents.
//!
//! `packed` gives slots in selection order (parent by parent); `scatter` goes round robin
//! over the parents (the first slot of every parent, then the second, ...), which is
//! Open MPI's `--map-by socket:PE=k` and Slurm's `-m block:cyclic`. `reverse` reverses
//! the slot list first, as it reverses the pool without slots.

use crate::shape::Pattern;

/// The order in which slots are handed out to `n` tasks, given each slot's parent number
/// (in selection order, as `select` numbers them).
pub(crate) fn order(parents: &[usize], pattern: Pattern, reverse: bool, n: usize) -> Vec<usize> {
    let mut slots: Vec<usize> = (0..parents.len()).collect();
    if reverse {
        slots.reverse();
    }
    // Slots are dealt whole: packed and interleave hand them out in order.
    match pattern {
        Pattern::Scatter | Pattern::Balanced => {}
        Pattern::Packed | Pattern::Interleave => return slots,
    }
    let position: Vec<usize> = {
        let mut at = vec![0; parents.len()];
        for (i, &s) in slots.iter().enumerate() {
            at[s] = i;
        }
        at
    };
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
    let mut dealt: Vec<usize> = keyed.into_iter().map(|(_, _, slot)| slot).collect();
    // Balanced: the slots round robin picks for the n tasks, handed out in selection
    // order (parent by parent); the rest after them.
    if pattern == Pattern::Balanced {
        let n = n.min(dealt.len());
        dealt[..n].sort_unstable_by_key(|&s| position[s]);
    }
    dealt
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_is_selection_order() {
        assert_eq!(
            order(&[0, 0, 1, 1], Pattern::Packed, false, 5),
            [0, 1, 2, 3]
        );
        assert_eq!(order(&[0, 0, 1, 1], Pattern::Packed, true, 5), [3, 2, 1, 0]);
    }

    #[test]
    fn scatter_goes_round_robin_over_parents() {
        // Two sockets with 3 and 2 slots: socket 0's first, socket 1's first, ...
        assert_eq!(
            order(&[0, 0, 0, 1, 1], Pattern::Scatter, false, 5),
            [0, 3, 1, 4, 2]
        );
        // Reversed: socket 1 comes first, and its last slot first.
        assert_eq!(
            order(&[0, 0, 0, 1, 1], Pattern::Scatter, true, 5),
            [4, 2, 3, 1, 0]
        );
        // One parent: scatter and packed agree.
        assert_eq!(order(&[5, 5, 5], Pattern::Scatter, false, 3), [0, 1, 2]);
    }

    #[test]
    fn balanced_takes_round_robin_s_share_and_fills_parent_by_parent() {
        // Two sockets of 3 slots, 3 tasks: 2 and 1 (Open MPI 5's `--map-by package`,
        // FILL ranking), ranks 0 and 1 on the first socket.
        let two = [0, 0, 0, 1, 1, 1];
        assert_eq!(order(&two, Pattern::Balanced, false, 3)[..3], [0, 1, 3]);
        assert_eq!(
            order(&two, Pattern::Balanced, false, 5)[..5],
            [0, 1, 2, 3, 4]
        );
        assert_eq!(order(&two, Pattern::Balanced, false, 4)[..4], [0, 1, 3, 4]);
        // Every slot is still dealt once.
        let mut all = order(&two, Pattern::Balanced, false, 2);
        assert_eq!(all[..2], [0, 3]);
        all.sort_unstable();
        assert_eq!(all, [0, 1, 2, 3, 4, 5]);
        // Reversed: the last socket first, its last slot first.
        assert_eq!(order(&two, Pattern::Balanced, true, 3)[..3], [5, 4, 2]);
    }
}
