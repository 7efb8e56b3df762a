//! Where a webhook's Service is, as kube-apiserver with
//! `--enable-aggregator-routing=true` finds it
//! (`k8s.io/apiserver/pkg/util/proxy.ResolveEndpoint`): the Service's port
//! numbered as the webhook's, then the EndpointSlices of the Service
//! (label `kubernetes.io/service-name`), the first that has a port of that
//! port's name and an endpoint not marked unready. Slices are taken by name
//! and endpoints in order (the real server starts at a random one): the
//! same objects always give the same address.

use crate::Store;
use serde_json::Value;
use std::net::{IpAddr, SocketAddr};

/// The address of `namespace/name`'s endpoint for service port `port`, or
/// why there is none (as the real server words it).
pub(crate) fn endpoint(
    store: &Store,
    namespace: &str,
    name: &str,
    port: u16,
) -> Result<SocketAddr, String> {
    let svc = store
        .get("services", Some(namespace), name)
        .map_err(|_| format!("service {name:?} not found"))?;
    let ty = svc
        .pointer("/spec/type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP");
    if !matches!(ty, "ClusterIP" | "LoadBalancer" | "NodePort") {
        return Err(format!("unsupported service type {ty:?}"));
    }
    let svc_port = svc
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .and_then(|ps| {
            ps.iter()
                .find(|p| p.get("port").and_then(Value::as_u64) == Some(u64::from(port)))
        })
        .ok_or_else(|| format!("no service port {port} found for service {name:?}"))?;
    let port_name = svc_port.get("name").and_then(Value::as_str).unwrap_or("");
    let selector = format!("kubernetes.io/service-name={name}");
    let slices = store
        .list(
            "endpointslices.discovery.k8s.io",
            Some(namespace),
            Some(&selector),
            None,
        )
        .unwrap_or_default();
    if slices.is_empty() {
        return Err(format!("no endpoints available for service {name:?}"));
    }
    for slice in &slices {
        let Some(ports) = slice.get("ports").and_then(Value::as_array) else {
            continue;
        };
        for p in ports {
            // A port with no name is the service's unnamed port.
            if p.get("name").and_then(Value::as_str).unwrap_or("") != port_name {
                continue;
            }
            let Some(number) = p.get("port").and_then(Value::as_u64) else {
                continue;
            };
            let endpoints = slice
                .get("endpoints")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            for ep in endpoints {
                if ep.pointer("/conditions/ready").and_then(Value::as_bool) == Some(false) {
                    continue;
                }
                let Some(addr) = ep
                    .get("addresses")
                    .and_then(Value::as_array)
                    .and_then(|a| a.first())
                    .and_then(Value::as_str)
                else {
                    continue;
                };
                let ip: IpAddr = addr.parse().map_err(|_| {
                    format!("endpoint address {addr:?} of service {name:?} is not an IP address")
                })?;
                return Ok(SocketAddr::new(ip, number as u16));
            }
        }
    }
    Err(format!("no endpoints available for service {name:?}"))
}
