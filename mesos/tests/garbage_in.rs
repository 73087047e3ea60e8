//! Random and mutated bytes through RecordIO and both decoders: errors, never panics.
//! (The same targets run unbounded under `mesos/fuzz`.)
#![allow(clippy::unwrap_used, missing_docs)]

mod fixtures;

use mesos::codec::Codec;
use mesos::proto::{executor as ex, scheduler as sc};
use mesos::recordio::{self, Decoder};
use proptest::prelude::*;

/// Decodes `bytes` as each top-level message in `codec`; a message that does
/// decode must re-encode.
fn decode_all(codec: Codec, bytes: &[u8]) {
    if let Ok(m) = codec.decode::<sc::Call>(bytes) {
        codec.encode(&m);
    }
    if let Ok(m) = codec.decode::<sc::Event>(bytes) {
        codec.encode(&m);
    }
    if let Ok(m) = codec.decode::<ex::Call>(bytes) {
        codec.encode(&m);
    }
    if let Ok(m) = codec.decode::<ex::Event>(bytes) {
        codec.encode(&m);
    }
}

/// Feeds `bytes` to a small-limit decoder in `chunk`-sized pieces and checks
/// that what it yields is bounded and consistent.
fn recordio_all(bytes: &[u8], chunk: usize) {
    const MAX: usize = 1024;
    let mut d = Decoder::new(MAX);
    let mut total = 0;
    for piece in bytes.chunks(chunk.max(1)) {
        d.push(piece);
        loop {
            match d.next_record() {
                Ok(Some(r)) => {
                    assert!(!r.is_empty() && r.len() <= MAX);
                    total += r.len();
                }
                Ok(None) => break,
                Err(_) => return,
            }
        }
    }
    assert!(total <= bytes.len());
    let _ = d.finish();
}

/// Valid encodings of every message, in both codecs, as RecordIO too.
fn seeds() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for codec in [Codec::Protobuf, Codec::Json] {
        out.extend(fixtures::scheduler_calls().iter().map(|m| codec.encode(m)));
        out.extend(fixtures::scheduler_events().iter().map(|m| codec.encode(m)));
        out.extend(fixtures::executor_calls().iter().map(|m| codec.encode(m)));
        out.extend(fixtures::executor_events().iter().map(|m| codec.encode(m)));
    }
    let framed: Vec<Vec<u8>> = out.iter().map(|m| recordio::encode(m)).collect();
    out.extend(framed);
    out
}

/// A seed with a few bytes overwritten, inserted or cut.
fn mutated() -> impl Strategy<Value = Vec<u8>> {
    let seeds = seeds();
    (
        0..seeds.len(),
        prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..8),
    )
        .prop_map(move |(i, edits)| {
            let mut bytes = seeds[i].clone();
            for (at, byte, kind) in edits {
                if bytes.is_empty() {
                    bytes.push(byte);
                    continue;
                }
                let at = at.index(bytes.len());
                match kind {
                    0 => bytes[at] = byte,
                    1 => bytes.insert(at, byte),
                    _ => bytes.truncate(at),
                }
            }
            bytes
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..600), chunk in 1usize..64) {
        recordio_all(&bytes, chunk);
        decode_all(Codec::Protobuf, &bytes);
        decode_all(Codec::Json, &bytes);
    }

    #[test]
    fn mutated_valid_messages_never_panic(bytes in mutated(), chunk in 1usize..64) {
        recordio_all(&bytes, chunk);
        decode_all(Codec::Protobuf, &bytes);
        decode_all(Codec::Json, &bytes);
    }

    #[test]
    fn digit_heavy_input_never_panics_recordio(
        bytes in prop::collection::vec(prop_oneof![Just(b'\n'), b'0'..=b'9', any::<u8>()], 0..200),
        chunk in 1usize..16,
    ) {
        recordio_all(&bytes, chunk);
    }
}

#[test]
fn the_seeds_themselves_decode() {
    // Guards the mutation test: it starts from inputs that reach deep paths.
    for bytes in seeds().iter().take(5) {
        assert!(Codec::Protobuf.decode::<sc::Call>(bytes).is_ok());
    }
}
