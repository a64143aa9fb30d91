//! The ledger key kept in the kernel's user keyring (`keyrings(7)`), for a user without a
//! home to keep it in (SEMANTICS §13.3): HOME unset, read-only or not this user's.
//!
//! The user keyring belongs to the user's UID on this node (its user namespace) and
//! outlives their processes until reboot; no other user can find or read a key in it.
//! A key added there is readable by every process of the user (`KEY_USR_READ`, set
//! explicitly: a login's own session keyring does not possess the user keyring, and a
//! key's default permissions let only a possessor read it). Where the keyring cannot be
//! used (a container whose seccomp profile refuses `keyctl`), there is no key, and the
//! caller falls back to its bounded search.
//!
//! Two first launches at the same moment may each add a key before either reads one
//! back (`add_key` replaces the payload of a key of the same name): each then uses its
//! own directory for a while, as in a fallback directory, and every later launch reads
//! the last key. The user's own bound tasks count from the kernel's view either way.

/// The key's type and description in the user keyring.
const TYPE: &std::ffi::CStr = c"user";
const DESCRIPTION: &std::ffi::CStr = c"binder-ledger-key";
/// `KEY_SPEC_USER_KEYRING`, and the `keyctl` operations used (`linux/keyctl.h`).
const USER_KEYRING: libc::c_long = -4;
const KEYCTL_SETPERM: libc::c_long = 5;
const KEYCTL_SEARCH: libc::c_long = 10;
const KEYCTL_READ: libc::c_long = 11;
/// Possessor: view, read, write, search, link, setattr; the user (every process of
/// this UID): view, read, search. Nobody else anything.
const PERM: libc::c_long = 0x3f0b_0000;
/// The key's length: 128 random bits, in hex.
const LEN: usize = 32;

/// This user's ledger key from the user keyring, made there on first need; `None` where
/// the keyring cannot be used.
pub(crate) fn key() -> Option<String> {
    if let Some(found) = read() {
        return Some(found);
    }
    let key = super::fsio::random_hex::<{ LEN / 2 }>()?;
    // SAFETY: add_key(2) with NUL-terminated type and description, a payload pointer and
    // its length; the kernel copies the payload and keeps no pointer.
    let id = unsafe {
        libc::syscall(
            libc::SYS_add_key,
            TYPE.as_ptr(),
            DESCRIPTION.as_ptr(),
            key.as_ptr(),
            key.len(),
            USER_KEYRING,
        )
    };
    if id < 0 {
        return None;
    }
    // SAFETY: keyctl(KEYCTL_SETPERM, id, perm) takes integers only.
    let _ = unsafe { libc::syscall(libc::SYS_keyctl, KEYCTL_SETPERM, id, PERM) };
    // Read back: a launch that added at the same moment may have replaced it.
    read()
}

/// The key, when the user keyring holds a well-formed one this process may read.
fn read() -> Option<String> {
    // SAFETY: keyctl(KEYCTL_SEARCH, keyring, type, description, 0) with NUL-terminated
    // strings; the kernel reads them and keeps no pointer.
    let id = unsafe {
        libc::syscall(
            libc::SYS_keyctl,
            KEYCTL_SEARCH,
            USER_KEYRING,
            TYPE.as_ptr(),
            DESCRIPTION.as_ptr(),
            0 as libc::c_long,
        )
    };
    if id < 0 {
        return None;
    }
    let mut buf = [0u8; LEN + 1];
    // SAFETY: keyctl(KEYCTL_READ, id, buffer, length) writes at most `length` bytes into
    // the buffer, which lives across the call; it returns the payload's full length.
    let n = unsafe {
        libc::syscall(
            libc::SYS_keyctl,
            KEYCTL_READ,
            id,
            buf.as_mut_ptr(),
            buf.len(),
        )
    };
    if n != LEN as libc::c_long {
        return None;
    }
    let text = std::str::from_utf8(&buf[..LEN]).ok()?;
    text.bytes()
        .all(|b| b.is_ascii_hexdigit())
        .then(|| text.to_owned())
}

#[cfg(test)]
mod tests {
    /// Where the keyring can be used, the key is made once and read back the same; the
    /// test runs as whoever runs the suite, so it leaves that user's key in place (the
    /// key binder itself would make on first need).
    #[test]
    fn the_key_is_made_once_and_read_back() {
        let Some(first) = super::key() else {
            // A kernel facility, not a tool: a container's seccomp profile may refuse it.
            eprintln!("SKIPPED: the user keyring cannot be used here (keyctl refused)");
            return;
        };
        assert_eq!(first.len(), super::LEN);
        assert_eq!(super::key().as_deref(), Some(first.as_str()));
        assert_eq!(super::read().as_deref(), Some(first.as_str()));
    }
}
