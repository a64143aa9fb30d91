//! CPU lists in the forms people and tools read: `0-3,48-51` (taskset, /proc, Slurm),
//! hwloc's bitmap string and taskset's hex mask. OS numbers throughout, no hwloc.

pub use crate::text::index_ranges;

/// A range list as taskset and /proc print it: `0-3,48-51`; empty for no CPUs.
pub fn cpu_list(cpus: &[usize]) -> String {
    index_ranges(cpus)
}

/// hwloc's bitmap string, byte for byte as `hwloc-calc` prints it: 32-bit words, most
/// significant first, `0x%08x` each; zero words between set ones are empty fields and a
/// zero lowest word is `0x0` (hwloc's `hwloc_bitmap_snprintf`).
pub fn hwloc_mask(cpus: &[usize]) -> String {
    let Some(&max) = cpus.iter().max() else {
        return "0x0".to_owned();
    };
    let mut words = vec![0u32; max / 32 + 1];
    for &c in cpus {
        words[c / 32] |= 1 << (c % 32);
    }
    let fields: Vec<String> = words
        .iter()
        .enumerate()
        .rev()
        .map(|(i, &w)| match (w, i) {
            (0, 0) => "0x0".to_owned(),
            (0, _) => String::new(),
            (w, _) => format!("0x{w:08x}"),
        })
        .collect();
    fields.join(",")
}

/// taskset's form: one hex number without leading zeros.
pub fn taskset_mask(cpus: &[usize]) -> String {
    let Some(&max) = cpus.iter().max() else {
        return "0x0".to_owned();
    };
    let mut nibbles = vec![0u8; max / 4 + 1];
    for &c in cpus {
        nibbles[c / 4] |= 1 << (c % 4);
    }
    let digits: String = nibbles
        .iter()
        .rev()
        .map(|n| char::from_digit(u32::from(*n), 16).expect("nibble"))
        .collect();
    format!("0x{digits}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_match_hwloc_calc() {
        // Expected strings are hwloc-calc 2.9 output on the genoa XML (core:0, pu:1, core:1 core:40).
        assert_eq!(hwloc_mask(&[0, 192]), "0x00000001,,,,,,0x00000001");
        assert_eq!(hwloc_mask(&[192]), "0x00000001,,,,,,0x0");
        assert_eq!(
            hwloc_mask(&[1, 40, 193, 232]),
            "0x00000100,0x00000002,,,,,0x00000100,0x00000002"
        );
        assert_eq!(hwloc_mask(&[0, 1, 2, 3]), "0x0000000f");
        assert_eq!(hwloc_mask(&[]), "0x0");
    }

    #[test]
    fn taskset_form() {
        assert_eq!(
            taskset_mask(&[0, 192]),
            "0x1000000000000000000000000000000000000000000000001"
        );
        assert_eq!(taskset_mask(&[4]), "0x10");
    }

    #[test]
    fn lists() {
        assert_eq!(cpu_list(&[0, 1, 2, 3, 48, 49, 50, 51, 60]), "0-3,48-51,60");
        assert_eq!(cpu_list(&[]), "");
    }
}
