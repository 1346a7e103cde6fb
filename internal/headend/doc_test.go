package headend_test

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/natstest"
)

// TestDocShowsThePublish: docs/HEAD-ENDS.md shows the example's publish
// function as it is.
func TestDocShowsThePublish(t *testing.T) {
	src, err := os.ReadFile("example_test.go")
	require.NoError(t, err)
	start := bytes.Index(src, []byte("// publish sends"))
	end := bytes.Index(src[start:], []byte("\n}\n"))
	require.True(t, start >= 0 && end > 0, "the example's publish function")
	fn := string(src[start : start+end+2])
	doc, err := os.ReadFile("../../docs/HEAD-ENDS.md")
	require.NoError(t, err)
	assert.Contains(t, string(doc), "```go\n"+fn+"\n```", "docs/HEAD-ENDS.md shows publish as the example has it")
}

// TestAnswersMatchWithoutStrings: the answers docs/HEAD-ENDS.md tells a
// head-end to tell apart are matched with errors.Is and errors.As, on a real
// server.
func TestAnswersMatchWithoutStrings(t *testing.T) {
	o := natstest.Options(t.TempDir())
	o.MaxPayload = 1024
	_, js := natstest.Connect(t, natstest.Start(t, o))
	_, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "METER_READS", Subjects: []string{"meter.reads.>"},
		MaxMsgs: 1, Discard: jetstream.DiscardNew})
	require.NoError(t, err)
	_, err = js.Publish(t.Context(), "meter.reads.north", []byte(`{}`), jetstream.WithMsgID("a"))
	require.NoError(t, err)

	tests := []struct {
		name, subject string
		body          []byte
		check         func(error) bool
	}{
		{"no stream captures the subject", "meter.read.north", []byte(`{}`),
			func(err error) bool { return errors.Is(err, jetstream.ErrNoStreamResponse) }},
		{"the stream is full (discard new)", "meter.reads.north", []byte(`{}`), func(err error) bool {
			var apiErr *jetstream.APIError
			return errors.As(err, &apiErr) && apiErr.Code == 503 && apiErr.ErrorCode == 10077 &&
				strings.Contains(apiErr.Description, "maximum messages exceeded")
		}},
		{"over the server's max payload", "meter.reads.north", bytes.Repeat([]byte("x"), 2048),
			func(err error) bool { return errors.Is(err, nats.ErrMaxPayload) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := js.Publish(t.Context(), tt.subject, tt.body, jetstream.WithMsgID("b"))
			require.Error(t, err)
			assert.True(t, tt.check(err), "%v", err)
		})
	}
}
