//! Rules that need the whole resource tree, checked after serde has read it.

use super::{Bind, CoreKind, Membind, Memory, ObjType, Pattern, Resource, Shape};

/// The longest `options.ge` taken.
const MAX_GE_BYTES: usize = 4096;
/// The most `options.reserve` locations taken, and the longest one.
const MAX_RESERVED: usize = 256;
const MAX_LOCATION_BYTES: usize = 128;

impl Shape {
    /// Rules that need the whole tree (SEMANTICS §10): slots stand at one level, never
    /// inside another slot or a device, and do not mix with GPU localities or interleave.
    pub(super) fn check_tree(&self) -> Result<(), String> {
        fn walk(
            items: &[Resource],
            path: &str,
            depth: usize,
            parent: Option<ObjType>,
            slot_depth: &mut Option<(usize, String)>,
        ) -> Result<(), String> {
            for (i, item) in items.iter().enumerate() {
                let here = format!("{path}[{i}]");
                if item.kind == ObjType::Slot {
                    match parent {
                        Some(ObjType::Slot) => return Err(format!(
                            "{here}: a `slot` inside a `slot`; a slot is one task's share, so put hardware (`core`, `pu`, ...) inside it, not another slot"
                        )),
                        Some(p) if !p.is_cpu_object() => return Err(format!(
                            "{here}: a `slot` inside a `{p}`; slots divide CPU objects (`socket`, `numa`, `l3`, ...) or the whole node, so move it up a level"
                        )),
                        _ => {}
                    }
                    match slot_depth {
                        Some((d, first)) if *d != depth => return Err(format!(
                            "{here}: slots at two levels (also at {first}); every task gets one slot, so put all `slot` items at one level of the tree"
                        )),
                        Some(_) => {}
                        None => *slot_depth = Some((depth, here.clone())),
                    }
                }
                walk(
                    &item.with,
                    &format!("{here}.with"),
                    depth + 1,
                    Some(item.kind),
                    slot_depth,
                )?;
            }
            Ok(())
        }
        if self.resources.is_empty() && self.options.ge.is_none() {
            return Err("the shape has no `resources`; list at least one item, for example `- type: core`, or give a Grid Engine request in `options.ge`".to_owned());
        }
        // A qsub request and a reserved location are one line of words; a line break or
        // control character there is a mistake (a `|` block, a pasted script), never
        // part of the request.
        let broken = |s: &str| {
            s.chars()
                .any(|c| c.is_control() && c != '\t' || matches!(c, '\u{2028}' | '\u{2029}'))
        };
        let unbound_memory = |membind: Option<Membind>, memory: &Option<Memory>| {
            membind == Some(Membind::None) && memory.is_some()
        };
        if unbound_memory(self.options.membind, &self.options.memory)
            || self
                .ranks
                .values()
                .any(|r| unbound_memory(r.membind.or(self.options.membind), &r.memory))
        {
            return Err("`memory:` with `membind: none`; `memory` says where a memory policy puts pages, so give `membind: local`, `interleave` or `preferred`, or drop `memory`".to_owned());
        }
        if self.options.numa_binding.is_some() {
            let clash = [
                (self.options.bind.is_some(), "`bind`"),
                (
                    self.options.gpus_per_task.is_some_and(|g| g.get() != 1),
                    "`gpus-per-task` other than 1",
                ),
                (!self.ranks.is_empty(), "`ranks:`"),
                (self.options.ge.is_some(), "`ge`"),
                (self.options.oversubscribe, "`oversubscribe`"),
                (
                    self.items().iter().any(|r| r.kind == ObjType::Slot),
                    "`slot` items",
                ),
            ];
            if let Some((_, what)) = clash.iter().find(|(c, _)| *c) {
                return Err(format!("`numa-binding` with {what}: PyTorch's NUMA binding gives local rank r the job's GPU r and the CPUs its mode names, so it decides the binding alone; drop {what}, or drop `numa-binding` and use `bind: gpu-local`"));
            }
        }
        if self.options.oversubscribe && !self.ranks.is_empty() {
            return Err("`oversubscribe` with `ranks:`: rules give their ranks units of their own; oversubscribe a shape without rules, or give the rules fewer ranks".to_owned());
        }
        // A qsub request and a reserved location are short; bounded, binder's written
        // form of a shape (escapes double a `\`) stays within what the reader takes.
        if self
            .options
            .ge
            .as_ref()
            .is_some_and(|g| g.len() > MAX_GE_BYTES)
        {
            return Err(format!("`options.ge` is longer than {MAX_GE_BYTES} bytes; a Grid Engine request is a few words, as qsub takes it"));
        }
        if self.options.reserve.len() > MAX_RESERVED
            || self
                .options
                .reserve
                .iter()
                .any(|r| r.len() > MAX_LOCATION_BYTES)
        {
            return Err(format!("`options.reserve` holds more than {MAX_RESERVED} locations or one longer than {MAX_LOCATION_BYTES} bytes; name each location briefly, for example `core:0`"));
        }
        if self.options.ge.as_deref().is_some_and(broken) {
            return Err("`options.ge` holds a line break or control character; write the Grid Engine request on one line, as qsub takes it".to_owned());
        }
        if self.options.reserve.iter().any(|r| broken(r)) {
            return Err("`options.reserve` holds a line break or control character; write each location on one line, for example `core:0`".to_owned());
        }
        if let Some(item) = self
            .items()
            .into_iter()
            .find(|r| r.core_kind.is_some() && !matches!(r.kind, ObjType::Core | ObjType::Pu))
        {
            return Err(format!(
                "`kind` on a `{}` item; core kinds apply to `core` and `pu` items (or to every one through `options.kind`)",
                item.kind
            ));
        }
        if self
            .items()
            .iter()
            .any(|r| r.core_kind == Some(CoreKind::Balanced))
        {
            return Err("`kind: balanced` on an item; balanced deals every kind of core evenly to the tasks, so it belongs in `options` (`options: {kind: balanced}`)".to_owned());
        }
        let mut slot_depth = None;
        walk(&self.resources, "resources", 0, None, &mut slot_depth)?;
        if slot_depth.is_some() {
            if let Some(bind @ (Bind::GpuLocal | Bind::GpuRemote)) = self.options.bind {
                return Err(format!(
                    "`bind: {bind}` with `slot` items: a slot already says where each task runs; put a `type: gpu` item inside the slot's parent (for example `numa` with `gpu` and `slot`) instead"
                ));
            }
            match self.pattern() {
                Pattern::Interleave => {
                    return Err("`pattern: interleave` with `slot` items: slots are dealt whole, so use `packed` (slot after slot) or `scatter` (round robin over the slots' parents)".to_owned());
                }
                Pattern::Packed | Pattern::Scatter | Pattern::Balanced => {}
            }
        }
        Ok(())
    }
}
