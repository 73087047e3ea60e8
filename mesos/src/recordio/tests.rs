#![allow(clippy::unwrap_used)]

use super::*;

fn decode_all(decoder: &mut Decoder) -> Result<Vec<Vec<u8>>, RecordIoError> {
    let mut out = Vec::new();
    while let Some(r) = decoder.next_record()? {
        out.push(r.to_vec());
    }
    Ok(out)
}

#[test]
fn one_chunk_with_many_records() {
    let mut d = Decoder::new(100);
    d.push(b"3\nabc1\nx10\n0123456789");
    assert_eq!(
        decode_all(&mut d).unwrap(),
        vec![b"abc".to_vec(), b"x".to_vec(), b"0123456789".to_vec()]
    );
    d.finish().unwrap();
}

#[test]
fn a_record_spanning_chunks_at_every_split_point() {
    let wire = [encode(b"hello world"), encode(b"!")].concat();
    for split in 0..=wire.len() {
        let mut d = Decoder::new(100);
        let mut got = Vec::new();
        d.push(&wire[..split]);
        got.extend(decode_all(&mut d).unwrap());
        d.push(&wire[split..]);
        got.extend(decode_all(&mut d).unwrap());
        assert_eq!(
            got,
            vec![b"hello world".to_vec(), b"!".to_vec()],
            "split at {split}"
        );
        d.finish().unwrap();
    }
}

#[test]
fn byte_at_a_time() {
    let wire = [encode(b"ab"), encode(&[7u8; 300])].concat();
    let mut d = Decoder::new(1000);
    let mut got = Vec::new();
    for b in &wire {
        d.push(std::slice::from_ref(b));
        got.extend(decode_all(&mut d).unwrap());
    }
    assert_eq!(got, vec![b"ab".to_vec(), vec![7u8; 300]]);
}

type Check = fn(&RecordIoError) -> bool;

#[test]
fn malformed_prefixes_give_typed_errors() {
    let cases: [(&[u8], Check); 6] = [
        (b"3\nabcx\n", |e| {
            matches!(
                e,
                RecordIoError::NotADigit {
                    byte: b'x',
                    offset: 5
                }
            )
        }),
        (b"\nabc", |e| {
            matches!(
                e,
                RecordIoError::NotADigit {
                    byte: b'\n',
                    offset: 0
                }
            )
        }),
        (b"3\r\nabc", |e| {
            matches!(e, RecordIoError::NotADigit { byte: b'\r', .. })
        }),
        (b"0\n", |e| matches!(e, RecordIoError::ZeroLength)),
        (b"101\n", |e| {
            matches!(e, RecordIoError::TooLong { max: 100, .. })
        }),
        (b"000000000000000000001\n", |e| {
            matches!(e, RecordIoError::TooManyDigits)
        }),
    ];
    for (wire, check) in cases {
        let mut d = Decoder::new(100);
        d.push(wire);
        let err = decode_all(&mut d).unwrap_err();
        assert!(check(&err), "{wire:?}: {err:?}");
        // poisoned: the same error again, and finish reports it
        assert!(check(&d.next_record().unwrap_err()));
        assert!(check(&d.finish().unwrap_err()));
    }
}

#[test]
fn an_oversize_length_is_refused_before_its_body_arrives() {
    let mut d = Decoder::new(DEFAULT_MAX_RECORD_LEN);
    // A claim of ~10^19 bytes, with no body at all: refused from the prefix.
    d.push(b"99999999999999999999");
    assert!(matches!(
        d.next_record(),
        Err(RecordIoError::TooLong { .. })
    ));
    let mut d = Decoder::new(usize::MAX);
    d.push(b"99999999999999999999\n");
    assert!(matches!(
        d.next_record(),
        Err(RecordIoError::TooLong { .. })
    ));
}

#[test]
fn a_truncated_record_is_reported_by_finish() {
    let mut d = Decoder::new(100);
    d.push(b"5\nabc");
    assert_eq!(d.next_record().unwrap(), None);
    assert!(matches!(d.finish(), Err(RecordIoError::Truncated)));
    let mut d = Decoder::new(100);
    d.push(b"12");
    assert_eq!(d.next_record().unwrap(), None);
    assert!(matches!(d.finish(), Err(RecordIoError::Truncated)));
}

#[test]
fn memory_stays_within_one_record_plus_one_chunk() {
    const MAX: usize = 500;
    const CHUNK: usize = 64;
    let mut wire = Vec::new();
    for len in (1..=MAX).step_by(37) {
        encode_into(&mut wire, &vec![b'x'; len]);
    }
    let mut d = Decoder::new(MAX);
    let mut peak = 0;
    let mut records = 0;
    for piece in wire.chunks(CHUNK) {
        d.push(piece);
        peak = peak.max(d.buffered());
        records += decode_all(&mut d).unwrap().len();
    }
    assert_eq!(records, MAX.div_ceil(37));
    assert!(peak <= MAX + MAX_LENGTH_DIGITS + 1 + CHUNK, "peak {peak}");
    assert_eq!(d.buffered(), 0);
}

#[test]
fn encode_writes_the_length_prefix() {
    assert_eq!(encode(b"abc"), b"3\nabc");
    let mut buf = b"x".to_vec();
    encode_into(&mut buf, &[0u8; 12]);
    assert_eq!(&buf[..4], b"x12\n");
}

#[derive(Debug, thiserror::Error)]
#[error("connection reset")]
struct Reset;

fn chunks(parts: Vec<Result<&'static [u8], Reset>>) -> impl Stream<Item = Result<Bytes, Reset>> {
    futures::stream::iter(parts.into_iter().map(|p| p.map(Bytes::from_static)))
}

#[tokio::test]
async fn decode_stream_yields_records_across_chunks() {
    let s = decode_stream(chunks(vec![Ok(b"3\nab"), Ok(b"c2"), Ok(b"\nde1\nf")]), 100);
    let got: Vec<_> = s.map(|r| r.unwrap().to_vec()).collect().await;
    assert_eq!(got, vec![b"abc".to_vec(), b"de".to_vec(), b"f".to_vec()]);
}

#[tokio::test]
async fn decode_stream_ends_with_one_error() {
    let got: Vec<_> = decode_stream(chunks(vec![Ok(b"1\na5\nab")]), 100)
        .collect()
        .await;
    assert_eq!(got.len(), 2);
    assert!(matches!(got[1], Err(RecordIoError::Truncated)));

    let got: Vec<_> = decode_stream(chunks(vec![Ok(b"1\na"), Err(Reset), Ok(b"1\nb")]), 100)
        .collect()
        .await;
    assert_eq!(got.len(), 2);
    assert!(matches!(&got[1], Err(RecordIoError::Io(e)) if e.to_string() == "connection reset"));

    let got: Vec<_> = decode_stream(chunks(vec![Ok(b"x\n"), Ok(b"1\nb")]), 100)
        .collect()
        .await;
    assert_eq!(got.len(), 1);
    assert!(matches!(got[0], Err(RecordIoError::NotADigit { .. })));
}
