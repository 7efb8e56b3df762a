//! Jobs submitted as users submit them (`--submit-as job|vcjob|jobset`):
//! the broker creates one workload object per Batsim job (a batch/v1 Job, a
//! Volcano Job, a JobSet) through the API's admission path, so that the
//! admission webhooks registered act on it, and a controller
//! (kube-controller-manager's job controller, vc-controller-manager;
//! JobSet's controller makes a Job, whose pods the job controller makes)
//! makes its pods. The job's entries (one per pod, as for `--submit-as
//! pod`) exist from the submission; each takes the first pod the controller
//! makes for its index (the Job's completion index, the Volcano task's),
//! found through the pod's controller reference (or its job-name label; a
//! JobSet's pods through its `jobset-name` label). From then on the pod is
//! followed as the broker's own pods are: EXECUTE_JOB once the gang is
//! bound, the kubelet's statuses, kills; the controller's reaction to them
//! (the Job's Complete or Failed condition, the Volcano Job's phase) is
//! its own.
//!
//! A later attempt (the job controller replacing failed pods within
//! `backoffLimit`, Kueue readmitting an evicted Job) is a new Batsim job:
//! once every pod of an attempt has ended and the object is not finished,
//! the first pod its controller makes registers the next attempt
//! (REGISTER_JOB with the same profile, as `<id>-r<n>`, Batsim's dynamic
//! jobs), and the attempt's entries take its pods when Batsim submits it
//! (those still there and not being deleted: the entry of a pod gone by
//! then takes the controller's next one).
//! A JobSet's restart (its `failurePolicy`) recreates its Job: the new
//! Job's pods are its next attempt in the same way.
//! Registration stays open while an object may still make pods: until each
//! is Complete or Failed (a JobSet: Completed or Failed; a Volcano Job:
//! Completed, Failed, Aborted, Terminated), or `--give-up-after` after the
//! last decision, when the run names the objects left with their
//! conditions.

use std::collections::HashMap;

use fakeapi::Change;
use serde_json::Value;

use super::Broker;
use crate::translate::{self, SubmitAs};
use batsim::protocol::{build, EventData};

/// The workload objects of the live jobs.
#[derive(Default)]
pub(super) struct Workloads {
    /// By object name: the job's entries by pod index, those still
    /// waiting for their pod. Kept after the job's pods are all found
    /// (a small record per job), to recognise the pods its controller
    /// makes later (retries, a readmission).
    by_name: HashMap<String, Workload>,
    /// Creates through admission, answered.
    answered: Option<(
        tokio::sync::mpsc::UnboundedSender<Answer>,
        tokio::sync::mpsc::UnboundedReceiver<Answer>,
    )>,
    /// Resources whose admission was already logged.
    logged: std::collections::BTreeSet<&'static str>,
    /// Later attempts registered with Batsim and not yet submitted by it:
    /// the attempt's job id, its object's name.
    registering: HashMap<String, String>,
    /// Registration is held open for an object that may still make pods
    /// (set once a window, read by the wake-up requests).
    pub(super) open: bool,
}

pub(super) struct Workload {
    /// The Batsim job of the current attempt.
    job_id: String,
    /// The current attempt's entries, by pod index.
    entries: Vec<usize>,
    /// Entry of pod index `k`, if it has no pod yet.
    waiting: Vec<Option<usize>>,
    /// The create was answered (the object exists).
    created: bool,
    /// The Batsim job (its JSON), to register a later attempt.
    job: Option<Value>,
    /// The next attempt, registered and not yet submitted by Batsim: its
    /// job id and the pods made for it so far (index, name).
    next: Option<(String, Vec<(Option<usize>, String)>)>,
    /// The object is finished (it makes no more pods).
    finished: bool,
    /// Pods made while the attempt's own still ran (not followed).
    replaced: std::collections::BTreeSet<String>,
}

/// The API's answer to the create of one job's workload object.
pub(super) struct Answer {
    name: String,
    result: Result<Value, String>,
}

/// Annotations and labels a controller writes a pod's index in.
const INDEX_KEYS: [&str; 2] = [
    translate::JOB_COMPLETION_INDEX,
    translate::VOLCANO_TASK_INDEX,
];

impl Broker {
    /// Creates the workload object `obj` of the job whose entries are
    /// `entries` (its pods in index order), through admission, on the
    /// API's runtime: the create is a request in flight until answered,
    /// so the window waits for it (and for the webhooks it calls); the
    /// answer is taken in with the window's changes
    /// ([`Broker::take_answers`]).
    pub(super) fn submit_workload(
        &mut self,
        job_id: &str,
        mut obj: Value,
        entries: Vec<usize>,
        job: Option<Value>,
    ) {
        let submit = self.cfg.submit_as;
        let resource = submit.resource().expect("a workload object");
        let name = obj["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let ns = translate::NAMESPACE;
        let hooks = match self.store.webhooks_for_create(resource, Some(ns), &obj) {
            Ok(h) => h,
            Err(e) => {
                tracing::debug!(%resource, error = %e, "webhooks not listed");
                Vec::new()
            }
        };
        // Kueue suspends the Jobs of its queues with its webhook; without
        // it registered, the broker writes what it would.
        let kueue_queue = obj["metadata"]["labels"][translate::KUEUE_QUEUE_LABEL].is_string();
        let imitated = submit == SubmitAs::Job && kueue_queue && !hooks.iter().any(|h| h.2);
        if imitated {
            obj["spec"]["suspend"] = Value::Bool(true);
        }
        if self.workloads.logged.insert(resource) {
            // Once per run, on the run's log (stderr): which webhooks act.
            let said = if hooks.is_empty() {
                format!(
                    "no admission webhook is registered for {resource}: none acts on the jobs' \
                     objects{}",
                    if imitated {
                        "; the broker suspends the Jobs of a Kueue queue as Kueue's webhook would"
                    } else {
                        ""
                    }
                )
            } else {
                let names: Vec<String> = hooks
                    .iter()
                    .map(|(c, w, m)| {
                        let kind = if *m { "mutating" } else { "validating" };
                        format!("{w} ({kind}, {c})")
                    })
                    .collect();
                format!(
                    "admission webhooks act on the jobs' objects ({resource}): {}",
                    names.join(", ")
                )
            };
            tracing::info!("{said}");
            eprintln!("batkube: --submit-as {}: {said}", submit.as_str());
        }
        let tx = self
            .workloads
            .answered
            .get_or_insert_with(tokio::sync::mpsc::unbounded_channel)
            .0
            .clone();
        let create = self.store.create_admitted(resource, Some(ns), obj);
        let answer_name = name.clone();
        self.rt.spawn(async move {
            let result = create.await.map_err(|e| e.to_string());
            let _ = tx.send(Answer {
                name: answer_name,
                result,
            });
        });
        self.workloads.by_name.insert(
            name,
            Workload {
                job_id: job_id.to_string(),
                waiting: entries.iter().copied().map(Some).collect(),
                entries,
                created: false,
                job,
                next: None,
                finished: false,
                replaced: Default::default(),
            },
        );
    }

    /// The API's answers to the creates of workload objects: a refusal (a
    /// webhook's denial, a failed call under `failurePolicy: Fail`, the
    /// server's validation) rejects the job with its message. Returns the
    /// number of decisions (rejections).
    pub(super) fn take_answers(&mut self, out: &mut Vec<EventData>) -> usize {
        let mut answers = Vec::new();
        if let Some((_, rx)) = &mut self.workloads.answered {
            while let Ok(a) = rx.try_recv() {
                answers.push(a);
            }
        }
        let mut decided = 0;
        let kind = self.cfg.submit_as.kind();
        for a in answers {
            let Some(w) = self.workloads.by_name.get_mut(&a.name) else {
                continue;
            };
            match a.result {
                Ok(obj) => {
                    w.created = true;
                    let detail = format!("job {}", w.job_id);
                    let ns = obj["metadata"]["namespace"]
                        .as_str()
                        .unwrap_or("")
                        .to_string();
                    let k = obj["kind"].as_str().unwrap_or("").to_string();
                    self.timeline
                        .push(self.clock.now(), "broker", "create", k, ns, a.name, detail);
                }
                Err(why) => {
                    let w = self.workloads.by_name.remove(&a.name).expect("checked");
                    tracing::warn!(job = %w.job_id, %why, "job rejected: its {kind} was refused");
                    out.push(build::reject_job(&w.job_id));
                    let now = self.clock.now();
                    for i in w.waiting.into_iter().flatten() {
                        if !self.jobs.contains(i) {
                            continue;
                        }
                        self.set_phase(i, super::Phase::Done);
                        self.jobs[i].record.outcome =
                            format!("REJECTED: its {kind} was refused: {why}");
                    }
                    self.last_decision_at = now;
                    self.last_decision_wall = std::time::Instant::now();
                    decided += 1;
                }
            }
        }
        decided
    }

    /// A pod a controller made for a workload object of a live job: the
    /// entry of its index (else the first still waiting) takes it, and
    /// follows it from now on. Returns that entry.
    pub(super) fn adopt_pod(&mut self, ch: &Change, out: &mut Vec<EventData>) -> Option<usize> {
        let meta = &ch.object["metadata"];
        // A JobSet's pods are its Jobs' (their controller reference names
        // the Job, `JOBSET-main-0`): its label names the JobSet.
        let owner = meta["labels"][translate::JOBSET_NAME_LABEL]
            .as_str()
            .filter(|_| self.cfg.submit_as == SubmitAs::Jobset)
            .or_else(|| {
                meta["ownerReferences"].as_array().and_then(|rs| {
                    rs.iter()
                        .find(|r| r["controller"] == true && r["kind"] == "Job")
                        .and_then(|r| r["name"].as_str())
                })
            })
            .or_else(|| meta["labels"]["batch.kubernetes.io/job-name"].as_str())
            .or_else(|| meta["labels"]["volcano.sh/job-name"].as_str())?;
        let w = self.workloads.by_name.get_mut(owner)?;
        let index = INDEX_KEYS
            .iter()
            .find_map(|k| {
                meta["annotations"][*k]
                    .as_str()
                    .or_else(|| meta["labels"][*k].as_str())
                    .and_then(|v| v.parse::<usize>().ok())
            })
            // Volcano's pod names: JOB-TASK-INDEX.
            .or_else(|| {
                ch.name
                    .strip_prefix(&format!("{owner}-{}-", translate::MAIN_TASK))
                    .and_then(|k| k.parse().ok())
            });
        let slot = index
            .filter(|&k| w.waiting.get(k).is_some_and(Option::is_some))
            .or_else(|| w.waiting.iter().position(Option::is_some));
        let Some(slot) = slot else {
            // Every pod of the attempt ended: the controller's next one.
            let over = w
                .entries
                .iter()
                .all(|&i| !self.jobs.contains(i) || self.jobs[i].phase == super::Phase::Done);
            if over && !w.finished && w.job.is_some() && self.life.dynamic_jobs {
                let owner = owner.to_string();
                self.next_attempt(&owner, index, &ch.name, out);
                return None;
            }
            let job_id = w.job_id.clone();
            if w.replaced.insert(ch.name.clone()) && w.replaced.len() == 1 {
                let message = if over && !self.life.dynamic_jobs {
                    format!(
                        "job {job_id}: its controller made pod {} for another attempt, which \
                         needs Batsim's dynamic jobs (--enable-dynamic-jobs \
                         --acknowledge-dynamic-jobs; `batkube run` gives them): this attempt \
                         is not simulated",
                        ch.name
                    )
                } else {
                    format!(
                        "job {job_id}: its controller made pod {} while the job's own pods \
                         still ran: this pod is not simulated",
                        ch.name
                    )
                };
                tracing::warn!("{message}");
                self.warnings.push(message);
            }
            return None;
        };
        let owner = owner.to_string();
        self.take_slot(&owner, Some(slot), &ch.name)
    }

    /// A pod for workload `owner`'s next attempt: the first registers the
    /// attempt with Batsim (REGISTER_JOB, same job, `<id>-r<n>`); the pods
    /// wait for Batsim's submission ([`Broker::attach_attempt`]).
    fn next_attempt(
        &mut self,
        owner: &str,
        index: Option<usize>,
        pod: &str,
        out: &mut Vec<EventData>,
    ) {
        let w = self.workloads.by_name.get_mut(owner).expect("checked");
        if let Some((_, pods)) = &mut w.next {
            pods.push((index, pod.to_string()));
            return;
        }
        let old = w.job_id.clone();
        let mut job = w.job.clone().expect("checked");
        let new_id = self.next_attempt_id(&old);
        if let Some(m) = job.as_object_mut() {
            m.insert("id".into(), Value::String(new_id.clone()));
            m.remove("subtime");
        }
        let w = self.workloads.by_name.get_mut(owner).expect("checked");
        w.next = Some((new_id.clone(), vec![(index, pod.to_string())]));
        self.workloads
            .registering
            .insert(new_id.clone(), owner.to_string());
        self.life.awaiting.insert(new_id.clone());
        self.life.resubmissions += 1;
        let now = self.clock.now();
        self.timeline.push(
            now,
            "broker",
            "register",
            "Job",
            translate::NAMESPACE,
            owner.to_string(),
            format!("attempt {new_id} after {old}: pod {pod}"),
        );
        tracing::info!(job = %old, attempt = %new_id, %pod, "its controller makes another attempt: registered as a new Batsim job");
        out.push(build::register_job(&new_id, job));
    }

    /// Batsim submitted `job_id`: if it is a later attempt of a workload
    /// object, its entries take the pods the controller made for it (bound
    /// ones as bindings now) and the object is not created again.
    pub(super) fn attach_attempt(
        &mut self,
        job_id: &str,
        entries: &[usize],
        out: &mut Vec<EventData>,
    ) -> anyhow::Result<bool> {
        let Some(owner) = self.workloads.registering.remove(job_id) else {
            return Ok(false);
        };
        let Some(w) = self.workloads.by_name.get_mut(&owner) else {
            return Ok(false);
        };
        let pods = w.next.take().map(|(_, p)| p).unwrap_or_default();
        w.job_id = job_id.to_string();
        w.entries = entries.to_vec();
        w.waiting = entries.iter().copied().map(Some).collect();
        w.replaced.clear();
        for (index, name) in pods {
            // A pod deleted (or being deleted) before Batsim submitted its
            // attempt (a Job readmitted and evicted in one instant) is not
            // the attempt's: its entry waits for the controller's next pod.
            // The broker never followed it, so its deletion was not seen.
            let Ok(obj) = self.store.get("pods", Some(translate::NAMESPACE), &name) else {
                continue;
            };
            if !obj["metadata"]["deletionTimestamp"].is_null() {
                continue;
            }
            let Some(i) = self.take_slot(&owner, index, &name) else {
                continue;
            };
            let node = obj["spec"]["nodeName"].as_str().unwrap_or("").to_string();
            if !node.is_empty() {
                self.bind(i, &node, out)?;
            }
        }
        Ok(true)
    }

    /// The entry of workload `owner` that takes pod `name` (of index
    /// `index`, else the first waiting), following it from now on.
    fn take_slot(&mut self, owner: &str, index: Option<usize>, name: &str) -> Option<usize> {
        let w = self.workloads.by_name.get_mut(owner)?;
        let slot = index
            .filter(|&k| w.waiting.get(k).is_some_and(Option::is_some))
            .or_else(|| w.waiting.iter().position(Option::is_some))?;
        let i = w.waiting[slot].take().expect("checked");
        if !self.jobs.contains(i) || self.jobs[i].phase != super::Phase::Pending {
            return None;
        }
        let j = &mut self.jobs[i];
        j.record.pod = name.to_string();
        j.pod_gone = false;
        self.job_by_pod.insert(name.to_string(), i);
        Some(i)
    }

    /// A change to a workload object: finished once its controller says
    /// so (a Job's Complete or Failed condition, a JobSet's Completed or
    /// Failed, a Volcano Job's final phase).
    pub(super) fn workload_changed(&mut self, ch: &Change) {
        let Some(resource) = self.cfg.submit_as.resource() else {
            return;
        };
        let (plural, group) = resource.split_once('.').unwrap_or((resource, ""));
        if ch.resource.plural != plural || ch.resource.group != group {
            return;
        }
        let Some(w) = self.workloads.by_name.get_mut(&ch.name) else {
            return;
        };
        let st = &ch.object["status"];
        let done_condition = st["conditions"].as_array().is_some_and(|cs| {
            cs.iter().any(|c| {
                matches!(
                    c["type"].as_str(),
                    Some("Complete" | "Completed" | "Failed")
                ) && c["status"] == "True"
            })
        });
        let done_phase = matches!(
            st["state"]["phase"].as_str(),
            Some("Completed" | "Failed" | "Aborted" | "Terminated")
        );
        if done_condition || done_phase || ch.kind == fakeapi::EventType::Deleted {
            w.finished = true;
        }
    }

    /// Whether a workload object may still make pods for another attempt
    /// (registration then stays open), else, past `--give-up-after` since
    /// the last decision, says which objects were left and lets it close.
    pub(super) fn workloads_hold_registration(&mut self, now: f64) -> bool {
        let open: Vec<&String> = self
            .workloads
            .by_name
            .iter()
            .filter(|(_, w)| !w.finished && w.job.is_some())
            .map(|(n, _)| n)
            .collect();
        if open.is_empty() {
            self.workloads.open = false;
            return false;
        }
        if now - self.last_decision_at < self.cfg.give_up_after {
            self.workloads.open = true;
            return true;
        }
        let mut names: Vec<String> = open.into_iter().cloned().collect();
        names.sort();
        let kind = self.cfg.submit_as.kind();
        for name in &names {
            let why = self.object_conditions(name);
            let message = format!(
                "{kind} {name} never finished ({why}): no more attempts are simulated after \
                 {} s without a decision (--give-up-after)",
                self.cfg.give_up_after
            );
            tracing::warn!("{message}");
            self.warnings.push(message);
        }
        for name in names {
            if let Some(w) = self.workloads.by_name.get_mut(&name) {
                w.finished = true;
            }
        }
        self.workloads.open = false;
        false
    }

    /// A workload object's phase and conditions, for messages.
    fn object_conditions(&self, name: &str) -> String {
        let Some(resource) = self.cfg.submit_as.resource() else {
            return String::new();
        };
        let Ok(obj) = self.store.get(resource, Some(translate::NAMESPACE), name) else {
            return "deleted".into();
        };
        let conditions: Vec<String> = obj["status"]["conditions"]
            .as_array()
            .map(|cs| {
                cs.iter()
                    .map(|c| {
                        format!(
                            "{}={} {}",
                            c["type"].as_str().unwrap_or(""),
                            c["status"].as_str().unwrap_or(""),
                            c["reason"].as_str().unwrap_or("")
                        )
                        .trim()
                        .to_string()
                    })
                    .collect()
            })
            .unwrap_or_default();
        let phase = obj["status"]["state"]["phase"].as_str();
        format!(
            "{}{}",
            phase.map(|p| format!("phase {p}, ")).unwrap_or_default(),
            if conditions.is_empty() {
                "no conditions".to_string()
            } else {
                format!("conditions {}", conditions.join("; "))
            }
        )
    }

    /// Why the pending entry `i` has no pod, if its workload object's
    /// controller made none: its conditions, for the give-up's message.
    pub(super) fn workload_why(&self, i: usize) -> Option<String> {
        let job_id = &self.jobs[i].record.job_id;
        let (name, w) = self
            .workloads
            .by_name
            .iter()
            .find(|(_, w)| &w.job_id == job_id && w.waiting.contains(&Some(i)))?;
        let kind = self.cfg.submit_as.kind();
        if !w.created {
            return Some(format!("its {kind} {name} was never created"));
        }
        Some(format!(
            "its controller made no pod for it: {kind} {name}, {}",
            self.object_conditions(name)
        ))
    }

    /// Drops what is known of job `job_id`'s workload object (it ended).
    pub(super) fn forget_workload(&mut self, job_id: &str) {
        self.workloads.by_name.retain(|_, w| w.job_id != job_id);
    }
}
