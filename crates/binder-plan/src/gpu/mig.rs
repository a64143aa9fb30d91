//! NVIDIA MIG instances in an inherited `CUDA_VISIBLE_DEVICES` (SEMANTICS §9): which GPU
//! each lies on, so that a task given an instance is placed near its parent GPU.
//!
//! hwloc does not list MIG instances, so an entry's parent comes from, in order: the entry
//! itself (the old form `MIG-GPU-<uuid>/<gi>/<ci>` names its parent's UUID); the driver's
//! listing (`nvidia-smi -L`, which the host layer runs only when an entry is a MIG one, and
//! which nests each `MIG … (UUID: MIG-…)` line under its `GPU N: … (UUID: GPU-…)`); or the
//! node itself when it has one NVIDIA GPU. An entry none of these place is left out and
//! said in a refusal, never guessed.

/// The driver's listing: each MIG instance's UUID with its parent's index (in PCI order,
/// as `nvidia-smi` numbers GPUs) and UUID.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MigListing {
    /// `(MIG-… uuid, parent index, parent GPU-… uuid)`.
    pub(super) instances: Vec<(String, usize, String)>,
}

/// The most instances read from a listing (7 per GPU on an A100/H100, 8 GPUs a node).
const MAX_INSTANCES: usize = 1024;

impl MigListing {
    /// Reads `nvidia-smi -L`'s output; lines it does not know are skipped.
    pub fn parse(text: &str) -> MigListing {
        let mut instances = Vec::new();
        let mut parent: Option<(usize, String)> = None;
        for line in text.lines().take(MAX_INSTANCES * 2) {
            let line = line.trim();
            let uuid = line
                .rsplit_once("(UUID: ")
                .and_then(|(_, rest)| rest.strip_suffix(')'))
                .map(str::trim);
            if let Some(rest) = line.strip_prefix("GPU ") {
                let index = rest.split(':').next().and_then(|n| n.trim().parse().ok());
                parent = index.zip(uuid.map(str::to_owned));
            } else if line.starts_with("MIG ") {
                if let (Some((index, gpu)), Some(uuid)) = (&parent, uuid) {
                    if instances.len() < MAX_INSTANCES {
                        instances.push((uuid.to_owned(), *index, gpu.clone()));
                    }
                }
            }
        }
        MigListing { instances }
    }

    /// Whether it places no instance.
    pub fn is_empty(&self) -> bool {
        self.instances.is_empty()
    }

    /// The parent of `entry` (a `MIG-…` entry) as (index, uuid), when listed.
    pub(super) fn parent(&self, entry: &str) -> Option<(usize, &str)> {
        self.instances
            .iter()
            .find(|(uuid, _, _)| uuid.eq_ignore_ascii_case(entry))
            .map(|(_, index, gpu)| (*index, gpu.as_str()))
    }
}

/// The parent GPU's UUID an old-form entry names: `MIG-GPU-<uuid>/1/0` → `GPU-<uuid>`.
pub(super) fn named_parent(entry: &str) -> Option<&str> {
    let rest = entry.strip_prefix("MIG-")?;
    rest.starts_with("GPU-")
        .then(|| rest.split('/').next().unwrap_or(rest))
}

/// Whether an inherited entry is a MIG instance.
pub(super) fn is_mig(entry: &str) -> bool {
    entry.starts_with("MIG-")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The layout `nvidia-smi -L` prints on an A100 with two instances (from NVIDIA's MIG
    /// user guide), a second GPU without MIG, and a line it may add that is not a device.
    const LISTING: &str =
        "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77)
  MIG 3g.20gb     Device  0: (UUID: MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f)
  MIG 3g.20gb     Device  1: (UUID: MIG-cba663e8-9bed-5b25-b243-5985ef7c9beb)
GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-2a6d1c7e-0000-1111-2222-333344445555)
No devices were found
";

    #[test]
    fn instances_hang_under_their_gpu() {
        let l = MigListing::parse(LISTING);
        assert_eq!(
            l.parent("MIG-cba663e8-9bed-5b25-b243-5985ef7c9beb"),
            Some((0, "GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77"))
        );
        assert_eq!(l.parent("MIG-ffffffff-9bed-5b25-b243-5985ef7c9beb"), None);
        assert_eq!(l.instances.len(), 2);
        assert!(MigListing::parse("").is_empty());
        // A MIG line before any GPU line has no parent.
        assert!(MigListing::parse("  MIG 1g.5gb Device 0: (UUID: MIG-1)").is_empty());
    }

    #[test]
    fn the_old_form_names_its_parent() {
        assert_eq!(
            named_parent("MIG-GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77/1/0"),
            Some("GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77")
        );
        assert_eq!(
            named_parent("MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f"),
            None
        );
        assert_eq!(named_parent("GPU-5d5b"), None);
        assert!(is_mig("MIG-c6d4") && !is_mig("0"));
    }
}
