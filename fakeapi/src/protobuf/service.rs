//! Protobuf bodies of v1 Services, moved into k8s-openapi's `Service`.
//!
//! JobSet's controller (controller-runtime, which writes the built-in kinds
//! in protobuf) makes a headless Service per JobSet for its pods' host
//! names. Every field of k8s-openapi's types is named (the compiler refuses
//! a missing one).

use k8s_openapi::api::core::v1 as oa_core;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as oa_meta;
use k8s_pb::api::core::v1 as pb_core;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as pb_meta;

use super::pod::{conv, field, To};
use super::Conv;

/// A condition's time is required in JSON (`metav1.Condition`).
impl To<oa_meta::Time> for Option<pb_meta::Time> {
    fn to(self) -> oa_meta::Time {
        self.conv()
            .unwrap_or(oa_meta::Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH))
    }
}

conv!(oa_core::ClientIPConfig <- pb_core::ClientIpConfig { timeout_seconds });
conv!(oa_core::LoadBalancerIngress <- pb_core::LoadBalancerIngress { hostname, ip, ip_mode, ports });
conv!(oa_core::LoadBalancerStatus <- pb_core::LoadBalancerStatus { ingress });
conv!(oa_core::PortStatus <- pb_core::PortStatus { error, port, protocol });
conv!(oa_core::Service <- pb_core::Service { metadata, spec, status });
conv!(oa_core::ServicePort <- pb_core::ServicePort {
    app_protocol, name, node_port, port, protocol, target_port
});
conv!(oa_core::ServiceSpec <- pb_core::ServiceSpec {
    allocate_load_balancer_node_ports, cluster_ip, cluster_ips, external_ips, external_name,
    external_traffic_policy, health_check_node_port, internal_traffic_policy, ip_families,
    ip_family_policy, load_balancer_class, load_balancer_ip, load_balancer_source_ranges, ports,
    publish_not_ready_addresses, selector, session_affinity, session_affinity_config,
    traffic_distribution, type_ = r#type
});
conv!(oa_core::ServiceStatus <- pb_core::ServiceStatus { conditions, load_balancer });
conv!(oa_core::SessionAffinityConfig <- pb_core::SessionAffinityConfig { client_ip });
conv!(oa_meta::Condition <- pb_meta::Condition {
    last_transition_time, message, observed_generation, reason, status, type_ = r#type
});
