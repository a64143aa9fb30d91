//! binder: from a YAML shape to every local task's cpuset.
//!
//! A one-way pipeline, one module per stage: `shape` → `topology` → `unit` → `select` →
//! `distribute` → `report`. Launching (bind + exec) is the next stage to land.
#![warn(missing_docs)]

pub mod cli;
pub mod distribute;
pub mod error;
pub mod exit_code;
pub mod gpu;
pub mod report;
pub mod select;
pub mod shape;
pub mod topology;
pub mod unit;

use std::io::Write;

pub use error::Error;

use cli::{Action, Cli, CofArg, FormatArg};
use distribute::{Locality, Request};
use shape::{Bind, Shape};
use topology::Source;

/// Plans `shape` for `local_size` tasks on the topology from `source`.
pub fn plan(
    shape: &Shape,
    origin: &str,
    source: &Source,
    local_size: usize,
    gpus_per_task: Option<usize>,
) -> Result<distribute::Plan, Error> {
    let io = shape.needs_gpus() || gpus_per_task.is_some();
    let topology = topology::load(source, io)?;
    let gpus = if io {
        gpu::discover(&topology)
    } else {
        Vec::new()
    };
    let unit = unit::choose(shape);
    let selection = select::select(&topology, &gpus, &shape.resources, origin)?;
    let locality = match shape.options.bind {
        Some(Bind::GpuLocal) => Locality::GpuLocal,
        Some(Bind::GpuRemote) => Locality::GpuRemote,
        _ => Locality::Any,
    };
    let request = Request {
        unit,
        pattern: shape.pattern(),
        reverse: shape.reverse(),
        local_size,
        gpus_per_task: gpus_per_task.or(shape.options.gpus_per_task.map(|g| g.get() as usize)),
        locality,
    };
    Ok(distribute::distribute(
        &topology, &selection, gpus, &request, origin,
    )?)
}

/// Runs the command line, writing reports to `out`.
pub fn run(cli: Cli, out: &mut impl Write) -> Result<(), Error> {
    if let Some(Action::Schema) = cli.action {
        return out
            .write_all(shape::schema_json().as_bytes())
            .map_err(Error::Output);
    }
    let path = cli
        .shape
        .clone()
        .ok_or_else(|| Error::Usage("a SHAPE file is required".into()))?;
    if !cli.dry_run {
        return Err(Error::Usage(
            "only --dry-run is implemented so far; add --dry-run".into(),
        ));
    }
    let source = match (&cli.topology, &cli.synthetic, &cli.input) {
        (Some(f), _, _) => Source::Xml(f.clone()),
        (_, Some(d), _) => Source::Synthetic(d.clone()),
        (_, _, Some(i)) if std::path::Path::new(i).is_file() => Source::Xml(i.into()),
        (_, _, Some(i)) => Source::Synthetic(i.clone()),
        _ => Source::Host,
    };
    let origin = path.display().to_string();
    let shape = Shape::from_file(&path)?;
    let size = cli.local_size.unwrap_or(1);
    if size == 0 {
        return Err(Error::Usage("--local-size must be at least 1".into()));
    }
    let plan = plan(&shape, &origin, &source, size, cli.gpus_per_task)?;
    let ranks = match cli.local_rank {
        Some(r) if r >= size => {
            return Err(Error::Usage(format!(
                "--local-rank {r} is not below --local-size {size}"
            )))
        }
        Some(r) => Some(vec![r]),
        None => None,
    };
    let format = match cli.format {
        FormatArg::Text => report::Format::Text,
        FormatArg::Json => report::Format::Json,
    };
    let cof = match cli.cpuset_output_format {
        CofArg::Hwloc => report::CpusetFormat::Hwloc,
        CofArg::List => report::CpusetFormat::List,
        CofArg::Taskset => report::CpusetFormat::Taskset,
    };
    let header = format!("binder --dry-run {origin} on {source}");
    report::render(&plan, ranks.as_deref(), format, cof, &header, out).map_err(Error::Output)
}
