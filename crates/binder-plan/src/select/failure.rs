//! Why a request could not be met: the outermost failing request with the reason inside,
//! written as the one `binder:` line (what was asked, where, how many there are, what to
//! change).

use std::fmt;

use crate::shape::{CoreKind, Count, ObjType};

/// The shape asks for more than this node has.
#[derive(Debug, thiserror::Error)]
#[error("{origin}: {failure}")]
pub struct SelectError {
    /// The shape file, for the message.
    pub origin: String,
    /// The outermost request that failed, with the reason inside.
    pub failure: Failure,
}

/// The objects an `index:` (or `os_index:`) named, for a failure's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Named {
    /// The indexes as written back (`4-7`).
    pub asked: String,
    /// Those with no allowed object in the request's scope (`6-7`), empty when all are.
    pub missing: String,
    /// Those the request could have named there (`0-5`), empty when none.
    pub present: String,
    /// Whether they are the kernel's numbers (`os_index`, written `pu P#4-7` as lstopo
    /// does) rather than logical indexes (`pu:4-7`).
    pub os: bool,
}

impl Named {
    /// `pu:4-7`, or `pu P#4-7` for the kernel's numbers.
    fn objects(&self, kind: &str, list: &str) -> String {
        if self.os {
            format!("{kind} P#{list}")
        } else {
            format!("{kind}:{list}")
        }
    }
}

/// One request that could not be met, and why.
#[derive(Debug)]
pub struct Failure {
    /// The objects `index:` named, when it did.
    pub named: Option<Box<Named>>,
    /// Where the request stands in the shape (`resources[0].with[1]`).
    pub path: String,
    /// What it asked for.
    pub kind: ObjType,
    /// How many.
    pub count: Count,
    /// Where it looked: `the node` or an object such as `package:1`.
    pub within: String,
    /// Objects of the type in that scope (allowed ones); for a slot without `with`, the
    /// binding units there.
    pub total: usize,
    /// Objects there that were not already taken.
    pub free: usize,
    /// Objects that qualified.
    pub qualified: usize,
    /// Why the first free object did not qualify, when a nested request failed.
    pub inner: Option<Box<Failure>>,
    /// For a slot cut from free units: the unit it counts.
    pub unit: Option<ObjType>,
    /// The core kind the request is limited to (SEMANTICS §12).
    pub core_kind: Option<CoreKind>,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.core_kind {
            Some(k) => format!("{k} {}", self.kind.hwloc_name()),
            None => self.kind.hwloc_name().to_owned(),
        };
        write!(f, "{} asks for {} {kind}", self.path, self.count)?;
        if let Some(named) = &self.named {
            write!(f, " of {}", named.objects(&kind, &named.asked))?;
        }
        write!(f, " in {}, ", self.within)?;
        if let Some(named) = self.named.as_ref().filter(|n| !n.missing.is_empty()) {
            // Kernel numbers: say which are there (a node's NUMA nodes, say).
            let here = match (named.os, named.present.is_empty()) {
                (false, _) => String::new(),
                (true, true) => format!(": no {kind} is here"),
                (true, false) => format!(
                    ": {} {} here",
                    named.objects(&kind, &named.present),
                    if named.present.contains([',', '-']) {
                        "are"
                    } else {
                        "is"
                    }
                ),
            };
            return write!(
                f,
                "but {} {} not there{here} (outside it or the job's allocation, reserved, taken, or past the last {kind}); name others, {}",
                named.objects(&kind, &named.missing),
                if named.missing.contains([',', '-']) { "are" } else { "is" },
                if named.os {
                    "numbered as the kernel numbers them (`lstopo -p`, `taskset`)"
                } else {
                    "numbered as `--dry-run` labels them"
                }
            );
        }
        if let Some(unit) = self.unit {
            let unit = unit.hwloc_name();
            return write!(
                f,
                "which has {} free {unit} ({} allowed); lower `count`, use `count: all`, or run fewer tasks",
                self.free, self.total
            );
        }
        if self.kind == ObjType::Slot {
            return match &self.inner {
                Some(inner) if self.qualified == 0 => write!(f, "but not one fits: {inner}"),
                Some(inner) => write!(f, "but only {} fit: {inner}", self.qualified),
                None => write!(f, "but not one fits"),
            };
        }
        if self.total == 0 && self.core_kind.is_some() {
            return write!(
                f,
                "which has no allowed {kind}: hwloc's CPU kinds (`lstopo --cpukinds`) have none there; drop `kind` or run where there are some"
            );
        }
        if self.total == 0 {
            return write!(
                f,
                "which has no allowed {kind}; choose a type it has (see `lstopo`)"
            );
        }
        let have = format!("{} allowed {kind} ({} free)", self.total, self.free);
        match &self.inner {
            Some(inner) if self.qualified == 0 => write!(f, "but none of its {have} qualifies: {inner}"),
            Some(inner) => write!(f, "but only {} of its {have} qualify: {inner}", self.qualified),
            None if self.free == self.total => {
                write!(f, "which has {have}; lower `count` or use `count: all`")
            }
            None => write!(
                f,
                "which has {have}, the rest already taken by earlier items; lower `count` or use `count: all`"
            ),
        }
    }
}
