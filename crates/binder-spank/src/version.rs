//! `SLURM_VERSION_NUMBER` read from a `slurm/slurm_version.h`: `build.rs` includes this
//! file to give the plugin the version of the Slurm it is built against, and the crate's
//! tests check it on other releases' headers.

/// The number a `slurm_version.h` defines (`#define SLURM_VERSION_NUMBER 0x160508`),
/// hexadecimal or decimal; `None` when it defines none.
pub fn version_of(text: &str) -> Option<u32> {
    text.lines().find_map(|line| {
        let mut words = line.split_whitespace();
        if words.next()? != "#define" || words.next()? != "SLURM_VERSION_NUMBER" {
            return None;
        }
        let value = words.next()?;
        match value
            .strip_prefix("0x")
            .or_else(|| value.strip_prefix("0X"))
        {
            Some(hex) => u32::from_str_radix(hex, 16).ok(),
            None => value.parse().ok(),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::version_of;

    #[test]
    fn releases_headers() {
        // As Slurm 22.05.8, 23.11.10 and 24.05.4 write it (slurm/slurm_version.h).
        let header = |v: &str| {
            format!("#ifndef _SLURM_VERSION_H_\n#define _SLURM_VERSION_H_\n\n#define SLURM_VERSION_NUMBER {v}\n\n#define SLURM_VERSION_NUM(a,b,c) (((a) << 16) + ((b) << 8) + (c))\n#endif\n")
        };
        assert_eq!(version_of(&header("0x160508")), Some(0x16_05_08));
        assert_eq!(version_of(&header("0x170b0a")), Some(0x17_0b_0a));
        assert_eq!(version_of(&header("0x180504")), Some(0x18_05_04));
        assert_eq!(version_of("#define SLURM_VERSION_NUM(a,b,c) 0\n"), None);
        assert_eq!(version_of("#define SLURM_VERSION_NUMBER\n"), None);
        assert_eq!(version_of(""), None);
    }
}
