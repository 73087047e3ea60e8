//! The admission contract's example as an in-process hook: run each
//! tenant's pods on that tenant's agents, hold work during a freeze window,
//! and refuse pods that ask for more than 8 CPUs.
//!
//! Run mesopod with it (embedded cluster, API on 127.0.0.1:8080):
//!
//! ```sh
//! cargo run --release -p framework --example tenant_hook
//! ```
//!
//! Agents carry the tenant as an attribute (`--attributes 'tenant:acme'`);
//! pods in namespace `acme` then land only there. Touch
//! `/tmp/mesopod-freeze` to start a freeze, remove it to end it.

use std::sync::Arc;

use framework::admission::{Changes, Decision, HookError, HookFn, Request, Toleration};

/// Pods may request at most this many millicores.
pub(crate) const CPU_CAP_MILLIS: u64 = 8000;

/// The hook. `frozen` says whether a freeze window is on now.
pub(crate) fn tenant_hook(
    frozen: Arc<dyn Fn() -> bool + Send + Sync>,
) -> HookFn<impl Fn(&Request) -> Result<Decision, HookError> + Send + Sync + 'static> {
    HookFn::new(move |req: &Request| {
        if frozen() {
            return Ok(Decision::Hold(
                "weekly maintenance freeze until 06:00 UTC".into(),
            ));
        }
        if req.cpu_millis() > CPU_CAP_MILLIS {
            return Ok(Decision::Refuse(
                "pods may request at most 8 CPUs; lower resources.requests.cpu".into(),
            ));
        }
        Ok(Decision::AdmitWith(Changes {
            node_selector: [("tenant".to_owned(), req.tenant.clone())].into(),
            tolerations: vec![Toleration {
                key: "tenant".into(),
                operator: "Equal".into(),
                value: req.tenant.clone(),
                effect: "NoSchedule".into(),
                toleration_seconds: None,
            }],
            labels: [("cost-center".to_owned(), req.tenant.clone())].into(),
            ..Default::default()
        }))
    })
}

#[allow(dead_code)]
fn main() -> anyhow::Result<()> {
    use clap::Parser as _;
    let args = framework::cli::Cli::parse_from([
        "mesopod",
        "--attributes",
        "tenant:default",
        "--data-dir",
        "mesopod-tenant-data",
    ])
    .scheduler;
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async move {
        let mut config = args.app_config()?;
        let frozen: Arc<dyn Fn() -> bool + Send + Sync> =
            Arc::new(|| std::path::Path::new("/tmp/mesopod-freeze").exists());
        config.admission = framework::admission::Admission::new(
            vec![Arc::new(tenant_hook(frozen))],
            framework::admission::AdmissionConfig::default(),
        );
        let mut app = framework::app::App::start(config).await?;
        println!("mesopod with the tenant hook: {}", app.api_url());
        app.wait().await?;
        Ok(())
    })
}
