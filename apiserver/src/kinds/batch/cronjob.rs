//! CronJob (`batch/v1`): a Job from a template on a schedule. The CronJob controller
//! creates the Jobs; the shim defaults a CronJob (`SetDefaults_CronJob`, and the pod
//! defaults of its template), validates it (`ValidateCronJobCreate`,
//! `ValidateCronJobUpdate`) and stores it. The schedule is read by [`crate::cron`], the
//! parser the controller runs, and the time zone from its bundled tz database.

use k8s_openapi::api::batch::v1::{CronJob, CronJobSpec};

use super::job::default_pod_failure_policy;
use super::job_warnings;
use super::spec::check_job_spec;
use crate::CauseKind;
use crate::cron::Schedule;
use crate::kinds::Kind;
use crate::kinds::apps::{
    WithStatus, default_template, go_selector, keep_metadata, next_generation,
};
use crate::resource::Resource;
use crate::validation::Causes;

/// The longest CronJob name: a Job it creates is named `<cronjob>-<minutes since the
/// epoch>`, eleven characters more, and a Job's pods' hostnames are DNS labels (63).
const MAX_NAME: usize = 63 - 11;

/// `successfulJobsHistoryLimit` unless given.
const SUCCESSFUL_HISTORY: i32 = 3;

/// `failedJobsHistoryLimit` unless given.
const FAILED_HISTORY: i32 = 1;

/// The concurrency policies, in kube-apiserver's order.
const CONCURRENCY_POLICIES: [&str; 3] = ["Allow", "Forbid", "Replace"];

impl Kind for CronJob {
    const RESOURCE: Resource = Resource::CronJobs;

    fn normalize(&mut self) {
        let spec = self.spec.get_or_insert_default();
        if spec.concurrency_policy.as_deref().is_none_or(str::is_empty) {
            spec.concurrency_policy = Some(CONCURRENCY_POLICIES[0].to_owned());
        }
        spec.suspend.get_or_insert(false);
        spec.successful_jobs_history_limit
            .get_or_insert(SUCCESSFUL_HISTORY);
        spec.failed_jobs_history_limit.get_or_insert(FAILED_HISTORY);
        // Only the pod defaults reach the template: its Job is defaulted when the
        // controller creates it (kube's generated defaulters call no SetDefaults_Job
        // for a CronJob, but do default its pod failure policy's patterns since 1.33.1).
        let job = spec.job_template.spec.get_or_insert_default();
        default_pod_failure_policy(job);
        default_template(&mut job.template);
    }

    fn validate(&self, causes: &mut Causes) {
        self.validate_against(None, causes);
    }

    /// kube's order, with what differs between a create and an update in its midst.
    fn validate_against(&self, old: Option<&Self>, causes: &mut Causes) {
        let default = CronJobSpec::default();
        let spec = self.spec.as_ref().unwrap_or(&default);
        let old_spec = old.map(|o| o.spec.as_ref().unwrap_or(&default));
        check_schedule(causes, spec, old_spec);
        if let Some(d) = spec.starting_deadline_seconds
            && d < 0
        {
            causes.invalid_number(
                "spec.startingDeadlineSeconds",
                d,
                "must be greater than or equal to 0",
            );
        }
        // A zone accepted once stays accepted, whatever the tz database says later.
        if old_spec.is_none_or(|o| o.time_zone != spec.time_zone)
            && let Some(zone) = spec.time_zone.as_deref()
            && let Err(e) = crate::cron::time_zone(Some(zone))
        {
            causes.invalid("spec.timeZone", zone, &e);
        }
        match spec.concurrency_policy.as_deref().unwrap_or_default() {
            "" => causes.required("spec.concurrencyPolicy"),
            p if !CONCURRENCY_POLICIES.contains(&p) => {
                causes.unsupported("spec.concurrencyPolicy", p, &CONCURRENCY_POLICIES);
            }
            _ => {}
        }
        check_job_template(causes, spec);
        for (field, limit) in [
            (
                "spec.successfulJobsHistoryLimit",
                spec.successful_jobs_history_limit,
            ),
            (
                "spec.failedJobsHistoryLimit",
                spec.failed_jobs_history_limit,
            ),
        ] {
            crate::kinds::apps::non_negative(causes, field, limit);
        }
        let name = self.metadata.name.as_deref().unwrap_or_default();
        // Only on create: the name cannot change, and a CronJob with a longer one, made
        // elsewhere, must stay updatable and deletable.
        if old.is_none() && name.len() > MAX_NAME {
            causes.invalid(
                "metadata.name",
                name,
                &format!("must be no more than {MAX_NAME} characters"),
            );
        }
    }

    /// On create, and on an update that changed the spec.
    fn warnings(&self, old: Option<&Self>) -> Vec<String> {
        job_warnings(
            &self.metadata,
            old.map(|o| &o.metadata),
            "spec.jobTemplate.spec",
            self.spec
                .as_ref()
                .and_then(|s| s.job_template.spec.as_ref()),
        )
    }

    fn prepare_create(&mut self) {
        self.metadata.generation = Some(1);
        self.status = None;
    }

    fn prepare_update(&mut self, old: &Self) {
        self.status.clone_from(&old.status);
        let changed = self.spec != old.spec;
        next_generation(&mut self.metadata, &old.metadata, changed);
    }
}

impl WithStatus for CronJob {
    fn keep_for_status(&mut self, old: &Self) {
        self.spec.clone_from(&old.spec);
        keep_metadata(&mut self.metadata, &old.metadata, false);
    }
}

/// `spec.schedule`: robfig's parse, and no `TZ=`/`CRON_TZ=` prefix (the zone belongs in
/// `spec.timeZone`) unless the stored schedule had one already.
fn check_schedule(causes: &mut Causes, spec: &CronJobSpec, old: Option<&CronJobSpec>) {
    let schedule = spec.schedule.as_str();
    if schedule.is_empty() {
        causes.required("spec.schedule");
        return;
    }
    if let Err(e) = parse_standard(schedule) {
        causes.invalid("spec.schedule", schedule, &e);
    }
    let had_tz = old.is_some_and(|o| o.schedule.contains("TZ"));
    if !schedule.contains("TZ") {
        return;
    }
    if !had_tz {
        causes.invalid(
            "spec.schedule",
            schedule,
            "cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
        );
    } else if spec.time_zone.is_some() {
        causes.invalid(
            "spec.schedule",
            schedule,
            "cannot use both timeZone field and TZ or CRON_TZ in schedule",
        );
    }
}

/// robfig's `ParseStandard` as it reads a `TZ=zone`/`CRON_TZ=zone` prefix before the
/// fields ([`Schedule::parse`] reads what follows it), with its error texts.
fn parse_standard(schedule: &str) -> Result<(), String> {
    let mut rest = schedule;
    if rest.starts_with("TZ=") || rest.starts_with("CRON_TZ=") {
        // Without a space robfig slices out of bounds and kube-apiserver answers 500;
        // here the whole text goes to the field parser, which refuses it.
        if let (Some(space), Some(eq)) = (rest.find(' '), rest.find('=')) {
            let zone = &rest[eq + 1..space];
            // Go's `time.LoadLocation`: empty and `UTC` are UTC, `Local` the host's.
            let known =
                matches!(zone, "" | "UTC" | "Local") || crate::cron::time_zone(Some(zone)).is_ok();
            if !known {
                return Err(format!(
                    "provided bad location {zone}: unknown time zone {zone}"
                ));
            }
            rest = rest[space..].trim();
            if rest.is_empty() {
                return Err("expected exactly 5 fields, found 0: []".to_owned());
            }
        }
    }
    Schedule::parse(rest).map(|_| ())
}

/// `ValidateJobTemplateSpec`: the template's spec as a Job's, without a selector of its
/// own (each Job gets one generated).
fn check_job_template(causes: &mut Causes, spec: &CronJobSpec) {
    let default = Default::default();
    let job = spec.job_template.spec.as_ref().unwrap_or(&default);
    check_job_spec(causes, job, "spec.jobTemplate.spec");
    if let Some(selector) = &job.selector {
        causes.push(
            CauseKind::Invalid,
            "spec.jobTemplate.spec.selector",
            format!(
                "Invalid value: {}: `selector` will be auto-generated",
                go_selector(selector)
            ),
        );
    }
    if job.manual_selector == Some(true) {
        causes.push(
            CauseKind::NotSupported,
            "spec.jobTemplate.spec.manualSelector",
            "Unsupported value: true: supported values: \"nil\", \"false\"",
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tz_prefix_is_read_as_robfig_reads_it() {
        assert_eq!(parse_standard("CRON_TZ=Europe/Paris 0 * * * *"), Ok(()));
        assert_eq!(parse_standard("TZ=UTC @hourly"), Ok(()));
        assert_eq!(
            parse_standard("TZ=Mars/Olympus 0 * * * *"),
            Err("provided bad location Mars/Olympus: unknown time zone Mars/Olympus".into())
        );
        assert_eq!(
            parse_standard("TZ=UTC "),
            Err("expected exactly 5 fields, found 0: []".into())
        );
        assert!(parse_standard("TZ=UTC").is_err());
    }
}
