package meter_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/meter"
)

func TestParseDecimal(t *testing.T) {
	tests := []struct {
		give      string
		want      string
		wantScale int
		wantSign  int
	}{
		{give: "0", want: "0"},
		{give: "0.1", want: "0.1", wantScale: 1, wantSign: 1},
		{give: "12.500", want: "12.500", wantScale: 3, wantSign: 1},
		{give: "-12.500", want: "-12.500", wantScale: 3, wantSign: -1},
		{give: "-0", want: "0"},
		{give: "-0.00", want: "0.00", wantScale: 2},
		{give: "0.000", want: "0.000", wantScale: 3},
		{give: "1.5e3", want: "1500", wantSign: 1},
		{give: "1.50e-2", want: "0.0150", wantScale: 4, wantSign: 1},
		{give: "1E+2", want: "100", wantSign: 1},
		{give: "123e-1", want: "12.3", wantScale: 1, wantSign: 1},
		{give: "123e-3", want: "0.123", wantScale: 3, wantSign: 1},
		{give: "0.0015e2", want: "0.15", wantScale: 2, wantSign: 1},
		{give: "0.00e5", want: "0"},
		{give: "0e-3", want: "0.000", wantScale: 3},
		{give: "-5e-0", want: "-5", wantSign: -1},
		{give: "1e100", want: "", wantSign: 1}, // 101 digits
		{give: "0e100", want: "0"},
		{give: "0.0000000000000000000000000000000000001e37", want: "1", wantSign: 1},
		{give: "99999999999999999999999999999999999999", want: "99999999999999999999999999999999999999", wantSign: 1},
		{give: "9999999999999999999999999999999999999.9", want: "9999999999999999999999999999999999999.9", wantScale: 1, wantSign: 1},
		{give: "0.00000000000000000000000000000000000001", want: "0.00000000000000000000000000000000000001", wantScale: 38, wantSign: 1},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			d, err := meter.ParseDecimal(tt.give)
			if tt.want == "" {
				assert.ErrorIs(t, err, meter.ErrInvalidDecimal)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, d.String())
			assert.Equal(t, tt.wantScale, d.Scale())
			assert.Equal(t, tt.wantSign, d.Sign())
			assert.Equal(t, tt.wantSign == 0, d.IsZero())

			again, err := meter.ParseDecimal(d.String())
			require.NoError(t, err)
			assert.Equal(t, d, again, "String is a fixed point")
		})
	}
}

func TestParseDecimalInvalid(t *testing.T) {
	tests := []struct {
		give string
		want string
	}{
		{give: "", want: "is not a decimal number"},
		{give: "NaN", want: "is not a decimal number"},
		{give: "Infinity", want: "is not a decimal number"},
		{give: "+1", want: "is not a decimal number"},
		{give: "01", want: "is not a decimal number"},
		{give: "-01", want: "is not a decimal number"},
		{give: ".5", want: "is not a decimal number"},
		{give: "5.", want: "is not a decimal number"},
		{give: "-", want: "is not a decimal number"},
		{give: "1e", want: "is not a decimal number"},
		{give: "1e+", want: "is not a decimal number"},
		{give: "1.2.3", want: "is not a decimal number"},
		{give: " 1", want: "is not a decimal number"},
		{give: "1\n", want: "is not a decimal number"},
		{give: "1e101", want: "exponent out of range"},
		{give: "1e-101", want: "exponent out of range"},
		{give: "1e0000000000000000000000000999", want: "exponent out of range"},
		{give: "1e99999999999999999999999", want: "exponent out of range"},
		{give: "1" + strings.Repeat("0", 38), want: "has more than 38 significant digits"},
		{give: "1e38", want: "has more than 38 significant digits"},
		{give: "0." + strings.Repeat("0", 38) + "1", want: "has more than 38 digits after the decimal point"},
		{give: "0.1e-38", want: "has more than 38 digits after the decimal point"},
		{give: "0e-39", want: "has more than 38 digits after the decimal point"},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			_, err := meter.ParseDecimal(tt.give)
			require.Error(t, err)
			assert.ErrorIs(t, err, meter.ErrInvalidDecimal)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestDecimalZeroValue(t *testing.T) {
	var d meter.Decimal
	assert.Equal(t, "0", d.String())
	assert.True(t, d.IsZero())
	assert.Equal(t, 0, d.Scale())
	assert.True(t, d.Equal(mustDecimal(t, "0.00")))
}

func TestDecimalCmp(t *testing.T) {
	tests := []struct {
		give [2]string
		want int
	}{
		{give: [2]string{"1", "1"}, want: 0},
		{give: [2]string{"12.5", "12.500"}, want: 0},
		{give: [2]string{"0", "-0.00"}, want: 0},
		{give: [2]string{"1", "2"}, want: -1},
		{give: [2]string{"10", "9"}, want: 1},
		{give: [2]string{"0.1", "0.09"}, want: 1},
		{give: [2]string{"0.1", "0.10001"}, want: -1},
		{give: [2]string{"-1", "1"}, want: -1},
		{give: [2]string{"-1", "-2"}, want: 1},
		{give: [2]string{"-0.5", "0"}, want: -1},
		{give: [2]string{"100.01", "100.1"}, want: -1},
	}
	for _, tt := range tests {
		t.Run(tt.give[0]+" vs "+tt.give[1], func(t *testing.T) {
			a, b := mustDecimal(t, tt.give[0]), mustDecimal(t, tt.give[1])
			assert.Equal(t, tt.want, a.Cmp(b))
			assert.Equal(t, -tt.want, b.Cmp(a))
			assert.Equal(t, tt.want == 0, a.Equal(b))
		})
	}
}

func TestDecimalJSON(t *testing.T) {
	tests := []struct {
		give string
		want string
	}{
		{give: `"12.500"`, want: `"12.500"`},
		{give: `12.500`, want: `"12.500"`},
		{give: `1.50e-2`, want: `"0.0150"`},
		{give: `"-0.00"`, want: `"0.00"`},
		{give: `"\u0031"`, want: `"1"`},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			var v struct{ Q meter.Decimal }
			require.NoError(t, json.Unmarshal([]byte(`{"Q":`+tt.give+`}`), &v))
			got, err := json.Marshal(v)
			require.NoError(t, err)
			assert.Equal(t, `{"Q":`+tt.want+`}`, string(got))
		})
	}
}

func TestDecimalUnmarshalJSONInvalid(t *testing.T) {
	tests := []struct {
		give string
	}{
		{give: `"1.2.3"`},
		{give: `"1e999"`},
		{give: `true`},
		{give: `"unterminated`},
		{give: `"1" `},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			var d meter.Decimal
			assert.ErrorIs(t, d.UnmarshalJSON([]byte(tt.give)), meter.ErrInvalidDecimal)
		})
	}
}

func TestDecimalUnmarshalJSONNull(t *testing.T) {
	d := mustDecimal(t, "7.0")
	require.NoError(t, d.UnmarshalJSON([]byte(`null`)))
	assert.Equal(t, "7.0", d.String())
}

func mustDecimal(t *testing.T, s string) meter.Decimal {
	t.Helper()
	d, err := meter.ParseDecimal(s)
	require.NoError(t, err)
	return d
}
