//! Protobuf bodies of v1 Pods, moved into k8s-openapi's `Pod`.
//!
//! client-go's typed clientset writes every built-in kind as protobuf by
//! default; programs that create, update or write the status of pods (a
//! scheduler that makes pods of its own, as YuniKorn makes its gang
//! placeholders, or fails a pod with a reason) send whole Pods. A `Pod` is
//! a tree of some hundred message types; each is moved field by field with
//! [`conv!`], whose struct expressions name every field of k8s-openapi's
//! type (the compiler refuses a missing one). Where the two disagree:
//!
//! - protobuf embeds a message where JSON inlines its fields (a
//!   `LocalObjectReference`'s `name`, a `Probe`'s handler, an
//!   `EphemeralContainer`'s common fields, a `Volume`'s source): `f = (e.f)`
//!   reads `f` from the embedded `e`;
//! - fields newer than the protobuf definitions of `k8s-pb` (Kubernetes
//!   1.35: `eviction_responders`, `scheduling_group`, `user`s of projected
//!   files, …) are `= default`, absent: a client of those releases cannot
//!   send them; `PodSpec.workloadRef` (1.35 alpha) has no field in
//!   k8s-openapi's types and is dropped.
//!
//! The lines were listed from both crates' sources (every type reachable
//! from `Pod`), then checked by the compiler.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as oa_core;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as oa_meta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_pb::api::core::v1 as pb_core;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as pb_meta;

use super::Conv;

/// A protobuf value moved into the k8s-openapi type `T` (the target type
/// picks the conversion: `Option<String>` into `String` or into
/// `Option<String>`, a repeated field into `Vec` or into `Option<Vec>`).
pub(super) trait To<T> {
    fn to(self) -> T;
}

macro_rules! scalars {
    ($($t:ty),*) => {$(
        impl To<$t> for $t {
            fn to(self) -> $t {
                self
            }
        }
        impl To<$t> for Option<$t> {
            fn to(self) -> $t {
                self.unwrap_or_default()
            }
        }
    )*};
}
scalars!(String, bool, i32, i64);

impl<A: To<B>, B> To<Option<B>> for Option<A> {
    fn to(self) -> Option<B> {
        self.map(To::to)
    }
}

impl<A: To<B>, B> To<Vec<B>> for Vec<A> {
    fn to(self) -> Vec<B> {
        self.into_iter().map(To::to).collect()
    }
}

/// Repeated fields: empty is absent, as in Kubernetes' JSON (`omitempty`).
impl<A: To<B>, B> To<Option<Vec<B>>> for Vec<A> {
    fn to(self) -> Option<Vec<B>> {
        (!self.is_empty()).then(|| self.into_iter().map(To::to).collect())
    }
}

impl<A: To<B>, B> To<BTreeMap<String, B>> for BTreeMap<String, A> {
    fn to(self) -> BTreeMap<String, B> {
        self.into_iter().map(|(k, v)| (k, v.to())).collect()
    }
}

impl<A: To<B>, B> To<Option<BTreeMap<String, B>>> for BTreeMap<String, A> {
    fn to(self) -> Option<BTreeMap<String, B>> {
        (!self.is_empty()).then(|| self.into_iter().map(|(k, v)| (k, v.to())).collect())
    }
}

impl To<Quantity> for k8s_pb::apimachinery::pkg::api::resource::Quantity {
    fn to(self) -> Quantity {
        Quantity(self.string.unwrap_or_default())
    }
}

impl To<Quantity> for Option<k8s_pb::apimachinery::pkg::api::resource::Quantity> {
    fn to(self) -> Quantity {
        self.unwrap_or_default().to()
    }
}

/// `type` 0 is an integer, 1 a string (`intstr.Type`).
impl To<IntOrString> for k8s_pb::apimachinery::pkg::util::intstr::IntOrString {
    fn to(self) -> IntOrString {
        match self.r#type {
            Some(1) => IntOrString::String(self.str_val.unwrap_or_default()),
            _ => IntOrString::Int(self.int_val.unwrap_or_default()),
        }
    }
}

impl To<IntOrString> for Option<k8s_pb::apimachinery::pkg::util::intstr::IntOrString> {
    fn to(self) -> IntOrString {
        self.unwrap_or_default().to()
    }
}

impl To<oa_meta::Time> for pb_meta::Time {
    fn to(self) -> oa_meta::Time {
        self.conv()
    }
}

impl To<oa_meta::ObjectMeta> for pb_meta::ObjectMeta {
    fn to(self) -> oa_meta::ObjectMeta {
        self.conv()
    }
}

impl To<oa_meta::ObjectMeta> for Option<pb_meta::ObjectMeta> {
    fn to(self) -> oa_meta::ObjectMeta {
        self.conv().unwrap_or_default()
    }
}

/// `conv!(oa::T <- pb::T { field, field = source, … })`: the k8s-openapi
/// type from the protobuf one, each field from the protobuf field of the
/// same name, or the one given (`= r#type`; `= (embedded.field)`; `=
/// default`: none).
macro_rules! conv {
    ($om:ident :: $on:ident <- $pm:ident :: $pn:ident { $($f:ident $(= $src:tt)?),* $(,)? }) => {
        impl To<$om::$on> for $pm::$pn {
            fn to(self) -> $om::$on {
                $om::$on { $($f: field!(self, $f $(, $src)?)),* }
            }
        }
        impl To<$om::$on> for Option<$pm::$pn> {
            fn to(self) -> $om::$on {
                self.unwrap_or_default().to()
            }
        }
    };
}

macro_rules! field {
    ($s:ident, $f:ident) => {
        $s.$f.to()
    };
    ($s:ident, $f:ident, default) => {
        Default::default()
    };
    ($s:ident, $f:ident, ($e:ident . $g:ident)) => {
        $s.$e
            .as_ref()
            .map(|e| e.$g.clone())
            .unwrap_or_default()
            .to()
    };
    ($s:ident, $f:ident, $g:ident) => {
        $s.$g.to()
    };
}

// For the other kinds' modules (a Job's pod template is a Pod's spec).
pub(super) use {conv, field};

conv!(oa_core::AWSElasticBlockStoreVolumeSource <- pb_core::AwsElasticBlockStoreVolumeSource {
    fs_type, partition, read_only, volume_id
});
conv!(oa_core::Affinity <- pb_core::Affinity { node_affinity, pod_affinity, pod_anti_affinity });
conv!(oa_core::AppArmorProfile <- pb_core::AppArmorProfile { localhost_profile, type_ = r#type });
conv!(oa_core::AzureDiskVolumeSource <- pb_core::AzureDiskVolumeSource {
    caching_mode, disk_name, disk_uri, fs_type, kind, read_only
});
conv!(oa_core::AzureFileVolumeSource <- pb_core::AzureFileVolumeSource {
    read_only, secret_name, share_name
});
conv!(oa_core::CSIVolumeSource <- pb_core::CSIVolumeSource {
    driver, fs_type, node_publish_secret_ref, read_only, volume_attributes
});
conv!(oa_core::Capabilities <- pb_core::Capabilities { add, drop });
conv!(oa_core::CephFSVolumeSource <- pb_core::CephFsVolumeSource {
    monitors, path, read_only, secret_file, secret_ref, user
});
conv!(oa_core::CinderVolumeSource <- pb_core::CinderVolumeSource {
    fs_type, read_only, secret_ref, volume_id
});
conv!(oa_core::ClusterTrustBundleProjection <- pb_core::ClusterTrustBundleProjection {
    label_selector, name, optional, path, signer_name, user = default
});
conv!(oa_core::ConfigMapEnvSource <- pb_core::ConfigMapEnvSource {
    name = (local_object_reference.name), optional
});
conv!(oa_core::ConfigMapKeySelector <- pb_core::ConfigMapKeySelector {
    key, name = (local_object_reference.name), optional
});
conv!(oa_core::ConfigMapProjection <- pb_core::ConfigMapProjection {
    items, name = (local_object_reference.name), optional
});
conv!(oa_core::ConfigMapVolumeSource <- pb_core::ConfigMapVolumeSource {
    default_mode, default_user = default, items, name = (local_object_reference.name), optional
});
conv!(oa_core::Container <- pb_core::Container {
    args, command, env, env_from, image, image_pull_policy, lifecycle, liveness_probe, name, ports,
    readiness_probe, resize_policy, resources, restart_policy, restart_policy_rules,
    security_context, startup_probe, stdin, stdin_once, termination_message_path,
    termination_message_policy, tty, volume_devices, volume_mounts, working_dir
});
conv!(oa_core::ContainerExtendedResourceRequest <- pb_core::ContainerExtendedResourceRequest {
    container_name, request_name, resource_name
});
conv!(oa_core::ContainerPort <- pb_core::ContainerPort {
    container_port, host_ip, host_port, name, protocol
});
conv!(oa_core::ContainerResizePolicy <- pb_core::ContainerResizePolicy {
    resource_name, restart_policy
});
conv!(oa_core::ContainerRestartRule <- pb_core::ContainerRestartRule { action, exit_codes });
conv!(oa_core::ContainerRestartRuleOnExitCodes <- pb_core::ContainerRestartRuleOnExitCodes {
    operator, values
});
conv!(oa_core::ContainerState <- pb_core::ContainerState { running, terminated, waiting });
conv!(oa_core::ContainerStateRunning <- pb_core::ContainerStateRunning { started_at });
conv!(oa_core::ContainerStateTerminated <- pb_core::ContainerStateTerminated {
    container_id, exit_code, finished_at, message, reason, signal, started_at
});
conv!(oa_core::ContainerStateWaiting <- pb_core::ContainerStateWaiting { message, reason });
conv!(oa_core::ContainerStatus <- pb_core::ContainerStatus {
    allocated_resources, allocated_resources_status, container_id, image, image_id, last_state,
    name, ready, resources, restart_count, started, state, stop_signal, user, volume_mounts
});
conv!(oa_core::ContainerUser <- pb_core::ContainerUser { linux });
conv!(oa_core::DownwardAPIProjection <- pb_core::DownwardAPIProjection { items });
conv!(oa_core::DownwardAPIVolumeFile <- pb_core::DownwardAPIVolumeFile {
    field_ref, mode, path, resource_field_ref, user = default
});
conv!(oa_core::DownwardAPIVolumeSource <- pb_core::DownwardAPIVolumeSource {
    default_mode, default_user = default, items
});
conv!(oa_core::EmptyDirVolumeSource <- pb_core::EmptyDirVolumeSource {
    medium, mode = default, size_limit
});
conv!(oa_core::EnvFromSource <- pb_core::EnvFromSource { config_map_ref, prefix, secret_ref });
conv!(oa_core::EnvVar <- pb_core::EnvVar { name, value, value_from });
conv!(oa_core::EnvVarSource <- pb_core::EnvVarSource {
    config_map_key_ref, field_ref, file_key_ref, resource_field_ref, secret_key_ref
});
conv!(oa_core::EphemeralContainer <- pb_core::EphemeralContainer {
    args = (ephemeral_container_common.args), command = (ephemeral_container_common.command),
    env = (ephemeral_container_common.env), env_from = (ephemeral_container_common.env_from),
    image = (ephemeral_container_common.image),
    image_pull_policy = (ephemeral_container_common.image_pull_policy),
    lifecycle = (ephemeral_container_common.lifecycle),
    liveness_probe = (ephemeral_container_common.liveness_probe),
    name = (ephemeral_container_common.name), ports = (ephemeral_container_common.ports),
    readiness_probe = (ephemeral_container_common.readiness_probe),
    resize_policy = (ephemeral_container_common.resize_policy),
    resources = (ephemeral_container_common.resources),
    restart_policy = (ephemeral_container_common.restart_policy),
    restart_policy_rules = (ephemeral_container_common.restart_policy_rules),
    security_context = (ephemeral_container_common.security_context),
    startup_probe = (ephemeral_container_common.startup_probe),
    stdin = (ephemeral_container_common.stdin),
    stdin_once = (ephemeral_container_common.stdin_once), target_container_name,
    termination_message_path = (ephemeral_container_common.termination_message_path),
    termination_message_policy = (ephemeral_container_common.termination_message_policy),
    tty = (ephemeral_container_common.tty),
    volume_devices = (ephemeral_container_common.volume_devices),
    volume_mounts = (ephemeral_container_common.volume_mounts),
    working_dir = (ephemeral_container_common.working_dir)
});
conv!(oa_core::EphemeralVolumeSource <- pb_core::EphemeralVolumeSource { volume_claim_template });
conv!(oa_core::ExecAction <- pb_core::ExecAction { command });
conv!(oa_core::FCVolumeSource <- pb_core::FcVolumeSource {
    fs_type, lun, read_only, target_wwns = target_ww_ns, wwids
});
conv!(oa_core::FileKeySelector <- pb_core::FileKeySelector { key, optional, path, volume_name });
conv!(oa_core::FlexVolumeSource <- pb_core::FlexVolumeSource {
    driver, fs_type, options, read_only, secret_ref
});
conv!(oa_core::FlockerVolumeSource <- pb_core::FlockerVolumeSource { dataset_name, dataset_uuid });
conv!(oa_core::GCEPersistentDiskVolumeSource <- pb_core::GcePersistentDiskVolumeSource {
    fs_type, partition, pd_name, read_only
});
conv!(oa_core::GRPCAction <- pb_core::GrpcAction { mode = default, port, service });
conv!(oa_core::GitRepoVolumeSource <- pb_core::GitRepoVolumeSource {
    directory, repository, revision
});
conv!(oa_core::GlusterfsVolumeSource <- pb_core::GlusterfsVolumeSource {
    endpoints, path, read_only
});
conv!(oa_core::HTTPGetAction <- pb_core::HttpGetAction {
    host, http_headers, path, port, protocol = default, scheme
});
conv!(oa_core::HTTPHeader <- pb_core::HttpHeader { name, value });
conv!(oa_core::HostAlias <- pb_core::HostAlias { hostnames, ip });
conv!(oa_core::HostIP <- pb_core::HostIp { ip });
conv!(oa_core::HostPathVolumeSource <- pb_core::HostPathVolumeSource { path, type_ = r#type });
conv!(oa_core::ISCSIVolumeSource <- pb_core::IscsiVolumeSource {
    chap_auth_discovery, chap_auth_session, fs_type, initiator_name, iqn, iscsi_interface, lun,
    portals, read_only, secret_ref, target_portal
});
conv!(oa_core::ImageVolumeSource <- pb_core::ImageVolumeSource { pull_policy, reference });
conv!(oa_core::KeyToPath <- pb_core::KeyToPath { key, mode, path, user = default });
conv!(oa_core::Lifecycle <- pb_core::Lifecycle { post_start, pre_stop, stop_signal });
conv!(oa_core::LifecycleHandler <- pb_core::LifecycleHandler { exec, http_get, sleep, tcp_socket });
conv!(oa_core::LinuxContainerUser <- pb_core::LinuxContainerUser { gid, supplemental_groups, uid });
conv!(oa_core::LocalObjectReference <- pb_core::LocalObjectReference { name });
conv!(oa_core::NFSVolumeSource <- pb_core::NfsVolumeSource { path, read_only, server });
conv!(oa_core::NodeAffinity <- pb_core::NodeAffinity {
    preferred_during_scheduling_ignored_during_execution,
    required_during_scheduling_ignored_during_execution
});
conv!(oa_core::NodeSelector <- pb_core::NodeSelector { node_selector_terms });
conv!(oa_core::NodeSelectorRequirement <- pb_core::NodeSelectorRequirement {
    key, operator, values
});
conv!(oa_core::NodeSelectorTerm <- pb_core::NodeSelectorTerm { match_expressions, match_fields });
conv!(oa_core::ObjectFieldSelector <- pb_core::ObjectFieldSelector { api_version, field_path });
conv!(oa_core::PersistentVolumeClaimSpec <- pb_core::PersistentVolumeClaimSpec {
    access_modes, data_source, data_source_ref, resources, selector, storage_class_name,
    volume_attributes_class_name, volume_mode, volume_name
});
conv!(oa_core::PersistentVolumeClaimTemplate <- pb_core::PersistentVolumeClaimTemplate {
    metadata, spec
});
conv!(oa_core::PersistentVolumeClaimVolumeSource <- pb_core::PersistentVolumeClaimVolumeSource {
    claim_name, read_only
});
conv!(oa_core::PhotonPersistentDiskVolumeSource <- pb_core::PhotonPersistentDiskVolumeSource {
    fs_type, pd_id
});
conv!(oa_core::Pod <- pb_core::Pod { metadata, spec, status });
conv!(oa_core::PodAffinity <- pb_core::PodAffinity {
    preferred_during_scheduling_ignored_during_execution,
    required_during_scheduling_ignored_during_execution
});
conv!(oa_core::PodAffinityTerm <- pb_core::PodAffinityTerm {
    label_selector, match_label_keys, mismatch_label_keys, namespace_selector, namespaces,
    topology_key
});
conv!(oa_core::PodAntiAffinity <- pb_core::PodAntiAffinity {
    preferred_during_scheduling_ignored_during_execution,
    required_during_scheduling_ignored_during_execution
});
conv!(oa_core::PodCertificateProjection <- pb_core::PodCertificateProjection {
    certificate_chain_path, credential_bundle_path, key_path, key_type, max_expiration_seconds,
    signer_name, user = default, user_annotations
});
conv!(oa_core::PodCondition <- pb_core::PodCondition {
    last_probe_time, last_transition_time, message, observed_generation, reason, status,
    type_ = r#type
});
conv!(oa_core::PodDNSConfig <- pb_core::PodDnsConfig { nameservers, options, searches });
conv!(oa_core::PodDNSConfigOption <- pb_core::PodDnsConfigOption { name, value });
conv!(oa_core::PodExtendedResourceClaimStatus <- pb_core::PodExtendedResourceClaimStatus {
    request_mappings, resource_claim_name
});
conv!(oa_core::PodIP <- pb_core::PodIp { ip });
conv!(oa_core::PodOS <- pb_core::PodOs { name });
conv!(oa_core::PodReadinessGate <- pb_core::PodReadinessGate { condition_type });
conv!(oa_core::PodResourceClaim <- pb_core::PodResourceClaim {
    name, resource_claim_name, resource_claim_template_name
});
conv!(oa_core::PodResourceClaimStatus <- pb_core::PodResourceClaimStatus {
    name, resource_claim_name
});
conv!(oa_core::PodSchedulingGate <- pb_core::PodSchedulingGate { name });
conv!(oa_core::PodSecurityContext <- pb_core::PodSecurityContext {
    app_armor_profile, fs_group, fs_group_change_policy, run_as_group, run_as_non_root,
    run_as_user, se_linux_change_policy, se_linux_options, seccomp_profile, supplemental_groups,
    supplemental_groups_policy, sysctls, windows_options
});
conv!(oa_core::PodSpec <- pb_core::PodSpec {
    active_deadline_seconds, affinity, automount_service_account_token, containers, dns_config,
    dns_policy, enable_service_links, ephemeral_containers, eviction_responders = default,
    host_aliases, host_ipc, host_network, host_pid, host_users, hostname, hostname_override,
    image_pull_secrets, init_containers, node_name, node_selector, os, overhead, preemption_policy,
    priority, priority_class_name, readiness_gates, resource_claims, resources, restart_policy,
    runtime_class_name, scheduler_name, scheduling_gates, scheduling_group = default,
    security_context, service_account, service_account_name, set_hostname_as_fqdn,
    share_process_namespace, subdomain, termination_grace_period_seconds, tolerations,
    topology_spread_constraints, volumes
});
conv!(oa_core::PodStatus <- pb_core::PodStatus {
    allocated_resources, conditions, container_statuses, ephemeral_container_statuses,
    extended_resource_claim_status, host_ip, host_ips, init_container_statuses, message,
    node_allocatable_resource_claim_statuses = default, nominated_node_name, observed_generation,
    phase, pod_ip, pod_ips, qos_class, reason, resize, resource_claim_statuses, resources,
    start_time, volume_health = default
});
conv!(oa_core::PortworxVolumeSource <- pb_core::PortworxVolumeSource {
    fs_type, read_only, volume_id
});
conv!(oa_core::PreferredSchedulingTerm <- pb_core::PreferredSchedulingTerm { preference, weight });
conv!(oa_core::Probe <- pb_core::Probe {
    exec = (handler.exec), failure_threshold, grpc = (handler.grpc), http_get = (handler.http_get),
    initial_delay_seconds, period_seconds, success_threshold, tcp_socket = (handler.tcp_socket),
    termination_grace_period_seconds, timeout_seconds
});
conv!(oa_core::ProjectedVolumeSource <- pb_core::ProjectedVolumeSource {
    default_mode, default_user = default, sources
});
conv!(oa_core::QuobyteVolumeSource <- pb_core::QuobyteVolumeSource {
    group, read_only, registry, tenant, user, volume
});
conv!(oa_core::RBDVolumeSource <- pb_core::RbdVolumeSource {
    fs_type, image, keyring, monitors, pool, read_only, secret_ref, user
});
conv!(oa_core::ResourceClaim <- pb_core::ResourceClaim { name, request });
conv!(oa_core::ResourceFieldSelector <- pb_core::ResourceFieldSelector {
    container_name, divisor, resource
});
conv!(oa_core::ResourceHealth <- pb_core::ResourceHealth {
    health, message = default, resource_id
});
conv!(oa_core::ResourceRequirements <- pb_core::ResourceRequirements { claims, limits, requests });
conv!(oa_core::ResourceStatus <- pb_core::ResourceStatus { name, resources });
conv!(oa_core::SELinuxOptions <- pb_core::SeLinuxOptions { level, role, type_ = r#type, user });
conv!(oa_core::ScaleIOVolumeSource <- pb_core::ScaleIoVolumeSource {
    fs_type, gateway, protection_domain, read_only, secret_ref, ssl_enabled, storage_mode,
    storage_pool, system, volume_name
});
conv!(oa_core::SeccompProfile <- pb_core::SeccompProfile { localhost_profile, type_ = r#type });
conv!(oa_core::SecretEnvSource <- pb_core::SecretEnvSource {
    name = (local_object_reference.name), optional
});
conv!(oa_core::SecretKeySelector <- pb_core::SecretKeySelector {
    key, name = (local_object_reference.name), optional
});
conv!(oa_core::SecretProjection <- pb_core::SecretProjection {
    items, name = (local_object_reference.name), optional
});
conv!(oa_core::SecretVolumeSource <- pb_core::SecretVolumeSource {
    default_mode, default_user = default, items, optional, secret_name
});
conv!(oa_core::SecurityContext <- pb_core::SecurityContext {
    allow_privilege_escalation, app_armor_profile, capabilities, privileged, proc_mount,
    read_only_root_filesystem, run_as_group, run_as_non_root, run_as_user, se_linux_options,
    seccomp_profile, windows_options
});
conv!(oa_core::ServiceAccountTokenProjection <- pb_core::ServiceAccountTokenProjection {
    audience, expiration_seconds, path, user = default
});
conv!(oa_core::SleepAction <- pb_core::SleepAction { seconds });
conv!(oa_core::StorageOSVolumeSource <- pb_core::StorageOsVolumeSource {
    fs_type, read_only, secret_ref, volume_name, volume_namespace
});
conv!(oa_core::Sysctl <- pb_core::Sysctl { name, value });
conv!(oa_core::TCPSocketAction <- pb_core::TcpSocketAction { host, port });
conv!(oa_core::Toleration <- pb_core::Toleration {
    effect, key, operator, toleration_seconds, value
});
conv!(oa_core::TopologySpreadConstraint <- pb_core::TopologySpreadConstraint {
    label_selector, match_label_keys, max_skew, min_domains, node_affinity_policy,
    node_taints_policy, topology_key, when_unsatisfiable
});
conv!(oa_core::TypedLocalObjectReference <- pb_core::TypedLocalObjectReference {
    api_group, kind, name
});
conv!(oa_core::TypedObjectReference <- pb_core::TypedObjectReference {
    api_group, kind, name, namespace
});
conv!(oa_core::Volume <- pb_core::Volume {
    aws_elastic_block_store = (volume_source.aws_elastic_block_store),
    azure_disk = (volume_source.azure_disk), azure_file = (volume_source.azure_file),
    cephfs = (volume_source.cephfs), cinder = (volume_source.cinder),
    config_map = (volume_source.config_map), csi = (volume_source.csi),
    downward_api = (volume_source.downward_api), empty_dir = (volume_source.empty_dir),
    ephemeral = (volume_source.ephemeral), fc = (volume_source.fc),
    flex_volume = (volume_source.flex_volume), flocker = (volume_source.flocker),
    gce_persistent_disk = (volume_source.gce_persistent_disk), git_repo = (volume_source.git_repo),
    glusterfs = (volume_source.glusterfs), host_path = (volume_source.host_path),
    image = (volume_source.image), iscsi = (volume_source.iscsi), name, nfs = (volume_source.nfs),
    persistent_volume_claim = (volume_source.persistent_volume_claim),
    photon_persistent_disk = (volume_source.photon_persistent_disk),
    portworx_volume = (volume_source.portworx_volume), projected = (volume_source.projected),
    quobyte = (volume_source.quobyte), rbd = (volume_source.rbd),
    scale_io = (volume_source.scale_io), secret = (volume_source.secret),
    storageos = (volume_source.storageos), vsphere_volume = (volume_source.vsphere_volume)
});
conv!(oa_core::VolumeDevice <- pb_core::VolumeDevice { device_path, name });
conv!(oa_core::VolumeMount <- pb_core::VolumeMount {
    bind_mount_options = default, mount_path, mount_propagation, name, read_only,
    recursive_read_only, sub_path, sub_path_expr
});
conv!(oa_core::VolumeMountStatus <- pb_core::VolumeMountStatus {
    mount_path, name, read_only, recursive_read_only, volume_status = default
});
conv!(oa_core::VolumeProjection <- pb_core::VolumeProjection {
    cluster_trust_bundle, config_map, downward_api, pod_certificate, secret, service_account_token
});
conv!(oa_core::VolumeResourceRequirements <- pb_core::VolumeResourceRequirements {
    limits, requests
});
conv!(oa_core::VsphereVirtualDiskVolumeSource <- pb_core::VsphereVirtualDiskVolumeSource {
    fs_type, storage_policy_id, storage_policy_name, volume_path
});
conv!(oa_core::WeightedPodAffinityTerm <- pb_core::WeightedPodAffinityTerm {
    pod_affinity_term, weight
});
conv!(oa_core::WindowsSecurityContextOptions <- pb_core::WindowsSecurityContextOptions {
    gmsa_credential_spec, gmsa_credential_spec_name, host_process, run_as_user_name
});
conv!(oa_meta::LabelSelector <- pb_meta::LabelSelector { match_expressions, match_labels });
conv!(oa_meta::LabelSelectorRequirement <- pb_meta::LabelSelectorRequirement {
    key, operator, values
});
