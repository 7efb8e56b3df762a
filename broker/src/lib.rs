//! batkube: the broker between Batsim and Kubernetes schedulers.
