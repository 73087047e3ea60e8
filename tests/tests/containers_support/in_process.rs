//! The executor's pod runtime hosted in the test's process, its containers
//! on the embedded runtime of the mesopod binary: for tests that feed the
//! executor objects (`StaticObjects`) or settings no flag reaches yet.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use executor::backoff::Backoff;
use executor::events::ContainerEvent;
use executor::objects::StaticObjects;
use executor::oci::{ContainerSettings, RuntimeKind};
use executor::{PodUpdate, Runtime, RuntimeConfig};
use images::ImageGcPolicy;
use tokio::sync::mpsc::UnboundedReceiver;

/// Bounds every wait for an update.
pub const T: Duration = Duration::from_secs(60);

/// A runtime whose sandbox, image store (`<dir>/images`) and runtime
/// state are under `dir`.
pub fn runtime(
    dir: &Path,
    objects: StaticObjects,
    image_gc: ImageGcPolicy,
) -> (Runtime, UnboundedReceiver<PodUpdate>) {
    Runtime::new(RuntimeConfig {
        sandbox: dir.join("sandbox"),
        host_ip: "127.0.0.1".into(),
        node_name: "agent-host".into(),
        backoff: Backoff {
            initial: Duration::from_millis(50),
            max: Duration::from_millis(200),
        },
        containers: ContainerSettings {
            runtime: RuntimeKind::Embedded,
            image_store: Some(dir.join("images")),
            state_root: Some(dir.join("runtime")),
            mesopod_binary: Some(crate::common::MESOPOD.into()),
            image_backoff: Backoff {
                initial: Duration::from_millis(100),
                max: Duration::from_millis(200),
            },
            image_gc,
            ..ContainerSettings::default()
        },
        objects: Arc::new(objects),
    })
}

/// The updates until one satisfies `done`: that one, and the events of all.
pub async fn until(
    rx: &mut UnboundedReceiver<PodUpdate>,
    done: impl Fn(&PodUpdate) -> bool,
) -> (PodUpdate, Vec<ContainerEvent>) {
    let mut events = Vec::new();
    loop {
        let u = tokio::time::timeout(T, rx.recv())
            .await
            .expect("an update in time")
            .expect("the runtime is up");
        events.extend(u.events.iter().cloned());
        if done(&u) {
            return (u, events);
        }
    }
}
