//! Codec and RecordIO throughput on the messages that dominate a busy
//! scheduler's stream: OFFERS events.
//!
//! Run: `CARGO_TARGET_DIR=/work/targets/mesos cargo bench -p mesos --bench codec -- --warm-up-time 1 --measurement-time 3`
#![allow(missing_docs, clippy::unwrap_used)]

#[path = "../tests/fixtures/mod.rs"]
mod fixtures;

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use mesos::codec::Codec;
use mesos::proto::scheduler::Event;
use mesos::recordio::{self, DEFAULT_MAX_RECORD_LEN, Decoder};

/// A typical HTTP chunk as hyper hands it over.
const CHUNK: usize = 16 * 1024;

fn offers_event(c: &mut Criterion) {
    let event = fixtures::offers_event(100);
    let mut group = c.benchmark_group("offers_event_100");
    for codec in [Codec::Protobuf, Codec::Json] {
        let bytes = codec.encode(&event);
        let name = format!("{codec:?}").to_lowercase();
        group.throughput(Throughput::Bytes(bytes.len() as u64));
        group.bench_function(format!("{name}_encode"), |b| {
            b.iter(|| codec.encode(black_box(&event)))
        });
        group.bench_function(format!("{name}_decode"), |b| {
            b.iter(|| codec.decode::<Event>(black_box(&bytes)).unwrap())
        });
        group.bench_function(format!("{name}_roundtrip"), |b| {
            b.iter(|| {
                codec
                    .decode::<Event>(&codec.encode(black_box(&event)))
                    .unwrap()
            })
        });
    }
    group.finish();
}

/// Feeds `wire` in [`CHUNK`]-sized pieces and drains every record.
fn decode_chunks(wire: &[u8]) -> usize {
    let mut decoder = Decoder::new(DEFAULT_MAX_RECORD_LEN);
    let mut n = 0;
    for piece in wire.chunks(CHUNK) {
        decoder.push(piece);
        while let Some(record) = decoder.next_record().unwrap() {
            n += record.len();
        }
    }
    n
}

fn recordio_decode(c: &mut Criterion) {
    let mut group = c.benchmark_group("recordio_decode");
    // Large records: 20 protobuf OFFERS events of 100 offers each.
    let offers = Codec::Protobuf.encode(&fixtures::offers_event(100));
    let mut large = Vec::new();
    for _ in 0..20 {
        recordio::encode_into(&mut large, &offers);
    }
    // Small records: JSON HEARTBEATs and UPDATEs, as an idle stream carries.
    let mut small = Vec::new();
    let events = fixtures::scheduler_events();
    while small.len() < large.len() / 4 {
        for e in [&events[8], &events[4]] {
            recordio::encode_into(&mut small, &Codec::Json.encode(e));
        }
    }
    for (name, wire) in [("large_records", &large), ("small_records", &small)] {
        group.throughput(Throughput::Bytes(wire.len() as u64));
        group.bench_function(name, |b| b.iter(|| decode_chunks(black_box(wire))));
    }
    group.finish();
}

criterion_group!(benches, offers_event, recordio_decode);
criterion_main!(benches);
