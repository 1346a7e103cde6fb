package stream

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/meterline/meter-consumer/internal/breaker"
	"github.com/meterline/meter-consumer/internal/classify"
	"github.com/meterline/meter-consumer/internal/dlq"
	"github.com/meterline/meter-consumer/internal/engine"
)

// Outcome is how a message was settled: the metric label of
// meter_consumer_messages_total and meter_consumer_handle_duration_seconds.
type Outcome string

// The closed set of outcomes.
const (
	OutcomeAck  Outcome = "ack"
	OutcomeNak  Outcome = "nak"
	OutcomeTerm Outcome = "term"
)

// Metrics are the consumer's Prometheus metrics, namespace meter_consumer.
type Metrics struct {
	messages        *prometheus.CounterVec
	failures        *prometheus.CounterVec
	deadLetters     *prometheus.CounterVec
	dlqErrors       prometheus.Counter
	dlqRejections   prometheus.Counter
	handBacks       prometheus.Counter
	leasesLost      prometheus.Counter
	recordErrors    *prometheus.CounterVec
	limit           prometheus.Gauge
	rejected        *prometheus.CounterVec
	retries         *prometheus.CounterVec
	recalled        prometheus.Counter
	hastened        prometheus.Counter
	settleErrors    *prometheus.CounterVec
	panics          prometheus.Counter
	retryDelay      prometheus.Histogram
	handleDuration  *prometheus.HistogramVec
	deliveryAttempt prometheus.Histogram
	readAge         *prometheus.HistogramVec
	inFlight        prometheus.Gauge
	held            prometheus.Gauge
	breakerState    prometheus.Gauge
	breakerChanges  *prometheus.CounterVec
	uncharged       *prometheus.CounterVec
	engineOverload  prometheus.Gauge
	engineShed      prometheus.Gauge
	engineLatency   *prometheus.GaugeVec
	engineMedian    prometheus.Gauge
	engineBaseline  prometheus.Gauge
	engineTrials    *prometheus.CounterVec
	engineDips      prometheus.Counter
	pauses          prometheus.Counter
	recordMetrics

	serverClockOffset prometheus.Gauge

	// cached children for the hot path
	ack, nak, term               prometheus.Counter
	durAck, durNak, durTerm      prometheus.Observer
	ageAck, ageTerm              prometheus.Observer
	failTransient, failPermanent map[classify.Cause]prometheus.Counter
	dlPermanent, dlExhausted     prometheus.Counter
	dlExpired                    prometheus.Counter
}

// NewMetrics registers the metrics on reg and initialises every label value,
// so dashboards see zeros instead of gaps.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := promauto.With(reg)
	const ns = "meter_consumer"
	m := &Metrics{
		messages: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "messages_total",
			Help: "Messages settled, by outcome (ack, nak, term).",
		}, []string{"outcome"}),
		failures: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "failures_total",
			Help: "Failed attempts to handle a read, by class (transient, permanent) and cause.",
		}, []string{"class", "cause"}),
		deadLetters: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "dead_letters_total",
			Help: "Reads copied to the dead-letter stream (confirmed), by reason.",
		}, []string{"reason"}),
		dlqErrors: f.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Name: "dead_letter_publish_errors_total",
			Help: "Dead-letter copies JetStream did not confirm; the original was NAKed instead of terminated.",
		}),
		dlqRejections: f.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Name: "dead_letter_rejections_total",
			Help: "Dead-letter copies the server answered and refused (too large, stream full or missing, a header it will not take): they need a person.",
		}),
		handBacks: f.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Name: "hand_backs_total",
			Help: "Reads handed back to the server at a stop, uncharged: an attempt is a call, and a read handed back made none (or had its call cut by the stop).",
		}),
		recordErrors: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "record_errors_total",
			Help: "Reads or writes of a read's record (its credits and its dead-letter decision) in the records bucket that failed, by op (get, put).",
		}, []string{"op"}),
		limit: f.NewGauge(prometheus.GaugeOpts{
			Namespace: ns, Name: "concurrency_limit",
			Help: "Calls this replica may have in flight to the downstream now: the adaptive limit, or consumer.concurrency when it is off.",
		}),
		rejected: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "downstream_rejected_total",
			Help: "Calls the downstream shed (503, 429), by cause: signs of overload that lower the concurrency limit.",
		}, []string{"cause"}),
		retries: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "retries_total",
			Help: "Retries due, by budget: spent (released to the server) or denied (over the retry budget: held again, not charged; a read may be denied more than once).",
		}, []string{"budget"}),
		recalled: f.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Name: "retries_recalled_total",
			Help: "Reads brought by the pulls this replica sends right after NAKing a due retry, so that the retry comes back at once instead of behind the reads buffered (the server hands out redeliveries first).",
		}),
		hastened: f.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Name: "retries_hastened_total",
			Help: "Held retries made due within the retry policy's base as the breaker closed: their delays had grown with the rate engine's outage (failures credited to the engine, no Retry-After), not with the reads' own failures.",
		}),
		leasesLost: f.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Name: "leases_lost_total",
			Help: "Deliveries dropped unsettled (no NAK, TERM, record or copy; an Ack still goes): the NATS connection was down, or the process stalled, for a quarter of the ack wait or more since they arrived, so the server may have given the read to another replica. The server redelivers the read.",
		}),
		serverClockOffset: f.NewGauge(prometheus.GaugeOpts{
			Namespace: ns, Name: "server_clock_offset_seconds",
			Help: "This machine's wall clock minus the NATS server's, as last measured (every minute, from the consumer info's timestamp); reads' ages and dead-letter decisions are timed on the server's clock.",
		}),
		settleErrors: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "settle_errors_total",
			Help: "Ack, NAK, TERM or in-progress signals that could not be sent, by operation.",
		}, []string{"op"}),
		panics: f.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Name: "panics_total",
			Help: "Panics recovered while handling a read (each treated as a transient failure).",
		}),
		retryDelay: f.NewHistogram(prometheus.HistogramOpts{
			Namespace: ns, Name: "retry_delay_seconds",
			Help:    "Retry delays asked for when NAKing a read.",
			Buckets: []float64{.01, .05, .1, .25, .5, 1, 2, 4, 8, 16, 30, 60, 120, 300},
		}),
		handleDuration: f.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Name: "handle_duration_seconds",
			Help:    "Time from taking a message to settling it, by outcome.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"outcome"}),
		deliveryAttempt: f.NewHistogram(prometheus.HistogramOpts{
			Namespace: ns, Name: "delivery_attempt",
			Help:    "Attempt at which a read was settled for good (acked or terminated): the calls charged to it before, plus one. A delivery that reached no call is not an attempt.",
			Buckets: []float64{1, 2, 3, 4, 5, 6, 8, 10, 15, 20},
		}),
		readAge: f.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Name: "settled_read_age_seconds",
			Help:    "Age of a read when settled for good, from its stream timestamp on the server's clock, by outcome: ack (billed) or term (dead-lettered). The billing SLO's measure.",
			Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 86400},
		}, []string{"outcome"}),
		inFlight: f.NewGauge(prometheus.GaugeOpts{
			Namespace: ns, Name: "in_flight",
			Help: "Reads being handled right now.",
		}),
		held: f.NewGauge(prometheus.GaugeOpts{
			Namespace: ns, Name: "retry_held",
			Help: "Reads held in this process: waiting out a retry delay, or parked while the breaker is open or no worker is free.",
		}),
	}
	m.breakerState = f.NewGauge(prometheus.GaugeOpts{
		Namespace: ns, Name: "breaker_state",
		Help: "Downstream circuit breaker: 0 closed, 1 open (not pulling), 2 half-open (probing).",
	})
	m.breakerChanges = f.NewCounterVec(prometheus.CounterOpts{
		Namespace: ns, Name: "breaker_transitions_total",
		Help: "Circuit breaker transitions, by the state entered.",
	}, []string{"to"})
	for _, s := range []breaker.State{breaker.Closed, breaker.Open, breaker.HalfOpen} {
		m.breakerChanges.WithLabelValues(s.String())
	}
	m.uncharged = f.NewCounterVec(prometheus.CounterOpts{
		Namespace: ns, Name: "uncharged_failures_total",
		Help: "Failed calls not charged to their read, by why: breaker (the engine failed as a whole), shedding (the engine shed broadly), engine_down (the engine failed every call since it last answered, beyond chance) or trial (a shed at the last attempt while a trial of the engine ran: held for its verdict, called again on one of load, dead-lettered otherwise); the read was called again without spending an attempt, but for trial's verdicts that found the shed its own.",
	}, []string{"why"})
	m.uncharged.WithLabelValues(whyBreaker)
	m.uncharged.WithLabelValues(whyShedding)
	m.uncharged.WithLabelValues(whyDown)
	m.uncharged.WithLabelValues(whyTrial)
	m.engineOverload = f.NewGauge(prometheus.GaugeOpts{
		Namespace: ns, Name: "engine_overloaded",
		Help: "1 while this replica's view judges the rate engine overloaded: it sheds now, refuses most of what it is sent, and a strong verdict of load stands (a trial found its sheds fall when the fleet sends less), or dips are off; the retry budget binds.",
	})
	m.engineShed = f.NewGauge(prometheus.GaugeOpts{
		Namespace: ns, Name: "engine_shed_ratio",
		Help: "Share of the last first attempts (128 at most, a minute old at most) shed by the rate engine.",
	})
	m.engineTrials = f.NewCounterVec(prometheus.CounterOpts{
		Namespace: ns, Name: "engine_trials_total",
		Help: "Verdicts of the engine view's trials, by verdict: load (the sheds fell when the fleet sent less) or own (they did not: the reads' own).",
	}, []string{"verdict"})
	m.engineTrials.WithLabelValues(engine.Load.String())
	m.engineTrials.WithLabelValues(engine.Own.String())
	m.engineDips = f.NewCounter(prometheus.CounterOpts{
		Namespace: ns, Name: "engine_dips_total",
		Help: "Dips of the engine view's trials: the calls in flight held at half the limit for a moment, to see whether the engine sheds less.",
	})
	m.pauses = f.NewCounter(prometheus.CounterOpts{
		Namespace: ns, Name: "engine_pauses_total",
		Help: "Pauses of every call to the rate engine: it refused most calls and asked to wait (Retry-After).",
	})
	m.engineLatency = f.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: ns, Name: "engine_latency_seconds",
		Help: "The rate engine's answered latency as the view sees it, by stat: median (of the last round) and baseline.",
	}, []string{"stat"})
	m.engineMedian = m.engineLatency.WithLabelValues("median")
	m.engineBaseline = m.engineLatency.WithLabelValues("baseline")
	m.ack = m.messages.WithLabelValues(string(OutcomeAck))
	m.nak = m.messages.WithLabelValues(string(OutcomeNak))
	m.term = m.messages.WithLabelValues(string(OutcomeTerm))
	m.durAck = m.handleDuration.WithLabelValues(string(OutcomeAck))
	m.durNak = m.handleDuration.WithLabelValues(string(OutcomeNak))
	m.durTerm = m.handleDuration.WithLabelValues(string(OutcomeTerm))
	m.ageAck = m.readAge.WithLabelValues(string(OutcomeAck))
	m.ageTerm = m.readAge.WithLabelValues(string(OutcomeTerm))
	m.failTransient = map[classify.Cause]prometheus.Counter{}
	m.failPermanent = map[classify.Cause]prometheus.Counter{}
	for _, c := range classify.Causes() {
		m.failTransient[c] = m.failures.WithLabelValues(classify.Transient.String(), string(c))
		m.failPermanent[c] = m.failures.WithLabelValues(classify.Permanent.String(), string(c))
	}
	m.dlPermanent = m.deadLetters.WithLabelValues(string(dlq.ReasonPermanent))
	m.dlExhausted = m.deadLetters.WithLabelValues(string(dlq.ReasonExhausted))
	m.dlExpired = m.deadLetters.WithLabelValues(string(dlq.ReasonExpired))
	m.rejected.WithLabelValues(string(classify.CauseHTTP503))
	m.rejected.WithLabelValues(string(classify.CauseRateLimited))
	m.retries.WithLabelValues("spent")
	m.retries.WithLabelValues("denied")
	m.recordErrors.WithLabelValues("get")
	m.recordErrors.WithLabelValues("put")
	m.recordMetrics = newRecordMetrics(f, ns)
	for _, op := range []string{"ack", "nak", "term", "in_progress"} {
		m.settleErrors.WithLabelValues(op)
	}
	return m
}

func (m *Metrics) settled(o Outcome, seconds float64) {
	switch o {
	case OutcomeAck:
		m.ack.Inc()
		m.durAck.Observe(seconds)
	case OutcomeNak:
		m.nak.Inc()
		m.durNak.Observe(seconds)
	case OutcomeTerm:
		m.term.Inc()
		m.durTerm.Observe(seconds)
	}
}

// Why a failed call was not charged to its read.
const (
	whyBreaker  = "breaker"
	whyShedding = "shedding"
	whyDown     = "engine_down"
	whyTrial    = "trial"
)

// engine exports what the engine's view made of the last call.
func (m *Metrics) engine(fb engine.Feedback) {
	if fb.Judged != engine.Undecided {
		m.engineTrials.WithLabelValues(fb.Judged.String()).Inc()
	}
	if fb.Dip.For > 0 {
		m.engineDips.Inc()
	}
	m.engineOverload.Set(b2f(fb.Overloaded))
	m.engineShed.Set(fb.ShedShare)
	m.engineMedian.Set(fb.Latency.Seconds())
	m.engineBaseline.Set(fb.Baseline.Seconds())
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (m *Metrics) breakerChanged(to breaker.State) {
	m.breakerState.Set(float64(to))
	m.breakerChanges.WithLabelValues(to.String()).Inc()
}

func (m *Metrics) failed(e *classify.Error) {
	set := m.failTransient
	if e.Class == classify.Permanent {
		set = m.failPermanent
	}
	if c, ok := set[e.Cause]; ok {
		c.Inc()
		return
	}
	set[classify.CauseUnknown].Inc()
}

func (m *Metrics) deadLettered(r dlq.Reason) {
	switch r {
	case dlq.ReasonPermanent:
		m.dlPermanent.Inc()
	case dlq.ReasonExpired:
		m.dlExpired.Inc()
	default:
		m.dlExhausted.Inc()
	}
}
