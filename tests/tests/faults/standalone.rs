//! A standalone `mesopod localmesos` on a fixed port with its work dir at
//! `<dir>/lm/localmesos`, and a `mesopod scheduler` against it, its
//! executors on an image store at `<dir>/images`.

use std::path::{Path, PathBuf};

use super::{Mode, Proc, Reset, free_port, get_json, image, request_json};

/// The two processes' addresses, work dir and logs.
pub struct Standalone {
    pub port: u16,
    pub work: PathBuf,
    pub lm_log: PathBuf,
    pub sched_log: PathBuf,
    pub master: String,
    pub api: String,
    mode: Mode,
    dir: PathBuf,
}

impl Standalone {
    /// Starts both, the pods to run in `mode`; returns them with the
    /// processes (localmesos, scheduler).
    pub fn start(dir: &Path, mode: Mode) -> (Standalone, Proc, Proc) {
        let port = free_port();
        let mut s = Standalone {
            port,
            work: dir.join("lm").join("localmesos"),
            lm_log: dir.join("localmesos.log"),
            sched_log: dir.join("scheduler.log"),
            master: String::new(),
            api: String::new(),
            mode,
            dir: dir.to_path_buf(),
        };
        if mode == Mode::Containers {
            image::load(&dir.join("images"));
        }
        let lm = s.localmesos();
        s.master = lm.url();
        let sched = s.scheduler();
        (s, lm, sched)
    }

    /// (Re)starts the scheduler on its data dir; [`Standalone::api`] is
    /// then its new address.
    pub fn scheduler(&mut self) -> Proc {
        let data = self.dir.join("scheduler-data");
        let mut args: Vec<String> = [
            "scheduler",
            "--master",
            &self.master,
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
            data.to_str().unwrap(),
            "--offer-ttl",
            "1s",
        ]
        .map(str::to_owned)
        .to_vec();
        args.extend(self.mode.scheduler_args(Some(&self.dir.join("images"))));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let sched = Proc::spawn(&args, "Kubernetes API", &self.sched_log);
        self.api = sched.url();
        sched
    }

    /// (Re)starts localmesos on its port and work dir.
    pub fn localmesos(&self) -> Proc {
        Proc::spawn(
            &[
                "localmesos",
                "--listen",
                &format!("127.0.0.1:{}", self.port),
                "--agents",
                "2",
                "--allocation-interval",
                "100ms",
                "--heartbeat-interval",
                "1s",
                "--work-dir",
                self.work.to_str().unwrap(),
                "--recovery-timeout",
                "2mins",
                // the fault tests drive localmesos' /admin/ routes
                "--enable-faults",
            ],
            "http://",
            &self.lm_log,
        )
    }

    /// The [`Reset`] that stops whatever this cluster leaves running.
    pub fn reset(&self) -> Reset {
        Reset(self.work.parent().unwrap().to_path_buf())
    }

    pub fn logs(&self) -> [&Path; 2] {
        [&self.lm_log, &self.sched_log]
    }

    /// Every live task in the master's `/state`: (task id, agent id,
    /// framework id, executor id, state).
    pub fn tasks(&self) -> Vec<[String; 5]> {
        self.tasks_in("tasks")
    }

    /// The tasks `/state` lists as unreachable (apart, as Mesos does).
    pub fn unreachable_tasks(&self) -> Vec<[String; 5]> {
        self.tasks_in("unreachable_tasks")
    }

    fn tasks_in(&self, list: &str) -> Vec<[String; 5]> {
        let state = get_json(&format!("{}/state", self.master));
        let mut out = Vec::new();
        for fw in state["frameworks"].as_array().into_iter().flatten() {
            for t in fw[list].as_array().into_iter().flatten() {
                let s = |k: &str| t[k].as_str().unwrap_or("").to_owned();
                out.push([
                    s("id"),
                    s("slave_id"),
                    s("framework_id"),
                    s("executor_id"),
                    s("state"),
                ]);
            }
        }
        out.sort();
        out
    }

    /// The agents in the master's `/state` as (id, whether active).
    pub fn agents(&self) -> Vec<(String, bool)> {
        let state = get_json(&format!("{}/state", self.master));
        state["slaves"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|a| {
                (
                    a["id"].as_str().unwrap_or("").to_owned(),
                    a["active"] == true,
                )
            })
            .collect()
    }

    /// POSTs an admin fault route; whether it answered 200.
    pub fn admin(&self, route: &str, body: &str) -> bool {
        !request_json("POST", &format!("{}/admin/{route}", self.master), body).is_null()
    }
}
