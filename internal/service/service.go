package service

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/meterline/meter-consumer/config"
	"github.com/meterline/meter-consumer/internal/dlq"
	"github.com/meterline/meter-consumer/internal/downstream"
	"github.com/meterline/meter-consumer/internal/lag"
	"github.com/meterline/meter-consumer/internal/retry"
	"github.com/meterline/meter-consumer/internal/topology"
)

// Deps are what the caller injects.
type Deps struct {
	Logger   *slog.Logger
	Registry *prometheus.Registry // metrics are registered here and served on /metrics
	// Rand is the process's one random source: the retry jitter, the
	// breaker's and the engine view's (through stream.Options.Rand), the
	// connect and lag waits, and the seeds of the demo's simulators. nil
	// seeds one from the clock, in Run, the only place the binary seeds.
	Rand    retry.Source
	Version string // the build's version, on the start-up line
	// LagInterval is the mean interval between two backlog readings; 0 is
	// LagInterval (tests shorten it).
	LagInterval time.Duration
}

// DrainTimeout bounds the connection drain that follows a graceful stop.
const DrainTimeout = 5 * time.Second

// LagInterval is the mean interval between two readings of the backlog
// (jittered ±50%, shared by every scrape).
const LagInterval = 15 * time.Second

// switches are the binary's flags, as topology's messages name them where
// they say the fix.
var switches = topology.Switches{
	Create:     config.Flag("stream.create"),
	Reconcile:  config.Flag("stream.reconcile"),
	OneReplica: config.Flag("stream.replicas") + " 1, " + config.Env("stream.replicas") + "=1",
}

// Topology returns the stream topology the configuration describes, its
// messages naming the binary's flags where they say the fix.
func Topology(cfg config.Config) topology.Topology {
	return topology.Topology{
		Stream: cfg.Stream.Name, Subjects: cfg.Stream.Subjects, Durable: cfg.Consumer.Durable,
		MaxAge: cfg.Stream.MaxAge, MaxBytes: int64(cfg.Stream.MaxBytes), Duplicates: cfg.Stream.Duplicates,
		DLQStream: cfg.DLQ.Stream, DLQPrefix: cfg.DLQ.Prefix, DLQDuplicates: cfg.DLQ.Duplicates,
		DLQMaxBytes: int64(cfg.DLQ.MaxBytes), RecordsBucket: cfg.Consumer.RecordsBucket, RecordsTTL: config.RecordsTTL,
		Replicas: cfg.Stream.Replicas, AckWait: cfg.Consumer.AckWait, MaxAckPending: cfg.Consumer.MaxAckPending,
		Reconcile: cfg.Stream.Reconcile,
		PullBatch: cfg.Consumer.PullBatch, Concurrency: cfg.Consumer.Concurrency, HandlerTimeout: cfg.Consumer.HandlerTimeout,
		Switches: switches,
	}
}

// Run runs the consumer until ctx ends, then shuts down gracefully. cfg must
// be valid. The HTTP server starts first, so /healthz answers and /readyz
// says why the service is not ready yet (connecting to NATS, a stream
// missing) while it waits; a ctx that ends before the service consumes is a
// clean stop (nil). It returns an error for what waiting cannot mend: a
// durable the service cannot run on, an embedded server that cannot start.
func Run(ctx context.Context, cfg config.Config, deps Deps) error {
	log := deps.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	rnd := deps.Rand
	if rnd == nil {
		rnd = retry.NewRand(uint64(time.Now().UnixNano()))
	}
	embedded := cfg.NATS.URL == ""
	logStart(log, cfg, deps.Version)
	// Every series this process's pipeline exports carries its stream and
	// durable: several fleets (partitions) in one namespace alert apart.
	reg := prometheus.WrapRegistererWith(prometheus.Labels{"stream": cfg.Stream.Name, "durable": cfg.Consumer.Durable}, deps.Registry)
	sm := NewMetrics(reg)
	if embedded {
		sm.embedded.Set(1)
	}
	st := NewStateMetrics(reg)
	ready := st.ready

	// Each start phase hands its closer to up; up.stop ends what started,
	// in the order it is written, after the consumer stops or a phase fails.
	var up started
	defer up.stop(log)
	httpAddr, stopHTTP, err := serveHTTP(cfg.HTTP.Addr, deps.Registry, ready.get, log)
	if err != nil {
		return err
	}
	up.http = stopHTTP
	_, stopPprof, err := servePprof(cfg.HTTP.PprofAddr, log)
	if err != nil {
		return err
	}
	up.pprof = stopPprof
	url, create, stopNATS, err := startNATS(cfg, log)
	if err != nil {
		return err
	}
	up.nats = stopNATS
	opts := append(connectOptions(cfg.NATS, log, st.event), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if errors.Is(err, nats.ErrPermissionViolation) {
			sm.refusals.Inc()
			log.Error("NATS refused a permission", slog.Any("error", err))
			ready.refused(err)
			return
		}
		log.Warn("NATS async error", slog.Any("error", err))
	}))
	ready.set(WhyConnecting, "connecting to NATS at "+redactedURL(url))
	nc, err := dial(ctx, url, opts, cfg.NATS.ConnectRetryMax, rnd, log, ready)
	if err != nil {
		log.Info("stopped before connecting to NATS")
		return nil
	}
	up.conn = nc
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	topo := Topology(cfg)
	set, err := setUp(ctx, js, topo, create, cfg.NATS.ConnectRetryMax, rnd, log, ready)
	if err != nil {
		if ctx.Err() != nil {
			log.Info("stopped before consuming")
			return nil
		}
		return err
	}
	reportTopology(set, topo, embedded, sm.topo, log)

	sink, stopSink, err := sinkFor(ctx, cfg, js, reg, rnd, log)
	if err != nil {
		return err
	}
	up.sink = stopSink
	consumer, _, err := Pipeline(cfg, Parts{Conn: nc, JS: js, Set: set, Sink: sink, Registry: reg, Logger: log, Rand: rnd})
	if err != nil {
		return err
	}
	ready.whyNot(func() string {
		switch {
		case !nc.IsConnected():
			return WhyDisconnected
		case consumer.Consuming() && sm.topo.paused(time.Now()):
			return WhyPaused
		}
		return WhyStopped
	})
	ready.consuming(func() (bool, string) {
		switch {
		case !nc.IsConnected():
			return false, "not connected to NATS (" + nc.Status().String() + ")"
		case !consumer.Consuming():
			return false, "not consuming"
		}
		if why := pausedReason(set, topo, sm.topo, time.Now()); why != "" {
			return false, why
		}
		switch {
		case embedded:
			return true, "ok (embedded NATS server: for a newcomer's machine and the demo, not for production)"
		}
		return true, "ok"
	})
	up.lag = startLag(ctx, lag.JetStream{JS: js, Stream: topo.Stream, Durable: topo.Durable, DLQName: topo.DLQStream,
		CopySubjects: copySubjects(topo.DLQPrefix, topo.Subjects), Bucket: topo.Bucket()}, reg, cmp.Or(deps.LagInterval, LagInterval), rnd, log)

	log.Info("consuming", slog.String("stream", topo.Stream), slog.String("durable", topo.Durable),
		slog.String("http", httpAddr))
	runErr := consumer.Run(ctx, set.Consumer)
	up.stop(log)
	if runErr != nil {
		return fmt.Errorf("consume: %w", runErr)
	}
	log.Info("stopped cleanly")
	return nil
}

// started is what Run has started, each part with its closer (nil until
// it started).
type started struct {
	lag   func()
	conn  *nats.Conn
	sink  func()
	nats  func()
	http  func()
	pprof func()
}

// stop ends whatever started, step by step in the order it runs; a second
// call does nothing. The whole stop stays within MaxStop.
func (s *started) stop(log *slog.Logger) {
	// 1. Stop reading the backlog: it asks over the connection.
	if s.lag != nil {
		s.lag()
	}
	// 2. Drain the connection, which flushes every settlement. Draining
	//    only flushes what is already settled: it is quick, and bounded.
	if s.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), DrainTimeout)
		if err := drain(ctx, s.conn); err != nil {
			log.Warn("drain", slog.Any("error", err))
		}
		cancel()
	}
	// 3. Close the sink's idle connections and stop the demo's simulators.
	if s.sink != nil {
		s.sink()
	}
	// 4. Stop the embedded NATS server.
	if s.nats != nil {
		s.nats()
	}
	// 5. Stop the HTTP servers last: /healthz and /readyz answer to the
	//    end (a profile in flight is cut at HTTPStopTimeout with them).
	if s.http != nil || s.pprof != nil {
		var wg sync.WaitGroup
		for _, stop := range []func(){s.http, s.pprof} {
			if stop != nil {
				wg.Go(stop)
			}
		}
		wg.Wait()
	}
	*s = started{}
}

// startNATS starts the embedded server when the configuration names no
// server; it returns the URL to dial, whether to create the topology, and
// the embedded server's stop (nil when there is none).
func startNATS(cfg config.Config, log *slog.Logger) (url string, create bool, stop func(), err error) {
	if cfg.NATS.URL != "" {
		return cfg.NATS.URL, cfg.Stream.Create, nil, nil
	}
	srv, err := startEmbedded(cfg.NATS.Listen, cfg.DataDir, log)
	if err != nil {
		return "", false, nil, err
	}
	return srv.ClientURL(), true, func() { srv.Shutdown(); srv.WaitForShutdown() }, nil
}

// startLag starts reading the backlog every interval (jittered) until
// ctx ends or the returned stop is called, which waits for it.
func startLag(ctx context.Context, src lag.JetStream, reg prometheus.Registerer, interval time.Duration, rnd retry.Source, log *slog.Logger) func() {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		lag.New(src, reg, interval, rnd, log).Run(ctx)
	}()
	return func() { cancel(); <-done }
}

// setUp finds (or creates) the streams, the records bucket and the durable,
// waiting while one is missing or JetStream does not answer, the reason on
// /readyz. A durable the service cannot run on is returned at once: waiting
// will not change it.
func setUp(ctx context.Context, js jetstream.JetStream, topo topology.Topology, create bool, maxWait time.Duration,
	rnd retry.Source, log *slog.Logger, ready *readiness) (*topology.Setup, error) {
	d := startDriver(maxWait, rnd)
	d.Transient = func(err error) bool { return !errors.Is(err, topology.ErrMismatch) }
	d.Notify = func(attempt int, err error, wait time.Duration) {
		log.Error("waiting for the streams", slog.Int("attempt", attempt), slog.Any("error", err), slog.Duration("retry_in", wait))
		ready.set(WhyStreams, err.Error())
	}
	var set *topology.Setup
	err := d.Do(ctx, func(ctx context.Context) error {
		ready.set(WhyStreams, "looking up the streams")
		var err error
		if create {
			set, err = topology.Ensure(ctx, js, topo)
		} else {
			set, err = topology.Lookup(ctx, js, topo)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	for _, w := range set.Warnings {
		log.Warn(w)
	}
	for _, r := range set.Reconciled {
		log.Info(r)
	}
	if set.AckWait != topo.AckWait {
		log.Warn("the durable's ack wait differs from consumer.ack_wait: following the durable's (--reconcile would change it)",
			slog.Duration("durable_ack_wait", set.AckWait), slog.Duration("consumer.ack_wait", topo.AckWait))
	}
	return set, nil
}

// Metrics are the service's own metrics, beside the pipeline's.
type Metrics struct {
	embedded prometheus.Gauge
	refusals prometheus.Counter
	topo     *topologyMetrics
}

// NewMetrics registers the service's metrics on reg:
// meter_consumer_embedded_nats (1 when this process runs on its own
// embedded NATS server, which a production deployment never should) and
// meter_consumer_nats_permission_refusals_total, and the topology's
// (meter_consumer_topology_replicas, meter_consumer_durable_paused).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := promauto.With(reg)
	return &Metrics{
		topo: newTopologyMetrics(reg, time.Now),
		embedded: f.NewGauge(prometheus.GaugeOpts{
			Namespace: "meter_consumer", Name: "embedded_nats",
			Help: "1 when this process runs on an embedded NATS server (a newcomer's machine, the demo), 0 on a real one.",
		}),
		refusals: f.NewCounter(prometheus.CounterOpts{
			Namespace: "meter_consumer", Name: "nats_permission_refusals_total",
			Help: "Publishes or subscriptions the NATS server refused for lack of a permission (each logged with the subject).",
		}),
	}
}

// drain drains the connection and waits until it is closed.
func drain(ctx context.Context, nc *nats.Conn) error {
	closed := make(chan struct{})
	nc.SetClosedHandler(func(*nats.Conn) { close(closed) })
	if err := nc.Drain(); err != nil {
		nc.Close()
		return err
	}
	select {
	case <-closed:
		return nil
	case <-ctx.Done():
		nc.Close()
		return ctx.Err()
	}
}

// sinkFor builds the HTTP sink (and, in demo mode, starts the simulators);
// stop closes its idle connections and stops the simulators.
func sinkFor(ctx context.Context, cfg config.Config, js jetstream.JetStream, reg prometheus.Registerer, rnd retry.Source, log *slog.Logger) (*downstream.HTTP, func(), error) {
	url, stopDemo := cfg.Downstream.URL, func() {}
	if cfg.Demo {
		demoURL, stop, err := startDemo(ctx, cfg, js, reg, rnd, log)
		if err != nil {
			return nil, nil, err
		}
		stopDemo = stop
		if url == "" {
			url = demoURL
		}
	}
	cls, err := cfg.Downstream.Classifier()
	if err == nil {
		var h *downstream.HTTP
		h, err = downstream.NewHTTP(downstream.HTTPOptions{
			URL: url, Timeout: cfg.Downstream.Timeout, Concurrency: cfg.Consumer.Concurrency, Classifier: cls,
			Access: cfg.Downstream.Access(), Logger: log,
		})
		if err == nil {
			return h, func() { h.CloseIdle(); stopDemo() }, nil
		}
	}
	stopDemo()
	return nil, nil, err
}

// serveHTTP serves /metrics, /healthz and /readyz on addr ("" disables it).
func serveHTTP(addr string, reg *prometheus.Registry, ready func() (bool, string), log *slog.Logger) (string, func(), error) {
	return serve("http.addr", addr, Handler(reg, ready), log)
}

// servePprof serves the profiles on addr ("" disables it), for diagnostics.
func servePprof(addr string, log *slog.Logger) (string, func(), error) {
	bound, stop, err := serve("http.pprof_addr", addr, PprofHandler(), log)
	if err == nil && bound != "" {
		log.Warn("profiling server listening: for diagnostics, not for a production pod's every day", slog.String("pprof", bound))
	}
	return bound, stop, err
}

// serve serves h on addr until the returned stop, which gives requests in
// flight HTTPStopTimeout to finish; setting names addr in errors.
func serve(setting, addr string, h http.Handler, log *slog.Logger) (string, func(), error) {
	if addr == "" {
		return "", func() {}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("%s %s: %w", setting, addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http server", slog.String("setting", setting), slog.Any("error", err))
		}
	}()
	return ln.Addr().String(), func() {
		ctx, cancel := context.WithTimeout(context.Background(), HTTPStopTimeout)
		defer cancel()
		_ = srv.Shutdown(ctx)
		wg.Wait()
	}, nil
}

// copySubjects are the subjects of the dead-letter copies of reads on the
// source subjects (dlq.Subject of each): a mark matches none.
func copySubjects(prefix string, subjects []string) []string {
	out := make([]string, len(subjects))
	for i, s := range subjects {
		out[i] = dlq.Subject(prefix, s)
	}
	return out
}
