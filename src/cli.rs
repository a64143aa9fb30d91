//! The command line, as clap derive structs. No I/O and no logic: `lib.rs` turns a
//! `Cli` into a `crate::Config` once, and no clap type goes further.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

/// Pin each task of a parallel job to the right CPUs (and GPUs) of its node.
///
/// binder reads a YAML shape, computes this task's cpuset from the node's hwloc topology,
/// binds itself and execs COMMAND. With --dry-run it prints what every local task would
/// get instead.
#[derive(Debug, Parser)]
#[command(
    name = "binder",
    version,
    max_term_width = 98,
    after_long_help = crate::manual::help_examples(),
    args_conflicts_with_subcommands = true,
    subcommand_value_name = "SUBCOMMAND",
    subcommand_help_heading = "Subcommands",
    disable_help_subcommand = true,
    subcommand_negates_reqs = true
)]
pub struct Cli {
    /// Other actions.
    #[command(subcommand)]
    pub action: Option<Action>,

    /// The shape describing the placement (optional with --ge): a YAML file, or a catalog
    /// name (`cores-packed`, `gpu-local`) looked up as NAME.yaml in ./shapes, in
    /// share/binder/shapes beside the executable's prefix and in /usr/share/binder/shapes.
    #[arg(value_name = "SHAPE", required_unless_present = "ge")]
    pub shape: Option<PathBuf>,

    /// The command to run bound, with its arguments, after `--`.
    #[arg(value_name = "COMMAND", last = true)]
    pub command: Vec<OsString>,

    /// Print the placement of every local task instead of running anything.
    #[arg(short = 'n', long, help_heading = "Placement options")]
    pub dry_run: bool,

    /// This task's rank among the tasks of its node (default: from the launcher, else 0).
    #[arg(long, value_name = "RANK", help_heading = "Placement options")]
    pub local_rank: Option<usize>,

    /// Number of tasks on this node (default: from the launcher, else 1).
    #[arg(long, value_name = "NUM", help_heading = "Placement options")]
    pub local_size: Option<usize>,

    /// GPUs given to each task; overrides the shape's `options.gpus-per-task`.
    #[arg(long, value_name = "NUM", help_heading = "Placement options")]
    pub gpus_per_task: Option<usize>,

    /// A Grid Engine request in qsub's words: "-bunit C -bamount 2 -btype host" (OCS 9.1)
    /// or "-binding linear:4" (SGE 6.2u5); overrides the shape's `options.ge`.
    #[arg(
        long,
        value_name = "SWITCHES",
        allow_hyphen_values = true,
        help_heading = "Placement options"
    )]
    pub ge: Option<String>,

    /// Keep these units from every task (`first-core`, `first-core-per-socket`,
    /// `core:0`, `package:1.core:0`, `pu:0-1`); adds to the shape's `options.reserve`.
    #[arg(long, value_name = "ENTRY", help_heading = "Placement options")]
    pub reserve: Vec<String>,

    /// Where to go on a node other jobs use (default fill); overrides `options.pack`.
    #[arg(
        long,
        value_enum,
        value_name = "POLICY",
        help_heading = "Placement options"
    )]
    pub pack: Option<PackArg>,

    /// Take units other jobs hold when too few are free, rather than refuse.
    #[arg(long, help_heading = "Placement options")]
    pub share: bool,

    /// How GPU variables name the task's GPUs; overrides `options.gpu-ids`.
    #[arg(
        long,
        value_enum,
        value_name = "FORM",
        help_heading = "Placement options"
    )]
    pub gpu_ids: Option<GpuIdsArg>,

    /// Use a Grid Engine topology string as the machine, e.g. NSXCCccSXCCCC; lowercase
    /// units are taken by other jobs (dry-run only).
    #[arg(long, value_name = "STRING", help_heading = "Input topology options", conflicts_with_all = ["topology", "synthetic", "input"])]
    pub ge_topology: Option<String>,

    /// Read the topology from an hwloc XML export instead of this host (dry-run only).
    #[arg(long, value_name = "FILE", help_heading = "Input topology options", conflicts_with_all = ["synthetic", "input"])]
    pub topology: Option<PathBuf>,

    /// Use an hwloc synthetic topology, e.g. "pack:2 numa:2 core:8 pu:2" (dry-run only).
    #[arg(
        long,
        value_name = "DESC",
        help_heading = "Input topology options",
        conflicts_with = "input"
    )]
    pub synthetic: Option<String>,

    /// hwloc's spelling: an XML file if one exists at that path, else a synthetic description.
    #[arg(
        short = 'i',
        long,
        value_name = "FILE|DESC",
        help_heading = "Input topology options"
    )]
    pub input: Option<String>,

    /// Dry-run output format (default: text).
    #[arg(long, value_enum, help_heading = "Output options")]
    pub format: Option<FormatArg>,

    /// How the dry-run text form prints cpusets (default: hwloc).
    #[arg(
        long = "cpuset-output-format",
        visible_alias = "cof",
        value_enum,
        value_name = "FORMAT",
        help_heading = "Output options"
    )]
    pub cpuset_output_format: Option<CofArg>,

    /// Dry-run text: print under each rank the variables binder would set (JSON has `env`).
    #[arg(long, help_heading = "Output options")]
    pub show_env: bool,

    /// Print this task's binding on stderr before running it (also BINDER_REPORT=1).
    #[arg(long, help_heading = "Output options")]
    pub report: bool,

    /// Say which launcher and variables gave the task identity, and warn about inherited
    /// bindings narrower than the allowed CPUs.
    #[arg(short, long, help_heading = "Output options")]
    pub verbose: bool,
}

impl Cli {
    /// The launch line every task of every job uses, `binder SHAPE -- COMMAND…`, with at
    /// most `--local-rank N`, `--local-size N` and `--report` besides (wrappers that set
    /// the rank themselves), read without clap: building clap's command costs about 12%
    /// of a warm launch. Returns the [`Cli`] clap would return for that line, and `None`
    /// for anything else (any other flag, a repeated one, a value that is not a number, a
    /// subcommand's name, no `--`), which then goes to clap. A test checks the two agree.
    pub fn parse_launch_line(args: &[OsString]) -> Option<Cli> {
        let line = binder_core::launch::line::LaunchLine::parse(args)?;
        let (local_rank, local_size, report) = (line.local_rank, line.local_size, line.report);
        Some(Cli {
            action: None,
            shape: Some(line.shape),
            command: line.command,
            dry_run: false,
            local_rank,
            local_size,
            gpus_per_task: None,
            ge: None,
            reserve: Vec::new(),
            pack: None,
            share: false,
            gpu_ids: None,
            ge_topology: None,
            topology: None,
            synthetic: None,
            input: None,
            format: None,
            cpuset_output_format: None,
            show_env: false,
            report,
            verbose: false,
        })
    }
}

/// What `--generate` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Generate {
    /// The man page, roff (`docs/man/binder.1`).
    Man,
    /// The shape format's man page, roff (`docs/man/binder-shape.5`).
    ManShape,
    /// bash completions.
    CompleteBash,
    /// zsh completions.
    CompleteZsh,
    /// fish completions.
    CompleteFish,
}

/// Catalog names in bash's completion of a shape argument (clap's completion knows only
/// files): the names binder resolves (`catalog_dirs`: `./shapes`, the catalog installed
/// beside the `binder` on PATH, `/usr/share/binder/shapes`), offered beside files for a
/// plain launch line and `binder explain`, never after `--` (the command's own words).
const BASH_CATALOG: &str = r#"
# Catalog names (`binder cores-packed -- ./app`) beside files, for the shape argument.
_binder_catalog() {
    local dir bin f
    bin=$(command -v binder 2>/dev/null)
    for dir in shapes "${bin%/bin/*}/share/binder/shapes" /usr/share/binder/shapes; do
        [ -d "$dir" ] || continue
        for f in "$dir"/*.yaml; do
            [ -e "$f" ] || continue
            f=${f##*/}
            echo "${f%.yaml}"
        done
    done
}
_binder_with_catalog() {
    _binder "$@"
    local cur=${COMP_WORDS[COMP_CWORD]} w i
    case "$cur" in -*) return ;; esac
    for ((i = 1; i < COMP_CWORD; i++)); do
        w=${COMP_WORDS[i]}
        case "$w" in
        --) return ;;
        schema|topology|node|convert|generate|help) [ "$i" = 1 ] && return ;;
        esac
    done
    COMPREPLY+=($(compgen -W "$(_binder_catalog | sort -u)" -- "$cur"))
}
complete -F _binder_with_catalog -o bashdefault -o default binder
"#;

/// The man page or completion script `what` asks for, generated from the clap definition
/// (committed under `docs/man/` and `completions/`; a test checks they are current).
pub fn generated(what: Generate) -> Vec<u8> {
    use clap::CommandFactory;
    let mut cmd = Cli::command();
    let mut out = Vec::new();
    match what {
        Generate::Man => out = crate::manual::man(cmd).unwrap_or_default(),
        Generate::ManShape => out = crate::shape_man::shape_man(),
        Generate::CompleteBash => {
            clap_complete::generate(clap_complete::Shell::Bash, &mut cmd, "binder", &mut out);
            out.extend_from_slice(BASH_CATALOG.as_bytes());
        }
        Generate::CompleteZsh => {
            clap_complete::generate(clap_complete::Shell::Zsh, &mut cmd, "binder", &mut out)
        }
        Generate::CompleteFish => {
            clap_complete::generate(clap_complete::Shell::Fish, &mut cmd, "binder", &mut out)
        }
    }
    out
}

/// `binder help` and `binder help SUBCOMMAND`, as git and cargo take them: the same as
/// `--help` (a shape named `help` is still a shape where a file of that name exists).
pub fn help_word(mut args: Vec<OsString>) -> Vec<OsString> {
    if args.get(1).is_some_and(|a| a == "help") && !std::path::Path::new("help").exists() {
        args.remove(1);
        args.push("--help".into());
    }
    args
}

/// clap's error as one line, without its usage block and tips: binder prints every
/// refusal as one `binder:` line. clap's tip for a value such as `-1` (`use '-- -1'`) is
/// wrong for binder, where `--` starts the command, so binder gives its own.
pub fn one_line(error: &clap::Error, args: &[OsString]) -> String {
    if let Some(line) = task_count_habit(args) {
        return line;
    }
    let rendered = error.render().to_string();
    let mut lines = rendered.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next().unwrap_or("invalid command line");
    let first = first.strip_prefix("error: ").unwrap_or(first);
    // "the following required arguments were not provided:" lists them on the next lines.
    let first = match first.strip_suffix(':') {
        Some(head) => {
            let listed: Vec<&str> = lines
                .take_while(|l| l.starts_with('<') || l.starts_with("--"))
                .collect();
            format!("{head}: {}", listed.join(" "))
        }
        None => first.to_owned(),
    };
    let negative = first.starts_with("unexpected argument '-")
        && first
            .chars()
            .nth("unexpected argument '-".len())
            .is_some_and(|c| c.is_ascii_digit());
    // `binder shape.yaml ./app`: the command after the shape without `--`.
    let command = first
        .strip_prefix("unexpected argument '")
        .and_then(|rest| rest.split_once('\''))
        .map(|(arg, _)| arg)
        .filter(|arg| !arg.starts_with('-'));
    if negative {
        format!("{first}; numbers must be whole and not negative (`--local-size 2`)")
    } else if let Some(command) = command {
        format!(
            "{first}; put the command after `--`: `binder SHAPE -- {} …`",
            binder_core::text::printable(command, 60)
        )
    } else if let Some(flag) = misspelt_flag(&first) {
        format!("{first}; did you mean `{flag}`? (see `binder --help`)")
    } else if let Some(values) = rendered
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("[possible values:"))
    {
        // An invalid value: clap's list of the possible ones, and its nearest one.
        let near = rendered
            .lines()
            .find_map(|l| l.trim().strip_prefix("tip: a similar value exists: "))
            .map(|v| format!("; did you mean {v}?"))
            .unwrap_or_default();
        format!("{first} {values}{near}")
    } else {
        format!("{first}; see `binder --help`")
    }
}

/// `--dryrun` for `--dry-run`: the nearest long option of binder's, when one is near.
fn misspelt_flag(first: &str) -> Option<String> {
    let given = first
        .strip_prefix("unexpected argument '--")?
        .split(['\'', '='])
        .next()?;
    let cmd = <Cli as clap::CommandFactory>::command();
    let longs: Vec<&str> = cmd.get_arguments().filter_map(|a| a.get_long()).collect();
    binder_core::text::suggestion(given, &longs).map(|l| format!("--{l}"))
}

/// An MPI launcher's habit, `binder -n 4 SHAPE` (`-np 4`): binder's `-n` is `--dry-run`,
/// so clap would take the number for the shape and complain about the real shape as a
/// stray command. Said as what it is, with the option binder takes for a task count.
fn task_count_habit(args: &[OsString]) -> Option<String> {
    let words: Vec<&str> = args.iter().skip(1).map_while(|a| a.to_str()).collect();
    let before_command = words.iter().position(|w| *w == "--").unwrap_or(words.len());
    let words = &words[..before_command];
    let at = words.iter().position(|w| *w == "-n" || *w == "-np")?;
    let count = words.get(at + 1)?;
    let is_count = !count.is_empty() && count.chars().all(|c| c.is_ascii_digit());
    if !is_count || std::path::Path::new(count).exists() {
        return None;
    }
    Some(format!(
        "`{} {count}`: binder's -n is --dry-run and takes no number; the tasks on a node are --local-size: `binder -n --local-size {count} SHAPE`, or launch them with `mpirun -np {count} binder SHAPE -- ./app`",
        words[at]
    ))
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Action {
    /// Print the JSON Schema of the shape format.
    Schema,
    /// Print the node's Grid Engine topology string (NSXYCTT...; lowercase = reserved).
    Topology(TopologyArgs),
    /// Show the jobs bound on this node and its packing metrics (the node ledger).
    Node(NodeArgs),
    /// Explain a plan: the unit's rule, what each request matched or skipped, the dealing.
    Explain(ExplainArgs),
    /// Print the shape for a peer tool's binding options (Open MPI, Slurm, numactl, hwloc-bind).
    Convert(ConvertArgs),
    /// Print the man page or a shell completion script (for packagers).
    #[command(hide = true)]
    Generate {
        /// What to print.
        #[arg(value_enum)]
        what: Generate,
    },
}

/// `binder convert --from PEER -- OPTIONS...`: the shape for a peer tool's line.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  binder convert --from ompi -- --map-by socket:PE=2 --bind-to core\n  binder convert --from slurm -- --hint=nomultithread -c 4\n  binder convert --from numactl -- --cpunodebind=1 --membind=1\n  binder convert --from hwloc-bind -- core:0-3"
)]
pub struct ConvertArgs {
    /// Whose options follow `--`.
    #[arg(long, value_enum)]
    pub from: PeerArg,
    /// The peer's binding options (without the program).
    #[arg(last = true, value_name = "OPTIONS", allow_hyphen_values = true)]
    pub options: Vec<String>,
}

/// The peers `binder convert` reads.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum PeerArg {
    /// Open MPI 4.1's mpirun (ORTE): --map-by, --bind-to, --rank-by, --use-hwthread-cpus.
    Ompi,
    /// Open MPI 5's mpirun (PRRTE 3): --map-by OBJ:PE=n:HWTCPUS, --bind-to, --rank-by fill|span.
    Ompi5,
    /// MPICH's mpiexec (Hydra): -bind-to OBJ, OBJ:N or user:LIST, -map-by OBJ.
    Mpich,
    /// Intel MPI: I_MPI_PIN_DOMAIN=core|socket|N, I_MPI_PIN_ORDER, I_MPI_PIN_PROCESSOR_LIST (NAME=VALUE words).
    Impi,
    /// Slurm's srun/sbatch: --cpu-bind, --distribution, -c, --hint, --ntasks-per-*.
    Slurm,
    /// numactl: --cpunodebind, --membind, --interleave, --localalloc, --preferred.
    Numactl,
    /// hwloc-bind: LOCATION... (core:0-3, socket:1, numa:0), --membind.
    HwlocBind,
    /// torchrun: --numa-binding node|socket|exclusive|core-complex, --nproc-per-node.
    Torchrun,
}

/// `binder convert`'s answer: the shape on stdout and its notes as `#` lines after it,
/// or one line saying why not.
pub fn converted(args: &ConvertArgs) -> Result<String, String> {
    use binder_plan::convert::{convert, Peer};
    let peer = match args.from {
        PeerArg::Ompi => Peer::Ompi,
        PeerArg::Ompi5 => Peer::Ompi5,
        PeerArg::Mpich => Peer::Mpich,
        PeerArg::Impi => Peer::Impi,
        PeerArg::Slurm => Peer::Slurm,
        PeerArg::Numactl => Peer::Numactl,
        PeerArg::HwlocBind => Peer::HwlocBind,
        PeerArg::Torchrun => Peer::Torchrun,
    };
    // A plain `srun` (no option after `--`) is a line Slurm binds by its own rule: it
    // converts (#64). Every other peer needs its options, and the example is its own.
    if args.options.is_empty() && peer != Peer::Slurm {
        let example = match peer {
            Peer::Ompi => "--from ompi -- --map-by socket --bind-to core",
            Peer::Ompi5 => "--from ompi5 -- --map-by package --bind-to core",
            Peer::Mpich => "--from mpich -- -bind-to core -map-by socket",
            Peer::Impi => "--from impi -- I_MPI_PIN_DOMAIN=core I_MPI_PIN_ORDER=scatter",
            Peer::Numactl => "--from numactl -- --cpunodebind=0 --membind=0",
            Peer::HwlocBind => "--from hwloc-bind -- socket:1",
            Peer::Torchrun => "--from torchrun -- --nproc-per-node 4 --numa-binding node",
            Peer::Slurm => "--from slurm -- --cpu-bind=cores",
        };
        return Err(format!(
            "convert: give the options after `--`, e.g. `binder convert {example}`"
        ));
    }
    let got = convert(peer, &args.options).map_err(|e| format!("convert: {e}"))?;
    let mut out = got.shape;
    for note in got.notes {
        out.push_str(&format!("# note: {note}\n"));
    }
    Ok(out)
}

/// Where `binder topology` reads the machine from (this host by default).
#[derive(Debug, clap::Args)]
pub struct TopologyArgs {
    /// An hwloc XML export.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["synthetic", "ge_topology"])]
    pub topology: Option<PathBuf>,
    /// An hwloc synthetic description.
    #[arg(long, value_name = "DESC", conflicts_with = "ge_topology")]
    pub synthetic: Option<String>,
    /// A Grid Engine topology string (rewritten in binder's product form).
    #[arg(long, value_name = "STRING")]
    pub ge_topology: Option<String>,
    /// Units to show reserved (`first-core`, `core:0`, ...), besides the site's.
    #[arg(long, value_name = "ENTRY")]
    pub reserve: Vec<String>,
}

/// `binder explain` options: the dry-run's placement, topology and size flags, which mean
/// the same here.
#[derive(Debug, clap::Args)]
pub struct ExplainArgs {
    /// The shape file (optional with --ge).
    #[arg(value_name = "SHAPE", required_unless_present = "ge")]
    pub shape: Option<PathBuf>,
    /// Show only this task's placement in the plan (default: every task).
    #[arg(long, value_name = "RANK")]
    pub local_rank: Option<usize>,
    /// Number of tasks on this node (default: from the launcher, else 1).
    #[arg(long, value_name = "NUM")]
    pub local_size: Option<usize>,
    /// GPUs given to each task; overrides the shape's `options.gpus-per-task`.
    #[arg(long, value_name = "NUM")]
    pub gpus_per_task: Option<usize>,
    /// A Grid Engine request in qsub's words; overrides the shape's `options.ge`.
    #[arg(long, value_name = "SWITCHES", allow_hyphen_values = true)]
    pub ge: Option<String>,
    /// Keep these units from every task; adds to the shape's `options.reserve`.
    #[arg(long, value_name = "ENTRY")]
    pub reserve: Vec<String>,
    /// Where to go on a node other jobs use; overrides `options.pack`.
    #[arg(long, value_enum, value_name = "POLICY")]
    pub pack: Option<PackArg>,
    /// Take units other jobs hold when too few are free, rather than refuse.
    #[arg(long)]
    pub share: bool,
    /// An hwloc XML export instead of this host.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["synthetic", "input", "ge_topology"])]
    pub topology: Option<PathBuf>,
    /// An hwloc synthetic description.
    #[arg(long, value_name = "DESC", conflicts_with_all = ["input", "ge_topology"])]
    pub synthetic: Option<String>,
    /// hwloc's spelling: an XML file if one exists at that path, else a synthetic description.
    #[arg(
        short = 'i',
        long,
        value_name = "FILE|DESC",
        conflicts_with = "ge_topology"
    )]
    pub input: Option<String>,
    /// A Grid Engine topology string as the machine.
    #[arg(long, value_name = "STRING")]
    pub ge_topology: Option<String>,
}

/// `binder node` options.
#[derive(Debug, clap::Args)]
pub struct NodeArgs {
    /// Output format (default: text).
    #[arg(long, value_enum)]
    pub format: Option<NodeFormatArg>,
}

/// `binder node --format` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum NodeFormatArg {
    /// Tables for people.
    Text,
    /// One JSON object.
    Json,
}

/// `--gpu-ids` values (SEMANTICS §9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GpuIdsArg {
    /// Each runtime's own index (CUDA, Level Zero: PCI order; ROCm: its own).
    Index,
    /// GPU-UUID strings (from hwloc's NVIDIAUUID/AMDUUID), where the topology has them.
    Uuid,
}

/// `--pack` values (SEMANTICS §13).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PackArg {
    /// Freest containers first (OCS -bsort S).
    Spread,
    /// Partly used containers first (OCS -bsort s).
    Fill,
    /// Whole free containers only, kept from other jobs (OCS -bstart S -bstop S).
    Exclusive,
}

/// `--format` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FormatArg {
    /// Aligned lines for people.
    Text,
    /// One JSON object per rank per line.
    Json,
    /// The pe_hostfile fourth column of a Grid Engine request (`0,0:0,1`).
    Pe,
    /// An Open MPI rankfile for the node's tasks.
    Rankfile,
    /// The node drawn in the terminal, each PU labelled with its rank.
    Map,
    /// The node as an lstopo-like SVG picture, ranks coloured.
    Svg,
}

/// `--cpuset-output-format` values (hwloc's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CofArg {
    /// hwloc bitmap string, 0x0000000f,,0x00000001.
    Hwloc,
    /// Range list, 0-3,64.
    List,
    /// taskset hex, 0x1000000000000000f.
    Taskset,
}

#[cfg(test)]
mod tests;
