//! The --resources / --attributes parsers: an error or a value whose text
//! form parses back to itself; never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mesos::resources::{Resources, attribute_text, parse_attributes};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // The text form drops reservation details the JSON form can carry, so
    // only flag-syntax input must survive the trip.
    let json = text.trim_start().starts_with('[');
    if !json && let Ok(resources) = Resources::parse(text) {
        let again = Resources::parse(&resources.to_string());
        assert_eq!(again.ok(), Some(resources));
    }
    if let Ok(attrs) = parse_attributes(text) {
        for a in &attrs {
            let _ = attribute_text(a);
        }
    }
});
