//! `plugin_version` is the release of the Slurm the plugin is built against: slurmstepd
//! refuses a plugin whose major.minor differs from its own, so a constant would load on
//! one release series only. The number is read from that Slurm's `slurm/slurm_version.h`,
//! found in `SLURM_INCLUDE_DIR`, else pkg-config's `slurm` include directory, else
//! `/usr/include` and `/usr/local/include`. A `SLURM_INCLUDE_DIR` without the header is
//! an error (the build was pointed at a Slurm and must not silently take another).
//! Without any header the plugin is still built (the workspace builds on a machine
//! without Slurm) with version 0, which every Slurm refuses to load: cargo prints a
//! warning saying how to point the build at a Slurm, and the plugin carries the mark
//! `binder-spank: UNLOADABLE` (cfg `spank_unloadable`), by which `make install` and the
//! packages leave it out and say why.

// The crate exports it; here it is private.
#[allow(unreachable_pub)]
#[path = "src/version.rs"]
mod version;

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=SLURM_INCLUDE_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rustc-check-cfg=cfg(spank_unloadable)");
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(dir) = std::env::var_os("SLURM_INCLUDE_DIR").filter(|d| !d.is_empty()) {
        let dir = PathBuf::from(dir);
        let header = dir.join("slurm/slurm_version.h");
        let text = std::fs::read_to_string(&header).unwrap_or_default();
        if version::version_of(&text).is_none() {
            // A build script's panic is the build's error, its message printed by cargo.
            panic!(
                "binder-spank: SLURM_INCLUDE_DIR={} has no readable slurm/slurm_version.h with SLURM_VERSION_NUMBER; point it at the `include` directory of the Slurm the plugin is for (the one holding slurm/spank.h), or unset it",
                dir.display()
            );
        }
        dirs.push(dir);
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
                "cargo:warning=binder-spank: no slurm/slurm_version.h found (looked in pkg-config slurm, /usr/include, /usr/local/include); the plugin is built with plugin_version 0, which Slurm will not load, and `make install` leaves it out: install your Slurm's development headers (Debian: libslurm-dev) or set SLURM_INCLUDE_DIR"
            );
            println!("cargo:rustc-cfg=spank_unloadable");
            0
        }
    };
    println!("cargo:rustc-env=SPANK_BUILT_SLURM_VERSION={version}");
}
