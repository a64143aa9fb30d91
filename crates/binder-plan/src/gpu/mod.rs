//! Finds the node's GPUs in the hwloc topology (SEMANTICS §9) from PCI devices alone, so
//! that `--dry-run --topology node.xml` on a laptop shows what the GPU node will do.
//!
//! A GPU is a PCI device of NVIDIA (10de), AMD (1002) or Intel (8086) whose class is
//! display (03xx) or processing accelerator (12xx); BMC/management VGA (ASPEED, Matrox)
//! has another vendor and is never one. Each PCI function is one GPU, which is also how
//! CUDA and ROCm count them (an MI250X module shows two GCDs, so two GPUs). Where hwloc's
//! OS devices (cuda*, rsmi*, nvml*, opencl*) are present they name the GPU; when one
//! backend shows several OS devices on one PCI device (MI300A in CPX mode: six `rsmi` per
//! APU), each of them is a GPU partition with its parent's locality.
//! Order: binder numbers GPUs by PCI bus id, then partition. Each runtime's variable uses
//! that runtime's own numbering (SEMANTICS §9): CUDA's under `CUDA_DEVICE_ORDER=PCI_BUS_ID`
//! and Level Zero's under `ZE_ENABLE_PCI_ID_DEVICE_ORDER=1` are PCI order (binder exports
//! both); ROCm numbers GPUs in KFD order, which hwloc reports as the `rsmiN` (or OpenCL
//! `openclXdN`) OS device and which is not PCI order on every node (Corona: bus 03 is
//! rsmi2), so AMD GPUs take that index where the topology has it.

use crate::cpuset::CpuSet;
use hwlocality::object::attributes::ObjectAttributes;
use hwlocality::object::types::ObjectType;
use hwlocality::object::TopologyObject;

use crate::topology::Topology;

pub mod grant;
pub mod mig;
pub mod model;
pub use grant::Grant;
pub use mig::MigListing;
pub use model::Gpu;

pub use binder_core::view::Vendor;

/// OS-device name prefixes of compute backends, preferred first.
const BACKENDS: [&str; 5] = ["cuda", "rsmi", "nvml", "opencl", "ze"];

/// Every GPU of the node a topology loaded with I/O discovery was cut from, in PCI bus
/// order, numbered over the whole node (SEMANTICS §9: never renumbered by the job's CPUs),
/// each with its physical locality; those a job may have: [`Grant::apply`], then the
/// planner keeps those near the job's CPUs or named by its allocation.
pub fn discover(topology: &Topology) -> Vec<Gpu> {
    let hw = topology.whole_hw();
    let mut found: Vec<(PciKey, Gpu, Option<usize>)> = Vec::new();
    for pci in hw.pci_devices() {
        let Some(ObjectAttributes::PCIDevice(attr)) = pci.attributes() else {
            continue;
        };
        let Some(vendor) = Vendor::from_pci(attr.vendor_id()) else {
            continue;
        };
        let class = attr.class_id() >> 8;
        if class != 0x03 && class != 0x12 {
            continue;
        }
        let PciPlace {
            key,
            busid,
            model: pci_model,
            locality,
            attached_to,
        } = PciPlace::of(topology, pci, attr);
        let partitions = partitions(pci);
        if partitions.is_empty() {
            let rocm = rocm_index(pci, None);
            let gpu = Gpu {
                index: 0,
                number: 0,
                vendor_index: 0,
                node_index: 0,
                busid,
                vendor,
                model: pci_model,
                os_name: None,
                uuid: uuid_of(pci, vendor),
                export: String::new(),
                locality,
                attached_to,
            };
            found.push((key, gpu, rocm));
            continue;
        }
        for osdev in partitions {
            let model = info(osdev, "GPUModel").unwrap_or_else(|| pci_model.clone());
            let os_name = osdev.name().map(|n| n.to_string_lossy().into_owned());
            let rocm = rocm_index(pci, Some(osdev));
            let gpu = Gpu {
                index: 0,
                number: 0,
                vendor_index: 0,
                node_index: 0,
                busid: busid.clone(),
                vendor,
                model,
                os_name,
                uuid: uuid_of(osdev, vendor).or_else(|| uuid_of(pci, vendor)),
                export: String::new(),
                locality: locality.clone(),
                attached_to: attached_to.clone(),
            };
            found.push((key, gpu, rocm));
        }
    }
    // Stable: partitions of one device keep their OS order.
    found.sort_by_key(|(key, _, _)| *key);
    // ROCm's indices only when every AMD GPU has one and no two share it: a partial or
    // clashing set (a hand-edited XML) falls back to PCI order rather than guess.
    let rocm: Vec<usize> = found
        .iter()
        .filter(|(_, g, _)| g.vendor == Vendor::Amd)
        .filter_map(|(_, _, r)| *r)
        .collect();
    let amd = found
        .iter()
        .filter(|(_, g, _)| g.vendor == Vendor::Amd)
        .count();
    let use_rocm = rocm.len() == amd && {
        let mut sorted = rocm.clone();
        sorted.sort_unstable();
        sorted.dedup();
        sorted.len() == amd
    };
    let mut per_vendor = [0usize; 3];
    found
        .into_iter()
        .enumerate()
        .map(|(index, (_, gpu, rocm))| {
            let slot = &mut per_vendor[gpu.vendor as usize];
            *slot += 1;
            let vendor_index = match rocm {
                Some(r) if use_rocm && gpu.vendor == Vendor::Amd => r,
                _ => *slot - 1,
            };
            Gpu {
                index,
                number: index,
                vendor_index,
                node_index: vendor_index,
                export: vendor_index.to_string(),
                ..gpu
            }
        })
        .collect()
}

/// ROCm's index of an AMD GPU, as hwloc reports it: the number of its `rsmiN` OS device
/// (`osdev` for a partition, else the PCI device's), else the device number of its
/// OpenCL one (`opencl0d3` → 3).
fn rocm_index(pci: &TopologyObject, osdev: Option<&TopologyObject>) -> Option<usize> {
    let name = |d: &TopologyObject| d.name().map(|n| n.to_string_lossy().into_owned());
    let number = |text: &str| text.parse::<usize>().ok();
    if let Some(n) = osdev
        .and_then(name)
        .and_then(|n| n.strip_prefix("rsmi").and_then(number))
    {
        return Some(n);
    }
    let names: Vec<String> = pci
        .io_children()
        .filter(|c| c.object_type() == ObjectType::OSDevice)
        .filter_map(name)
        .collect();
    names
        .iter()
        .find_map(|n| n.strip_prefix("rsmi").and_then(number))
        .or_else(|| {
            names.iter().find_map(|n| {
                let rest = n.strip_prefix("opencl")?;
                let (_, device) = rest.split_once('d')?;
                number(device)
            })
        })
}

/// Where a PCI device is, as GPU and NIC discovery both need it.
pub(crate) struct PciPlace {
    /// Its address, sortable.
    pub key: PciKey,
    /// `domain:bus:device.function`.
    pub busid: String,
    /// Marketing name from the PCI database, else `vendor:device` in hex.
    pub model: String,
    /// The cpuset of its first non-I/O ancestor.
    pub locality: CpuSet,
    /// That ancestor as `type:index`.
    pub attached_to: String,
}

impl PciPlace {
    pub(crate) fn of(
        topology: &Topology,
        pci: &TopologyObject,
        attr: &hwlocality::object::attributes::PCIDeviceAttributes,
    ) -> PciPlace {
        let key = (
            attr.domain(),
            attr.bus_id(),
            attr.bus_device(),
            attr.function(),
        );
        let ancestor = pci.first_non_io_ancestor();
        PciPlace {
            key,
            busid: format!("{:04x}:{:02x}:{:02x}.{:x}", key.0, key.1, key.2, key.3),
            model: info(pci, "PCIDevice")
                .unwrap_or_else(|| format!("{:04x}:{:04x}", attr.vendor_id(), attr.device_id())),
            locality: ancestor.map(crate::topology::cpus).unwrap_or_default(),
            attached_to: ancestor.map_or_else(|| "machine:0".into(), |a| topology.label(a)),
        }
    }
}

/// A PCI address as a sortable tuple: domain, bus, device, function.
pub(crate) type PciKey = (hwlocality::object::attributes::PCIDomain, u8, u8, u8);

/// The OS devices of the first backend present on `pci`, one per GPU (partition).
fn partitions(pci: &TopologyObject) -> Vec<&TopologyObject> {
    let osdevs: Vec<&TopologyObject> = pci
        .io_children()
        .filter(|c| c.object_type() == ObjectType::OSDevice)
        .collect();
    for backend in BACKENDS {
        let mut of_backend: Vec<&TopologyObject> = osdevs
            .iter()
            .copied()
            .filter(|d| {
                d.name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(backend))
            })
            .collect();
        if !of_backend.is_empty() {
            of_backend.sort_by_key(|d| os_number(d));
            return of_backend;
        }
    }
    Vec::new()
}

/// The trailing number of an OS device name (`rsmi11` → 11), so `rsmi10` sorts after `rsmi9`.
fn os_number(dev: &TopologyObject) -> usize {
    let name = dev
        .name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let digits: String = name
        .chars()
        .rev()
        .take_while(char::is_ascii_digit)
        .collect();
    digits
        .chars()
        .rev()
        .collect::<String>()
        .parse()
        .unwrap_or(0)
}

/// `GPU-<uuid>` of a GPU object or its OS devices: hwloc's `NVIDIAUUID` (which already
/// reads `GPU-…`) or `AMDUUID` (bare hex, which ROCm takes as `GPU-<hex>`).
fn uuid_of(obj: &TopologyObject, vendor: Vendor) -> Option<String> {
    let key = vendor.row().uuid_info?;
    let own = info(obj, key);
    let found = own.or_else(|| obj.io_children().find_map(|c| info(c, key)))?;
    Some(if found.starts_with("GPU-") {
        found
    } else {
        format!("GPU-{found}")
    })
}

pub(crate) fn info(obj: &TopologyObject, key: &str) -> Option<String> {
    obj.info(key)
        .map(|v| v.to_string_lossy().into_owned())
        .filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::Topology;

    #[test]
    fn synthetic_topologies_have_no_gpus() {
        let t = Topology::from_synthetic("pack:2 core:2 pu:2", true).expect("loads");
        assert!(discover(&t).is_empty());
    }
}
