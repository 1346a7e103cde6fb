package dlqops_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/meterline/meter-consumer/internal/dlqops"
)

// exampleOps starts a server holding the five dead-lettered reads of the
// fixture and returns Ops writing to stdout, its clock stopped at base.
func exampleOps() (*dlqops.Ops, func()) {
	js, stop, err := startExampleServer()
	if err != nil {
		panic(err)
	}
	return &dlqops.Ops{
		JS: js, Stream: "METER_READS_DLQ", SourceStream: "METER_READS", Out: os.Stdout,
		Now: func() time.Time { return base },
	}, stop
}

func ExampleOps_List() {
	o, stop := exampleOps()
	defer stop()
	err := o.List(context.Background(), dlqops.Filter{Reason: "permanent"}, false)
	fmt.Println(err)
	// Output:
	// SEQ  REASON     CAUSE            SUBJECT            METER  DELIVERIES  REPLAYS  AGE    ERROR
	// 1    permanent  http_422         meter.reads.north  MTR-1  1           0        3h0m   http_422: downstream answered 422 Unprocessable Entity
	// 3    permanent  invalid_payload  meter.reads.south  -      1           0        1h30m  invalid_payload: invalid meter read: body: invalid UTF-8
	// 5    permanent  http_422         meter.reads.east   MTR-4  1           0        5m     http_422: downstream answered 422 Unprocessable Entity
	// <nil>
}

func ExampleOps_List_json() {
	o, stop := exampleOps()
	defer stop()
	err := o.List(context.Background(), dlqops.Filter{Meter: "MTR-4"}, true)
	fmt.Println(err)
	// Output:
	// {"seq":5,"reason":"permanent","cause":"http_422","subject":"meter.reads.east","meter_id":"MTR-4","error":"http_422: downstream answered 422 Unprocessable Entity","deliveries":1,"attempts":1,"replay_count":0,"dead_lettered_at":"2026-11-30T06:55:00Z","published_at":"2026-11-30T06:54:00Z","headers":{"Dlq-Attempts":["1"],"Dlq-Cause":["http_422"],"Dlq-Consumer":["meter-consumer"],"Dlq-Dead-Lettered-At":["2026-11-30T06:55:00.000000000Z"],"Dlq-Deliveries":["1"],"Dlq-Error":["http_422: downstream answered 422 Unprocessable Entity"],"Dlq-Published-At":["2026-11-30T06:54:00.000000000Z"],"Dlq-Reason":["permanent"],"Dlq-Sequence":["105"],"Dlq-Stream":["METER_READS"],"Dlq-Subject":["meter.reads.east"],"Nats-Msg-Id":["dlq:METER_READS:105:1796021640000000000"]},"payload":"{\"meter_id\":\"MTR-4\",\"read_at\":\"2026-11-30T06:00:00+01:00\",\"quantity\":\"12.500\",\"unit\":\"kWh\"}"}
	// <nil>
}

func ExampleOps_Stats() {
	o, stop := exampleOps()
	defer stop()
	err := o.Stats(context.Background(), dlqops.Filter{}, false)
	fmt.Println(err)
	// Output:
	// 5 dead-lettered reads in METER_READS_DLQ
	// oldest 2026-11-30T04:00:00Z (3h0m ago)
	// newest 2026-11-30T06:55:00Z (5m ago)
	//
	// REASON     COUNT
	// permanent  3
	// exhausted  2
	//
	// CAUSE            COUNT
	// http_422         2
	// http_503         1
	// invalid_payload  1
	// timeout          1
	//
	// REASON     CAUSE            COUNT
	// permanent  http_422         2
	// exhausted  http_503         1
	// exhausted  timeout          1
	// permanent  invalid_payload  1
	// <nil>
}

func ExampleOps_Show() {
	o, stop := exampleOps()
	defer stop()
	err := o.Show(context.Background(), 1)
	fmt.Println(err)
	// Output:
	// seq 1 in METER_READS_DLQ, subject meter.dlq.meter.reads.north
	//
	// Dlq-Attempts: 1
	// Dlq-Cause: http_422
	// Dlq-Consumer: meter-consumer
	// Dlq-Dead-Lettered-At: 2026-11-30T04:00:00.000000000Z
	// Dlq-Deliveries: 1
	// Dlq-Error: http_422: downstream answered 422 Unprocessable Entity
	// Dlq-Original-Msg-Id: he-1
	// Dlq-Published-At: 2026-11-30T03:59:00.000000000Z
	// Dlq-Reason: permanent
	// Dlq-Sequence: 101
	// Dlq-Stream: METER_READS
	// Dlq-Subject: meter.reads.north
	// Nats-Msg-Id: dlq:METER_READS:101:1796011140000000000
	// X-Head-End: he-7
	// X-Head-End: he-8
	//
	// payload (91 bytes):
	// {"meter_id":"MTR-1","read_at":"2026-11-30T06:00:00+01:00","quantity":"12.500","unit":"kWh"}
	// <nil>
}

func ExampleOps_Replay() {
	o, stop := exampleOps()
	defer stop()
	ctx := context.Background()
	ro := dlqops.ReplayOptions{Filter: dlqops.Filter{Cause: "http_422"}, Rate: 100}

	ro.DryRun = true
	sum, err := o.Replay(ctx, ro)
	fmt.Printf("selected %d, error %v\n\n", sum.Selected, err)

	ro.DryRun = false
	sum, err = o.Replay(ctx, ro)
	fmt.Printf("selected %d, error %v\n\n", sum.Selected, err)

	sum, err = o.Replay(ctx, ro)
	fmt.Printf("selected %d, error %v\n", sum.Selected, err)
	// Output:
	// SEQ  REASON     CAUSE     SUBJECT            METER  DELIVERIES  REPLAYS  AGE   ERROR
	// 1    permanent  http_422  meter.reads.north  MTR-1  1           0        3h0m  http_422: downstream answered 422 Unprocessable Entity
	// 5    permanent  http_422  meter.reads.east   MTR-4  1           0        5m    http_422: downstream answered 422 Unprocessable Entity
	// dry run, nothing changed: would replay 2, would skip at max replays 0
	// selected 2, error <nil>
	//
	// replayed 2, skipped as duplicate 0, skipped at max replays 0, failed 0
	// selected 2, error <nil>
	//
	// replayed 0, skipped as duplicate 0, skipped at max replays 0, failed 0
	// selected 0, error <nil>
}

func ExampleOps_Purge() {
	o, stop := exampleOps()
	defer stop()
	n, err := o.Purge(context.Background(), dlqops.Filter{Cause: "invalid_payload"}, "", func(n int) bool {
		fmt.Printf("delete %d dead-lettered reads? yes\n", n)
		return true
	})
	fmt.Println(n, err)
	// Output:
	// delete 1 dead-lettered reads? yes
	// deleted 1 dead-lettered reads from METER_READS_DLQ
	// 1 <nil>
}
