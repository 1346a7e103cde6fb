// Package deploy holds no code: it is the home of the deployment artefacts
// beside it (Kubernetes manifests under kubernetes/, an example overlay
// under overlays/example/, a Job running consumer dlq under tools/,
// Prometheus rules and a scrape configuration under prometheus/, a Grafana
// dashboard under grafana/) and of the tests that check them against the real metrics, the
// Kubernetes API types, promtool and a real Prometheus server. See
// docs/OPERATIONS.md.
package deploy
