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

// stdRead is a read as encoding/json decodes it, the library the scanner
// stands in for: the fields by their tags, the quantity's text kept
// (json.Number), the timestamp parsed by time.Time. Unknown fields are
// admitted, as the contract admits them (DisallowUnknownFields would reject
// every read that carries one).
type stdRead struct {
	MeterID        string      `json:"meter_id"`
	ReadAt         time.Time   `json:"read_at"`
	Quantity       json.Number `json:"quantity"`
	Unit           string      `json:"unit"`
	IdempotencyKey *string     `json:"idempotency_key"`
}

// decodeStd decodes a body with encoding/json, then takes the quantity
// through the package's own decimal parser and the time to UTC: as near to
// Decode's work as encoding/json comes.
func decodeStd(body []byte) (stdRead, meter.Decimal, error) {
	var r stdRead
	if err := json.Unmarshal(body, &r); err != nil {
		return r, meter.Decimal{}, err
	}
	q, err := meter.ParseDecimal(r.Quantity.String())
	r.ReadAt = r.ReadAt.UTC()
	return r, q, err
}

// The scanner keeps its place because encoding/json accepts bodies the
// contract (docs/CONTRACT.md) refuses, each a read billed on a guess: a
// field given twice (encoding/json keeps the last), a field name in another
// case (it matches names case-insensitively), bytes that are not UTF-8 (it
// replaces them with U+FFFD) and a fraction of a second past nanoseconds
// (time.Time drops it). Each row: Decode rejects the body, encoding/json
// takes it. Should a row stop holding (encoding/json made strict), the
// scanner's reason to exist goes with it.
func TestEncodingJSONAcceptsWhatTheContractRefuses(t *testing.T) {
	for _, tt := range []struct {
		name, give, why string
	}{
		{"a field twice", `{"meter_id":"MTR-1","meter_id":"MTR-2","read_at":"2026-11-30T12:30:00Z","quantity":"1.5","unit":"kWh"}`, `duplicate key "meter_id"`},
		{"a field name in another case", `{"METER_ID":"MTR-1","read_at":"2026-11-30T12:30:00Z","quantity":"1.5","unit":"kWh"}`, "meter_id: is required"},
		{"bytes that are not UTF-8", "{\"meter_id\":\"MTR-1\",\"read_at\":\"2026-11-30T12:30:00Z\",\"quantity\":\"1.5\",\"unit\":\"kWh\",\"note\":\"\xff\"}", "invalid UTF-8"},
		{"a tenth digit of a second", `{"meter_id":"MTR-1","read_at":"2026-11-30T12:30:00.1234567891Z","quantity":"1.5","unit":"kWh"}`, "more than 9 fractional second digits"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := meter.Decode([]byte(tt.give))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.why)
			_, _, err = decodeStd([]byte(tt.give))
			assert.NoError(t, err, "encoding/json accepts it")
		})
	}
}

// Both decoders agree on a read the contract accepts.
func TestEncodingJSONAgreesOnAValidRead(t *testing.T) {
	r, err := meter.Decode(benchBody)
	require.NoError(t, err)
	s, q, err := decodeStd(benchBody)
	require.NoError(t, err)
	assert.Equal(t, r.MeterID, s.MeterID)
	assert.True(t, r.ReadAt.Equal(s.ReadAt))
	assert.Equal(t, r.Quantity, q)
	assert.Equal(t, string(r.Unit), s.Unit)
}

// BenchmarkDecodeWithEncodingJSON is BenchmarkDecode's given-key read
// through encoding/json (and the same decimal parser), to set the
// scanner's cost against the library's.
func BenchmarkDecodeWithEncodingJSON(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(benchBody)))
	for b.Loop() {
		if _, _, err := decodeStd(benchBody); err != nil {
			b.Fatal(err)
		}
	}
}

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
