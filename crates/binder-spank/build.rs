//! `plugin_version` is the release of the Slurm the plugin is built against: slurmstepd
//! refuses a plugin whose major.minor differs from its own, so a constant would load on
//! one release series only. The number is read from that Slurm's `slurm/slurm_version.h`,
//! found in `SLURM_INCLUDE_DIR`, else pkg-config's `slurm` include directory, else
//! `/usr/include` and `/usr/local/include`. Without the header the plugin is still built
//! (the workspace builds on a machine without Slurm) with version 0, which every Slurm
//! refuses to load, and cargo prints a warning saying how to point the build at a Slurm.

// The crate exports it; here it is private.
#[allow(unreachable_pub)]
#[path = "src/version.rs"]
mod version;

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=SLURM_INCLUDE_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(dir) = std::env::var_os("SLURM_INCLUDE_DIR") {
        dirs.push(dir.into());
    }
    if let Ok(out) = Command::new("pkg-config")
        .args(["--variable=includedir", "slurm"])
        .output()
    {
        let dir = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        if out.status.success() && !dir.is_empty() {
            dirs.push(dir.into());
        }
    }
    dirs.extend(["/usr/include", "/usr/local/include"].map(PathBuf::from));
    let found = dirs.iter().find_map(|dir| {
        let header = dir.join("slurm/slurm_version.h");
        let text = std::fs::read_to_string(&header).ok()?;
        Some((header, version::version_of(&text)?))
    });
    let version = match found {
        Some((header, version)) => {
            println!("cargo:rerun-if-changed={}", header.display());
            version
        }
        None => {
            println!(
                "cargo:warning=binder-spank: no slurm/slurm_version.h found (looked in SLURM_INCLUDE_DIR, pkg-config slurm, /usr/include, /usr/local/include); the plugin is built with plugin_version 0, which Slurm will not load: install your Slurm's development headers (Debian: libslurm-dev) or set SLURM_INCLUDE_DIR"
            );
            0
        }
    };
    println!("cargo:rustc-env=SPANK_BUILT_SLURM_VERSION={version}");
}
