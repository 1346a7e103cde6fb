package dlq_test

import (
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/assert"

	"github.com/meterline/meter-consumer/internal/dlq"
)

// Every header nats-server acts on when a message is published is left off
// a copy: the list is the server's own constants, not one written from
// memory.
func TestServerHeadersAreTheServersOwn(t *testing.T) {
	acted := []string{
		server.JSMsgId, server.JSExpectedStream, server.JSExpectedLastSeq, server.JSExpectedLastSubjSeq,
		server.JSExpectedLastSubjSeqSubj, server.JSExpectedLastMsgId, server.JSStreamSource,
		server.JSMsgRollup, server.JSMessageTTL, server.JSMarkerReason, server.JSMessageIncr,
		server.JSMessageCounterSources, server.JSBatchId, server.JSBatchSeq, server.JSBatchCommit,
		server.JSSchedulePattern, server.JSScheduleTimeZone, server.JSScheduleTTL, server.JSScheduleRollup,
		server.JSScheduleTarget, server.JSScheduleSource, server.JSScheduler, server.JSScheduleNext,
		server.JSRequiredApiLevel, server.MsgTraceDest, server.MsgTraceHop, server.MsgTraceOriginAccount,
		server.MsgTraceOnly, server.KVOperation, server.JSStream, server.JSSequence, server.JSTimeStamp,
		server.JSSubject, server.JSLastSequence, server.JSNumPending,
	}
	for _, h := range acted {
		assert.True(t, dlq.ServerHeader(h), h)
	}
	for _, h := range []string{"X-Head-End", "Traceparent", "Content-Type", "Natsy", "Dlq-Reason", "Idempotency-Key"} {
		assert.False(t, dlq.ServerHeader(h), h)
	}
	assert.True(t, dlq.ServerHeader("nats-batch-id"), "matched without regard to case")
}
