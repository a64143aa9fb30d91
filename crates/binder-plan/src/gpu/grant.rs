//! Which GPUs a job may have (SEMANTICS §9, last bullet): those its allocation grants,
//! as the allowed cpuset does for CPUs, less those another live job holds (§13).
//!
//! The allocation is what the environment the job inherited says: each vendor's
//! allocation variables (first one set; its row of `binder_core::vendor::VENDORS`:
//! `CUDA_VISIBLE_DEVICES` for NVIDIA, `ROCR_VISIBLE_DEVICES`, `HIP_VISIBLE_DEVICES`,
//! `GPU_DEVICE_ORDINAL` for AMD, `ZE_AFFINITY_MASK` for Intel), and for any vendor the
//! scheduler's (`SLURM_STEP_GPUS`, else `SLURM_JOB_GPUS`: Slurm's GPU indices).
//!
//! A vendor whose variable is set may use the GPUs it lists and no other; one whose
//! variable is unset may use all of its GPUs, or those Slurm lists when Slurm's variable
//! is set. When both are set with as many entries, Slurm's give the physical GPU and the
//! vendor's how the runtime names it (Slurm with constrained devices exports
//! `CUDA_VISIBLE_DEVICES=0,1` for physical GPUs 2 and 3). A task's variable lists the
//! entries it was given, written as inherited: never renumbered, never a GPU outside them.
//!
//! Slurm may give each task only some of the step's GPUs (`--gpus-per-task`,
//! `--gpu-bind=single:N`, `map_gpu`): the task then inherits its own GPUs in every
//! variable, and only `SLURM_GPUS_ON_NODE` still says how many the step has here. Those
//! are the job's GPUs (SEMANTICS §9, GPUs per task): `SLURM_JOB_GPUS` when it lists that
//! many (a step inside `sbatch`; Slurm 22.05's `salloc` exports none), else every GPU of
//! the node when it has that
//! many; binder plans within them and writes each task's devices as Slurm numbers them
//! (physical indices, or positions in the step's list where constrained devices renumber).
//! Where neither says which GPUs they are, the host asks the scheduler for the job's GPUs
//! here once, when it plans ([`Grant::wants_job_gpus`], [`Grant::place_split`]: `scontrol
//! show job -d`), and takes them when they are as many; else the grant is empty and the
//! refusal says so.

use super::mig::{self, MigListing};
use super::model::Gpu;
use super::Vendor;

use binder_core::driver::DriverView;
use binder_core::identity::Launcher;
use binder_core::vendor::{SCHEDULER_GPU_COUNT, SCHEDULER_GPU_VARS, VENDORS};

/// Why no UUID could be had, as both refusals that need one say it.
const NO_UUID: &str = "hwloc has none (no NVML backend) and neither /proc/driver/nvidia/gpus nor `nvidia-smi` gave one";

/// The most entries read from one variable; the longest entry kept.
const MAX_ENTRIES: usize = 1024;
const MAX_ENTRY: usize = 128;

/// The GPUs a job may have.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grant {
    /// Per vendor (in `binder_core::vendor::VENDORS` order), the inherited entries,
    /// when set.
    lists: [Option<Vec<String>>; VENDORS.len()],
    /// Slurm's GPU indices, when set.
    slurm: Option<Vec<String>>,
    /// Each variable that set an allocation, as `NAME=value` (clipped), for messages.
    said: Vec<String>,
    /// PCI bus ids another job holds.
    held: Vec<String>,
    /// PCI bus ids other users' claims name: left out unless the allocation names them
    /// (SEMANTICS §13.2: another user's GPU claim never touches the job's own GPUs).
    steer: Vec<String>,
    /// `gpu-ids: uuid`: name a GPU the allocation did not name by `GPU-<uuid>`.
    uuid: bool,
    /// Where the inherited MIG instances lie (`nvidia-smi -L`), once the host was asked
    /// (empty when the driver gave nothing): the listing is asked for at most once.
    mig: Option<MigListing>,
    /// The step's GPU count here when Slurm gave this task only some of them and no
    /// variable names the step's (see the module doc): the grant must come to that
    /// many, or it is empty, unless the scheduler is asked ([`Grant::place_split`]).
    split: Option<usize>,
    /// What asking the scheduler for the job's GPUs needs, while `split` is unresolved.
    ask: Option<Ask>,
    /// How many GPUs `SLURM_JOB_GPUS` lists, when it is set but is not the step's (a step
    /// given some of a batch job's GPUs): the refusal's advice differs there.
    job_listed: Option<usize>,
    /// Whether the job is Flux's, whose `gpu-affinity=per-task` leaves each task only its
    /// own GPUs and says so nowhere a task can read cheaply: the refusal names it.
    flux: bool,
    /// Per vendor, the container runtime's variable (`NVIDIA_VISIBLE_DEVICES`), when it
    /// names GPUs: `Some(empty)` for `none`/`void`, `None` unset or `all`.
    container: [Option<Vec<String>>; VENDORS.len()],
    /// Whether a container variable is set at all (`all` too): the device files present
    /// then say which GPUs the task can open.
    in_container: bool,
    /// What the drivers said (UUIDs, the GPUs this process can open), once the host was
    /// asked ([`Grant::wants_driver`]).
    driver: Option<DriverView>,
}

/// What a split grant needs to adopt the job's GPUs once the scheduler names them.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Ask {
    /// The job and this node, as `scontrol` takes them.
    job: String,
    node: String,
    /// Whether the task's vendor entries are positions in the step's list (constrained
    /// devices), and which vendors' lists were set.
    renumbered: bool,
    vendors: [bool; VENDORS.len()],
    /// Whether the scheduler was asked (and what it said, for the refusal).
    answer: Option<Option<usize>>,
}

/// The task's vendor lists once the step's `k` GPUs are known (`known`): with
/// constrained devices (`renumbered`) each set list is the positions `0..k` in the
/// step's list; else they go, and Slurm's indices name the GPUs. Unknown: they go too
/// (they name the task's own GPUs, not the job's).
fn adopt(
    lists: &mut [Option<Vec<String>>; VENDORS.len()],
    vendors: [bool; VENDORS.len()],
    renumbered: bool,
    k: usize,
    known: bool,
) {
    for (list, set) in lists.iter_mut().zip(vendors) {
        if set {
            *list = (renumbered && known).then(|| (0..k).map(|i| i.to_string()).collect());
        }
    }
}

/// A batch job's step that Slurm gave `k` of the job's GPUs here (`srun --gpus-per-task`
/// inside `sbatch --gpus=N`, N > k), seen from the task of local rank `rank` that holds
/// `own` of them: no variable names the step's GPUs, but Slurm takes a step's GPUs from
/// the job's free ones in index order and deals them to the tasks in rank order, `own.len()`
/// each. So the step's are the `k` consecutive entries of the job's list (`job`, in
/// Slurm's index order) in which this task's own sit at its rank's place; `None` when its
/// own are not consecutive there or the window would leave the list (`--gpu-bind=map_gpu`
/// dealing out of order, a step whose GPUs another step's fragmented): the refusal stands.
/// Every task of a step that got consecutive GPUs finds the same window, so their plans
/// agree (docs/SEMANTICS.md §9, GPUs per task).
fn step_around(job: &[String], own: &[String], rank: usize, k: usize) -> Option<Vec<String>> {
    let first = job.iter().position(|e| Some(e) == own.first())?;
    let start = first.checked_sub(rank.checked_mul(own.len())?)?;
    let end = start.checked_add(k)?;
    let window = job.get(start..end)?;
    (first + own.len() <= end && job.get(first..first + own.len())? == own).then(|| window.to_vec())
}

/// A variable's entries: comma separated, blanks dropped; `NoDevFiles` (what CUDA and
/// Slurm write for "none") is the empty list.
fn entries(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty() && *e != "NoDevFiles")
        .take(MAX_ENTRIES)
        .map(|e| e.chars().take(MAX_ENTRY).collect())
        .collect()
}

impl Grant {
    /// Every GPU of the node (no allocation named, nothing held).
    pub const EVERY: Grant = Grant {
        lists: [const { None }; VENDORS.len()],
        slurm: None,
        said: Vec::new(),
        held: Vec::new(),
        steer: Vec::new(),
        uuid: false,
        mig: None,
        split: None,
        ask: None,
        job_listed: None,
        flux: false,
        container: [const { None }; VENDORS.len()],
        in_container: false,
        driver: None,
    };

    /// The allocation the environment `get` describes (nothing held yet).
    pub fn from_env(get: &dyn Fn(&str) -> Option<String>) -> Grant {
        let mut said = Vec::new();
        let mut first = |names: &[&str]| {
            let (name, value) = names.iter().find_map(|n| get(n).map(|v| (*n, v)))?;
            said.push(format!(
                "{name}={}",
                binder_core::text::printable(&value, binder_core::text::QUOTE_MAX)
            ));
            Some(entries(&value))
        };
        let mut lists = VENDORS.each_ref().map(|row| first(row.allocation));
        let mut slurm = first(&SCHEDULER_GPU_VARS);
        let count = binder_core::vendor::task_split(get).filter(|&k| k <= MAX_ENTRIES);
        let step = get(SCHEDULER_GPU_VARS[0]).map(|v| entries(&v));
        let (mut split, mut ask, mut job_listed) = (None, None, None);
        if let (Some(k), Some(task)) = (count, step) {
            // This task's GPUs, not the step's: the step's are the job's if Slurm
            // lists them, else (`split`) every GPU of a node that has `k`.
            said.push(format!("{SCHEDULER_GPU_COUNT}={k}"));
            let listed = get(SCHEDULER_GPU_VARS[1]).map(|v| entries(&v));
            job_listed = listed.as_ref().map(Vec::len).filter(|&n| n != k);
            let local = get(Launcher::Slurm.row().local_rank).and_then(|r| r.trim().parse().ok());
            let job = match listed {
                Some(j) if j.len() == k => Some(j),
                Some(j) => local
                    .and_then(|r| step_around(&j, &task, r, k))
                    .inspect(|s| {
                    said.push(format!(
                        "the step's GPUs taken as {} (the {k} of SLURM_JOB_GPUS in order around this task's own)",
                        s.join(",")
                    ));
                    }),
                _ => None,
            };
            // Constrained devices renumber: the task's vendor entries are then
            // positions in the step's list, not its physical indices.
            let renumbered = lists
                .iter()
                .flatten()
                .any(|l| l.len() == task.len() && l.iter().zip(&task).any(|(a, b)| a != b));
            let vendors = lists.each_ref().map(Option::is_some);
            adopt(&mut lists, vendors, renumbered, k, job.is_some());
            split = job.is_none().then_some(k);
            slurm = job;
            if let (true, [Some(job), Some(node)]) = (
                split.is_some(),
                binder_core::scheduler::SLURM_JOB_VARS.map(get),
            ) {
                ask = Some(Ask {
                    job,
                    node,
                    renumbered,
                    vendors,
                    answer: None,
                });
            }
        }
        Grant {
            lists,
            slurm,
            said,
            held: Vec::new(),
            steer: Vec::new(),
            uuid: false,
            mig: None,
            split,
            ask,
            job_listed,
            flux: get("FLUX_JOB_ID").is_some(),
            container: VENDORS.each_ref().map(|row| {
                let value = get(row.container?)?;
                match value.trim() {
                    "all" => None,
                    "none" | "void" | "" => Some(Vec::new()),
                    list => Some(entries(list)),
                }
            }),
            in_container: VENDORS
                .iter()
                .any(|row| row.container.and_then(get).is_some()),
            driver: None,
        }
    }

    /// Whether planning needs what the drivers say ([`Grant::place_driver`]): an entry
    /// names a GPU by UUID, `gpu-ids: uuid` asks for UUIDs, or a container variable says
    /// which GPUs the container has (its device files say which it can open).
    pub fn wants_driver(&self) -> bool {
        self.driver.is_none()
            && (self.uuid
                || self.in_container
                || self
                    .lists
                    .iter()
                    .flatten()
                    .flatten()
                    .any(|e| e.starts_with("GPU-")))
    }

    /// The same grant with what the drivers say, which `read` gives (the host's
    /// `binder_core::driver::read`); called only when [`Grant::wants_driver`] says so.
    pub fn place_driver(mut self, read: impl FnOnce() -> DriverView) -> Grant {
        if self.wants_driver() {
            self.driver = Some(read());
        }
        self
    }

    /// Whether the job's allocation names `vendor`'s GPUs (its variable or Slurm's is
    /// set): those it names are its own wherever they lie; without one, a job has the GPUs
    /// near its CPUs.
    pub fn names(&self, vendor: Vendor) -> bool {
        self.lists[vendor as usize].is_some() || self.slurm.is_some()
    }

    /// The node's GPUs this process can use, numbered as its runtime numbers them: a
    /// container's (its variable, the device files present) renumbered from 0 in PCI
    /// order, with the driver's UUID where hwloc has none. What [`Grant::misnamed`] and
    /// [`Grant::apply`] take (taken once per plan).
    pub fn visible(&self, all: Vec<Gpu>) -> Vec<Gpu> {
        let mut out: Vec<Gpu> = all
            .into_iter()
            .map(|mut g| {
                if g.uuid.is_none() {
                    g.uuid = self
                        .driver
                        .as_ref()
                        .and_then(|d| d.uuid(&g.busid))
                        .map(str::to_owned);
                }
                g
            })
            .collect();
        let before = out.len();
        out.retain(|g| {
            let listed = self.container[g.vendor as usize]
                .as_ref()
                .is_none_or(|list| {
                    list.iter()
                        .any(|e| index_of(e) == Some(g.node_index) || uuid_prefix(e, g))
                });
            let openable = g.vendor != Vendor::Nvidia
                || self
                    .driver
                    .as_ref()
                    .and_then(|d| d.nvidia_openable(&g.busid))
                    .unwrap_or(true);
            listed && openable
        });
        if out.len() < before {
            // CUDA numbers the GPUs it can open, in PCI order (CUDA_DEVICE_ORDER).
            for (next, g) in out
                .iter_mut()
                .filter(|g| g.vendor == Vendor::Nvidia)
                .enumerate()
            {
                g.vendor_index = next;
            }
        }
        out
    }

    /// Why the allocation's entries cannot be read as GPUs of this node, where a `GPU-`
    /// entry names none of the `visible` GPUs ([`Grant::visible`]) or more than one (CUDA
    /// takes a unique prefix): one line naming the entry and what the node's GPUs are
    /// called, else `None`.
    pub fn misnamed(&self, visible: &[Gpu]) -> Option<String> {
        for (row, list) in VENDORS.iter().zip(&self.lists) {
            let mine: Vec<&Gpu> = visible.iter().filter(|g| g.vendor == row.vendor).collect();
            for entry in list.iter().flatten().filter(|e| e.starts_with("GPU-")) {
                let found: Vec<&&Gpu> = mine.iter().filter(|g| uuid_prefix(entry, g)).collect();
                let var = row
                    .allocation
                    .iter()
                    .find(|v| self.said.iter().any(|s| s.starts_with(&format!("{v}="))))
                    .copied()
                    .unwrap_or(row.allocation[0]);
                let entry = binder_core::text::printable(entry, binder_core::text::QUOTE_MAX);
                let known: Vec<String> = mine
                    .iter()
                    .filter_map(|g| g.uuid.as_ref().map(|u| format!("{} at {}", u, g.busid)))
                    .collect();
                if found.len() > 1 {
                    let matching: Vec<String> = found
                        .iter()
                        .map(|g| format!("{} at {}", g.uuid.as_deref().unwrap_or(""), g.busid))
                        .collect();
                    return Some(format!(
                        "{var} names {entry}, a prefix of {} GPUs' UUIDs ({}): give more of the UUID",
                        found.len(),
                        matching.join(", ")
                    ));
                }
                if found.is_empty() {
                    let what = if known.is_empty() {
                        format!(
                            "binder could read no UUID of this node's {} {} GPU(s): {NO_UUID}; name GPUs by index",
                            mine.len(),
                            row.name,
                        )
                    } else {
                        format!("this node's are {}", known.join(", "))
                    };
                    return Some(format!(
                        "{var} names {entry}, which no GPU of this node has: {what}"
                    ));
                }
            }
        }
        None
    }

    /// Under `gpu-ids: uuid`, the GPUs of `kept` that would be named by index for want of
    /// a UUID (hwloc's or the driver's): one line saying so, else `None`.
    pub fn uuid_missing(&self, kept: &[Gpu]) -> Option<String> {
        if !self.uuid {
            return None;
        }
        let missing: Vec<&str> = kept
            .iter()
            .filter(|g| g.uuid.is_none() && !g.export.starts_with("GPU-") && !g.is_mig())
            .map(|g| g.busid.as_str())
            .collect();
        (!missing.is_empty()).then(|| {
            format!(
                "`gpu-ids: uuid` asks for UUIDs, but binder could read none for GPU(s) {}: {NO_UUID}; use `gpu-ids: index`",
                missing.join(", "),
            )
        })
    }

    /// Whether the inherited list names MIG instances whose GPU only the driver's listing
    /// can tell (`MIG-<uuid>`): the host then reads `nvidia-smi -L` ([`Grant::place_mig`]).
    pub fn wants_mig_listing(&self) -> bool {
        self.mig.is_none()
            && self.lists[Vendor::Nvidia as usize]
                .iter()
                .flatten()
                .any(|e| mig::is_mig(e) && mig::named_parent(e).is_none())
    }

    /// The same grant placing MIG instances by the driver's listing, which `read` gives
    /// (the host's `binder_core::vendor::nvidia_listing`); called only when the inherited
    /// list needs it (see [`Grant::wants_mig_listing`]).
    pub fn place_mig(mut self, read: impl FnOnce() -> Option<String>) -> Grant {
        if self.wants_mig_listing() {
            self.mig = Some(read().map_or_else(MigListing::default, |t| MigListing::parse(&t)));
        }
        self
    }

    /// The job and node to ask the scheduler about, where Slurm gave this task only some
    /// of the step's GPUs and no variable names the step's (see [`Grant::place_split`]).
    pub fn wants_job_gpus(&self) -> Option<(&str, &str)> {
        self.ask
            .as_ref()
            .filter(|a| a.answer.is_none())
            .map(|a| (a.job.as_str(), a.node.as_str()))
    }

    /// The same grant with the step's GPUs the scheduler names: `read` gives the job's
    /// GPUs on this node (the host's `binder_core::scheduler::slurm_job_gpus`), which
    /// are the step's when they are as many (a step that made its own allocation, as
    /// `srun -n2 --gpus-per-task=1` outside `sbatch` does). Called only when
    /// [`Grant::wants_job_gpus`] says so; asked at most once.
    pub fn place_split(mut self, read: impl FnOnce(&str, &str) -> Option<String>) -> Grant {
        let (Some(k), Some(ask)) = (self.split, self.ask.as_mut()) else {
            return self;
        };
        if ask.answer.is_some() {
            return self;
        }
        let job = read(&ask.job, &ask.node).map(|t| entries(&t));
        ask.answer = Some(job.as_ref().map(Vec::len));
        if let Some(job) = job.filter(|j| j.len() == k) {
            let (vendors, renumbered) = (ask.vendors, ask.renumbered);
            adopt(&mut self.lists, vendors, renumbered, k, true);
            self.said.push(format!(
                "scontrol show job: the job's GPUs here {}",
                job.join(",")
            ));
            self.slurm = Some(job);
            self.split = None;
        }
        self
    }

    /// The same grant, naming GPUs by `GPU-<uuid>` where hwloc knows it (`gpu-ids: uuid`);
    /// an inherited entry is still passed on as written.
    pub fn by_uuid(mut self, uuid: bool) -> Grant {
        self.uuid = uuid;
        self
    }

    /// The same grant less the GPUs (bus ids) other jobs hold.
    pub fn holding(mut self, held: Vec<String>) -> Grant {
        self.held = held;
        self
    }

    /// The same grant steering clear of the GPUs (bus ids) other users claim, where the
    /// job's allocation does not name GPUs of that vendor itself.
    pub fn steering(mut self, steer: Vec<String>) -> Grant {
        self.steer = steer;
        self
    }

    /// The GPUs of `all` (the node's GPUs this process can use, [`Grant::visible`], in PCI
    /// order) this job may have, each with the name its runtime variable will use; their
    /// `index` is their position in what is returned, their `number` stays the node's.
    pub fn apply(&self, all: Vec<Gpu>) -> Vec<Gpu> {
        if self.split.is_some_and(|k| k != all.len()) {
            return Vec::new();
        }
        let mut used: Vec<Vec<bool>> = self
            .lists
            .iter()
            .map(|l| vec![false; l.as_ref().map_or(0, Vec::len)])
            .collect();
        // Each MIG entry's parent, by position in its vendor's list.
        let parents: Vec<Vec<Option<usize>>> = self
            .lists
            .iter()
            .map(|l| {
                l.iter()
                    .flatten()
                    .map(|e| mig::is_mig(e).then(|| self.mig_parent(e, &all)).flatten())
                    .collect()
            })
            .collect();
        let mut out = Vec::new();
        for mut gpu in all {
            let v = gpu.vendor as usize;
            // MIG instances on this GPU, each its own device with the GPU's locality.
            if let Some(list) = &self.lists[v] {
                for (k, entry) in list.iter().enumerate() {
                    if used[v][k] || parents[v][k] != Some(gpu.number) {
                        continue;
                    }
                    used[v][k] = true;
                    let mut instance = gpu.clone();
                    instance.export = entry.clone();
                    if self.held.contains(&instance.claim_id()) {
                        continue;
                    }
                    instance.index = out.len();
                    out.push(instance);
                }
            }
            if self.held.contains(&gpu.busid) {
                continue;
            }
            let allocated = self.lists[v].is_some() || self.slurm.is_some();
            if !allocated && self.steer.contains(&gpu.busid) {
                continue;
            }
            let export = match &self.lists[v] {
                Some(list) => {
                    let found = (0..list.len()).find(|&k| {
                        !used[v][k]
                            && !mig::is_mig(&list[k])
                            && self.matches(&list[k], k, list.len(), &gpu)
                    });
                    found.map(|k| {
                        used[v][k] = true;
                        list[k].clone()
                    })
                }
                None => match &self.slurm {
                    Some(slurm) => slurm
                        .iter()
                        .any(|e| index_of(e) == Some(gpu.node_index))
                        .then(|| self.own_name(&gpu)),
                    None => Some(self.own_name(&gpu)),
                },
            };
            if let Some(export) = export {
                gpu.export = export;
                gpu.index = out.len();
                out.push(gpu);
            }
        }
        out
    }

    /// The node's GPU (its number) the MIG instance `entry` lies on, if binder can tell
    /// (see [`super::mig`]). A UUID is matched where some GPU of the node has it; a listing
    /// whose UUIDs hwloc does not know (an XML exported elsewhere, anonymised) falls back to
    /// the listing's index, which is PCI order among NVIDIA GPUs like binder's.
    fn mig_parent(&self, entry: &str, all: &[Gpu]) -> Option<usize> {
        let nvidia: Vec<&Gpu> = all.iter().filter(|g| g.vendor == Vendor::Nvidia).collect();
        let by_uuid = |uuid: &str| {
            nvidia
                .iter()
                .find(|g| {
                    g.uuid
                        .as_deref()
                        .is_some_and(|u| u.eq_ignore_ascii_case(uuid))
                })
                .map(|g| g.number)
        };
        let only = || (nvidia.len() == 1).then(|| nvidia[0].number);
        if let Some(parent) = mig::named_parent(entry) {
            return by_uuid(parent).or_else(only);
        }
        match self.mig.as_ref().and_then(|m| m.parent(entry)) {
            Some((index, uuid)) => by_uuid(uuid).or_else(|| {
                nvidia
                    .iter()
                    .find(|g| g.vendor_index == index)
                    .map(|g| g.number)
            }),
            None => only(),
        }
    }

    /// The inherited MIG entries none of `kept` is: their GPU is unknown or held.
    fn unplaced_mig(&self, kept: &[Gpu]) -> Vec<String> {
        self.lists[Vendor::Nvidia as usize]
            .iter()
            .flatten()
            .filter(|e| mig::is_mig(e) && !kept.iter().any(|g| &g.export == *e))
            .map(|e| binder_core::text::printable(e, binder_core::text::QUOTE_MAX))
            .collect()
    }

    /// Why the job has `kept` of the node's `all` GPUs, when fewer (`for this job (4 in
    /// all; its allocation says CUDA_VISIBLE_DEVICES=-1); …`): what its allocation said,
    /// whether other jobs hold some, and how to ask the launcher for GPUs. Said in a refusal
    /// instead of "the topology has no GPUs" when the node has them (a Flux job run without
    /// `-g` inherits `CUDA_VISIBLE_DEVICES=-1`).
    pub fn why_fewer(&self, all: usize, kept: &[Gpu]) -> Option<String> {
        let unplaced = self.unplaced_mig(kept);
        if kept.len() >= all && unplaced.is_empty() {
            return None;
        }
        let mut why = Vec::new();
        if !self.said.is_empty() {
            why.push(format!("its allocation says {}", self.said.join(", ")));
        }
        if !self.held.is_empty() || !self.steer.is_empty() {
            why.push("other jobs hold some".to_owned());
        }
        if !unplaced.is_empty() {
            why.push(format!(
                "MIG instance(s) {} lie on no GPU binder can tell: `nvidia-smi -L` does not list them, or another job holds them",
                unplaced.join(", ")
            ));
        }
        why.insert(0, format!("{all} in all"));
        let mut text = format!("for this job ({})", why.join("; "));
        if let Some(k) = self.split {
            let asked = match self.ask.as_ref().and_then(|a| a.answer) {
                Some(Some(n)) => format!(
                    "; `scontrol show job -d` gives the job {n} GPU(s) here, so which {k} are the step's is unknown"
                ),
                Some(None) => "; `scontrol show job -d` did not say which".to_owned(),
                None => String::new(),
            };
            match self.job_listed {
                // Inside a batch job whose GPUs are more than the step's: the advice to run
                // the step in one would send the user round in a circle.
                Some(n) => text.push_str(&format!(
                    "; Slurm gave each task only some of the step's {k} GPU(s) here, and this batch job has {n} (SLURM_JOB_GPUS), so which {k} are the step's is unknown: give the step all the job's GPUs (`srun --gpus={n}` without `--gpus-per-task`), or let the plugin bind it (`srun --binder=SHAPE`), which reads the step's GPUs"
                )),
                None => text.push_str(&format!(
                    "; Slurm gave each task only some of the step's {k} GPU(s) here and names the step's only inside an `sbatch` job with `--gpus` (SLURM_JOB_GPUS; not in `salloc` on Slurm 22.05){asked}: run the step there, give the step all the job's GPUs, or let the plugin bind it (`srun --binder=SHAPE`), which reads the step's GPUs"
                )),
            }
        } else if self.said.iter().any(|s| s.ends_with("=-1")) {
            text.push_str(
                "; Flux exports -1 to a job that asked for no GPUs: add `-g N` (`--gpus-per-task`) to `flux run`",
            );
        } else if self.flux && !self.said.is_empty() {
            text.push_str("; with `-o gpu-affinity=per-task` each task sees only its own GPUs: keep gpu-affinity on (Flux's default) for the wrapper, or bind with the plugin (`-o binder=SHAPE`), which reads R; else ask for more GPUs (`flux run -g`)");
        } else if !self.said.is_empty() {
            text.push_str("; ask the launcher for GPUs (`srun --gpus-per-task`, `flux run -g`)");
        }
        Some(text)
    }

    /// The name of a GPU no inherited entry names: `GPU-<uuid>` under `gpu-ids: uuid`
    /// where hwloc knows it, else the runtime's index.
    fn own_name(&self, gpu: &Gpu) -> String {
        match &gpu.uuid {
            Some(uuid) if self.uuid => uuid.clone(),
            _ => gpu.vendor_index.to_string(),
        }
    }

    /// Whether entry `k` of a vendor list of `len` entries names `gpu`.
    fn matches(&self, entry: &str, k: usize, len: usize, gpu: &Gpu) -> bool {
        if entry.starts_with("GPU-") {
            // A unique prefix, as CUDA takes it ([`Grant::misnamed`] refuses the others).
            return uuid_prefix(entry, gpu);
        }
        // Slurm's list, as long as the vendor's, names the node's GPUs; the vendor's own
        // entries are the runtime's indices.
        match &self.slurm {
            Some(slurm) if slurm.len() == len => {
                slurm.get(k).and_then(|e| index_of(e)) == Some(gpu.node_index)
            }
            _ => index_of(entry) == Some(gpu.vendor_index),
        }
    }
}

/// Whether `entry` (`GPU-…`) is a prefix of `gpu`'s UUID, case aside, as CUDA reads a
/// `CUDA_VISIBLE_DEVICES` entry.
fn uuid_prefix(entry: &str, gpu: &Gpu) -> bool {
    let Some(prefix) = entry.strip_prefix("GPU-") else {
        return false;
    };
    gpu.uuid
        .as_deref()
        .and_then(|u| u.strip_prefix("GPU-"))
        .and_then(|u| u.get(..prefix.len()))
        .is_some_and(|head| head.eq_ignore_ascii_case(prefix))
}

/// The device index of an entry: `3`, or Level Zero's `3.1` (sub-device 1 of device 3).
fn index_of(entry: &str) -> Option<usize> {
    entry.split('.').next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpuset::CpuSet;
    use crate::gpu::Vendor;

    fn gpu(number: usize, vendor: Vendor, vendor_index: usize) -> Gpu {
        Gpu {
            index: number,
            number,
            vendor_index,
            node_index: vendor_index,
            busid: format!("0000:{number:02x}:00.0"),
            vendor,
            model: "m".into(),
            os_name: None,
            uuid: Some(format!("GPU-{number}{number}{number}{number}-aaaa")),
            export: vendor_index.to_string(),
            locality: CpuSet::new(),
            attached_to: "machine:0".into(),
        }
    }

    fn four() -> Vec<Gpu> {
        (0..4).map(|n| gpu(n, Vendor::Nvidia, n)).collect()
    }

    fn grant(vars: &[(&str, &str)]) -> Grant {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Grant::from_env(&|k| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()))
    }

    fn kept(g: &Grant, all: Vec<Gpu>) -> Vec<(usize, usize, String)> {
        g.apply(all)
            .into_iter()
            .map(|g| (g.index, g.number, g.export))
            .collect()
    }

    #[test]
    fn nothing_set_keeps_every_gpu() {
        assert_eq!(kept(&grant(&[]), four()).len(), 4);
    }

    #[test]
    fn an_inherited_list_restricts_and_keeps_its_own_words() {
        let g = grant(&[("CUDA_VISIBLE_DEVICES", "2,3")]);
        assert_eq!(
            kept(&g, four()),
            [(0, 2, "2".to_owned()), (1, 3, "3".to_owned())]
        );
        let g = grant(&[("CUDA_VISIBLE_DEVICES", "GPU-3333,GPU-1111-aaaa")]);
        assert_eq!(
            kept(&g, four()),
            [
                (0, 1, "GPU-1111-aaaa".to_owned()),
                (1, 3, "GPU-3333".to_owned())
            ]
        );
        // Empty, or CUDA's "none": no NVIDIA GPU at all.
        assert!(kept(&grant(&[("CUDA_VISIBLE_DEVICES", "")]), four()).is_empty());
        assert!(kept(&grant(&[("CUDA_VISIBLE_DEVICES", "NoDevFiles")]), four()).is_empty());
        // An entry naming no GPU of the node names none.
        assert_eq!(
            kept(&grant(&[("CUDA_VISIBLE_DEVICES", "7,1")]), four()).len(),
            1
        );
    }

    #[test]
    fn slurm_names_the_physical_gpus() {
        // Constrained devices: Slurm gives physical 2,3 and CUDA sees them as 0,1.
        let g = grant(&[("SLURM_STEP_GPUS", "2,3"), ("CUDA_VISIBLE_DEVICES", "0,1")]);
        assert_eq!(
            kept(&g, four()),
            [(0, 2, "0".to_owned()), (1, 3, "1".to_owned())]
        );
        // Slurm alone.
        let g = grant(&[("SLURM_JOB_GPUS", "1")]);
        assert_eq!(kept(&g, four()), [(0, 1, "1".to_owned())]);
    }

    #[test]
    fn a_task_given_some_of_the_steps_gpus_plans_with_the_steps() {
        // What `srun --gpus-per-task=1 -n2` gives task 1 on a node of 4 (Slurm 22.05):
        // its own GPU in every variable, the step's count beside them.
        let task1 = [
            ("CUDA_VISIBLE_DEVICES", "1"),
            ("GPU_DEVICE_ORDINAL", "1"),
            ("SLURM_STEP_GPUS", "1"),
            ("SLURM_GPUS_ON_NODE", "2"),
        ];
        // Inside a batch job of GPUs 1 and 3: the step's are those, physical indices.
        let mut in_batch = task1.to_vec();
        in_batch.push(("SLURM_JOB_GPUS", "1,3"));
        assert_eq!(
            kept(&grant(&in_batch), four()),
            [(0, 1, "1".to_owned()), (1, 3, "3".to_owned())]
        );
        // Constrained devices: task 1 (physical 3) sees its GPU as position 1.
        let renumbered = [
            ("CUDA_VISIBLE_DEVICES", "1"),
            ("SLURM_STEP_GPUS", "3"),
            ("SLURM_GPUS_ON_NODE", "2"),
            ("SLURM_JOB_GPUS", "1,3"),
        ];
        assert_eq!(
            kept(&grant(&renumbered), four()),
            [(0, 1, "0".to_owned()), (1, 3, "1".to_owned())]
        );
        // A batch job of 4 whose step has 2 (`sbatch --gpus=4`, `srun -n2
        // --gpus-per-task=1`): the 2 consecutive job GPUs with this task's own at its
        // rank's place, the same window from either task.
        for (rank, own, step) in [("0", "0", [0, 1]), ("1", "1", [0, 1]), ("1", "3", [2, 3])] {
            let env = [
                ("CUDA_VISIBLE_DEVICES", own),
                ("SLURM_STEP_GPUS", own),
                ("SLURM_GPUS_ON_NODE", "2"),
                ("SLURM_JOB_GPUS", "0,1,2,3"),
                ("SLURM_LOCALID", rank),
            ];
            let got: Vec<usize> = kept(&grant(&env), four()).iter().map(|g| g.1).collect();
            assert_eq!(got, step, "rank {rank} holding {own}");
        }
        // Dealt out of order (`map_gpu:1,0`): rank 1 holds GPU 0, which no window has at
        // its place, so the refusal stands, with the batch job's advice.
        let env = [
            ("SLURM_STEP_GPUS", "0"),
            ("SLURM_GPUS_ON_NODE", "2"),
            ("SLURM_JOB_GPUS", "0,1,2,3"),
            ("SLURM_LOCALID", "1"),
        ];
        let g = grant(&env);
        let none = g.apply(four());
        assert!(none.is_empty());
        assert!(g.why_fewer(4, &none).unwrap().contains("srun --gpus=4"));
        assert_eq!(step_around(&entries("0,1,2,3"), &entries("3"), 2, 2), None);
        assert_eq!(step_around(&entries("0,1,2,3"), &entries("9"), 0, 2), None);
        // Outside one: the step's 2 GPUs are the node's on a node of 2, unknown on 4.
        let g = grant(&task1);
        assert_eq!(kept(&g, four()[..2].to_vec()).len(), 2);
        let none = g.apply(four());
        assert!(none.is_empty());
        let why = g.why_fewer(4, &none).unwrap();
        assert!(why.contains("SLURM_GPUS_ON_NODE=2"), "{why}");
        assert!(why.contains("--binder=SHAPE"), "{why}");
        assert!(!why.contains("--gpus-per-task"), "{why}");
        // Outside one, the scheduler asked (`scontrol show job -d`), once: the job's GPUs
        // here are the step's when they are as many.
        let mut asking = task1.to_vec();
        asking.extend([("SLURM_JOB_ID", "12"), ("SLURMD_NODENAME", "vm")]);
        let g = grant(&asking);
        assert_eq!(g.wants_job_gpus(), Some(("12", "vm")));
        assert!(
            grant(&task1).wants_job_gpus().is_none(),
            "nothing to ask with"
        );
        let asked = g.clone().place_split(|job, node| {
            assert_eq!((job, node), ("12", "vm"));
            Some("1,3".into())
        });
        assert!(asked.wants_job_gpus().is_none());
        assert_eq!(
            kept(&asked, four()),
            [(0, 1, "1".to_owned()), (1, 3, "3".to_owned())]
        );
        let again = asked.place_split(|_, _| panic!("scontrol asked twice"));
        assert_eq!(kept(&again, four()).len(), 2);
        // Constrained devices: positions in the step's list, as in a batch job.
        let mut renumbered_asking = renumbered[..3].to_vec();
        renumbered_asking.extend([("SLURM_JOB_ID", "12"), ("SLURMD_NODENAME", "vm")]);
        let r = grant(&renumbered_asking).place_split(|_, _| Some("1,3".into()));
        assert_eq!(
            kept(&r, four()),
            [(0, 1, "0".to_owned()), (1, 3, "1".to_owned())]
        );
        // A job with more GPUs here than the step (a step of `salloc --gpus=4`), or no
        // answer: still unknown, and the refusal says what scontrol said.
        for (answer, said) in [
            (Some("0-3"), "gives the job 4 GPU(s) here"),
            (None, "did not say which"),
        ] {
            let g = g.clone().place_split(|_, _| {
                answer.map(|a| entries(&a.replace("0-3", "0,1,2,3")).join(","))
            });
            let none = g.apply(four());
            assert!(none.is_empty());
            let why = g.why_fewer(4, &none).unwrap();
            assert!(why.contains(said), "{why}");
        }
        // Flux's per-task GPU affinity: said, with the way out.
        let g = grant(&[("CUDA_VISIBLE_DEVICES", "1"), ("FLUX_JOB_ID", "f1")]);
        let why = g.why_fewer(4, &g.apply(four())).unwrap();
        assert!(why.contains("gpu-affinity=per-task"), "{why}");
        // The step's own list (the SPANK plugin reads it before the tasks' split): as is.
        let step = [("SLURM_STEP_GPUS", "0,2"), ("SLURM_GPUS_ON_NODE", "2")];
        assert_eq!(
            kept(&grant(&step), four()),
            [(0, 0, "0".to_owned()), (1, 2, "2".to_owned())]
        );
    }

    #[test]
    fn other_vendors_and_held_gpus() {
        let mut all = four();
        all.push(gpu(4, Vendor::Amd, 0));
        all.push(gpu(5, Vendor::Intel, 0));
        // CUDA's list says nothing of AMD and Intel.
        let g = grant(&[("CUDA_VISIBLE_DEVICES", "0")]);
        assert_eq!(kept(&g, all.clone()).len(), 3);
        let g = grant(&[("ZE_AFFINITY_MASK", "0.1"), ("ROCR_VISIBLE_DEVICES", "")]);
        let k = kept(&g, all.clone());
        assert_eq!(k.len(), 5);
        assert_eq!(k[4], (4, 5, "0.1".to_owned()));
        // Held by another job: gone, whatever the allocation says.
        let g = grant(&[("CUDA_VISIBLE_DEVICES", "2,3")]).holding(vec!["0000:02:00.0".into()]);
        assert_eq!(kept(&g, four()), [(0, 3, "3".to_owned())]);
    }

    #[test]
    fn other_users_claims_steer_only_outside_the_allocation() {
        // GPUs 0 and 2 look claimed by another user.
        let steer = vec!["0000:00:00.0".to_owned(), "0000:02:00.0".to_owned()];
        // No allocation: steered clear of.
        let g = grant(&[]).steering(steer.clone());
        let numbers: Vec<usize> = kept(&g, four()).iter().map(|k| k.1).collect();
        assert_eq!(numbers, [1, 3]);
        // Slurm gave this job 2 and 3: both stay, whatever another user claims.
        let g = grant(&[("CUDA_VISIBLE_DEVICES", "2,3")]).steering(steer.clone());
        assert_eq!(
            kept(&g, four()),
            [(0, 2, "2".to_owned()), (1, 3, "3".to_owned())]
        );
        let g = grant(&[("SLURM_STEP_GPUS", "2,3")]).steering(steer);
        assert_eq!(kept(&g, four()).len(), 2);
    }

    /// NVIDIA MIG instances (issue 36): each inherited `MIG-…` entry is a device of its
    /// own on its parent GPU (same number, bus id and locality), passed on as written;
    /// the parent comes from the old-form entry, the driver's listing, or a one-GPU node.
    #[test]
    fn mig_instances_lie_on_their_parent() {
        let ids = |g: &Grant, all: Vec<Gpu>| -> Vec<(usize, String, String)> {
            g.apply(all)
                .into_iter()
                .map(|g| (g.number, g.export.clone(), g.claim_id()))
                .collect()
        };
        // One NVIDIA GPU: both instances are on it, with claims of their own.
        let g = grant(&[("CUDA_VISIBLE_DEVICES", "MIG-aaaa,MIG-bbbb")]);
        let one = vec![gpu(0, Vendor::Nvidia, 0)];
        assert_eq!(
            ids(&g, one.clone()),
            [
                (0, "MIG-aaaa".into(), "0000:00:00.0/MIG-aaaa".into()),
                (0, "MIG-bbbb".into(), "0000:00:00.0/MIG-bbbb".into())
            ]
        );
        // Another job holds one instance: the other stays.
        let held = g.clone().holding(vec!["0000:00:00.0/MIG-aaaa".into()]);
        assert_eq!(ids(&held, one).len(), 1);
        // Four GPUs: the old form names its parent's UUID (GPU 2's is GPU-2222-aaaa).
        let g = grant(&[("CUDA_VISIBLE_DEVICES", "MIG-GPU-2222-aaaa/1/0")]);
        assert_eq!(ids(&g, four())[0].0, 2);
        assert!(!g.wants_mig_listing());
        // The new form needs the driver's listing; without it nothing is guessed.
        let g = grant(&[("CUDA_VISIBLE_DEVICES", "MIG-cccc,MIG-dddd")]);
        assert!(g.wants_mig_listing());
        assert!(ids(&g, four()).is_empty());
        let note = g.why_fewer(4, &[]).expect("said");
        assert!(
            note.contains("MIG instance(s) MIG-cccc, MIG-dddd lie on no GPU"),
            "{note}"
        );
        // GPU 3 by its UUID; GPU 1 by its index where hwloc knows no UUID.
        let listing = "GPU 1: X (UUID: GPU-1-not-hwlocs)\n  MIG 1g Device 0: (UUID: MIG-dddd)\n\
                       GPU 3: X (UUID: GPU-3333-aaaa)\n  MIG 1g Device 0: (UUID: MIG-cccc)\n";
        // A driver that answered nothing is not asked again either.
        assert!(!g.clone().place_mig(|| None).wants_mig_listing());
        let g = g.place_mig(|| Some(listing.to_owned()));
        // Asked once: a second planning pass (the ledger's) does not run the driver again.
        assert!(!g.wants_mig_listing());
        let g = g.place_mig(|| panic!("nvidia-smi asked twice"));
        let mut all = four();
        all[1].uuid = None;
        let got = ids(&g, all);
        assert_eq!(
            got.iter()
                .map(|(n, e, _)| (*n, e.as_str()))
                .collect::<Vec<_>>(),
            [(1, "MIG-dddd"), (3, "MIG-cccc")]
        );
        assert!(
            g.why_fewer(4, &g.apply(four())).is_some(),
            "MIG-dddd is not on GPU 1 with its UUID"
        );
    }
}
