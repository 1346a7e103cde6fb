package lag

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/meterline/meter-consumer/internal/retry"
)

// Reader refreshes the gauges.
type Reader struct {
	src      Source
	interval time.Duration
	rand     retry.Source
	log      *slog.Logger
	now      func() time.Time
	g        gauges
	// bucketGone is what the last answered look-up of the records bucket
	// said: the bucket is gone (logged once, at the change).
	bucketGone bool
}

// New registers the gauges on reg.
func New(src Source, reg prometheus.Registerer, interval time.Duration, rnd retry.Source, log *slog.Logger) *Reader {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Reader{src: src, interval: interval, rand: rnd, log: log, now: time.Now, g: newGauges(reg)}
}

// Read takes one reading now. It returns every request's error, joined.
func (r *Reader) Read(ctx context.Context) error {
	var errs []error
	fail := func(what string, err error) {
		r.g.errors.Inc()
		errs = append(errs, fmt.Errorf("%s: %w", what, err))
	}
	ci, err := r.src.ConsumerInfo(ctx)
	if err != nil {
		fail("consumer info", err)
	} else {
		r.g.pending.Set(float64(ci.NumPending))
		r.g.ackPending.Set(float64(ci.NumAckPending))
		r.g.redelivered.Set(float64(ci.NumRedelivered))
		r.g.maxAckPending.Set(float64(ci.Config.MaxAckPending))
		age, err := r.oldestUnacked(ctx, ci)
		if err != nil {
			fail("oldest unsettled read", err)
		} else {
			r.g.oldestUnacked.Set(age.Seconds())
			r.g.backlogReadAt.Set(float64(r.now().UnixMilli()) / 1000)
		}
	}
	si, err := r.src.StreamInfo(ctx)
	if err != nil {
		fail("stream info", err)
	} else {
		r.g.streamMsgs.Set(float64(si.State.Msgs))
		r.g.streamBytes.Set(float64(si.State.Bytes))
		r.g.streamMaxMsgs.Set(float64(si.Config.MaxMsgs))
		r.g.streamMaxBytes.Set(float64(si.Config.MaxBytes))
		r.g.streamMaxAge.Set(si.Config.MaxAge.Seconds())
		r.g.streamDiscardNew.Set(boolGauge(si.Config.Discard == jetstream.DiscardNew))
	}
	dl, err := r.src.DeadLetterInfo(ctx)
	if err != nil {
		fail("dead-letter stream info", err)
	} else {
		r.g.deadLetters.Set(float64(dl.State.Msgs))
		r.g.deadLetterBytes.Set(float64(dl.State.Bytes))
		r.g.deadLetterMaxBytes.Set(float64(dl.Config.MaxBytes))
		r.g.deadLetterMaxAge.Set(dl.Config.MaxAge.Seconds())
		if age, err := r.oldestCopy(ctx, dl); err != nil {
			fail("oldest dead-letter copy", err)
		} else {
			r.g.deadLetterOldest.Set(age.Seconds())
		}
	}
	if err := r.recordsBucket(ctx); err != nil {
		fail("records bucket", err)
	}
	return errors.Join(errs...)
}

// recordsBucket sets records_bucket_present: 1 when the bucket's stream is
// found, 0 when the server says it does not exist (logged once, when it
// becomes so). Any other error is returned, and the gauge keeps its value.
// A fleet that retries nothing never touches the bucket otherwise: without
// this, a bucket gone is found at the next hand-back.
func (r *Reader) recordsBucket(ctx context.Context) error {
	err := r.src.RecordsBucket(ctx)
	gone := errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrBucketNotFound)
	if err != nil && !gone {
		return err
	}
	if gone != r.bucketGone {
		n := r.src.Names()
		attrs := []any{slog.String("bucket", n.Bucket), slog.String("stream", n.Stream), slog.String("durable", n.Durable)}
		if gone {
			r.log.Warn("the records bucket is gone: a read's record (calls made, sheds, a dead-letter decision) can be neither stored nor read until it is made again", attrs...)
		} else {
			r.log.Info("the records bucket is there again", attrs...)
		}
	}
	r.bucketGone = gone
	r.g.bucketPresent.WithLabelValues().Set(boolGauge(!gone))
	return nil
}

// oldestUnacked returns the age of the first message after the durable's
// ack floor that its filter selects, skipping deleted sequences; 0 when
// nothing is pending.
func (r *Reader) oldestUnacked(ctx context.Context, ci *jetstream.ConsumerInfo) (time.Duration, error) {
	if ci.NumPending == 0 && ci.NumAckPending == 0 {
		return 0, nil
	}
	msg, err := r.src.GetMsg(ctx, ci.AckFloor.Stream+1, filter(ci.Config))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil // settled or removed since the consumer info
	}
	if err != nil {
		return 0, err
	}
	return max(r.now().Sub(msg.Time), 0), nil
}

// filter is the subject the durable selects: its one filter, or every
// subject (">") when it has none or several. With several, the age may be
// that of a message the durable does not select: an overstatement, never an
// understatement.
func filter(c jetstream.ConsumerConfig) string {
	switch {
	case c.FilterSubject != "":
		return c.FilterSubject
	case len(c.FilterSubjects) == 1:
		return c.FilterSubjects[0]
	}
	return ">"
}

// oldestCopy returns the age of the dead-letter stream's oldest copy (its
// marks left out: a person cannot work a mark away); 0 when it holds none.
func (r *Reader) oldestCopy(ctx context.Context, dl *jetstream.StreamInfo) (time.Duration, error) {
	if dl.State.Msgs == 0 {
		return 0, nil
	}
	msg, err := r.src.OldestCopy(ctx, dl.State.FirstSeq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil // marks only, or removed since the stream info
	}
	if err != nil {
		return 0, err
	}
	return max(r.now().Sub(msg.Time), 0), nil
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Run reads at once, then every jittered interval until ctx ends.
func (r *Reader) Run(ctx context.Context) {
	for {
		rctx, cancel := context.WithTimeout(ctx, max(r.interval/2, time.Second))
		if err := r.Read(rctx); err != nil && ctx.Err() == nil {
			r.log.Warn("reading the backlog", slog.Any("error", err))
		}
		cancel()
		wait := r.interval/2 + time.Duration(r.rand.Int64N(int64(r.interval)+1))
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
