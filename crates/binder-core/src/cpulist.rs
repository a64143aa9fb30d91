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

/// The CPUs of a hex mask as taskset and Slurm's `mask_cpu` write it (`0xF0`, `3`; bit
/// N is CPU N, read from the right): the reader of [`taskset_mask`]'s form. `None` for a
/// digit that is not hex, an empty mask, or one of more than `max_digits` digits (a mask
/// another program wrote stays bounded).
pub fn parse_hex_mask(text: &str, max_digits: usize) -> Option<Vec<usize>> {
    let text = text.trim();
    let hex = text
        .strip_prefix("0x")
        .or_else(|| text.strip_prefix("0X"))
        .unwrap_or(text);
    if hex.is_empty() || hex.len() > max_digits {
        return None;
    }
    let mut cpus = Vec::new();
    for (i, c) in hex.chars().rev().enumerate() {
        let digit = c.to_digit(16)?;
        cpus.extend((0..4).filter(|b| digit >> b & 1 == 1).map(|b| i * 4 + b));
    }
    cpus.sort_unstable();
    Some(cpus)
}

/// Why a range list is not one (each reader words it for its own list).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RangeError {
    /// A part that is not a whole number or a range of two (`a`, `1-`, an empty part), as
    /// written.
    NotANumber(String),
    /// A range written high to low (`7-4`), as written.
    Backwards(String),
    /// A number above the list's largest, as written.
    TooLarge(String),
    /// More numbers than the list may hold (counted before repeats merge).
    TooMany,
}

/// A read range list: its numbers ascending, each once, and whether one was named twice.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Ranges {
    /// The numbers, ascending, each once.
    pub values: Vec<usize>,
    /// Whether a number was named more than once (`0,0`, `0-3,2`).
    pub repeated: bool,
}

/// The one reader of range lists (`0-3,8,10-11`; spaces around parts and dashes are
/// allowed): the kernel's CPU lists, another user's claim, Flux's idsets, a shape's
/// `index:`/`os_index:`, `memory:` and rank lists, `binder convert`'s lists. Bounded before
/// it costs memory: a number above `max_value`, or more than `max_count` numbers, is
/// refused (`0-1048576` repeated would otherwise expand to billions). An empty text is
/// the empty list.
pub fn parse_ranges(text: &str, max_value: usize, max_count: usize) -> Result<Ranges, RangeError> {
    let mut out = Ranges::default();
    if text.trim().is_empty() {
        return Ok(out);
    }
    let number = |part: &str| -> Result<usize, RangeError> {
        let digits = part.trim();
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(RangeError::NotANumber(crate::text::clip(part.trim(), 40)));
        }
        // Past 20 digits no usize holds it; `max_value` is far below either way.
        match digits.parse::<usize>() {
            Ok(n) if n <= max_value => Ok(n),
            _ => Err(RangeError::TooLarge(crate::text::clip(digits, 40))),
        }
    };
    let mut sorted = true;
    for part in text.split(',') {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (
                number(a).map_err(|e| whole(e, part))?,
                number(b).map_err(|e| whole(e, part))?,
            ),
            None => {
                let a = number(part)?;
                (a, a)
            }
        };
        if a > b {
            return Err(RangeError::Backwards(crate::text::clip(part.trim(), 40)));
        }
        if out.values.len() + (b - a) >= max_count {
            return Err(RangeError::TooMany);
        }
        sorted &= out.values.last().is_none_or(|&last| last < a);
        out.values.extend(a..=b);
    }
    if !sorted {
        let before = out.values.len();
        out.values.sort_unstable();
        out.values.dedup();
        out.repeated = out.values.len() != before;
    }
    Ok(out)
}

/// The bounds a range list read through `str::parse` gets: numbers up to 2^20 (more CPUs,
/// ranks or objects than any node has) and as many of them; readers that know a tighter
/// bound call [`parse_ranges`] with it.
pub const MAX_LISTED: usize = 1 << 20;

impl std::str::FromStr for Ranges {
    type Err = RangeError;

    /// [`parse_ranges`] within [`MAX_LISTED`].
    fn from_str(text: &str) -> Result<Ranges, RangeError> {
        parse_ranges(text, MAX_LISTED, MAX_LISTED)
    }
}

impl std::fmt::Display for Ranges {
    /// The list as taskset and /proc print it (`0-3,8`): what [`parse_ranges`] reads back.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&cpu_list(&self.values))
    }
}

/// A side of a range that is not a number stands for the whole part (`1-x`, not `x`).
fn whole(error: RangeError, part: &str) -> RangeError {
    match error {
        RangeError::NotANumber(_) => RangeError::NotANumber(crate::text::clip(part.trim(), 40)),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hand-made lists: order, repeats, spaces, and each refusal with its bound.
    #[test]
    fn one_reader_for_every_range_list() {
        let read = |t: &str| parse_ranges(t, 100, 10);
        assert_eq!(read("0-3,8").unwrap().values, [0, 1, 2, 3, 8]);
        assert_eq!(read(" 5 , 1 - 2 ").unwrap().values, [1, 2, 5]);
        assert_eq!(read("").unwrap(), Ranges::default());
        let again = read("0-3,2").unwrap();
        assert_eq!((again.values, again.repeated), (vec![0, 1, 2, 3], true));
        assert!(!read("0,2,4").unwrap().repeated);
        assert_eq!(read("3-1"), Err(RangeError::Backwards("3-1".into())));
        assert_eq!(read("1-x"), Err(RangeError::NotANumber("1-x".into())));
        assert_eq!(read("1,,2"), Err(RangeError::NotANumber(String::new())));
        assert_eq!(read("+3"), Err(RangeError::NotANumber("+3".into())));
        assert_eq!(read("101"), Err(RangeError::TooLarge("101".into())));
        assert_eq!(
            read(&"9".repeat(30)),
            Err(RangeError::TooLarge("9".repeat(30)))
        );
        assert_eq!(read("0-10"), Err(RangeError::TooMany));
        assert_eq!(read("0-9").unwrap().values.len(), 10);
        assert_eq!(read(&"0-9,".repeat(1000)), Err(RangeError::TooMany));
    }

    /// The type reads and writes the one form: a list printed reads back as itself.
    #[test]
    fn a_list_prints_as_it_reads() {
        for text in ["0-3,8", "5", "", "0,2,4-6,1048576"] {
            let list: Ranges = text.parse().unwrap();
            assert_eq!(list.to_string(), text);
        }
        assert_eq!(" 3 ,1-2".parse::<Ranges>().unwrap().to_string(), "1-3");
        assert_eq!(
            "1048577".parse::<Ranges>(),
            Err(RangeError::TooLarge("1048577".into()))
        );
    }

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
    fn hex_masks_read_back() {
        assert_eq!(parse_hex_mask("0xF0", 16), Some(vec![4, 5, 6, 7]));
        assert_eq!(parse_hex_mask(" 3 ", 16), Some(vec![0, 1]));
        assert_eq!(parse_hex_mask("0x0", 16), Some(vec![]));
        for cpus in [vec![0, 192], vec![4], vec![1, 40, 63, 64]] {
            assert_eq!(parse_hex_mask(&taskset_mask(&cpus), 64), Some(cpus));
        }
        assert_eq!(parse_hex_mask("0xG", 16), None);
        assert_eq!(parse_hex_mask("0x", 16), None);
        assert_eq!(parse_hex_mask("1ff", 2), None);
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
