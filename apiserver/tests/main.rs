//! apiserver's HTTP and typed-API tests, in one test binary: a module per area,
//! sharing `common` (the in-process test server). One binary instead of one per
//! file keeps a clean build's disk and link time small.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

mod api_typed;
mod binding_writes;
mod defaults_golden;
mod etcd_compaction;
mod etcd_namespace;
mod etcd_shim;
mod events_aggregate;
mod fuzz_decoding;
mod fuzz_objects;
mod http_api;
mod http_cronjobs;
mod http_deletion;
mod http_hpa_v1;
mod http_job_status;
mod http_jobs;
mod http_jobs_validation;
mod http_nodes_workloads;
mod http_objects;
mod http_statefulsets;
mod http_workloads;
mod kube_client;
mod kubectl_pod_defaults;
mod kubectl_pod_warnings;
mod kubectl_priority;
mod list_paging;
mod pod_security;
