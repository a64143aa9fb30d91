//! The site's install (`make install`, issue #46): into a fresh prefix, then used as a site
//! would, from outside the clone: the installed `binder` finds its installed catalog by
//! name, Slurm loads the SPANK plugin through the installed `plugstack.conf.d` file, and
//! Flux's job shell loads the Flux plugin through the installed `lua.d` file; each binds
//! a task as the dry-run says. The same test checks the `.deb` installed on the machine
//! (`BINDER_TEST_INSTALLED=/`, from `.ci/package`).

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{promised, Slurm};
use crate::common::{self, root};

/// `make install PREFIX=prefix` of what this test run built (its profile directory).
fn install(prefix: &Path) -> bool {
    if !common::prerequisite(common::has("make"), "make") {
        return false;
    }
    let exe = Path::new(common::binder_exe());
    let out_dir = exe.parent().unwrap();
    let profile = out_dir.file_name().unwrap().to_string_lossy().into_owned();
    let target = out_dir.parent().unwrap();
    let out = Command::new("make")
        .current_dir(root())
        .args(["install", "--no-print-directory"])
        .arg(format!("PREFIX={}", prefix.display()))
        .arg(format!("PROFILE={profile}"))
        .arg(format!("CARGO_TARGET_DIR={}", target.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "make install: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    true
}

/// The one task's `BINDER_CPUS|affinity` line is what the dry-run promises one task.
fn bound_as_promised(out: &std::process::Output) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let one = promised("shapes/cores-packed.yaml", 1);
    assert_eq!(stdout.trim(), format!("{}|{}", one[&0], one[&0]));
}

/// Where the files under test are: `BINDER_TEST_INSTALLED=/` names a package installed
/// on this machine (the `.deb` that `.ci/package` builds and installs: `/usr`, `/etc`);
/// otherwise `make install` into a fresh prefix. The prefix and its `etc`.
fn installed() -> Option<(PathBuf, PathBuf, bool)> {
    match std::env::var("BINDER_TEST_INSTALLED") {
        Ok(root) if !root.is_empty() => {
            let root = PathBuf::from(root);
            Some((root.join("usr"), root.join("etc"), false))
        }
        _ => {
            let prefix = common::scratch().join(format!("prefix-{}", std::process::id()));
            install(&prefix).then(|| (prefix.clone(), prefix.join("etc"), true))
        }
    }
}

#[test]
fn make_install_then_both_plugins_from_the_installed_files() {
    let Some((prefix, etc, made)) = installed() else {
        return;
    };
    for file in [
        "etc/slurm/plugstack.conf.d/binder.conf",
        "etc/flux/shell/lua.d/binder.lua",
    ] {
        let file = etc.join(file.strip_prefix("etc/").unwrap());
        assert!(file.is_file(), "the install left out {}", file.display());
    }
    for file in [
        "bin/binder",
        "bin/binder-full",
        "share/binder/shapes/cores-packed.yaml",
        "share/man/man1/binder.1",
        "share/man/man5/binder-shape.5",
        "share/bash-completion/completions/binder",
        "share/zsh/site-functions/_binder",
        "share/fish/vendor_completions.d/binder.fish",
        "lib/binder/libbinder_spank.so",
        "lib/binder/libbinder_flux.so",
        // Both licences travel with every copy (#56), and the guide the man page names.
        "share/doc/binder/LICENSE-MIT",
        "share/doc/binder/LICENSE-APACHE",
        "share/doc/binder/guide.md",
        "share/man/man1/binder-full.1",
    ] {
        // A package compresses its man pages (Debian's policy).
        let gz = prefix.join(format!("{file}.gz"));
        assert!(
            prefix.join(file).is_file() || (file.starts_with("share/man/") && gz.is_file()),
            "the install left out {file}"
        );
    }
    // The installed executable, run from outside the clone, finds its catalog by name.
    let binder = prefix.join("bin/binder");
    let out = Command::new(&binder)
        .current_dir("/")
        .args([
            "--dry-run",
            "--local-size",
            "2",
            "--format",
            "json",
            "cores-packed",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let want = promised("shapes/cores-packed.yaml", 2);
    let text = String::from_utf8_lossy(&out.stdout);
    for (rank, line) in text.lines().enumerate() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(v["cpulist"].as_str().unwrap(), want[&rank], "{text}");
    }

    // Slurm with the installed include, as a site's plugstack.conf would have it.
    let include = format!(
        "include {}",
        etc.join("slurm/plugstack.conf.d/*.conf").display()
    );
    if let Some(slurm) = Slurm::start_with(&[("E2E_PLUGSTACK", include)]) {
        let ledger = common::private_ledger();
        let out = super::spank::srun(&slurm.conf, &ledger, &["-n1", "--cpu-bind=none"])
            .current_dir("/")
            .args([
                "--binder=cores-packed",
                "sh",
                "-c",
                "echo \"$BINDER_CPUS|$(grep Cpus_allowed_list /proc/self/status | cut -f2)\"",
            ])
            .output()
            .unwrap();
        bound_as_promised(&out);
    }

    // Flux's job shell with the installed lua.d file (as -o userrc=, which a site puts in
    // its Flux's etc/flux/shell/lua.d).
    let flux = PathBuf::from("/opt/flux/bin/flux");
    let flux = if common::has("flux") {
        Some(PathBuf::from("flux"))
    } else {
        flux.is_file().then_some(flux)
    };
    if common::prerequisite(flux.is_some(), "flux") {
        let rc = etc.join("flux/shell/lua.d/binder.lua");
        // The whole node's cores for the one task, as the dry-run of one task assumes.
        let cores = format!(
            "-c{}",
            std::thread::available_parallelism().map_or(1, usize::from)
        );
        let mut cmd = Command::new(flux.unwrap());
        common::isolated(&mut cmd)
            .current_dir("/")
            .args(["start", "--test-size=1", "flux", "run", "-n1", &cores, "-o"])
            .arg(format!("userrc={}", rc.display()))
            .args([
                "-o",
                "binder=cores-packed",
                "sh",
                "-c",
                "echo \"$BINDER_CPUS|$(grep Cpus_allowed_list /proc/self/status | cut -f2)\"",
            ]);
        let path = std::env::var("PATH").unwrap_or_default();
        cmd.env("PATH", format!("/opt/flux/bin:{path}"));
        let out = cmd.output().unwrap();
        bound_as_promised(&out);
    }
    if made {
        let _ = std::fs::remove_dir_all(&prefix);
    }
}

/// #56: a SPANK plugin built without Slurm's headers (`plugin_version` 0, which no Slurm
/// loads; the build marks it `binder-spank: UNLOADABLE`) is left out by `make install`,
/// with its configuration file, and the install says why; the rest installs. Run on a
/// profile directory of copies whose plugin is such a file (the mark is what the build
/// writes: `cargo build` with no `slurm/slurm_version.h` in sight).
#[test]
fn make_install_leaves_out_an_unloadable_spank_plugin() {
    if !common::prerequisite(common::has("make"), "make") {
        return;
    }
    let exe = Path::new(common::binder_exe());
    let target = common::scratch().join(format!("unloadable-{}", std::process::id()));
    let out_dir = target.join("fake");
    std::fs::create_dir_all(&out_dir).unwrap();
    for name in ["binder", "binder-full", "libbinder_flux.so"] {
        std::fs::copy(exe.with_file_name(name), out_dir.join(name)).unwrap();
    }
    let mut plugin = b"\x7fELF...".to_vec();
    plugin.extend_from_slice(b"binder-spank: UNLOADABLE (built without Slurm's slurm_version.h)\0");
    std::fs::write(out_dir.join("libbinder_spank.so"), plugin).unwrap();
    let prefix = target.join("prefix");
    let out = Command::new("make")
        .current_dir(root())
        .args(["install", "--no-print-directory", "PROFILE=fake"])
        .arg(format!("PREFIX={}", prefix.display()))
        .arg(format!("CARGO_TARGET_DIR={}", target.display()))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("leaves out the Slurm plugin") && stderr.contains("libslurm-dev"),
        "{stderr}"
    );
    assert!(!prefix.join("lib/binder/libbinder_spank.so").exists());
    assert!(!prefix
        .join("etc/slurm/plugstack.conf.d/binder.conf")
        .exists());
    assert!(prefix.join("lib/binder/libbinder_flux.so").is_file());
    assert!(prefix.join("bin/binder").is_file());
    let _ = std::fs::remove_dir_all(&target);
}

/// `make TARGET ARGS` of what this test run built (its profile directory).
fn make(target: &str, args: &[String]) -> std::process::Output {
    let exe = Path::new(common::binder_exe());
    let out_dir = exe.parent().unwrap();
    let profile = out_dir.file_name().unwrap().to_string_lossy().into_owned();
    let out = Command::new("make")
        .current_dir(root())
        .args([target, "--no-print-directory"])
        .arg(format!("PROFILE={profile}"))
        .arg(format!(
            "CARGO_TARGET_DIR={}",
            out_dir.parent().unwrap().display()
        ))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "make {target}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Every directory under `dir`, sorted.
fn dirs_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            if e.path().is_dir() {
                out.push(e.path().display().to_string());
                todo.push(e.path());
            }
        }
    }
    out.sort();
    out
}

/// `make uninstall` after `make install` leaves no directory the install made (#65: 17
/// empty ones were left), into a DESTDIR as packagers stage and into a fresh prefix; a
/// directory holding something else stays.
#[test]
fn make_uninstall_leaves_no_directory_it_made() {
    if !common::prerequisite(common::has("make"), "make") {
        return;
    }
    let base = common::scratch().join(format!("uninstall-{}", std::process::id()));
    let stage = base.join("stage");
    let staged = [
        format!("DESTDIR={}", stage.display()),
        "PREFIX=/usr".to_owned(),
    ];
    make("install", &staged);
    assert!(stage.join("usr/bin/binder").is_file());
    make("uninstall", &staged);
    assert_eq!(dirs_under(&stage), Vec::<String>::new());
    // A prefix whose share/man holds another page keeps it, and only it.
    let prefix = base.join("prefix");
    std::fs::create_dir_all(prefix.join("share/man/man1")).unwrap();
    std::fs::write(prefix.join("share/man/man1/other.1"), "x").unwrap();
    let fresh = [format!("PREFIX={}", prefix.display())];
    make("install", &fresh);
    make("uninstall", &fresh);
    let left: Vec<String> = dirs_under(&prefix)
        .into_iter()
        .map(|d| {
            d.trim_start_matches(&prefix.display().to_string())
                .to_owned()
        })
        .collect();
    assert_eq!(left, ["/share", "/share/man", "/share/man/man1"]);
    let _ = std::fs::remove_dir_all(&base);
}

/// A user's own install (the README's `make install-user PREFIX=$HOME/.local`) has the
/// executables, the catalog and the man pages, and no plugin and no Slurm or Flux
/// configuration, which are a site's (#65).
#[test]
fn a_user_install_has_no_site_files() {
    if !common::prerequisite(common::has("make"), "make") {
        return;
    }
    let home = common::scratch().join(format!("user-{}", std::process::id()));
    let prefix = [format!("PREFIX={}", home.join(".local").display())];
    make("install-user", &prefix);
    let local = home.join(".local");
    assert!(local.join("bin/binder").is_file());
    assert!(local
        .join("share/binder/shapes/cores-packed.yaml")
        .is_file());
    assert!(local.join("share/man/man1/binder.1").is_file());
    assert!(!local.join("lib").exists(), "plugins in a user's install");
    assert!(
        !local.join("etc").exists(),
        "site configuration in a user's install"
    );
    make("uninstall", &prefix);
    assert!(!local.exists());
    let _ = std::fs::remove_dir_all(&home);
}
