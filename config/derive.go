package config

import (
	"time"

	"go.yaml.in/yaml/v3"
)

// DefaultRealReplicas is stream.replicas when it is not given and nats.url
// is: what --create-streams makes on a real server.
const DefaultRealReplicas = 3

// derivedPaths are the settings derive sets when they are not given.
var derivedPaths = []string{"stream.replicas", "consumer.ack_wait", "consumer.handler_timeout", "downstream.timeout"}

// derive sets the settings whose valid range depends on another, when they
// were not given (by the file, the environment or a flag), from the ones
// that were: downstream.timeout < consumer.handler_timeout <
// consumer.ack_wait. Only a contradiction between given settings is then
// left for Validate to refuse. consumer.pull_batch 0 is derived later, from
// the values these end with (see stream.AutoPullBatch).
//
// The built-in values these start from are Default()'s (30s, 6s, 5s):
//
//   - handler_timeout: min(6s, 4/5 ack_wait), raised to downstream.timeout +
//     max(1/5 of it, 100ms) when downstream.timeout is given, and kept below a
//     given ack_wait, and under it by one round more than a given pull_batch
//     takes (ack_wait / (ceil(pull_batch / concurrency) + 1));
//   - ack_wait: max(30s, 2 x handler_timeout, (rounds + 1) x
//     handler_timeout), rounds being ceil(pull_batch / concurrency) of a
//     given pull_batch: a read waits in the client buffer for the rounds of
//     the reads pulled ahead of it;
//   - downstream.timeout: min(5s, 5/6 handler_timeout);
//   - stream.replicas: 3 when nats.url is set (a real server, whose copies
//     are what billing rests on), 1 on the embedded server. One copy on a
//     real server is only made when it is asked for.
func (c *Config) derive(given func(yamlPath string) bool) {
	if !given("stream.replicas") && c.NATS.URL != "" {
		c.Stream.Replicas = DefaultRealReplicas
	}
	def := Default()
	k, d := &c.Consumer, &c.Downstream
	ack := k.AckWait
	if !given("consumer.ack_wait") {
		ack = def.Consumer.AckWait
	}
	// A read pulled may wait in the client buffer for the reads ahead of it,
	// rounds handler timeouts at most: the ack wait must outlast them.
	var rounds time.Duration
	if k.PullBatch > 0 && k.Concurrency > 0 {
		rounds = time.Duration((k.PullBatch + k.Concurrency - 1) / k.Concurrency)
	}
	if !given("consumer.handler_timeout") {
		h := min(def.Consumer.HandlerTimeout, ack*4/5)
		if given("downstream.timeout") {
			h = max(h, d.Timeout+max(d.Timeout/5, 100*time.Millisecond))
			if given("consumer.ack_wait") && h >= ack {
				h = ack * 4 / 5
			}
		}
		if rounds > 0 && given("consumer.ack_wait") {
			h = min(h, ack/(rounds+1))
		}
		k.HandlerTimeout = h
	}
	if !given("consumer.ack_wait") {
		k.AckWait = max(def.Consumer.AckWait, 2*k.HandlerTimeout, (rounds+1)*k.HandlerTimeout)
	}
	if !given("downstream.timeout") {
		d.Timeout = min(def.Downstream.Timeout, k.HandlerTimeout*5/6)
	}
}

// yamlLeaves returns the YAML paths of the settings the mapping n sets.
func yamlLeaves(n *yaml.Node, prefix string, into map[string]bool) {
	for _, kv := range pairs(n) {
		path := prefix + kv[0].Value
		if isLeaf(path) {
			into[path] = true
			continue
		}
		yamlLeaves(kv[1], path+".", into)
	}
}
