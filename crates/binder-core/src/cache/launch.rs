//! The node cache as a launch uses it: open it and key this launch, look up, store, each
//! decision said on stderr under `BINDER_CACHE_TRACE=1`. Every launcher goes through
//! these, so that the `binder` executable, `binder-full` and the SPANK plugin key a plan
//! alike.

use std::io::Write;

use super::{Cache, Key};
use crate::text::emit;
use crate::view::{Packing, TaskView};

/// A cache and this launch's key in it.
pub(crate) type Keyed = (Cache, Key);

/// Whether `BINDER_CACHE_TRACE=1` (or another on word) asks for the cache's decisions on stderr.
pub(crate) fn tracing(env: &dyn Fn(&str) -> Option<String>) -> bool {
    crate::settings::cache_trace(env) == Ok(true)
}

/// The node cache and this launch's key (`text` from [`crate::launch::line::JobKey`]),
/// or `None` when the cache is off or cannot key this host.
pub fn open(
    env: &dyn Fn(&str) -> Option<String>,
    text: &str,
    size: usize,
    gpus_per_task: Option<usize>,
    err: &mut impl Write,
) -> Option<Keyed> {
    Cache::open(env)
        .and_then(|c| Ok((c, Key::for_host(text, size, gpus_per_task)?)))
        .map_err(|why| {
            if tracing(env) {
                emit(err, &format!("cache off: {why}"));
            }
        })
        .ok()
}

/// The cached views for the key and the shape's packing policy, if any.
pub fn lookup(
    (c, key): &Keyed,
    env: &dyn Fn(&str) -> Option<String>,
    err: &mut impl Write,
) -> Option<(Vec<TaskView>, Packing)> {
    let found = c.lookup(key);
    if tracing(env) {
        match &found {
            Ok(_) => emit(err, &format!("cache hit: {}", c.dir().display())),
            Err(why) => emit(err, &format!("cache miss: {why}")),
        }
    }
    found.ok()
}

/// Stores a fresh plan's views.
pub fn store(
    (c, key): &Keyed,
    views: Vec<TaskView>,
    pack: Packing,
    env: &dyn Fn(&str) -> Option<String>,
    err: &mut impl Write,
) {
    let stored = c.store(key, views, pack);
    if tracing(env) {
        let what = stored.map_or_else(|e| e, |()| c.dir().display().to_string());
        emit(err, &format!("cache store: {what}"));
    }
}
