//! RecordIO: any bytes, split into chunks at fuzzer-chosen points, give
//! records no longer than the limit or a typed error; never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mesos::recordio::Decoder;

const MAX: usize = 4096;

fuzz_target!(|data: &[u8]| {
    // The first byte picks the chunk size, so chunk boundaries are fuzzed too.
    let Some((&chunk, rest)) = data.split_first() else {
        return;
    };
    let mut decoder = Decoder::new(MAX);
    let mut total = 0;
    for piece in rest.chunks(usize::from(chunk).max(1)) {
        decoder.push(piece);
        loop {
            match decoder.next_record() {
                Ok(Some(record)) => {
                    assert!(!record.is_empty() && record.len() <= MAX);
                    total += record.len();
                }
                Ok(None) => break,
                Err(_) => return,
            }
        }
    }
    assert!(total <= rest.len());
    let _ = decoder.finish();
});
