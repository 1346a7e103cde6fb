package meter_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/classify"
	"github.com/meterline/meter-consumer/internal/meter"
)

// omit drops a field from the body built by give.
const omit = "\x00omit"

// give builds a valid read, with each name/raw-JSON-value pair in kv
// replacing a base field (or omitting it), or adding a new one.
func give(kv ...string) string {
	fields := [][2]string{
		{"meter_id", `"MTR-1"`},
		{"read_at", `"2026-11-30T07:00:00Z"`},
		{"quantity", `"1234.567"`},
		{"unit", `"kWh"`},
	}
	return object(fields, kv)
}

// want builds the normalised form of a read, with each name/raw-JSON-value
// pair in kv replacing a base field. The key is derived unless given.
func want(kv ...string) string {
	fields := [][2]string{
		{"meter_id", `"MTR-1"`},
		{"read_at", `"2026-11-30T07:00:00Z"`},
		{"quantity", `"1234.567"`},
		{"unit", `"kWh"`},
		{"idempotency_key", ""},
	}
	for i := 0; i < len(kv); i += 2 {
		for j := range fields {
			if fields[j][0] == kv[i] {
				fields[j][1] = kv[i+1]
			}
		}
	}
	if fields[4][1] == "" {
		fields[4][1] = strings.TrimSuffix(fields[0][1], `"`) + "@" + strings.TrimPrefix(fields[1][1], `"`)
	}
	return object(fields, nil)
}

func object(fields [][2]string, kv []string) string {
	for i := 0; i < len(kv); i += 2 {
		replaced := false
		for j := range fields {
			if fields[j][0] == kv[i] {
				fields[j][1] = kv[i+1]
				replaced = true
			}
		}
		if !replaced {
			fields = append(fields, [2]string{kv[i], kv[i+1]})
		}
	}
	var b strings.Builder
	b.WriteByte('{')
	for _, f := range fields {
		if f[1] == omit {
			continue
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		b.WriteString(`"` + f[0] + `":` + f[1])
	}
	b.WriteByte('}')
	return b.String()
}

// appendMembers adds raw members to the end of an object, even duplicates.
func appendMembers(body, members string) string {
	return strings.TrimSuffix(body, "}") + "," + members + "}"
}

// padTo pads a valid read with an unknown field to exactly size bytes.
func padTo(size int) string {
	base := give("pad", `""`)
	return give("pad", `"`+strings.Repeat("x", size-len(base))+`"`)
}

type decodeTest struct {
	name string
	give string
	// want is the normalised form of a valid read.
	want string
	// wantField is the field an invalid read's error names.
	wantField string
	// wantCause is the classify cause of an invalid read; invalid_payload if empty.
	wantCause classify.Cause
}

func decodeTests() []decodeTest {
	digits38 := "12345678901234567890123456789012345678"
	id64 := strings.Repeat("M", 64)
	key128 := strings.Repeat("k", 128)
	return []decodeTest{
		// Valid reads.
		{name: "base", give: give(), want: want()},
		{name: "quantity 0.1 stays exact", give: give("quantity", `"0.1"`), want: want("quantity", `"0.1"`)},
		{name: "quantity keeps trailing zeros", give: give("quantity", `"12.500"`), want: want("quantity", `"12.500"`)},
		{name: "quantity as number", give: give("quantity", `1234.567`), want: want("quantity", `"1234.567"`)},
		{name: "quantity number with exponent", give: give("quantity", `1.5e3`), want: want("quantity", `"1500"`)},
		{name: "quantity negative exponent keeps scale", give: give("quantity", `"1.50e-2"`), want: want("quantity", `"0.0150"`)},
		{name: "quantity exponent with plus", give: give("quantity", `"1E+2"`), want: want("quantity", `"100"`)},
		{name: "quantity exponent leading zeros", give: give("quantity", `"5e0001"`), want: want("quantity", `"50"`)},
		{name: "quantity exponent with 60000 leading zeros", give: give("quantity", `"1e`+strings.Repeat("0", 60000)+`5"`), want: want("quantity", `"100000"`)},
		{name: "quantity 38 digits", give: give("quantity", `"`+digits38+`"`), want: want("quantity", `"`+digits38+`"`)},
		{name: "quantity scale 38", give: give("quantity", `"0.`+digits38+`"`), want: want("quantity", `"0.`+digits38+`"`)},
		{name: "quantity negative", give: give("quantity", `-42.5`), want: want("quantity", `"-42.5"`)},
		{name: "quantity negative zero", give: give("quantity", `"-0.00"`), want: want("quantity", `"0.00"`)},
		{name: "quantity zero", give: give("quantity", `0`), want: want("quantity", `"0"`)},
		{name: "quantity escaped string", give: give("quantity", `"\u0031.5"`), want: want("quantity", `"1.5"`)},
		{name: "read_at offset normalised to UTC", give: give("read_at", `"2026-11-30T12:30:00+05:30"`), want: want()},
		{name: "read_at negative offset crosses midnight", give: give("read_at", `"2026-11-29T23:00:00-08:00"`), want: want()},
		{name: "read_at -00:00 is UTC", give: give("read_at", `"2026-11-30T07:00:00-00:00"`), want: want()},
		{name: "read_at lower-case t and z", give: give("read_at", `"2026-11-30t07:00:00z"`), want: want()},
		{name: "read_at trailing fraction zeros dropped", give: give("read_at", `"2026-11-30T07:00:00.500Z"`), want: want("read_at", `"2026-11-30T07:00:00.5Z"`)},
		{name: "read_at nanoseconds", give: give("read_at", `"2026-11-30T07:00:00.123456789Z"`), want: want("read_at", `"2026-11-30T07:00:00.123456789Z"`)},
		{name: "read_at leap day", give: give("read_at", `"2028-02-29T07:00:00Z"`), want: want("read_at", `"2028-02-29T07:00:00Z"`)},
		{name: "meter_id 64 characters", give: give("meter_id", `"`+id64+`"`), want: want("meter_id", `"`+id64+`"`)},
		{name: "meter_id every allowed character", give: give("meter_id", `"azAZ09._:-"`), want: want("meter_id", `"azAZ09._:-"`)},
		{name: "meter_id escaped", give: give("meter_id", `"MTR\u002d1"`), want: want()},
		{name: "unit m3", give: give("unit", `"m3"`), want: want("unit", `"m3"`)},
		{name: "unit therm", give: give("unit", `"therm"`), want: want("unit", `"therm"`)},
		{name: "idempotency_key given", give: give("idempotency_key", `"abc-123"`), want: want("idempotency_key", `"abc-123"`)},
		{name: "idempotency_key 128 characters", give: give("idempotency_key", `"`+key128+`"`), want: want("idempotency_key", `"`+key128+`"`)},
		{name: "idempotency_key inner space and quote", give: give("idempotency_key", `"a b\"~"`), want: want("idempotency_key", `"a b\"~"`)},
		{name: "idempotency_key with escapes", give: give("idempotency_key", `"a\/b\\c\"d\u0041"`), want: want("idempotency_key", `"a/b\\c\"dA"`)},
		{name: "idempotency_key null is derived", give: give("idempotency_key", `null`), want: want()},
		{name: "unknown fields ignored", give: give("note", `{"a":[1,-2.5e3,{"b":null}],"c":true,"d":"\u00e9\n"}`, "tags", `[]`, "x", `{}`), want: want()},
		{name: "unknown field same name as nested", give: give("extra", `{"meter_id":1,"unit":[]}`), want: want()},
		{name: "escaped field name", give: give("meter_id", omit, `meter\u005fid`, `"MTR-1"`), want: want()},
		{name: "escaped names are distinct", give: appendMembers(give(), `"\b\f\n\r\t":1,"\ud83d\ude00":2,"\ud800":3,"A\u00e9":4`), want: want()},
		{name: "field names are case-sensitive", give: give("METER_ID", `7`), want: want()},
		{name: "white space around everything", give: " \t\n{ \"meter_id\" : \"MTR-1\" ,\r\n\"read_at\":\"2026-11-30T07:00:00Z\", \"quantity\" : 1234.567 , \"unit\":\"kWh\" } \n\t ", want: want()},
		{name: "exactly MaxSize bytes", give: padTo(meter.MaxSize), want: want()},

		// Invalid quantity.
		{name: "quantity exponent out of range", give: give("quantity", `"1e999"`), wantField: "quantity"},
		{name: "quantity huge exponent", give: give("quantity", `1e999999999`), wantField: "quantity"},
		{name: "quantity huge negative exponent", give: give("quantity", `"1e-999999999999999999999"`), wantField: "quantity"},
		{name: "quantity exponent with 60000 digits", give: give("quantity", `1e`+strings.Repeat("9", 60000)), wantField: "quantity"},
		{name: "quantity 39 digits", give: give("quantity", `"1`+digits38+`"`), wantField: "quantity"},
		{name: "quantity 39 digits by exponent", give: give("quantity", `"`+digits38+`e1"`), wantField: "quantity"},
		{name: "quantity scale 39", give: give("quantity", `"0.1e-38"`), wantField: "quantity"},
		{name: "quantity NaN", give: give("quantity", `"NaN"`), wantField: "quantity"},
		{name: "quantity Infinity", give: give("quantity", `"Infinity"`), wantField: "quantity"},
		{name: "quantity -Infinity", give: give("quantity", `"-Infinity"`), wantField: "quantity"},
		{name: "quantity empty", give: give("quantity", `""`), wantField: "quantity"},
		{name: "quantity leading space", give: give("quantity", `" 1"`), wantField: "quantity"},
		{name: "quantity trailing space", give: give("quantity", `"1 "`), wantField: "quantity"},
		{name: "quantity leading plus", give: give("quantity", `"+1"`), wantField: "quantity"},
		{name: "quantity leading zero", give: give("quantity", `"01"`), wantField: "quantity"},
		{name: "quantity number leading zero", give: give("quantity", `01`), wantField: "quantity"},
		{name: "quantity no integer digit", give: give("quantity", `".5"`), wantField: "quantity"},
		{name: "quantity no fraction digit", give: give("quantity", `"5."`), wantField: "quantity"},
		{name: "quantity empty exponent", give: give("quantity", `"1e"`), wantField: "quantity"},
		{name: "quantity hex", give: give("quantity", `"0x10"`), wantField: "quantity"},
		{name: "quantity comma", give: give("quantity", `"1,5"`), wantField: "quantity"},
		{name: "quantity null", give: give("quantity", `null`), wantField: "quantity"},
		{name: "quantity boolean", give: give("quantity", `true`), wantField: "quantity"},
		{name: "quantity object", give: give("quantity", `{"v":1}`), wantField: "quantity"},
		{name: "quantity missing", give: give("quantity", omit), wantField: "quantity"},

		// Invalid unit.
		{name: "unit wrong case", give: give("unit", `"kwh"`), wantField: "unit"},
		{name: "unit unknown", give: give("unit", `"J"`), wantField: "unit"},
		{name: "unit empty", give: give("unit", `""`), wantField: "unit"},
		{name: "unit number", give: give("unit", `1`), wantField: "unit"},
		{name: "unit missing", give: give("unit", omit), wantField: "unit"},

		// Invalid read_at.
		{name: "read_at without zone", give: give("read_at", `"2026-11-30T07:00:00"`), wantField: "read_at"},
		{name: "read_at fraction without zone", give: give("read_at", `"2026-11-30T07:00:00.5"`), wantField: "read_at"},
		{name: "read_at space separator", give: give("read_at", `"2026-11-30 07:00:00Z"`), wantField: "read_at"},
		{name: "read_at offset without colon", give: give("read_at", `"2026-11-30T07:00:00+0530"`), wantField: "read_at"},
		{name: "read_at offset hours out of range", give: give("read_at", `"2026-11-30T07:00:00+24:00"`), wantField: "read_at"},
		{name: "read_at month 13", give: give("read_at", `"2026-13-01T07:00:00Z"`), wantField: "read_at"},
		{name: "read_at February 30", give: give("read_at", `"2026-02-30T07:00:00Z"`), wantField: "read_at"},
		{name: "read_at February 29 in a common year", give: give("read_at", `"2026-02-29T07:00:00Z"`), wantField: "read_at"},
		{name: "read_at hour 24", give: give("read_at", `"2026-11-30T24:00:00Z"`), wantField: "read_at"},
		{name: "read_at leap second", give: give("read_at", `"2026-12-31T23:59:60Z"`), wantField: "read_at"},
		{name: "read_at 10 fraction digits", give: give("read_at", `"2026-11-30T07:00:00.1234567891Z"`), wantField: "read_at"},
		{name: "read_at empty fraction", give: give("read_at", `"2026-11-30T07:00:00.Z"`), wantField: "read_at"},
		{name: "read_at date only", give: give("read_at", `"2026-11-30"`), wantField: "read_at"},
		{name: "read_at before year 0 in UTC", give: give("read_at", `"0000-01-01T00:00:00+01:00"`), wantField: "read_at"},
		{name: "read_at after year 9999 in UTC", give: give("read_at", `"9999-12-31T23:00:00-01:00"`), wantField: "read_at"},
		{name: "read_at empty", give: give("read_at", `""`), wantField: "read_at"},
		{name: "read_at number", give: give("read_at", `1764486000`), wantField: "read_at"},
		{name: "read_at missing", give: give("read_at", omit), wantField: "read_at"},

		// Invalid meter_id.
		{name: "meter_id 65 characters", give: give("meter_id", `"`+id64+`X"`), wantField: "meter_id"},
		{name: "meter_id empty", give: give("meter_id", `""`), wantField: "meter_id"},
		{name: "meter_id space", give: give("meter_id", `"MTR 1"`), wantField: "meter_id"},
		{name: "meter_id slash", give: give("meter_id", `"MTR/1"`), wantField: "meter_id"},
		{name: "meter_id non-ASCII", give: give("meter_id", `"MTR-é"`), wantField: "meter_id"},
		{name: "meter_id null", give: give("meter_id", `null`), wantField: "meter_id"},
		{name: "meter_id number", give: give("meter_id", `42`), wantField: "meter_id"},
		{name: "meter_id missing", give: give("meter_id", omit), wantField: "meter_id"},

		// Invalid idempotency_key.
		{name: "idempotency_key 129 characters", give: give("idempotency_key", `"`+key128+`k"`), wantField: "idempotency_key"},
		{name: "idempotency_key empty", give: give("idempotency_key", `""`), wantField: "idempotency_key"},
		{name: "idempotency_key leading space", give: give("idempotency_key", `" abc"`), wantField: "idempotency_key"},
		{name: "idempotency_key trailing space", give: give("idempotency_key", `"abc "`), wantField: "idempotency_key"},
		{name: "idempotency_key tab", give: give("idempotency_key", `"a\tb"`), wantField: "idempotency_key"},
		{name: "idempotency_key DEL", give: give("idempotency_key", `"a\u007fb"`), wantField: "idempotency_key"},
		{name: "idempotency_key non-ASCII", give: give("idempotency_key", `"clé"`), wantField: "idempotency_key"},
		{name: "idempotency_key number", give: give("idempotency_key", `7`), wantField: "idempotency_key"},

		// Invalid body.
		{name: "duplicate field", give: appendMembers(give(), `"meter_id":"MTR-1"`), wantField: "body"},
		{name: "duplicate field after escape", give: give(`meter\u005fid`, `"MTR-2"`), wantField: "body"},
		{name: "duplicate surrogate pair name", give: appendMembers(give(), `"\ud83d\ude00":1,"😀":2`), wantField: "body"},
		{name: "duplicate lone surrogate names", give: appendMembers(give(), `"\ud800":1,"\udc00":2`), wantField: "body"},
		{name: "duplicate broken pair name", give: appendMembers(give(), `"\ud800\u0041":1,"\ufffdA":2`), wantField: "body"},
		{name: "invalid unicode escape", give: give("note", `"\u12g4"`), wantField: "body"},
		{name: "truncated unicode escape", give: `{"note":"\u12`, wantField: "body"},
		{name: "duplicate unknown field", give: appendMembers(give(), `"x":1,"y":2,"x":3`), wantField: "body"},
		{name: "duplicate nested key", give: give("extra", `[{"a":1,"b":{"c":1,"c":2}}]`), wantField: "body"},
		{name: "trailing data", give: give() + `x`, wantField: "body"},
		{name: "trailing object", give: give() + `{}`, wantField: "body"},
		{name: "invalid UTF-8 in a field", give: give("meter_id", "\"MTR-\xff\""), wantField: "body"},
		{name: "invalid UTF-8 in an unknown field", give: give("note", "\"caf\xc3\""), wantField: "body"},
		{name: "raw control character in a string", give: give("note", "\"a\x01b\""), wantField: "body"},
		{name: "invalid escape", give: give("note", `"\x"`), wantField: "body"},
		{name: "invalid JSON in an unknown field", give: give("note", `[1,]`), wantField: "body"},
		{name: "invalid literal in an unknown field", give: give("note", `tru`), wantField: "body"},
		{name: "invalid number in an unknown field", give: give("note", `-`), wantField: "body"},
		{name: "bare NaN quantity", give: give("quantity", `NaN`), wantField: "body"},
		{name: "unterminated object", give: strings.TrimSuffix(give(), "}"), wantField: "body"},
		{name: "array body", give: `[` + give() + `]`, wantField: "body"},
		{name: "string body", give: `"MTR-1"`, wantField: "body"},
		{name: "number body", give: `42`, wantField: "body"},
		{name: "null body", give: `null`, wantField: "body"},
		{name: "empty body", give: ``, wantField: "body"},
		{name: "white space body", give: " \n", wantField: "body"},
		{name: "empty object", give: `{}`, wantField: "meter_id"},
		{name: "garbage body", give: `MTR-1`, wantField: "body"},
		{name: "one byte over MaxSize", give: padTo(meter.MaxSize + 1), wantField: "body", wantCause: classify.CausePayloadTooLarge},
	}
}

func TestDecode(t *testing.T) {
	tests := decodeTests()
	require.GreaterOrEqual(t, len(tests), 40)

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := meter.Decode([]byte(tt.give))

			if tt.want != "" {
				require.NoError(t, err)
				got, err := r.MarshalJSON()
				require.NoError(t, err)
				assert.Equal(t, tt.want, string(got))
				assert.Equal(t, time.UTC, r.ReadAt.Location())
				assert.NotEmpty(t, r.IdempotencyKey)
				return
			}

			require.Error(t, err)
			assert.ErrorIs(t, err, meter.ErrInvalid)

			var ce *classify.Error
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, classify.Permanent, ce.Class)
			wantCause := tt.wantCause
			if wantCause == "" {
				wantCause = classify.CauseInvalidPayload
			}
			assert.Equal(t, wantCause, ce.Cause)

			var fe *meter.FieldError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, tt.wantField, fe.Field)
			assert.Contains(t, err.Error(), string(wantCause)+": invalid meter read: "+tt.wantField+": ")
			assert.Equal(t, meter.Read{}, r)
		})
	}
}
