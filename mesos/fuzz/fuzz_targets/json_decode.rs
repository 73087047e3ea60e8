//! Json decoding of every top-level message: an error or a message that
//! re-encodes; never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mesos::codec::Codec;
use mesos::proto::{executor, scheduler};

const CODEC: Codec = Codec::Json;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = CODEC.decode::<scheduler::Call>(data) {
        CODEC.encode(&m);
    }
    if let Ok(m) = CODEC.decode::<scheduler::Event>(data) {
        CODEC.encode(&m);
    }
    if let Ok(m) = CODEC.decode::<executor::Call>(data) {
        CODEC.encode(&m);
    }
    if let Ok(m) = CODEC.decode::<executor::Event>(data) {
        CODEC.encode(&m);
    }
});
