//! binder's own set of CPUs (OS numbers, as the kernel, taskset and hwloc's `os_index`
//! name them): the type of a task's CPUs and of a device's locality in a [`Plan`].
//!
//! The plan's data model does not use hwlocality's bitmap, so a program that embeds the
//! planner needs no pinned hwlocality of its own; hwloc's sets are converted where the
//! topology hands them out (`topology::cpus`). A set of a few thousand CPUs is a few
//! dozen words: copies are cheap, and set algebra is word-wise.
//!
//! [`Plan`]: crate::distribute::Plan

use std::fmt;
use std::ops::{BitAnd, BitOr, BitOrAssign};

const BITS: usize = u64::BITS as usize;

/// A finite set of CPUs by OS number. Equality is set equality (no trailing zero words
/// are kept).
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct CpuSet {
    words: Vec<u64>,
}

impl CpuSet {
    /// The empty set.
    pub fn new() -> Self {
        CpuSet::default()
    }

    /// Adds `cpu`.
    pub fn set(&mut self, cpu: usize) {
        let (w, b) = (cpu / BITS, cpu % BITS);
        if self.words.len() <= w {
            self.words.resize(w + 1, 0);
        }
        self.words[w] |= 1 << b;
    }

    /// Takes `cpu` out.
    pub fn unset(&mut self, cpu: usize) {
        if let Some(word) = self.words.get_mut(cpu / BITS) {
            *word &= !(1 << (cpu % BITS));
            self.trim();
        }
    }

    /// Whether `cpu` is in the set.
    pub fn is_set(&self, cpu: usize) -> bool {
        self.words
            .get(cpu / BITS)
            .is_some_and(|w| w & (1 << (cpu % BITS)) != 0)
    }

    /// Whether the set holds no CPU.
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// How many CPUs the set holds.
    pub fn weight(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// The CPUs, ascending.
    pub fn iter_set(&self) -> impl Iterator<Item = usize> + '_ {
        self.words.iter().enumerate().flat_map(|(i, &word)| {
            let mut rest = word;
            std::iter::from_fn(move || {
                (rest != 0).then(|| {
                    let bit = rest.trailing_zeros() as usize;
                    rest &= rest - 1;
                    i * BITS + bit
                })
            })
        })
    }

    /// The CPUs, ascending, as a list.
    pub fn to_vec(&self) -> Vec<usize> {
        self.iter_set().collect()
    }

    /// The lowest CPU, if any.
    pub fn first_set(&self) -> Option<usize> {
        self.iter_set().next()
    }

    /// Whether every CPU of `other` is in this set.
    pub fn includes(&self, other: &CpuSet) -> bool {
        other.words.len() <= self.words.len()
            && other
                .words
                .iter()
                .zip(&self.words)
                .all(|(o, s)| o & !s == 0)
    }

    /// Whether the two sets share a CPU.
    pub fn intersects(&self, other: &CpuSet) -> bool {
        self.words.iter().zip(&other.words).any(|(a, b)| a & b != 0)
    }

    fn trim(&mut self) {
        while self.words.last() == Some(&0) {
            self.words.pop();
        }
    }
}

impl FromIterator<usize> for CpuSet {
    fn from_iter<I: IntoIterator<Item = usize>>(cpus: I) -> Self {
        let mut set = CpuSet::new();
        for cpu in cpus {
            set.set(cpu);
        }
        set
    }
}

impl BitOrAssign<&CpuSet> for CpuSet {
    fn bitor_assign(&mut self, other: &CpuSet) {
        if self.words.len() < other.words.len() {
            self.words.resize(other.words.len(), 0);
        }
        for (s, o) in self.words.iter_mut().zip(&other.words) {
            *s |= o;
        }
    }
}

impl BitOr<&CpuSet> for CpuSet {
    type Output = CpuSet;
    fn bitor(mut self, other: &CpuSet) -> CpuSet {
        self |= other;
        self
    }
}

impl BitOr<&CpuSet> for &CpuSet {
    type Output = CpuSet;
    fn bitor(self, other: &CpuSet) -> CpuSet {
        self.clone() | other
    }
}

impl BitAnd<&CpuSet> for &CpuSet {
    type Output = CpuSet;
    fn bitand(self, other: &CpuSet) -> CpuSet {
        let mut out = CpuSet {
            words: self
                .words
                .iter()
                .zip(&other.words)
                .map(|(a, b)| a & b)
                .collect(),
        };
        out.trim();
        out
    }
}

/// The range list taskset and /proc print: `0-3,48-51`; empty for no CPUs.
impl fmt::Display for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&binder_core::cpulist::cpu_list(&self.to_vec()))
    }
}

impl fmt::Debug for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CpuSet({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn model(set: &CpuSet) -> std::collections::BTreeSet<usize> {
        set.iter_set().collect()
    }

    proptest! {
        /// Every operation agrees with a BTreeSet of the same CPUs (the independent model).
        #[test]
        fn agrees_with_a_set_of_numbers(
            a in proptest::collection::btree_set(0usize..300, 0..40),
            b in proptest::collection::btree_set(0usize..300, 0..40),
            out in 0usize..300,
        ) {
            let (sa, sb): (CpuSet, CpuSet) = (a.iter().copied().collect(), b.iter().copied().collect());
            prop_assert_eq!(model(&sa), a.clone());
            prop_assert_eq!(sa.weight(), a.len());
            prop_assert_eq!(sa.is_empty(), a.is_empty());
            prop_assert_eq!(sa.first_set(), a.first().copied());
            prop_assert_eq!(model(&(&sa | &sb)), a.union(&b).copied().collect());
            prop_assert_eq!(model(&(&sa & &sb)), a.intersection(&b).copied().collect());
            prop_assert_eq!(sa.intersects(&sb), !a.is_disjoint(&b));
            prop_assert_eq!(sa.includes(&sb), b.is_subset(&a));
            prop_assert_eq!(sa.is_set(out), a.contains(&out));
            let mut less = sa.clone();
            less.unset(out);
            let mut want = a.clone();
            want.remove(&out);
            prop_assert_eq!(model(&less), want.clone());
            // Equality is set equality, whatever was added and taken out.
            prop_assert_eq!(less, want.iter().copied().collect::<CpuSet>());
        }
    }

    #[test]
    fn prints_as_taskset_lists() {
        let set: CpuSet = [0, 1, 2, 3, 64, 65, 200].into_iter().collect();
        assert_eq!(set.to_string(), "0-3,64-65,200");
        assert_eq!(CpuSet::new().to_string(), "");
    }
}
