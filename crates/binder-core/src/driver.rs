//! What the GPU drivers say of the node's GPUs where hwloc does not (SEMANTICS §9): each
//! GPU's UUID (a distribution's hwloc has no NVML backend, so no `NVIDIAUUID`), and which
//! GPUs this process can open (a container sees every GPU in sysfs, but only its own
//! device files).
//!
//! Read only when a launch needs it: an inherited entry or `gpu-ids: uuid` names GPUs by
//! UUID, or a container variable (`NVIDIA_VISIBLE_DEVICES`) is set. In this order:
//! - NVIDIA's `/proc/driver/nvidia/gpus/BUS/information` (no process started): `GPU UUID`,
//!   `Bus Location`, `Device Minor` (the `N` of `/dev/nvidiaN`);
//! - `nvidia-smi --query-gpu=pci.bus_id,uuid`, where that tree gives no UUID;
//! - AMD's `unique_id` beside each PCI device of vendor 0x1002 (the amdgpu driver's file,
//!   hex, which ROCm names `GPU-<hex>`).
//!
//! Every read is bounded (entries, bytes, the tool's time), and a missing or odd file is
//! no answer, never an error: the plan then says what it could not tell.

use std::path::Path;

/// One GPU the driver lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverGpu {
    /// Its PCI address as hwloc writes it, `0000:18:00.0` (lowercase, 4-digit domain).
    pub busid: String,
    /// `GPU-<uuid>`, when the driver says.
    pub uuid: Option<String>,
    /// The minor number of its device file (`/dev/nvidiaN`), when the driver says.
    pub minor: Option<u32>,
}

/// What the drivers said.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DriverView {
    /// NVIDIA's GPUs as its `/proc` tree lists them (in a container, the container's).
    pub nvidia: Vec<DriverGpu>,
    /// GPUs whose UUID came from elsewhere (`nvidia-smi`, AMD's `unique_id`).
    pub others: Vec<DriverGpu>,
    /// The minors of the `/dev/nvidiaN` files present, when `/dev/nvidiactl` is there
    /// (a node or container with NVIDIA's driver); `None` elsewhere.
    pub nvidia_devices: Option<Vec<u32>>,
}

impl DriverView {
    /// The UUID the driver gives the GPU at `busid`, if any.
    pub fn uuid(&self, busid: &str) -> Option<&str> {
        self.nvidia
            .iter()
            .chain(&self.others)
            .find(|g| g.busid == busid)
            .and_then(|g| g.uuid.as_deref())
    }

    /// Whether this process can open the NVIDIA GPU at `busid`: `None` when the driver
    /// does not say (no `/proc` tree), else whether its tree lists it and, where the
    /// device files are known, its `/dev/nvidiaN` is present.
    pub fn nvidia_openable(&self, busid: &str) -> Option<bool> {
        if self.nvidia.is_empty() {
            return None;
        }
        let Some(gpu) = self.nvidia.iter().find(|g| g.busid == busid) else {
            return Some(false);
        };
        Some(match (&self.nvidia_devices, gpu.minor) {
            (Some(present), Some(minor)) => present.contains(&minor),
            _ => true,
        })
    }
}

/// NVIDIA's per-GPU `/proc` tree.
pub const NVIDIA_PROC: &str = "/proc/driver/nvidia/gpus";

/// The most GPUs (directories, lines, PCI devices) read from one source.
const MAX_GPUS: usize = 256;
/// The most bytes read from one file.
const MAX_FILE: u64 = 16 * 1024;

/// Everything the drivers say on this host (see the module doc).
pub fn read() -> DriverView {
    let mut view = DriverView {
        nvidia: nvidia_proc(Path::new(NVIDIA_PROC)),
        others: Vec::new(),
        nvidia_devices: device_files(Path::new("/dev")),
    };
    if view.nvidia.iter().all(|g| g.uuid.is_none()) {
        if let Some(text) = crate::vendor::tool_output(
            "nvidia-smi",
            &["--query-gpu=pci.bus_id,uuid", "--format=csv,noheader"],
            crate::vendor::DRIVER_LISTING_TIMEOUT,
        ) {
            view.others.extend(parse_smi(&text));
        }
    }
    view.others
        .extend(amd_unique_ids(Path::new("/sys/bus/pci/devices")));
    view
}

/// A PCI address in hwloc's spelling: `00000000:18:00.0` (nvidia-smi) or `0000:18:00.0`
/// → `0000:18:00.0`; `None` for anything else.
pub fn busid(text: &str) -> Option<String> {
    let text = text.trim();
    let (domain, rest) = text.rsplit_once(':').and_then(|(head, func)| {
        let (domain, bus) = head.split_once(':')?;
        Some((domain, format!("{bus}:{func}")))
    })?;
    let domain = u32::from_str_radix(domain, 16).ok()?;
    let (bus, dev_fn) = rest.split_once(':')?;
    let (dev, func) = dev_fn.split_once('.')?;
    let bus = u8::from_str_radix(bus, 16).ok()?;
    let dev = u8::from_str_radix(dev, 16).ok()?;
    let func = u8::from_str_radix(func, 16).ok()?;
    Some(format!("{domain:04x}:{bus:02x}:{dev:02x}.{func:x}"))
}

fn read_small(path: &Path) -> Option<String> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(path)
        .ok()?
        .take(MAX_FILE)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

/// The GPUs NVIDIA's `/proc` tree under `root` lists, by bus id.
pub fn nvidia_proc(root: &Path) -> Vec<DriverGpu> {
    let Ok(dir) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut out: Vec<DriverGpu> = dir
        .flatten()
        .take(MAX_GPUS)
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let text = read_small(&entry.path().join("information"))?;
            Some(parse_information(&name, &text))
        })
        .flatten()
        .collect();
    out.sort_by(|a, b| a.busid.cmp(&b.busid));
    out
}

/// One GPU's `information` file; `dir` (its directory's name, the bus id) where the
/// file has no `Bus Location`.
pub fn parse_information(dir: &str, text: &str) -> Option<DriverGpu> {
    let field = |key: &str| {
        text.lines().find_map(|line| {
            let (k, v) = line.split_once(':')?;
            (k.trim() == key).then(|| v.trim().to_owned())
        })
    };
    let busid = field("Bus Location")
        .and_then(|b| busid(&b))
        .or_else(|| busid(dir))?;
    let uuid = field("GPU UUID").filter(|u| is_uuid(u));
    let minor = field("Device Minor").and_then(|m| m.parse().ok());
    Some(DriverGpu { busid, uuid, minor })
}

/// Whether `text` is a driver's UUID as CUDA names it: `GPU-` then hex and dashes.
fn is_uuid(text: &str) -> bool {
    text.strip_prefix("GPU-").is_some_and(|rest| {
        !rest.is_empty()
            && rest.len() <= 64
            && rest.chars().all(|c| c.is_ascii_hexdigit() || c == '-')
    })
}

/// `nvidia-smi --query-gpu=pci.bus_id,uuid --format=csv,noheader`'s lines.
pub fn parse_smi(text: &str) -> Vec<DriverGpu> {
    text.lines()
        .take(MAX_GPUS)
        .filter_map(|line| {
            let (bus, uuid) = line.split_once(',')?;
            let uuid = uuid.trim();
            Some(DriverGpu {
                busid: busid(bus)?,
                uuid: is_uuid(uuid).then(|| uuid.to_owned()),
                minor: None,
            })
        })
        .collect()
}

/// The minors of the `/dev/nvidiaN` files under `dev`, when `nvidiactl` is there.
pub fn device_files(dev: &Path) -> Option<Vec<u32>> {
    if !dev.join("nvidiactl").exists() {
        return None;
    }
    let mut minors: Vec<u32> = std::fs::read_dir(dev)
        .ok()?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.strip_prefix("nvidia")?.parse().ok())
        .take(MAX_GPUS)
        .collect();
    minors.sort_unstable();
    Some(minors)
}

/// AMD GPUs' `unique_id` under `devices` (each PCI device's directory, by bus id).
pub fn amd_unique_ids(devices: &Path) -> Vec<DriverGpu> {
    let Ok(dir) = std::fs::read_dir(devices) else {
        return Vec::new();
    };
    dir.flatten()
        .take(4 * MAX_GPUS)
        .filter_map(|entry| {
            let path = entry.path();
            let vendor = read_small(&path.join("vendor"))?;
            if vendor.trim() != "0x1002" {
                return None;
            }
            let id = read_small(&path.join("unique_id"))?;
            let id = id.trim();
            (!id.is_empty() && id.len() <= 32 && id.chars().all(|c| c.is_ascii_hexdigit())).then(
                || DriverGpu {
                    busid: busid(&entry.file_name().to_string_lossy()).unwrap_or_default(),
                    uuid: Some(format!("GPU-{id}")),
                    minor: None,
                },
            )
        })
        .filter(|g| !g.busid.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bus_ids_in_hwlocs_spelling() {
        assert_eq!(busid("00000000:18:00.0").as_deref(), Some("0000:18:00.0"));
        assert_eq!(busid("0000:4E:00.0").as_deref(), Some("0000:4e:00.0"));
        assert_eq!(busid("0001:c1:1f.7").as_deref(), Some("0001:c1:1f.7"));
        assert_eq!(busid("18:00.0"), None);
        assert_eq!(busid("zz:18:00.0"), None);
        assert_eq!(busid(""), None);
    }

    #[test]
    fn an_information_file() {
        // The fields as NVIDIA's driver (550) writes them: a tab, then spaces.
        let text = "Model: \t\t NVIDIA H200\nIRQ:   \t\t 215\nGPU UUID: \t GPU-58648fc4-d5f0-7c3e-1c2b-b6c1f8e1e0aa\n\
                    Video BIOS: \t 96.00.9f.00.01\nBus Type: \t PCIe\nBus Location: \t 0000:18:00.0\nDevice Minor: \t 3\n";
        let gpu = parse_information("0000:18:00.0", text).unwrap();
        assert_eq!(gpu.busid, "0000:18:00.0");
        assert_eq!(
            gpu.uuid.as_deref(),
            Some("GPU-58648fc4-d5f0-7c3e-1c2b-b6c1f8e1e0aa")
        );
        assert_eq!(gpu.minor, Some(3));
        // No Bus Location: the directory's name; a forged UUID is no UUID.
        let gpu = parse_information("0000:1a:00.0", "GPU UUID: GPU-$(rm -rf)\n").unwrap();
        assert_eq!(
            (gpu.busid.as_str(), gpu.uuid, gpu.minor),
            ("0000:1a:00.0", None, None)
        );
        assert_eq!(parse_information("not-a-bus", "Model: x\n"), None);
    }

    #[test]
    fn nvidia_smis_csv() {
        let got = parse_smi("00000000:18:00.0, GPU-aaaa-1111\n00000000:3B:00.0, [N/A]\nnonsense\n");
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].uuid.as_deref(), Some("GPU-aaaa-1111"));
        assert_eq!(got[1].busid, "0000:3b:00.0");
        assert_eq!(got[1].uuid, None);
    }

    #[test]
    fn a_tree_on_disk_and_its_device_files() {
        let root = std::env::temp_dir().join(format!("binder-driver-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let gpus = root.join("gpus");
        for (bus, minor, uuid) in [("0000:12:00.0", 2, "GPU-cc"), ("0000:10:00.0", 0, "GPU-aa")] {
            std::fs::create_dir_all(gpus.join(bus)).unwrap();
            std::fs::write(
                gpus.join(bus).join("information"),
                format!("GPU UUID: {uuid}\nBus Location: {bus}\nDevice Minor: {minor}\n"),
            )
            .unwrap();
        }
        let dev = root.join("dev");
        std::fs::create_dir_all(&dev).unwrap();
        assert_eq!(
            device_files(&dev),
            None,
            "no nvidiactl: the driver is not there"
        );
        for f in ["nvidiactl", "nvidia2", "nvidia-uvm"] {
            std::fs::write(dev.join(f), "").unwrap();
        }
        let view = DriverView {
            nvidia: nvidia_proc(&gpus),
            others: Vec::new(),
            nvidia_devices: device_files(&dev),
        };
        // Sorted by bus id.
        assert_eq!(view.nvidia[0].busid, "0000:10:00.0");
        assert_eq!(view.nvidia_devices, Some(vec![2]));
        assert_eq!(view.uuid("0000:12:00.0"), Some("GPU-cc"));
        // Listed but its device file is absent; listed and present; not listed.
        assert_eq!(view.nvidia_openable("0000:10:00.0"), Some(false));
        assert_eq!(view.nvidia_openable("0000:12:00.0"), Some(true));
        assert_eq!(view.nvidia_openable("0000:13:00.0"), Some(false));
        assert_eq!(DriverView::default().nvidia_openable("0000:13:00.0"), None);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
