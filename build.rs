//! Links the `binder` executable statically (static-pie), by the plain `cargo build
//! --release` (#37).
//!
//! Every task of every job starts this executable, and with dynamic linking the loader's
//! work (mapping libc and libgcc_s, relocating, resolving) was most of the difference
//! between a warm launch and `taskset -c 0 true` (1.20x); statically linked it starts
//! like taskset. `-C target-feature=+crt-static` cannot be given to one executable of a
//! workspace (rustflags are global, and `binder-full`, which loads libhwloc, and the
//! plugins must stay dynamic), so this gives only `binder`'s link line `-static-pie` and a
//! search directory where the libraries std names (`-lc`, `-lgcc_s`, …) are linker
//! scripts for their static archives (`GROUP(-l:libc.a …)`): the linker resolves every
//! `-l` through them before the system's shared ones.
//!
//! That directory must come first among the linker's `-L` directories, and a link-arg
//! comes after the `-L /usr/lib/…` that hwlocality's build script gives every executable
//! of this package (ld searches `-L` directories in command-line order, whatever their
//! position). So `binder`'s link also gets `-fuse-ld=bfd -B DIR`, where `DIR/ld.bfd` is a
//! two-line script that runs the system's GNU ld with `-L DIR` in front: the C compiler
//! driver takes the linker from a `-B` directory first (the way mold is plugged in), and
//! rustc's own `-B` directory holds only its `ld.lld`. `binder-full` and the tests link as
//! usual (rust-lld).
//!
//! What a static glibc gives up, and why that is fine here: NSS (user and group names)
//! would need the same glibc's modules at run time; this executable never asks for a name
//! (messages naming other users' jobs come from `binder-full`). Nothing else (DNS, iconv,
//! dlopen) is used. Where glibc's static archives are missing (no `libc6-dev`), or with
//! `BINDER_DYNAMIC_FRONT=1`, the executable is linked dynamically as before, and a
//! warning says so.

use std::path::PathBuf;
use std::process::Command;

/// The libraries std's link line names, and the static archives that replace them.
const LIBS: [(&str, &str); 7] = [
    // libc.a calls into libgcc (`__gcc_personality_v0`, soft float): GNU ld reads an
    // archive once, in order, so they are one group.
    ("c", "-l:libc.a -l:libgcc_eh.a -l:libgcc.a"),
    ("pthread", "-l:libpthread.a"),
    ("dl", "-l:libdl.a"),
    ("m", "-l:libm.a"),
    ("rt", "-l:librt.a"),
    ("util", "-l:libutil.a"),
    ("gcc_s", "-l:libgcc_eh.a -l:libgcc.a"),
];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=BINDER_DYNAMIC_FRONT");
    println!("cargo:rerun-if-env-changed=CC");
    println!("cargo:rerun-if-env-changed=TARGET_CC");
    let target = std::env::var("TARGET").unwrap_or_default();
    println!("cargo:rerun-if-env-changed=CC_{target}");
    println!("cargo:rerun-if-env-changed=CC_{}", target.replace('-', "_"));
    if !target.ends_with("-linux-gnu") {
        return;
    }
    // Static-pie is what this file was checked with on x86_64 and aarch64 glibc; on
    // another architecture the executable is linked as Rust links it.
    if !["x86_64-", "aarch64-"]
        .iter()
        .any(|a| target.starts_with(a))
    {
        println!("cargo:warning=static-pie linking of binder is untested on {target}: binder is linked dynamically, and starts slower");
        return;
    }
    if compiler(&target).is_none() {
        println!("cargo:warning=no C compiler for {target} (set CC_{target} or TARGET_CC to the cross compiler): binder is linked dynamically, and starts slower");
        return;
    }
    if std::env::var("BINDER_DYNAMIC_FRONT").is_ok_and(|v| v == "1") {
        println!("cargo:warning=BINDER_DYNAMIC_FRONT=1: binder is linked dynamically");
        return;
    }
    // The C compiler knows where the archives are; it echoes the bare name when it does
    // not find one.
    let found = |file: &str| {
        cc_prints(&format!("-print-file-name={file}"))
            .is_some_and(|p| p != file && std::path::Path::new(&p).is_file())
    };
    if !["libc.a", "libgcc_eh.a"].iter().all(|f| found(f)) {
        println!("cargo:warning=glibc's or libgcc's static archives are missing (Debian: libc6-dev, libgcc-12-dev): binder is linked dynamically, and starts slower");
        return;
    }
    let dir = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR")).join("static-libs");
    std::fs::create_dir_all(&dir).expect("static-libs dir");
    for (name, archives) in LIBS {
        std::fs::write(
            dir.join(format!("lib{name}.so")),
            format!("GROUP({archives})\n"),
        )
        .expect("linker script");
    }
    let Some(ld) = system_ld() else {
        println!("cargo:warning=GNU ld (binutils) is missing: binder is linked dynamically, and starts slower");
        return;
    };
    let wrapper = dir.join("ld.bfd");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\n# binder's static-pie link (build.rs): its archive scripts before any other -L.\nexec '{}' -L'{}' \"$@\"\n",
            ld.display(),
            dir.display()
        ),
    )
    .expect("ld wrapper");
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755))
        .expect("ld wrapper mode");
    println!("cargo:rustc-link-arg-bin=binder=-fuse-ld=bfd");
    println!("cargo:rustc-link-arg-bin=binder=-B{}", dir.display());
    println!("cargo:rustc-link-arg-bin=binder=-static-pie");
}

/// GNU ld: what the C compiler names (`-print-prog-name=ld.bfd`), as an absolute
/// path (looked up on PATH when the compiler gives a bare name), so the wrapper never
/// finds itself.
fn system_ld() -> Option<PathBuf> {
    let name = PathBuf::from(cc_prints("-print-prog-name=ld.bfd")?);
    if name.is_absolute() {
        return name.is_file().then_some(name);
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(&name))
        .find(|p| p.is_file())
}

/// The C compiler for `target`, looked up as the `cc` crate does: `CC_<target>` (as
/// written, then with underscores), then `TARGET_CC` when cross-compiling, then `CC`,
/// then `cc` for a native build. A cross build without one of these has none: the host's
/// `cc` would name the host's archives.
fn compiler(target: &str) -> Option<String> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let cross = std::env::var("HOST").is_ok_and(|host| host != target);
    var(&format!("CC_{target}"))
        .or_else(|| var(&format!("CC_{}", target.replace('-', "_"))))
        .or_else(|| if cross { var("TARGET_CC") } else { None })
        .or_else(|| var("CC"))
        .or_else(|| (!cross).then(|| "cc".to_owned()))
}

/// What the target's C compiler ([`compiler`]) prints for `arg`, trimmed.
fn cc_prints(arg: &str) -> Option<String> {
    let target = std::env::var("TARGET").unwrap_or_default();
    let out = Command::new(compiler(&target)?).arg(arg).output().ok()?;
    Some(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}
