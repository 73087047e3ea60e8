//! The Tables of Job and CronJob, as kube-apiserver 1.33's printers
//! (`printJob`, `printCronJob`) fill them.

use std::time::{SystemTime, UNIX_EPOCH};

use k8s_openapi::api::batch::v1::{CronJob, Job, JobCondition};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Value, json};

use super::job::selector_text;
use crate::clock::{age, human_duration};
use crate::kinds::apps::{col, wide_columns};
use crate::kinds::name_and_age;

/// `JobSpec.selector`'s description, which both kinds' SELECTOR column carries.
const SELECTOR: &str = "A label query over pods that should match the pod count. Normally, the system sets this field for you. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors";

/// NAME STATUS COMPLETIONS DURATION AGE, and with `-o wide` CONTAINERS IMAGES SELECTOR.
pub(crate) fn job_columns() -> Vec<Value> {
    let (name, age) = name_and_age();
    vec![
        name,
        col("Status", "string", 0, "Status of the job."),
        col(
            "Completions",
            "string",
            0,
            "The number of pods which reached phase Succeeded. The value increases monotonically for a given spec. However, it may decrease in reaction to scale down of elastic indexed jobs.",
        ),
        col("Duration", "string", 0, "Time required to complete the job."),
        age,
    ]
    .into_iter()
    .chain(wide_columns(SELECTOR))
    .collect()
}

/// NAME SCHEDULE TIMEZONE SUSPEND ACTIVE LAST SCHEDULE AGE, and with `-o wide`
/// CONTAINERS IMAGES SELECTOR (the template's).
pub(crate) fn cronjob_columns() -> Vec<Value> {
    let (name, age) = name_and_age();
    vec![
        name,
        col(
            "Schedule",
            "string",
            0,
            "The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron.",
        ),
        col(
            "Timezone",
            "string",
            0,
            "The time zone name for the given schedule, see https://en.wikipedia.org/wiki/List_of_tz_database_time_zones. If not specified, this will default to the time zone of the kube-controller-manager process. The set of valid time zone names and the time zone offset is loaded from the system-wide time zone database by the API server during CronJob validation and the controller manager during execution. If no system-wide time zone database can be found a bundled version of the database is used instead. If the time zone name becomes invalid during the lifetime of a CronJob or due to a change in host configuration, the controller will stop creating new new Jobs and will create a system event with the reason UnknownTimeZone. More information can be found in https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/#time-zones",
        ),
        col(
            "Suspend",
            "boolean",
            0,
            "This flag tells the controller to suspend subsequent executions, it does not apply to already started executions.  Defaults to false.",
        ),
        col(
            "Active",
            "integer",
            0,
            "A list of pointers to currently running jobs.",
        ),
        col(
            "Last Schedule",
            "string",
            0,
            "Information when was the last time the job was successfully scheduled.",
        ),
        age,
    ]
    .into_iter()
    .chain(wide_columns(SELECTOR))
    .collect()
}

/// One Job's row: its status from its conditions (1.33's printer knows no
/// SuccessCriteriaMet; 1.34 added it), `succeeded/completions` (`N/1 of P` for a work
/// queue), and how long it ran or has been running, by the server's clock.
pub(crate) fn job_cells(obj: &Value, now: SystemTime) -> Option<Vec<Value>> {
    let job: Job = serde_json::from_value(obj.clone()).ok()?;
    let spec = job.spec.unwrap_or_default();
    let status = job.status.unwrap_or_default();
    let succeeded = status.succeeded.unwrap_or(0);
    let completions = match spec.completions {
        Some(c) => format!("{succeeded}/{c}"),
        None => match spec.parallelism.unwrap_or(0) {
            p if p > 1 => format!("{succeeded}/1 of {p}"),
            _ => format!("{succeeded}/1"),
        },
    };
    let now_secs = now
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    let duration = match (&status.start_time, &status.completion_time) {
        (None, _) => String::new(),
        (Some(start), None) => go_human(now_secs - seconds(start)),
        (Some(start), Some(end)) => go_human(seconds(end) - seconds(start)),
    };
    let conditions = status.conditions.as_deref().unwrap_or_default();
    let state = if has_condition(conditions, "Complete") {
        "Complete"
    } else if has_condition(conditions, "Failed") {
        "Failed"
    } else if job.metadata.deletion_timestamp.is_some() {
        "Terminating"
    } else if has_condition(conditions, "Suspended") {
        "Suspended"
    } else if has_condition(conditions, "FailureTarget") {
        "FailureTarget"
    } else {
        "Running"
    };
    let (names, images) = containers(&spec.template);
    Some(vec![
        json!(job.metadata.name),
        json!(state),
        json!(completions),
        json!(duration),
        json!(age(crate::table::created(obj), now)),
        json!(names),
        json!(images),
        json!(selector_text(spec.selector.as_ref())),
    ])
}

/// One CronJob's row.
pub(crate) fn cronjob_cells(obj: &Value, now: SystemTime) -> Option<Vec<Value>> {
    let cj: CronJob = serde_json::from_value(obj.clone()).ok()?;
    let spec = cj.spec.unwrap_or_default();
    let status = cj.status.unwrap_or_default();
    let suspend = match spec.suspend {
        Some(true) => "True",
        Some(false) => "False",
        None => "<unset>",
    };
    let last = status.last_schedule_time.as_ref().map_or_else(
        || "<none>".to_owned(),
        |t| crate::clock::since(Some(crate::api::system_time(t)), now),
    );
    let job = spec.job_template.spec.unwrap_or_default();
    let (names, images) = containers(&job.template);
    Some(vec![
        json!(cj.metadata.name),
        json!(spec.schedule),
        json!(spec.time_zone.as_deref().unwrap_or("<none>")),
        json!(suspend),
        json!(status.active.map_or(0, |a| a.len())),
        json!(last),
        json!(age(crate::table::created(obj), now)),
        json!(names),
        json!(images),
        json!(selector_text(job.selector.as_ref())),
    ])
}

/// `hasJobCondition`: the first condition of `type_` is True.
fn has_condition(conditions: &[JobCondition], type_: &str) -> bool {
    conditions
        .iter()
        .find(|c| c.type_ == type_)
        .is_some_and(|c| c.status == "True")
}

fn seconds(t: &Time) -> i64 {
    t.0.as_second()
}

/// apimachinery's `HumanDuration` of a signed span: a little negative is clock skew
/// (`0s`), more is `<invalid>`.
fn go_human(secs: i64) -> String {
    match secs {
        s if s < -1 => "<invalid>".to_owned(),
        s if s < 0 => "0s".to_owned(),
        s => human_duration(std::time::Duration::from_secs(s.unsigned_abs())),
    }
}

/// The template's container names and images, comma-separated (`layoutContainerCells`).
fn containers(template: &PodTemplateSpec) -> (String, String) {
    let containers = template
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or_default();
    let names: Vec<&str> = containers.iter().map(|c| c.name.as_str()).collect();
    let images: Vec<&str> = containers
        .iter()
        .map(|c| c.image.as_deref().unwrap_or(""))
        .collect();
    (names.join(","), images.join(","))
}
