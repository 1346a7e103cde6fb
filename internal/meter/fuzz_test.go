package meter_test

import (
	"bytes"
	"encoding/json"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/classify"
	"github.com/meterline/meter-consumer/internal/meter"
)

func FuzzDecode(f *testing.F) {
	for _, tt := range decodeTests() {
		if len(tt.give) <= 4096 {
			f.Add([]byte(tt.give))
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := meter.Decode(body)
		if err != nil {
			assert.ErrorIs(t, err, meter.ErrInvalid)
			var ce *classify.Error
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, classify.Permanent, ce.Class)
			var fe *meter.FieldError
			require.ErrorAs(t, err, &fe)
			if strings.HasPrefix(fe.Reason, "invalid JSON") && !strings.Contains(fe.Reason, "nesting") {
				assert.False(t, json.Valid(body), "rejected valid JSON: %v", err)
			}
			return
		}

		// Only valid JSON is accepted.
		require.True(t, json.Valid(body), "accepted invalid JSON")
		assert.NotEmpty(t, r.IdempotencyKey)
		assert.Equal(t, time.UTC, r.ReadAt.Location())
		checkAgainstEncodingJSON(t, body, r)

		// The normalised form is a fixed point.
		out, err := r.MarshalJSON()
		require.NoError(t, err)
		again, err := meter.Decode(out)
		require.NoError(t, err, "normalised form rejected: %s", out)
		assert.Equal(t, r, again)
		out2, err := again.MarshalJSON()
		require.NoError(t, err)
		assert.Equal(t, string(out), string(out2))
	})
}

// checkAgainstEncodingJSON compares an accepted read with what encoding/json
// and math/big make of the same body.
func checkAgainstEncodingJSON(t *testing.T, body []byte, r meter.Read) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var m map[string]any
	require.NoError(t, dec.Decode(&m))

	assert.Equal(t, m["meter_id"], r.MeterID)
	assert.Equal(t, m["unit"], string(r.Unit))
	if key, ok := m["idempotency_key"].(string); ok {
		assert.Equal(t, key, r.IdempotencyKey)
	}

	at, err := time.Parse(time.RFC3339Nano, strings.ToUpper(m["read_at"].(string)))
	if assert.NoError(t, err) {
		assert.True(t, at.Equal(r.ReadAt), "read_at %v, encoding/json %v", r.ReadAt, at)
	}

	var qty string
	switch v := m["quantity"].(type) {
	case string:
		qty = v
	case json.Number:
		qty = v.String()
	default:
		t.Fatalf("quantity is %T", v)
	}
	want, ok := new(big.Rat).SetString(qty)
	require.True(t, ok, "math/big rejects %q", qty)
	got, ok := new(big.Rat).SetString(r.Quantity.String())
	require.True(t, ok)
	assert.Zero(t, want.Cmp(got), "quantity %s, math/big %s", r.Quantity, want.RatString())
}
