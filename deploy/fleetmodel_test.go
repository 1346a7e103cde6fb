package deploy_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// A small model of a fleet, minute by minute, that writes the series the
// binary exports (and those of kube-state-metrics and KEDA the alerts read)
// as promtool input: reads arrive in a stream, wait in a FIFO queue, and
// the replicas that consume bill them at their capacity while NATS and the
// rate engine allow. The situations (situations_test.go) set its knobs per
// minute; the replay asserts which alert fires when.

// world is what a situation sets, per fleet, for one minute.
type world struct {
	arrivals    float64         // reads published this minute
	perPod      float64         // reads one consuming replica bills a minute
	pods        []string        // the replicas that exist (scraped while up)
	down        map[string]bool // replicas not scraped (crashed, gone)
	natsDown    bool            // every replica connecting
	engineDown  bool            // the breaker open on every replica
	invalid     float64         // share of reads invalid (the head-end's)
	refused     float64         // share the engine refuses with 422
	exhausted   bool            // one read dead-lettered exhausted this minute
	expired     bool            // one read dead-lettered expired this minute
	bucketGone  bool            // the records bucket deleted
	kedaMissing bool            // KEDA reports no lag for the ScaledObject
	restart     map[string]bool // replicas whose process restarts this minute
}

// fleetID names a fleet: its Service (and ScaledObject), stream and durable.
type fleetID struct{ service, stream, durable string }

var (
	fleetP0 = fleetID{"meter-consumer-p0", "METER_READS_0", "meter-consumer-0"}
	fleetP1 = fleetID{"meter-consumer-p1", "METER_READS_1", "meter-consumer-1"}
)

type chunk struct {
	minute int
	n      float64
}

// fleetModel is one fleet's state and the series it has written so far.
type fleetModel struct {
	id       fleetID
	queue    []chunk
	started  map[string]int     // each replica's process start, in minutes
	restarts map[string]float64 // kube-state-metrics' restart counter
	pods     map[string]*podCounters
	series   map[string][]string // series text → one value per minute
	minutes  int
	lastRead map[string][4]float64 // pending, read timestamp, oldest age, ack pending: kept while NATS is lost
}

type podCounters struct {
	ack, nak, term, invalid, refused, transient float64
	exhausted, expired, permanent               float64
	ageOK, ageAck, ageTerm                      float64
}

func newFleetModel(id fleetID) *fleetModel {
	return &fleetModel{id: id, started: map[string]int{}, restarts: map[string]float64{},
		pods: map[string]*podCounters{}, series: map[string][]string{}, lastRead: map[string][4]float64{}}
}

// set records value v of a series at the current minute, padding earlier
// minutes with "_" (no sample) for a series new now.
func (f *fleetModel) set(name string, labels map[string]string, v string) {
	keys := slices.Sorted(maps.Keys(labels))
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s=%q", k, labels[k])
	}
	s := name + "{" + b.String() + "}"
	vs := f.series[s]
	for len(vs) < f.minutes {
		vs = append(vs, "_")
	}
	f.series[s] = append(vs, v)
}

func num(v float64) string { return fmt.Sprintf("%g", v) }

// step advances the fleet by one minute in world w.
func (f *fleetModel) step(w world) {
	m := f.minutes
	if w.arrivals > 0 {
		f.queue = append(f.queue, chunk{m, w.arrivals})
	}
	consuming := 0
	for _, p := range w.pods {
		if _, ok := f.started[p]; !ok || w.restart[p] {
			if ok {
				f.restarts[p]++
			}
			f.started[p] = m
		}
		if f.pods[p] == nil {
			f.pods[p] = &podCounters{}
		}
		if !w.down[p] && !w.natsDown && !w.restart[p] {
			consuming++
		}
	}
	// Bill from the head of the queue, shared among the consuming replicas.
	if consuming > 0 && !w.engineDown {
		budget := w.perPod * float64(consuming)
		for budget > 0 && len(f.queue) > 0 {
			c := &f.queue[0]
			n := min(c.n, budget)
			budget -= n
			c.n -= n
			late := m-c.minute > 15
			for _, p := range w.pods {
				if w.down[p] || w.natsDown || w.restart[p] {
					continue
				}
				share, pc := n/float64(consuming), f.pods[p]
				bad := share * (w.invalid + w.refused)
				pc.ack += share - bad
				pc.term += bad
				pc.ageAck += share - bad
				pc.ageTerm += bad
				if !late {
					pc.ageOK += share - bad
				}
				pc.invalid += share * w.invalid
				pc.refused += share * w.refused
				pc.permanent += bad
			}
			if c.n <= 0 {
				f.queue = f.queue[1:]
			}
		}
	}
	pending := 0.0
	for _, c := range f.queue {
		pending += c.n
	}
	oldest := 0.0
	if len(f.queue) > 0 {
		oldest = float64(m-f.queue[0].minute) * 60
	}
	// Reads delivered and not yet settled at a reading: a few per replica
	// while reads arrive (all of them while the engine is down).
	inFlight := 0.0
	if w.arrivals > 0 {
		inFlight = 20 * float64(consuming)
	}
	first := true
	for _, p := range w.pods {
		if w.restart[p] {
			f.pods[p] = &podCounters{} // a new process counts from 0
		}
		pc, pod := f.pods[p], f.id.service+"-"+p
		labels := func(extra ...string) map[string]string {
			l := map[string]string{"namespace": "billing", "job": "meter-consumer", "service": f.id.service,
				"pod": pod, "stream": f.id.stream, "durable": f.id.durable}
			for i := 0; i+1 < len(extra); i += 2 {
				l[extra[i]] = extra[i+1]
			}
			return l
		}
		ksm := map[string]string{"namespace": "billing", "job": "kube-state-metrics", "pod": pod, "container": "consumer"}
		f.set("kube_pod_container_status_restarts_total", ksm, num(f.restarts[p]))
		if w.down[p] || w.restart[p] {
			// not scraped: Prometheus marks its series stale
			f.set("up", map[string]string{"namespace": "billing", "job": "meter-consumer", "service": f.id.service, "pod": pod}, "0")
			for s := range f.series {
				if strings.Contains(s, fmt.Sprintf("pod=%q", pod)) && !strings.HasPrefix(s, "up{") && !strings.HasPrefix(s, "kube_") {
					vs := f.series[s]
					for len(vs) < m {
						vs = append(vs, "_")
					}
					if len(vs) == m {
						f.series[s] = append(vs, "stale")
					}
				}
			}
			continue
		}
		if w.exhausted && first {
			pc.exhausted++
			pc.term++
			pc.ageTerm++
		}
		if w.expired && first {
			pc.expired++
			pc.term++
			pc.ageTerm++
		}
		if w.engineDown {
			pc.nak += w.perPod / 60 // the breaker's probes
			pc.transient += w.perPod / 60
		}
		f.set("up", map[string]string{"namespace": "billing", "job": "meter-consumer", "service": f.id.service, "pod": pod}, "1")
		f.set("process_start_time_seconds", labels(), num(float64(f.started[p]*60)))
		for _, o := range []struct {
			outcome string
			v       float64
		}{{"ack", pc.ack}, {"nak", pc.nak}, {"term", pc.term}} {
			f.set("meter_consumer_messages_total", labels("outcome", o.outcome), num(o.v))
		}
		f.set("meter_consumer_failures_total", labels("class", "permanent", "cause", "invalid_payload"), num(pc.invalid))
		f.set("meter_consumer_failures_total", labels("class", "permanent", "cause", "http_422"), num(pc.refused))
		f.set("meter_consumer_failures_total", labels("class", "transient", "cause", "connection"), num(pc.transient))
		f.set("meter_consumer_dead_letters_total", labels("reason", "permanent"), num(pc.permanent))
		f.set("meter_consumer_dead_letters_total", labels("reason", "exhausted"), num(pc.exhausted))
		f.set("meter_consumer_dead_letters_total", labels("reason", "expired"), num(pc.expired))
		f.set("meter_consumer_downstream_rejected_total", labels("cause", "http_503"), "0")
		f.set("meter_consumer_settled_read_age_seconds_bucket", labels("outcome", "ack", "le", "900"), num(pc.ageOK))
		f.set("meter_consumer_settled_read_age_seconds_count", labels("outcome", "ack"), num(pc.ageAck))
		f.set("meter_consumer_settled_read_age_seconds_count", labels("outcome", "term"), num(pc.ageTerm))
		breaker := 0.0
		if w.engineDown {
			breaker = 2
		}
		f.set("meter_consumer_breaker_state", labels(), num(breaker))
		c, why := 1.0, "connecting"
		if w.natsDown {
			c = 0
		}
		f.set("meter_consumer_consuming", labels(), num(c))
		f.set("meter_consumer_not_consuming", labels("reason", why), num(1-c))
		// The backlog as last read: a replica without NATS keeps its last
		// reading (and its timestamp).
		read := f.lastRead[p]
		if !w.natsDown {
			read = [4]float64{pending, float64(m * 60), oldest, inFlight}
			f.lastRead[p] = read
		}
		f.set("meter_consumer_pending_messages", labels(), num(read[0]))
		f.set("meter_consumer_ack_pending_messages", labels(), num(read[3]))
		f.set("meter_consumer_max_ack_pending", labels(), "1000")
		f.set("meter_consumer_backlog_read_timestamp_seconds", labels(), num(read[1]))
		f.set("meter_consumer_oldest_unacked_age_seconds", labels(), num(read[2]))
		f.set("meter_consumer_stream_max_age_seconds", labels(), num(7*24*3600))
		f.set("meter_consumer_durable_paused", labels(), "0")
		bucket := 1.0
		if w.bucketGone {
			bucket = 0
		}
		f.set("meter_consumer_records_bucket_present", labels(), num(bucket))
		first = false
	}
	if !w.kedaMissing {
		f.set("keda_scaler_metrics_value", map[string]string{"namespace": "keda", "job": "keda-operator",
			"exported_namespace": "billing", "scaledObject": f.id.service, "scaler": "natsJetStreamScaler",
			"metric": "s0-nats-jetstream-" + f.id.stream, "type": "scaledobject"}, num(pending))
	}
	f.minutes++
	for s, vs := range f.series {
		for len(vs) < f.minutes {
			vs = append(vs, "_")
		}
		f.series[s] = vs
	}
}

// healthy is a fleet of two replicas keeping up with 1,000 reads a minute.
func healthy() world {
	return world{arrivals: 1000, perPod: 1500, pods: []string{"a", "b"}}
}
