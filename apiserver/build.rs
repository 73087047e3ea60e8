//! Compiles Kubernetes' wire schemas (`proto/k8s.io/**/generated.proto`, written by
//! `proto/generate.py`) into one encoded `FileDescriptorSet` in `OUT_DIR`, which
//! `src/protobuf/schema.rs` embeds: the protobuf decoder reads any kind by reflection
//! over these descriptors instead of by generated structs or hand-written field tables.
//!
//! `protox` is a protobuf compiler in Rust, so the build needs neither `protoc` nor the
//! network.

use std::error::Error;
use std::path::{Path, PathBuf};

fn main() -> Result<(), Box<dyn Error>> {
    println!("cargo:rerun-if-changed=proto");
    let mut files = Vec::new();
    find_protos(Path::new("proto"), &mut files)?;
    files.sort();
    let relative: Vec<PathBuf> = files
        .iter()
        .map(|f| f.strip_prefix("proto").map(Path::to_path_buf))
        .collect::<Result<_, _>>()?;
    let bytes = protox::Compiler::new(["proto"])?
        .include_imports(true)
        .include_source_info(false)
        .open_files(relative)?
        .encode_file_descriptor_set();
    let out = PathBuf::from(std::env::var_os("OUT_DIR").ok_or("OUT_DIR is not set")?);
    std::fs::write(out.join("kubernetes.fds"), bytes)?;
    Ok(())
}

/// Every `.proto` file under `dir`.
fn find_protos(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), Box<dyn Error>> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            find_protos(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "proto") {
            out.push(path);
        }
    }
    Ok(())
}
