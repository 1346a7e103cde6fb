package meter_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/meter"
)

func TestDecodeDerivedKeyIgnoresNotation(t *testing.T) {
	tests := []struct {
		give string
	}{
		{give: `"2026-11-30T07:00:00.5Z"`},
		{give: `"2026-11-30T07:00:00.500000000Z"`},
		{give: `"2026-11-30t07:00:00.50z"`},
		{give: `"2026-11-30T12:30:00.5+05:30"`},
		{give: `"2026-11-29T21:00:00.5-10:00"`},
		{give: `"2026-11-30T07:00:00.5-00:00"`},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			r, err := meter.Decode([]byte(give("read_at", tt.give)))
			require.NoError(t, err)
			assert.Equal(t, "MTR-1@2026-11-30T07:00:00.5Z", r.IdempotencyKey)
			assert.Equal(t, "MTR-1", r.MeterID)
			assert.True(t, r.ReadAt.Equal(time.Date(2026, 11, 30, 7, 0, 0, 500_000_000, time.UTC)))
		})
	}
}

func TestDecodeFields(t *testing.T) {
	r, err := meter.Decode([]byte(give("quantity", `-0.0150`, "unit", `"MWh"`, "idempotency_key", `"k-1"`)))
	require.NoError(t, err)
	assert.Equal(t, "MTR-1", r.MeterID)
	assert.Equal(t, time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC), r.ReadAt)
	assert.Equal(t, "-0.0150", r.Quantity.String())
	assert.Equal(t, 4, r.Quantity.Scale())
	assert.Equal(t, -1, r.Quantity.Sign())
	assert.Equal(t, meter.UnitMWh, r.Unit)
	assert.Equal(t, "k-1", r.IdempotencyKey)
}

func TestDecodeEveryUnit(t *testing.T) {
	for _, u := range meter.Units() {
		t.Run(string(u), func(t *testing.T) {
			assert.True(t, u.Valid())
			r, err := meter.Decode([]byte(give("unit", `"`+string(u)+`"`)))
			require.NoError(t, err)
			assert.Equal(t, u, r.Unit)
		})
	}
	assert.False(t, meter.Unit("kwh").Valid())
	assert.False(t, meter.Unit("").Valid())
}

func TestDecodeManyKeys(t *testing.T) {
	// Enough names to switch duplicate detection to a map, at two depths.
	var members, nested []string
	for i := range 200 {
		members = append(members, `"k`+strconv.Itoa(i)+`":1`)
		nested = append(nested, `"n`+strconv.Itoa(i)+`":1`)
	}
	body := appendMembers(give("nested", "{"+strings.Join(nested, ",")+"}"), strings.Join(members, ","))
	_, err := meter.Decode([]byte(body))
	require.NoError(t, err)

	_, err = meter.Decode([]byte(appendMembers(body, `"k150":2`)))
	assert.ErrorContains(t, err, `duplicate key "k150"`)

	_, err = meter.Decode([]byte(appendMembers(body, `"nested":2`)))
	assert.ErrorContains(t, err, `duplicate key "nested"`)

	// Deeper than the names the decoder keeps without a map.
	deep := strings.Repeat(`{"a":1,"b":`, 40) + `{"c":1,"d":2}` + strings.Repeat("}", 40)
	_, err = meter.Decode([]byte(give("deep", deep)))
	require.NoError(t, err)
	_, err = meter.Decode([]byte(give("deep", strings.Replace(deep, `"d"`, `"c"`, 1))))
	assert.ErrorContains(t, err, `duplicate key "c"`)
	_, err = meter.Decode([]byte(give("deep", strings.Replace(deep, `"b":{"c"`, `"b":{"c":1,"a":1,"c"`, 1))))
	assert.ErrorContains(t, err, `duplicate key "c"`)

	dupNested := give("nested", "{"+strings.Join(nested, ",")+`,"n199":2}`)
	_, err = meter.Decode([]byte(dupNested))
	assert.ErrorContains(t, err, `duplicate key "n199"`)
}

func TestDecodeDeepNesting(t *testing.T) {
	tests := []struct {
		name  string
		depth int
		ok    bool
	}{
		{name: "at the limit", depth: 9999, ok: true},
		{name: "over the limit", depth: 10000, ok: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The read object is one level, so the unknown field adds depth more.
			body := give("deep", strings.Repeat("[", tt.depth)+strings.Repeat("]", tt.depth))
			_, err := meter.Decode([]byte(body))
			if tt.ok {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, "nesting too deep")
		})
	}
}

func TestMarshalJSONHandBuilt(t *testing.T) {
	tests := []struct {
		name string
		give meter.Read
		want string
	}{
		{
			name: "derives a missing key and converts to UTC",
			give: meter.Read{
				MeterID:  "MTR-1",
				ReadAt:   time.Date(2026, 11, 30, 8, 0, 0, 0, time.FixedZone("CET", 3600)),
				Quantity: mustDecimal(t, "12.500"),
				Unit:     meter.UnitKWh,
			},
			want: `{"meter_id":"MTR-1","read_at":"2026-11-30T07:00:00Z","quantity":"12.500","unit":"kWh","idempotency_key":"MTR-1@2026-11-30T07:00:00Z"}`,
		},
		{
			name: "escapes strings",
			give: meter.Read{
				MeterID:        "a\"b\\c\n\x01\xff",
				Unit:           "é",
				IdempotencyKey: "<k>",
			},
			want: `{"meter_id":"a\"b\\c\n\u0001\ufffd","read_at":"0001-01-01T00:00:00Z","quantity":"0","unit":"é","idempotency_key":"<k>"}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.give.MarshalJSON()
			require.NoError(t, err)
			assert.Equal(t, tt.want, string(got))
			assert.True(t, json.Valid(got))
			assert.Equal(t, tt.want, string(tt.give.AppendJSON(nil)))
		})
	}
}

func TestAppendJSONAppends(t *testing.T) {
	r, err := meter.Decode([]byte(give()))
	require.NoError(t, err)
	got := r.AppendJSON([]byte("prefix:"))
	assert.Equal(t, "prefix:"+want(), string(got))
}

func TestFieldError(t *testing.T) {
	tests := []struct {
		give meter.FieldError
		want string
	}{
		{give: meter.FieldError{Field: "quantity", Reason: "bad"}, want: "invalid meter read: quantity: bad"},
		{give: meter.FieldError{Reason: "bad"}, want: "invalid meter read: bad"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.give.Error())
			assert.ErrorIs(t, &tt.give, meter.ErrInvalid)
		})
	}
}

// TestDecodeNonASCIINotCountedAsLength: a string field with characters it
// may not hold is rejected for them, not for its length in bytes (40 "é"
// are 80 bytes but 40 characters).
func TestDecodeNonASCIINotCountedAsLength(t *testing.T) {
	tests := []struct {
		field, value, want string
	}{
		{field: "meter_id", value: strings.Repeat("é", 40), want: "may hold only A-Z a-z 0-9 . _ : -"},
		{field: "idempotency_key", value: strings.Repeat("é", 65), want: "may hold only printable ASCII"},
	}
	for _, tt := range tests {
		t.Run(tt.field, func(t *testing.T) {
			_, err := meter.Decode([]byte(give(tt.field, `"`+tt.value+`"`)))
			var fe *meter.FieldError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, tt.field, fe.Field)
			assert.True(t, strings.HasSuffix(fe.Reason, " "+tt.want), fe.Reason)
		})
	}
}

var benchBody = []byte(`{"meter_id":"MTR-000123456","read_at":"2026-11-30T12:30:00.250+05:30","quantity":"1234.567","unit":"kWh","idempotency_key":"b1946ac9-2a5c-4e0d-8f2b-5c3f6b1c2d3e","firmware":{"version":"4.2.1","flags":[1,2,3]}}`)

func BenchmarkDecode(b *testing.B) {
	tests := []struct {
		name string
		give []byte
	}{
		{name: "given key", give: benchBody},
		{name: "derived key", give: []byte(give("quantity", `1.5e3`))},
	}
	for _, tt := range tests {
		b.Run(tt.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(tt.give)))
			for b.Loop() {
				if _, err := meter.Decode(tt.give); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
