//! binder against users who do not play fair (SEMANTICS §13.1-§13.3): throwaway users
//! alice and bob run honest jobs while mallory attacks (`attacks.rs`, scenarios in
//! `hostile.sh`).
//!
//! Each scenario runs in a PID namespace of its own with its own `/proc`, so bound tasks
//! of other users elsewhere on the machine are not part of it. And a test binary of its
//! own: cargo runs test binaries one after another, so no other test's launch meets the
//! hostile users' bound tasks. Every launch counts every user's
//! bound tasks (§13.3), so the launcher tests' expected CPUs would otherwise depend on
//! which attack happened to run beside them.
mod attacks;
#[path = "../common/mod.rs"]
mod common;
