//! The shape stage's error type.

/// The largest shape file read (binder-core's, so the warm path reads the same).
pub use binder_core::input::MAX_SHAPE_BYTES;

/// A shape file that cannot be read or does not follow the format.
#[derive(Debug, thiserror::Error)]
pub enum ShapeError {
    /// The file could not be read.
    #[error("cannot read shape file `{path}`: {reason}")]
    Read {
        /// The path as given.
        path: String,
        /// Why reading failed, and what to do.
        reason: String,
    },
    /// The text is not a valid shape.
    #[error("{origin}:{} {message}", location.map_or_else(String::new, |(l, c)| format!("{l}:{c}:")))]
    Invalid {
        /// The file name (or `<string>`).
        origin: String,
        /// Line and column (1-based), when the YAML parser knows them.
        location: Option<(usize, usize)>,
        /// What is wrong and how to fix it.
        message: String,
    },
}
