//! Chooses the binding unit: what a task's binding is made of (SEMANTICS §2).
//!
//! First rule that applies: explicit `options.bind`; implicit, the finest of core/pu named
//! anywhere in `resources`; default, core. `gpu-local`/`gpu-remote` say where, not what,
//! so they fall through to the implicit and default rules.

use std::fmt;

use crate::shape::{Bind, ObjType, Shape};

/// The binding unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Whole cores: every PU of each core (as `hwloc-bind core:N`, Open MPI
    /// `--bind-to core`, Slurm `--cpu-bind=cores`).
    Core,
    /// Single PUs (hardware threads).
    Pu,
    /// No binding at all.
    None,
}

/// Which rule of SEMANTICS §2 chose the unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// `options.bind` named it.
    Explicit,
    /// The finest type in `resources` is core or pu.
    Implicit,
    /// Nothing said otherwise: core.
    Default,
}

/// The unit and the rule that chose it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnitChoice {
    /// The binding unit.
    pub unit: Unit,
    /// The rule that fired.
    pub rule: Rule,
    /// `bind: package|numa|l3|…`: each task's cpuset is widened to the whole objects of
    /// this type that its units touch (SEMANTICS §11). The unit itself still comes from
    /// rules 2–3; the rule is reported as explicit.
    pub width: Option<ObjType>,
    /// `bind: slurm-auto`: the width is chosen after dealing, by Slurm's rule (SEMANTICS
    /// §11); the unit comes from rules 2–3.
    pub slurm_auto: bool,
}

impl Unit {
    /// The shape type of the unit's objects (`None` for no binding).
    pub(crate) fn obj_type(self) -> Option<ObjType> {
        match self {
            Unit::Core => Some(ObjType::Core),
            Unit::Pu => Some(ObjType::Pu),
            Unit::None => None,
        }
    }
}

impl fmt::Display for Unit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Unit::Core => "core",
            Unit::Pu => "pu",
            Unit::None => "none",
        })
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Rule::Explicit => "explicit",
            Rule::Implicit => "implicit",
            Rule::Default => "default",
        })
    }
}

/// Applies the three rules to `shape`.
pub fn choose(shape: &Shape) -> UnitChoice {
    let explicit = match shape.options.bind {
        Some(Bind::Core) => Some(Unit::Core),
        Some(Bind::Pu) => Some(Unit::Pu),
        Some(Bind::None) => Some(Unit::None),
        Some(Bind::GpuLocal | Bind::GpuRemote | Bind::Width(_) | Bind::SlurmAuto) | None => None,
    };
    if let Some(unit) = explicit {
        return UnitChoice {
            unit,
            rule: Rule::Explicit,
            width: None,
            slurm_auto: false,
        };
    }
    let items = shape.items();
    let (unit, rule) = if items.iter().any(|r| r.kind == ObjType::Pu) {
        (Unit::Pu, Rule::Implicit)
    } else if items.iter().any(|r| r.kind == ObjType::Core) {
        (Unit::Core, Rule::Implicit)
    } else {
        (Unit::Core, Rule::Default)
    };
    match shape.options.bind {
        Some(Bind::Width(width)) => UnitChoice {
            unit,
            rule: Rule::Explicit,
            width: Some(width),
            slurm_auto: false,
        },
        Some(Bind::SlurmAuto) => UnitChoice {
            unit,
            rule: Rule::Explicit,
            width: None,
            slurm_auto: true,
        },
        _ => UnitChoice {
            unit,
            rule,
            width: None,
            slurm_auto: false,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit_of(yaml: &str) -> (Unit, Rule) {
        let c = choose(&Shape::from_yaml(yaml, "t.yaml").expect("valid shape"));
        (c.unit, c.rule)
    }

    // The seven examples of the binding-unit table in SEMANTICS §2 / the fluxbind design.
    #[test]
    fn table_examples() {
        let cases = [
            (
                "options: {bind: process}\nresources: [{type: socket}]",
                (Unit::Pu, Rule::Explicit),
            ),
            (
                "options: {bind: core}\nresources: [{type: socket}]",
                (Unit::Core, Rule::Explicit),
            ),
            (
                "resources: [{type: core, count: 4}]",
                (Unit::Core, Rule::Implicit),
            ),
            (
                "resources: [{type: pu, count: 4}]",
                (Unit::Pu, Rule::Implicit),
            ),
            (
                "resources: [{type: l3cache, count: 1}]",
                (Unit::Core, Rule::Default),
            ),
            (
                "resources: [{type: numanode, count: 1}]",
                (Unit::Core, Rule::Default),
            ),
            (
                "options: {bind: process}\nresources: [{type: core, count: 2}]",
                (Unit::Pu, Rule::Explicit),
            ),
        ];
        for (yaml, want) in cases {
            assert_eq!(unit_of(yaml), want, "{yaml}");
        }
    }

    #[test]
    fn finest_anywhere_in_the_tree() {
        let yaml = "resources:\n- type: socket\n  with: [{type: core, with: [{type: pu}]}]";
        assert_eq!(unit_of(yaml), (Unit::Pu, Rule::Implicit));
        let yaml = "resources: [{type: socket}, {type: core}]";
        assert_eq!(unit_of(yaml), (Unit::Core, Rule::Implicit));
    }

    #[test]
    fn none_and_gpu_localities() {
        assert_eq!(
            unit_of("options: {bind: none}\nresources: [{type: core}]"),
            (Unit::None, Rule::Explicit)
        );
        assert_eq!(
            unit_of("options: {bind: gpu-local}\nresources: [{type: core}]"),
            (Unit::Core, Rule::Implicit)
        );
        assert_eq!(
            unit_of("options: {bind: gpu-remote}\nresources: [{type: numa}]"),
            (Unit::Core, Rule::Default)
        );
    }

    #[test]
    fn a_width_keeps_the_unit_of_rules_2_and_3() {
        // SEMANTICS §11: the unit still comes from the tree; the rule is explicit.
        let c = choose(
            &Shape::from_yaml(
                "options: {bind: numa}\nresources: [{type: pu, count: 4}]",
                "t",
            )
            .unwrap(),
        );
        assert_eq!(
            (c.unit, c.rule, c.width),
            (Unit::Pu, Rule::Explicit, Some(ObjType::Numa))
        );
        let c = choose(
            &Shape::from_yaml("options: {bind: socket}\nresources: [{type: l3}]", "t").unwrap(),
        );
        assert_eq!(
            (c.unit, c.rule, c.width),
            (Unit::Core, Rule::Explicit, Some(ObjType::Package))
        );
    }
}
