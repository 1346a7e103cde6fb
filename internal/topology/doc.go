// Package topology owns what the service needs the server to hold for it:
// the source stream, the dead-letter stream, the records bucket and the
// shared durable pull consumer, all named by a Topology.
//
// Ensure finds each one or creates what is missing; Lookup only finds them
// and says which is missing. Either way what someone else made is checked
// against what the service would have made (checkDurable for the durable,
// findings.go for the streams and the bucket): a difference the service
// cannot keep its promises on is refused, the rest is a warning, and with
// Topology.Reconcile what the server can change is changed in one update
// (see converge). The result is a Setup: the consumer, the records
// (stream.KVRecords) and the settings the pipeline must follow because they
// are the server's, with the warnings and changes to log once.
//
// Ensure and Lookup wrap ErrMissing for what does not exist, ErrMismatch
// for what the service cannot run on (each problem named with its setting
// and its fix) and the jetstream sentinels; match them with errors.Is. The
// messages never name the binary's flags: the caller gives how a person
// asks it to create, to reconcile or to keep one copy (Switches), and the
// fix is said in this package's terms without them.
//
// It imports stream for what the pipeline takes from a pull (PullExpiry,
// AutoPullBatch) and the records type, never the other way round. Ensure
// and Lookup are safe for concurrent use; a Topology is a value.
package topology
