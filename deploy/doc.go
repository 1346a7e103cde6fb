// Package deploy holds no code: it is the home of the deployment artefacts
// beside it (Kubernetes manifests under kubernetes/, overlays under
// overlays/ and the partition component under components/, a Job running
// consumer dlq under tools/, Prometheus rules and a scrape configuration
// under prometheus/, an Alertmanager configuration under alertmanager/, a
// Grafana dashboard under grafana/, the NATS account and users under nats/:
// permissions.conf, from which go generate writes users.sh) and of the tests that check them against
// the real metrics, the Kubernetes API types, the pinned kustomize, promtool, a
// real Prometheus server, amtool and a real Alertmanager, and KEDA v2.20's
// nats-jetstream scaler (its code paths, written again in
// kedascaler_test.go) against real nats-servers. See
// docs/OPERATIONS.md.
package deploy

//go:generate go run ./nats/nscusers -o nats/users.sh nats/permissions.conf
