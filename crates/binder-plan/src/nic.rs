//! Finds the node's network interfaces in the hwloc topology (SEMANTICS §11), so that a
//! shape can pick the CPUs near a NIC (`type: nic`) and a task learns its nearest NICs
//! (`BINDER_NICS`), as fluxbind's NIC affinity does.
//!
//! A NIC is a PCI device of class network (02xx, which includes Ethernet 0200 and
//! InfiniBand 0207) or the older InfiniBand class 0c06. Its names are the names of its
//! hwloc OS devices: network interfaces (`eth0`, `ib0`) and OpenFabrics devices
//! (`mlx5_0`, `hfi1_0`); a device without OS devices (an unbound virtual function) is
//! named by its PCI bus id. Order: PCI bus id.

use crate::cpuset::CpuSet;
use hwlocality::object::attributes::ObjectAttributes;
use hwlocality::object::types::ObjectType;
use hwlocality::object::TopologyObject;

use crate::gpu::{PciKey, PciPlace};
use crate::topology::Topology;
use binder_core::launch::env::NicForm;
use hwlocality::object::types::OSDeviceType;

/// One network interface of the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nic {
    /// Position in PCI bus order among all NICs (`nic:N`).
    pub index: usize,
    /// PCI bus id, `domain:bus:device.function`.
    pub busid: String,
    /// The OS device names (`ib0`, `mlx5_0`), in hwloc's order; empty when it has none.
    pub os_names: Vec<String>,
    /// Its RDMA (OpenFabrics) devices with the port communication libraries should use,
    /// `mlx5_0:1`: the first port hwloc reports active (`PortNState` 4), else the first
    /// port it reports, else 1.
    pub rdma: Vec<String>,
    /// Its network interfaces (`eth0`, `ib0`).
    pub netdevs: Vec<String>,
    /// Marketing name from the PCI database, else `vendor:device` in hex.
    pub model: String,
    /// The CPUs near it: the cpuset of its first non-I/O ancestor.
    pub locality: CpuSet,
    /// Its first non-I/O ancestor, as `type:index`.
    pub attached_to: String,
}

impl Nic {
    /// How `form` names this NIC: UCX takes its RDMA devices, else its interfaces; NCCL's
    /// HCA list only its RDMA devices.
    pub fn names_for(&self, form: NicForm) -> Vec<String> {
        match form {
            NicForm::Ucx if self.rdma.is_empty() => self.netdevs.clone(),
            NicForm::Ucx | NicForm::NcclHca => self.rdma.clone(),
        }
    }

    /// The names a task is told in `BINDER_NICS`: its OS devices, else its bus id.
    pub fn names(&self) -> Vec<String> {
        if self.os_names.is_empty() {
            vec![self.busid.clone()]
        } else {
            self.os_names.clone()
        }
    }
}

/// Whether a PCI class id is a network device.
pub(crate) fn is_network_class(class_id: u16) -> bool {
    class_id >> 8 == 0x02 || class_id == 0x0c06
}

/// The port of an RDMA device communication libraries should use: the first hwloc reports
/// active (`Port<N>State` 4, IB_PORT_ACTIVE), else the first it reports, else 1.
fn port(osdev: &TopologyObject) -> u32 {
    let mut ports: Vec<(u32, bool)> = osdev
        .infos()
        .iter()
        .filter_map(|i| {
            let name = i.name().to_str().ok()?;
            let n = name
                .strip_prefix("Port")?
                .strip_suffix("State")?
                .parse()
                .ok()?;
            Some((n, i.value().to_bytes() == b"4"))
        })
        .collect();
    ports.sort_unstable();
    ports
        .iter()
        .find(|(_, active)| *active)
        .or(ports.first())
        .map_or(1, |(n, _)| *n)
}

/// Lists the NICs of a topology loaded with I/O discovery, in PCI bus order.
pub fn discover(topology: &Topology) -> Vec<Nic> {
    let mut found: Vec<(PciKey, Nic)> = Vec::new();
    for pci in topology.hw().pci_devices() {
        let Some(ObjectAttributes::PCIDevice(attr)) = pci.attributes() else {
            continue;
        };
        if !is_network_class(attr.class_id()) {
            continue;
        }
        let place = PciPlace::of(topology, pci, attr);
        let osdevs: Vec<&TopologyObject> = pci
            .io_children()
            .filter(|c| c.object_type() == ObjectType::OSDevice)
            .collect();
        let name = |o: &TopologyObject| o.name().map(|n| n.to_string_lossy().into_owned());
        let of_type = |ty: OSDeviceType| {
            osdevs
                .iter()
                .filter(move |o| {
                    matches!(o.attributes(), Some(ObjectAttributes::OSDevice(a)) if a.device_type() == ty)
                })
                .copied()
        };
        let os_names = osdevs.iter().filter_map(|o| name(o)).collect();
        let rdma = of_type(OSDeviceType::OpenFabrics)
            .filter_map(|o| Some(format!("{}:{}", name(o)?, port(o))))
            .collect();
        let netdevs = of_type(OSDeviceType::Network).filter_map(name).collect();
        let key = place.key;
        let nic = Nic {
            index: 0,
            busid: place.busid,
            os_names,
            rdma,
            netdevs,
            model: place.model,
            locality: place.locality,
            attached_to: place.attached_to,
        };
        found.push((key, nic));
    }
    found.sort_by_key(|(key, _)| *key);
    found
        .into_iter()
        .enumerate()
        .map(|(index, (_, nic))| Nic { index, ..nic })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn network_classes() {
        assert!(is_network_class(0x0200)); // Ethernet
        assert!(is_network_class(0x0207)); // InfiniBand (ConnectX)
        assert!(is_network_class(0x0c06)); // InfiniBand, serial-bus class
        assert!(!is_network_class(0x0302)); // 3D controller (a GPU)
        assert!(!is_network_class(0x0604)); // PCI bridge
    }

    #[test]
    fn names_fall_back_to_the_bus_id() {
        let nic = Nic {
            index: 0,
            busid: "0000:02:00.0".into(),
            os_names: vec![],
            rdma: vec![],
            netdevs: vec![],
            model: "x".into(),
            locality: CpuSet::new(),
            attached_to: "package:0".into(),
        };
        assert_eq!(nic.names(), ["0000:02:00.0"]);
        assert!(nic.names_for(NicForm::Ucx).is_empty());
        let nic = Nic {
            os_names: vec!["ib0".into(), "mlx5_0".into()],
            rdma: vec!["mlx5_0:1".into()],
            netdevs: vec!["ib0".into()],
            ..nic
        };
        assert_eq!(nic.names(), ["ib0", "mlx5_0"]);
        // UCX and NCCL take the RDMA device with its port; UCX the interface without one.
        assert_eq!(nic.names_for(NicForm::Ucx), ["mlx5_0:1"]);
        assert_eq!(nic.names_for(NicForm::NcclHca), ["mlx5_0:1"]);
        let eth = Nic {
            rdma: vec![],
            netdevs: vec!["eth0".into()],
            ..nic
        };
        assert_eq!(eth.names_for(NicForm::Ucx), ["eth0"]);
        assert!(eth.names_for(NicForm::NcclHca).is_empty());
    }
}
