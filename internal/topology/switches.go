package topology

// Switches are how a person asks the caller for what this package does
// only on request, as the messages name them where they say the fix: the
// binary gives its flags. An empty switch is not named: the message says
// the fix in this package's terms instead (Ensure, reconciling).
type Switches struct {
	// Create asks for Ensure rather than Lookup: what is missing is made.
	Create string
	// Reconcile asks for Topology.Reconcile.
	Reconcile string
	// OneReplica asks for a Topology.Replicas of 1.
	OneReplica string
}

// orCreate is ", or start with <Create>" ("" without a switch), after a
// person's own way of making what is missing.
func (s Switches) orCreate() string {
	if s.Create == "" {
		return ""
	}
	return ", or start with " + s.Create
}

// creator is who makes a durable a person deleted.
func (s Switches) creator() string {
	if s.Create == "" {
		return "Ensure"
	}
	return s.Create
}

// reconciler is what changes a setting on request, as the subject of a
// phrase: "<reconciler> changes it".
func (s Switches) reconciler() string {
	if s.Reconcile == "" {
		return "reconciling"
	}
	return s.Reconcile
}

// toReconcile is how a person asks for reconciling, as an imperative.
func (s Switches) toReconcile() string {
	if s.Reconcile == "" {
		return "reconcile"
	}
	return "start with " + s.Reconcile
}

// oneReplica is " (<OneReplica>)", or "" without a switch.
func (s Switches) oneReplica() string {
	if s.OneReplica == "" {
		return ""
	}
	return " (" + s.OneReplica + ")"
}
