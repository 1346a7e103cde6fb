package topology_test

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/meterline/meter-consumer/internal/topology"
)

// No goroutine outlives the servers and connections the tests start.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testTopology is the topology the stream tests run on too (a pull of 32).
func testTopology() topology.Topology {
	return topology.Topology{
		Stream: "METER_READS", Subjects: []string{"meter.reads.>"}, Durable: "meter-consumer", Duplicates: 10 * time.Minute,
		DLQStream: "METER_READS_DLQ", DLQPrefix: "meter.dlq", DLQDuplicates: 20 * time.Minute,
		Replicas: 1, AckWait: 5 * time.Second, MaxAckPending: 10000, RecordsTTL: 30 * 24 * time.Hour,
		Concurrency: 8, HandlerTimeout: time.Second, // a pull of 32
	}
}
