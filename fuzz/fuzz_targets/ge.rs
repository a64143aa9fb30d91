//! Fuzzes the Grid Engine codec (SEMANTICS §12) with arbitrary text: a topology string
//! (`NSXCCccSXCCCC`, `(S(C(T)(T)))`) and a request in qsub's words. Neither may panic,
//! recurse without bound or take long (the script runs this target with a 2 s timeout
//! and 256 MiB); every refusal is one line; a string that parses prints back as one that
//! parses to the same threads, taken ones included.
#![no_main]

use binder_plan::ge::{Request, Tree};
use libfuzzer_sys::fuzz_target;

fn one_line(message: &str) {
    let line = binder_core::text::diag_line(message);
    assert_eq!(line.matches('\n').count(), 1, "{line}");
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Tree::parse(text) {
        Ok(tree) => {
            let printed = tree.occupancy_string();
            let again = Tree::parse(&printed).expect("a printed topology string parses");
            let used = |t: &Tree| -> Vec<bool> {
                t.nodes
                    .iter()
                    .filter(|n| n.letter == binder_plan::ge::Letter::T)
                    .map(|n| n.used)
                    .collect()
            };
            assert_eq!(used(&again), used(&tree), "{text} printed as {printed}");
        }
        Err(e) => one_line(&e.to_string()),
    }
    if let Err(e) = Request::parse(text) {
        one_line(&e.to_string());
    }
});
