//! Fuzzes the shape parser with arbitrary bytes: it must never panic, every refusal must
//! be one line naming the origin, and every shape it accepts must survive serialize then
//! parse unchanged (SEMANTICS §1).
#![no_main]

use binder_plan::shape::Shape;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Shape::from_yaml(text, "f.yaml") {
        Ok(shape) => {
            let again = yaml_serde::to_string(&shape).expect("a parsed shape serializes");
            let back = Shape::from_yaml(&again, "again.yaml").expect("a serialized shape parses");
            assert_eq!(back, shape, "round trip changed the shape");
        }
        Err(e) => {
            let message = e.to_string();
            assert!(message.starts_with("f.yaml"), "{message}");
            let line = binder_core::text::diag_line(&message);
            assert_eq!(line.matches('\n').count(), 1, "{line}");
            assert!(line.chars().count() <= binder_core::text::MAX_LINE + 12, "{line}");
        }
    }
});
