# Sourced by the webhook scripts (schedulers/*/webhook.sh): what makes a
# Service reach a program of the run, which listens on the loopback.
#
#   loopback_service NAMESPACE SERVICE PORT
#
# prints a Service NAMESPACE/SERVICE (port 443 to PORT) and an EndpointSlice
# that sends it to 127.0.0.1:PORT, as YAML documents (no leading `---`).
# fakeapi resolves a webhook's service reference through them, as
# kube-apiserver does through the cluster's Service and its endpoints.
loopback_service() {
	cat <<END_OF_SERVICE
apiVersion: v1
kind: Service
metadata:
  name: $2
  namespace: $1
spec:
  ports:
  - port: 443
    protocol: TCP
    targetPort: $3
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: $2
  namespace: $1
  labels:
    kubernetes.io/service-name: $2
addressType: IPv4
ports:
- port: $3
  protocol: TCP
endpoints:
- addresses: ["127.0.0.1"]
  conditions:
    ready: true
END_OF_SERVICE
}
