package headend_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/meterline/meter-consumer/internal/meter"
	"github.com/meterline/meter-consumer/internal/natstest"
)

// publish sends one read under its idempotency key (the Nats-Msg-Id header)
// and waits for the stream's ack. It retries with full-jitter delays
// (uniform in [0, ceiling), the ceiling doubling from 50ms) what may pass on
// a later try: no ack in time, no stream leader yet, a full stream; it gives
// up at once on a body over the server's limit, which never will.
func publish(ctx context.Context, js jetstream.JetStream, subject string, body []byte, key string) (*jetstream.PubAck, error) {
	const attempts, base = 4, 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		ack, err := js.Publish(actx, subject, body, jetstream.WithMsgID(key))
		cancel()
		if err == nil || attempt == attempts || errors.Is(err, nats.ErrMaxPayload) {
			return ack, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(rand.N(base << (attempt - 1))):
		}
	}
}

// Example publishes two reads, resends the first as a head-end would after a
// lost ack, refuses to send an invalid read, publishes to a subject no stream
// captures (a typo), and meets a full stream (limited here to two reads,
// discard new).
func Example() {
	dir, _ := os.MkdirTemp("", "headend")
	defer os.RemoveAll(dir)
	srv, err := server.NewServer(natstest.Options(dir)) // a head-end dials the cluster's NATS instead
	if err != nil {
		fmt.Println(err)
		return
	}
	go srv.Start()
	defer srv.WaitForShutdown()
	defer srv.Shutdown()
	if !srv.ReadyForConnections(10 * time.Second) {
		fmt.Println("server not ready")
		return
	}
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "METER_READS", Subjects: []string{"meter.reads.>"},
		Duplicates: 10 * time.Minute, MaxMsgs: 2, Discard: jetstream.DiscardNew})
	if err != nil {
		fmt.Println(err)
		return
	}

	reads := []struct{ subject, body string }{
		{"meter.reads.north", `{"meter_id":"MTR-1","read_at":"2026-11-30T07:00:00Z","quantity":"1234.567","unit":"kWh","idempotency_key":"he-north:MTR-1:42"}`},
		{"meter.reads.north", `{"meter_id":"MTR-1","read_at":"2026-11-30T07:00:00Z","quantity":"1234.567","unit":"kWh","idempotency_key":"he-north:MTR-1:42"}`},
		{"meter.reads.south", `{"meter_id":"GAS-7","read_at":"2026-11-30T08:15:00+01:00","quantity":12.5,"unit":"m3"}`},
		{"meter.reads.west", `{"meter_id":"MTR-3","read_at":"2026-11-30 07:00:00","quantity":"1","unit":"kWh"}`},
		{"meter.read.east", `{"meter_id":"MTR-9","read_at":"2026-11-30T07:00:00Z","quantity":"1","unit":"kWh"}`},
		{"meter.reads.east", `{"meter_id":"MTR-9","read_at":"2026-11-30T07:00:00Z","quantity":"1","unit":"kWh"}`},
	}
	for _, r := range reads {
		read, err := meter.Decode([]byte(r.body)) // what the consumer would dead-letter is not sent
		if err != nil {
			fmt.Printf("%s: not sent: %v\n", r.subject, err)
			continue
		}
		ack, err := publish(ctx, js, r.subject, []byte(r.body), read.IdempotencyKey)
		switch {
		case err != nil:
			fmt.Printf("%s: not stored: %v\n", r.subject, err)
		case ack.Duplicate:
			fmt.Printf("%s: a resend, dropped: %s is already stored as %d\n", r.subject, read.IdempotencyKey, ack.Sequence)
		default:
			fmt.Printf("%s: %s stored as %d\n", r.subject, read.IdempotencyKey, ack.Sequence)
		}
	}
	// Output:
	// meter.reads.north: he-north:MTR-1:42 stored as 1
	// meter.reads.north: a resend, dropped: he-north:MTR-1:42 is already stored as 1
	// meter.reads.south: GAS-7@2026-11-30T07:15:00Z stored as 2
	// meter.reads.west: not sent: invalid_payload: invalid meter read: read_at: "2026-11-30 07:00:00" is not an RFC 3339 timestamp (want 2006-01-02T15:04:05Z or ±hh:mm offset)
	// meter.read.east: not stored: nats: no response from stream
	// meter.reads.east: not stored: nats: nats: API error: code=503 err_code=10077 description=maximum messages exceeded
}
