//! binder's manual: the man page and the tables it shares with the README.
//!
//! What binder reads from the environment, what it sets for the task, the files it uses
//! and the examples are tables here, written once: the man page's ENVIRONMENT, FILES and
//! EXAMPLES sections and `--help`'s examples are rendered from them, and a test checks that
//! the README's tables are the same rows ([`readme_table`]), so the three never drift.
//! Text uses Markdown's backquotes for literals: bold in the man page, code in the README.

use roff::{bold, roman, Inline, Roff};

/// One row of a table: the names it covers and what they do.
pub struct Entry {
    /// The variables or paths of the row.
    pub names: &'static [&'static str],
    /// What they do, Markdown backquotes for literals.
    pub what: &'static str,
}

/// The variables binder reads (man page ENVIRONMENT).
pub const ENVIRONMENT: &[Entry] = &[
    Entry {
        names: &["BINDER_REPORT"],
        what: "`1`, `yes`, `true` or `on`: print the task's binding on stderr before exec, as `--report`; `0`, `no`, `false`, `off`, `none`: do not. Every `BINDER_*` setting takes these words alike, and any other value is refused with one line (exit 125)",
    },
    Entry {
        names: &["BINDER_LEDGER"],
        what: "`require`: refuse (125) when the node ledger cannot be used, instead of warning and launching uncoordinated; `off` (or another off word): do not use the ledger",
    },
    Entry {
        names: &["BINDER_LEDGER_DIR"],
        what: "the node ledger's root (default `/dev/shm`); must be root's with the sticky bit, or yours",
    },
    Entry {
        names: &["BINDER_LEDGER_WAIT"],
        what: "whole seconds to wait for your own ledger lock before refusing (default 30, from 0 to 3600)",
    },
    Entry {
        names: &["BINDER_KERNEL_VIEW"],
        what: "`all` (the default) or `in-sight`: with `in-sight`, look at other users' bound tasks in `/proc` only when one of their ledger entries is in the ledger root (by default always, so a task bound without binder counts too); a launch that cannot use the ledger then does the same (other users' bound tasks only where one of their entries is in the root) and leaves out your own other jobs' tasks too; for runs whose result must not depend on other jobs on the machine, such as binder's own test suite",
    },
    Entry {
        names: &["BINDER_CACHE"],
        what: "`off` (or `0`, `no`, `false`): do not use the node cache",
    },
    Entry {
        names: &["BINDER_CACHE_DIR"],
        what: "the node cache's directory (default `$XDG_RUNTIME_DIR/binder`, else `/dev/shm/binder-UID`, else `/tmp/binder-UID`)",
    },
    Entry {
        names: &["BINDER_CACHE_TRACE"],
        what: "`1` (or another on word): one line on stderr per launch saying cache hit, miss (and why), store or off, and when `binder` hands over to `binder-full`",
    },
    Entry {
        names: &["BINDER_DYNAMIC_FRONT"],
        what: "at build time (`cargo build`), `1`: link the `binder` executable dynamically instead of static-pie (a warm launch then starts slower)",
    },
    Entry {
        names: &["BINDER_STACK_SOFT"],
        what: "set by binder itself, never by you: the stack size limit you launched it with, while binder runs with a larger one it started itself again under (`ulimit -s` below 1 MiB); the task gets your limit back, and never this variable",
    },
    Entry {
        names: &["BINDER_SITE_FILE"],
        what: "the site file to read instead of `/etc/binder/site.yaml` (for modules and tests)",
    },
    Entry {
        names: &binder_core::launch::line::GPU_GRANT_VARS,
        what: "the job's GPU allocation: tasks are given GPUs from it only, named as the launcher wrote them; an index is the runtime's over the node's GPUs (or a container's: `NVIDIA_VISIBLE_DEVICES` and the `/dev/nvidiaN` files present say which it has), never renumbered by the job's CPUs; a `GPU-` entry is a UUID or a unique prefix of one, from hwloc or the driver (`/proc/driver/nvidia/gpus`, `nvidia-smi`, AMD's `unique_id`)",
    },
    Entry {
        names: &["OMP_NUM_THREADS", "OMP_PLACES", "OMP_PROC_BIND"],
        what: "with `options.openmp`, kept when they agree with the task's binding and replaced otherwise (`--verbose` says which)",
    },
    Entry {
        names: &["HWLOC_XMLFILE", "HWLOC_SYNTHETIC"],
        what: "make hwloc describe another machine: a launch refuses (use `--topology` for a dry-run), unless the XML names this host and holds its online CPUs, all or some (Flux's `-o hwloc.xmlfile`, with or without `hwloc.restrict`); every `HWLOC_*` variable is part of the node cache's key",
    },
    Entry {
        names: &["SLURM_CPU_BIND_TYPE", "SLURM_CPU_BIND_LIST"],
        what: "with `mask_cpu` or `map_cpu`, the union of the step's task masks is the job's allocation on the node (SEMANTICS §4.1); the SPANK plugin reads the type srun handed over to tell a typed `--cpu-bind` from Slurm's implicit one",
    },
    Entry {
        names: &["BINDER_SLURM_CPU_BIND_INHERITED"],
        what: "set by the SPANK plugin inside srun when its `--cpu-bind` is only the `SLURM_CPU_BIND` it inherited from the step it runs in (an `srun` inside `srun --pty bash`), so that it is not taken for a binding the user typed; removed before the task runs",
    },
    Entry {
        names: &["BINDER_SPANK_MULTI_PROG"],
        what: "set by the SPANK plugin inside srun when it was given `--multi-prog`, so that slurmstepd's side reads each task's own line of the file (a site default stays out of a context that runs the wrapper); removed before the task runs",
    },
    Entry {
        names: &binder_core::identity::LOCAL_VARS,
        what: "the task's local rank and the node's task count, innermost launcher first (torchrun and DeepSpeed's launcher, then MPI launchers, then Flux, then Slurm); `--local-rank` and `--local-size` win",
    },
    Entry {
        names: &binder_core::identity::MARK_VARS,
        what: "mark `LOCAL_RANK` as torchrun's (torch elastic; `LOCAL_WORLD_SIZE` the node's workers) or DeepSpeed's launcher's (`LOCAL_SIZE`); a `LOCAL_RANK` alone names no launcher. Their workers are one job, named by the agent (the `torchrun` or `deepspeed` process, else the workers' parent)",
    },
    Entry {
        names: &binder_core::identity::JOB_VARS,
        what: "the job the task belongs to, for the node ledger, first one set of the task's launcher (Hydra exports none: its proxy process names the job; Slurm's step keeps steps apart; Flux's job shell rank, from its `FLUX_JOB_TMPDIR`, keeps each shell's tasks apart on a host shared by brokers; LSF's `LSB_JOBID` names the batch job around a launcher that exports none)",
    },
    Entry {
        names: &["NO_COLOR"],
        what: "set: `--format map` is never coloured",
    },
];

/// The variables binder sets for the task (the README's "The environment binder sets").
pub const TASK_ENVIRONMENT: &[Entry] = &[
    Entry {
        names: &["BINDER_LOCAL_RANK", "BINDER_LOCAL_SIZE"],
        what: "the task identity binder used",
    },
    Entry {
        names: &["BINDER_UNIT"],
        what: "`core`, `pu` or `none`",
    },
    Entry {
        names: &["BINDER_CPUS"],
        what: "the task's CPUs as a list, `0-3,48-51` (unset with `bind: none`)",
    },
    Entry {
        names: &["BINDER_CPUSET"],
        what: "the same as hwloc's bitmap string (unset with `bind: none`)",
    },
    Entry {
        names: &["BINDER_GPUS"],
        what: "the task's GPU numbers, `0,1` (only with GPUs)",
    },
    Entry {
        names: &["BINDER_NICS"],
        what: "the OS devices of the task's nearest NICs, `ib0,mlx5_0` (only when the shape names a `nic`)",
    },
    Entry {
        names: &binder_core::launch::env::NIC_VAR_NAMES,
        what: "the same NICs for UCX (`mlx5_0:1`: each RDMA device and its active port, else the interface) and NCCL (`=mlx5_0:1`, RDMA devices only); a value the user set is kept",
    },
    Entry {
        names: &["BINDER_JOB"],
        what: "the job's name in the node ledger (`slurm:812.3`, `openmpi:1307181057`)",
    },
    Entry {
        names: &["CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"],
        what: "the task's NVIDIA GPUs, and `PCI_BUS_ID`",
    },
    Entry {
        names: &["ROCR_VISIBLE_DEVICES"],
        what: "the task's AMD GPUs",
    },
    Entry {
        names: &["ZE_AFFINITY_MASK", "ZE_ENABLE_PCI_ID_DEVICE_ORDER"],
        what: "the task's Intel GPUs, and `1`",
    },
    Entry {
        names: &["OMP_NUM_THREADS", "OMP_PLACES", "OMP_PROC_BIND"],
        what: "with `options.openmp: true`: one thread per unit, one place per unit, `close`",
    },
    Entry {
        names: &[
            "GCS_BINDING",
            "GCS_BINDING_INSTANCE",
            "SGE_BINDING_INSTANCE",
            "SGE_BINDING_TOPOLOGY",
            "SGE_BINDING_CPUSET",
            "SGE_BINDING",
        ],
        what: "with a Grid Engine request (`SGE_BINDING` only with `-binstance env`)",
    },
];

/// The files binder uses (man page FILES).
pub const FILES: &[Entry] = &[
    Entry {
        names: &[binder_core::launch::line::SITE_FILE],
        what: "the site's reservation, read by every launch and dry-run on the node (`reserve: [first-core]`); a missing file reserves nothing, a broken one is refused",
    },
    Entry {
        names: &["/dev/shm/binder-ledger.UID/"],
        what: "the node ledger: each user's claims, one file per job (`BINDER_LEDGER_DIR` moves the root); `binder node` reads them",
    },
    Entry {
        names: &["~/.cache/binder/ledger-key"],
        what: "128 random bits, yours alone (mode 0600), made only when another user took your ledger directory's name: your directory's name then derives from it and the boot id, so nobody can take it first (without a usable home, the key `binder-ledger-key` in the kernel's user keyring)",
    },
    Entry {
        names: &["$XDG_RUNTIME_DIR/binder/", "/dev/shm/binder-UID/", "/tmp/binder-UID/"],
        what: "the node cache, the first that is usable (`BINDER_CACHE_DIR` overrides); yours alone, mode 0700",
    },
    Entry {
        names: &["/usr/share/binder/shapes/"],
        what: "the catalog the SPANK plugin's `--binder=NAME` looks in (plugstack.conf `catalog=DIR`)",
    },
];

/// `--help`'s and the man page's examples: what each does, then the line.
pub const EXAMPLES: &[(&str, &str)] = &[
    (
        "Show what 8 tasks on this node would get:",
        "binder --dry-run --local-size 8 shapes/cores-packed.yaml",
    ),
    (
        "The same on another machine's topology, as JSON:",
        "binder --dry-run --local-size 8 --format json --topology node.xml shapes/cores-packed.yaml",
    ),
    (
        "Launch under a launcher; each task finds its local rank in the launcher's environment:",
        "mpirun -np 8 --bind-to none binder shapes/cores-packed.yaml -- ./app arg1",
    ),
    ("", "srun -n 8 binder shapes/cores-packed.yaml -- ./app arg1"),
    (
        "Why this placement, step by step:",
        "binder explain --local-size 2 shapes/socket-core-pu.yaml",
    ),
    ("Who holds what on this node:", "binder node"),
];

/// The exit statuses, for `--help` and EXIT STATUS.
pub const EXIT_STATUS: &[(&str, &str)] = &[
    ("0", "the dry-run, `explain`, `schema` or another command printed what was asked"),
    ("125", "binder refused: usage, shape, topology, task identity, infeasible placement, binding not applied. The task was not started."),
    ("126", "the command exists but cannot be executed"),
    ("127", "the command was not found"),
    ("other", "the task's own exit status (binder became the task)"),
];

/// `--help`'s closing text.
pub fn help_examples() -> String {
    let mut out = String::from("Examples:\n");
    for (what, line) in EXAMPLES {
        if !what.is_empty() {
            out.push_str(&format!("  {what}\n"));
        }
        out.push_str(&format!("    {line}\n"));
    }
    out.push_str(
        "\nExit status: 0 dry-run printed; 125 binder refused (the task was not started);\n",
    );
    out.push_str(
        "126 command not executable; 127 command not found; otherwise the task's own status.",
    );
    out
}

/// The README's table for `entries` (`| name | what |` rows under a header).
pub fn readme_table(header: (&str, &str), entries: &[Entry]) -> String {
    markdown_table(
        header,
        entries.iter().map(|e| {
            let names: Vec<String> = e.names.iter().map(|n| format!("`{n}`")).collect();
            (names.join(", "), e.what.to_owned())
        }),
    )
}

/// The README's "Exit codes" table: [`EXIT_STATUS`]'s rows.
pub fn readme_exit_table() -> String {
    markdown_table(
        ("code", "meaning"),
        EXIT_STATUS
            .iter()
            .map(|(code, what)| ((*code).to_owned(), (*what).to_owned())),
    )
}

/// A two-column Markdown table.
fn markdown_table(header: (&str, &str), rows: impl Iterator<Item = (String, String)>) -> String {
    let mut out = format!("| {} | {} |\n|---|---|\n", header.0, header.1);
    for (name, what) in rows {
        out.push_str(&format!("| {name} | {what} |\n"));
    }
    out
}

/// Text with Markdown backquotes as roff inlines: literals bold, the rest roman.
pub(crate) fn inlines(text: &str) -> Vec<Inline> {
    text.split('`')
        .enumerate()
        .filter(|(_, s)| !s.is_empty())
        .map(|(i, s)| if i % 2 == 1 { bold(s) } else { roman(s) })
        .collect()
}

/// A tagged-paragraph list: each entry's names in bold, then what it does.
fn tagged(roff: &mut Roff, entries: &[Entry]) {
    for e in entries {
        roff.control("TP", []);
        let mut tag = Vec::new();
        for (i, n) in e.names.iter().enumerate() {
            if i > 0 {
                tag.push(roman(", "));
            }
            tag.push(bold(*n));
        }
        roff.text(tag);
        roff.text(inlines(e.what));
    }
}

/// binder's own sections, after clap's options: subcommands without references to pages
/// that are not shipped, examples kept verbatim, exit status, environment, files.
fn own_sections(cmd: &clap::Command) -> Result<String, std::io::Error> {
    let mut roff = Roff::new();
    roff.control("SH", ["SUBCOMMANDS"]);
    let mut subs = String::new();
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let mut head = Roff::new();
        head.control("SS", [format!("binder {}", sub.get_name()).as_str()]);
        head.text(inlines(
            &sub.get_about().map(|a| a.to_string()).unwrap_or_default(),
        ));
        subs.push_str(&head.render());
        let mut options = Vec::new();
        clap_mangen::Man::new(sub.clone()).render_options_section(&mut options)?;
        // clap_mangen heads them `.SH OPTIONS`; here they sit inside the subcommand's `.SS`.
        let options = String::from_utf8_lossy(&options)
            .lines()
            .filter(|l| !l.starts_with(".SH"))
            .collect::<Vec<_>>()
            .join("\n");
        if !options.trim().is_empty() {
            subs.push_str(&options);
            subs.push('\n');
        }
    }
    let mut rest = Roff::new();
    rest.control("SH", ["EXAMPLES"]);
    for (what, line) in EXAMPLES {
        if !what.is_empty() {
            rest.control("PP", []);
            rest.text(inlines(what));
        }
        // Verbatim: no filling or hyphenation, so a command line is never reflowed.
        rest.control("RS", ["4"]).control("nf", []);
        rest.text([roman(*line)]);
        rest.control("fi", []).control("RE", []);
    }
    rest.control("SH", ["EXIT STATUS"]);
    for (code, what) in EXIT_STATUS {
        rest.control("TP", []);
        rest.text([bold(*code)]);
        rest.text(inlines(what));
    }
    rest.control("SH", ["ENVIRONMENT"]);
    rest.text(inlines("binder reads:"));
    tagged(&mut rest, ENVIRONMENT);
    rest.control("PP", []);
    rest.text(inlines("and sets, for the task:"));
    tagged(&mut rest, TASK_ENVIRONMENT);
    rest.control("SH", ["FILES"]);
    tagged(&mut rest, FILES);
    rest.control("SH", ["SEE ALSO"]);
    rest.text([
        bold("hwloc-bind"),
        roman("(1), "),
        bold("hwloc-calc"),
        roman("(1), "),
        bold("lstopo"),
        roman("(1), "),
        bold("taskset"),
        roman("(1), "),
        bold("numactl"),
        roman("(8), "),
        bold("mpirun"),
        roman("(1), "),
        bold("srun"),
        roman("(1), "),
        bold("binder-shape"),
        roman("(5) (the shape format); the user guide (shapes, launchers, GPUs, Grid Engine, sharing a node), installed as /usr/share/doc/binder/guide.md by the packages (PREFIX/share/doc/binder/guide.md by make install; docs/guide.md in the source)"),
    ]);
    Ok(format!("{}{subs}{}", roff.render(), rest.render()))
}

/// The man page (`docs/man/binder.1`): clap's title, name, synopsis, description and
/// options, then `own_sections`, then the version.
pub fn man(cmd: clap::Command) -> Result<Vec<u8>, std::io::Error> {
    let man = clap_mangen::Man::new(cmd.clone());
    let mut out = Vec::new();
    man.render_title(&mut out)?;
    // No hyphenation: option names and paths must read as typed.
    out.extend_from_slice(b".nh\n.ad l\n");
    man.render_name_section(&mut out)?;
    man.render_synopsis_section(&mut out)?;
    man.render_description_section(&mut out)?;
    man.render_options_section(&mut out)?;
    out.extend_from_slice(own_sections(&cmd)?.as_bytes());
    man.render_version_section(&mut out)?;
    // Each rendered part starts with roff's apostrophe preamble (two lines); keep the first.
    let text = String::from_utf8_lossy(&out).into_owned();
    let mut preamble_lines = 0;
    let mut page = String::new();
    for line in text.lines() {
        if line.starts_with(".ie \\n(.g .ds Aq") || line.starts_with(".el .ds Aq") {
            preamble_lines += 1;
            if preamble_lines > 2 {
                continue;
            }
        }
        page.push_str(line);
        page.push('\n');
    }
    Ok(plain_sections(&page).into_bytes())
}

/// A page's text with SEMANTICS' `§9` written `section 9`: groff has no glyph for `§`
/// under the C locale a fresh machine has, and prints `<section>` there.
pub(crate) fn plain_sections(page: &str) -> String {
    page.replace('§', "section ")
}
