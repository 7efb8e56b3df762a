//! Protobuf bodies of batch/v1 Jobs, moved into k8s-openapi's `Job`.
//!
//! Controllers built on controller-runtime (JobSet's, which makes a Job per
//! replicated job) write the built-in kinds in protobuf whatever their
//! configuration says. A Job's pod template is a Pod's spec, moved by
//! [`super::pod`]'s conversions; the rest is listed here, every field of
//! k8s-openapi's types named (the compiler refuses a missing one).
//! `JobSpec.scheduling` (1.36) is newer than `k8s-pb`'s definitions: absent.

use k8s_openapi::api::batch::v1 as oa_batch;
use k8s_openapi::api::core::v1 as oa_core;
use k8s_pb::api::batch::v1 as pb_batch;
use k8s_pb::api::core::v1 as pb_core;

use super::pod::{conv, field, To};

conv!(oa_batch::Job <- pb_batch::Job { metadata, spec, status });
conv!(oa_batch::JobCondition <- pb_batch::JobCondition {
    last_probe_time, last_transition_time, message, reason, status, type_ = r#type
});
conv!(oa_batch::JobSpec <- pb_batch::JobSpec {
    active_deadline_seconds, backoff_limit, backoff_limit_per_index, completion_mode, completions,
    managed_by, manual_selector, max_failed_indexes, parallelism, pod_failure_policy,
    pod_replacement_policy, scheduling = default, selector, success_policy, suspend, template,
    ttl_seconds_after_finished
});
conv!(oa_batch::JobStatus <- pb_batch::JobStatus {
    active, completed_indexes, completion_time, conditions, failed, failed_indexes, ready,
    start_time, succeeded, terminating, uncounted_terminated_pods
});
conv!(oa_batch::PodFailurePolicy <- pb_batch::PodFailurePolicy { rules });
conv!(oa_batch::PodFailurePolicyOnExitCodesRequirement <-
    pb_batch::PodFailurePolicyOnExitCodesRequirement { container_name, operator, values });
conv!(oa_batch::PodFailurePolicyOnPodConditionsPattern <-
    pb_batch::PodFailurePolicyOnPodConditionsPattern { status, type_ = r#type });
conv!(oa_batch::PodFailurePolicyRule <- pb_batch::PodFailurePolicyRule {
    action, on_exit_codes, on_pod_conditions
});
conv!(oa_batch::SuccessPolicy <- pb_batch::SuccessPolicy { rules });
conv!(oa_batch::SuccessPolicyRule <- pb_batch::SuccessPolicyRule {
    succeeded_count, succeeded_indexes
});
conv!(oa_batch::UncountedTerminatedPods <- pb_batch::UncountedTerminatedPods {
    failed, succeeded
});
conv!(oa_core::PodTemplateSpec <- pb_core::PodTemplateSpec { metadata, spec });
