package reliability_test

import (
	"strings"

	"github.com/nats-io/nats.go"
)

// hostile is one malformed message: its body, the cause it must be
// dead-lettered with, and a word the error must contain.
type hostile struct {
	name   string
	body   []byte
	cause  string
	field  string
	header nats.Header
}

const okFields = `"meter_id":"MTR-1","read_at":"2026-11-30T07:00:00Z","unit":"kWh"`

func q(quantity string) []byte { return []byte(`{` + okFields + `,"quantity":` + quantity + `}`) }

func hostileCorpus() []hostile {
	inv := func(name, body, field string) hostile {
		return hostile{name: name, body: []byte(body), cause: "invalid_payload", field: field}
	}
	qty := func(name, quantity string) hostile {
		return hostile{name: name, body: q(quantity), cause: "invalid_payload", field: "quantity"}
	}
	c := []hostile{
		inv("empty", "", "body"),
		inv("whitespace", "   \n", "body"),
		inv("not json", "hello", "body"),
		inv("truncated", `{"meter_id":"MTR-1","read_at":"2026-11-30T07:00:00Z"`, "body"),
		inv("array", `[1,2,3]`, "body"),
		inv("string", `"a read"`, "body"),
		inv("number", `42`, "body"),
		inv("null", `null`, "body"),
		inv("true", `true`, "body"),
		inv("two objects", `{}{}`, "body"),
		inv("trailing garbage", `{`+okFields+`,"quantity":"1"} x`, "body"),
		inv("duplicate key", `{`+okFields+`,"quantity":"1","quantity":"2"}`, "quantity"),
		inv("invalid utf-8", "{\"meter_id\":\"MTR-\xff\",\"read_at\":\"2026-11-30T07:00:00Z\",\"quantity\":\"1\",\"unit\":\"kWh\"}", "UTF-8"),
		inv("binary garbage", "\x00\x01\x02\x03\xfe\xff", "body"),
		inv("nul bytes", "{\x00}", "body"),
		inv("missing meter_id", `{"read_at":"2026-11-30T07:00:00Z","quantity":"1","unit":"kWh"}`, "meter_id"),
		inv("missing read_at", `{"meter_id":"M","quantity":"1","unit":"kWh"}`, "read_at"),
		inv("missing quantity", `{"meter_id":"M","read_at":"2026-11-30T07:00:00Z","unit":"kWh"}`, "quantity"),
		inv("missing unit", `{"meter_id":"M","read_at":"2026-11-30T07:00:00Z","quantity":"1"}`, "unit"),
		inv("meter_id number", `{"meter_id":7,"read_at":"2026-11-30T07:00:00Z","quantity":"1","unit":"kWh"}`, "meter_id"),
		inv("meter_id empty", `{"meter_id":"","read_at":"2026-11-30T07:00:00Z","quantity":"1","unit":"kWh"}`, "meter_id"),
		inv("meter_id too long", `{"meter_id":"`+strings.Repeat("M", 65)+`","read_at":"2026-11-30T07:00:00Z","quantity":"1","unit":"kWh"}`, "meter_id"),
		inv("meter_id space", `{"meter_id":"MTR 1","read_at":"2026-11-30T07:00:00Z","quantity":"1","unit":"kWh"}`, "meter_id"),
		inv("meter_id slash", `{"meter_id":"MTR/1","read_at":"2026-11-30T07:00:00Z","quantity":"1","unit":"kWh"}`, "meter_id"),
		inv("read_at no zone", `{"meter_id":"M","read_at":"2026-11-30T07:00:00","quantity":"1","unit":"kWh"}`, "read_at"),
		inv("read_at date only", `{"meter_id":"M","read_at":"2026-11-30","quantity":"1","unit":"kWh"}`, "read_at"),
		inv("read_at unix", `{"meter_id":"M","read_at":1764486000,"quantity":"1","unit":"kWh"}`, "read_at"),
		inv("read_at space", `{"meter_id":"M","read_at":"2026-11-30 07:00:00Z","quantity":"1","unit":"kWh"}`, "read_at"),
		inv("read_at month 13", `{"meter_id":"M","read_at":"2026-13-30T07:00:00Z","quantity":"1","unit":"kWh"}`, "read_at"),
		inv("read_at zone name", `{"meter_id":"M","read_at":"2026-11-30T07:00:00 CET","quantity":"1","unit":"kWh"}`, "read_at"),
		inv("unit lower", `{"meter_id":"M","read_at":"2026-11-30T07:00:00Z","quantity":"1","unit":"kwh"}`, "unit"),
		inv("unit unknown", `{"meter_id":"M","read_at":"2026-11-30T07:00:00Z","quantity":"1","unit":"BTU"}`, "unit"),
		inv("unit number", `{"meter_id":"M","read_at":"2026-11-30T07:00:00Z","quantity":"1","unit":1}`, "unit"),
		inv("key empty", `{`+okFields+`,"quantity":"1","idempotency_key":""}`, "idempotency_key"),
		inv("key too long", `{`+okFields+`,"quantity":"1","idempotency_key":"`+strings.Repeat("k", 129)+`"}`, "idempotency_key"),
		inv("key control char", `{`+okFields+`,"quantity":"1","idempotency_key":"a\u0007b"}`, "idempotency_key"),
		qty("NaN string", `"NaN"`),
		{name: "NaN bare", body: q(`NaN`), cause: "invalid_payload", field: "invalid JSON"},
		qty("Infinity", `"Infinity"`),
		qty("-Infinity", `"-Infinity"`),
		qty("huge exponent", `1e999`),
		qty("huge exponent string", `"1e999999999"`),
		qty("negative huge exponent", `1e-999`),
		qty("39 digits", `123456789012345678901234567890123456789`),
		qty("float with exponent out of range", `1.5E+400`),
		qty("empty string", `""`),
		qty("leading plus", `"+1"`),
		qty("leading zeros", `"007"`),
		qty("bare dot", `".5"`),
		qty("trailing dot", `"5."`),
		qty("hex", `"0x10"`),
		qty("comma decimal", `"1,5"`),
		qty("spaces", `" 1.5 "`),
		qty("bool", `true`),
		qty("object", `{"value":"1"}`),
		qty("array", `["1"]`),
		qty("null", `null`),
		{name: "1 MiB payload", body: []byte(`{` + okFields + `,"quantity":"1","pad":"` + strings.Repeat("x", 1<<20) + `"}`), cause: "payload_too_large", field: "limit"},
		{name: "64 KiB + 1", body: []byte(`{` + okFields + `,"quantity":"1","pad":"` + strings.Repeat("x", 64<<10) + `"}`), cause: "payload_too_large", field: "limit"},
		{name: "odd headers, bad body", body: []byte(`{oops}`), cause: "invalid_payload", field: "body",
			header: nats.Header{"X-Odd": {"\x01\x02"}, "Content-Type": {"application/octet-stream"}}},
	}
	return c
}
