// Package meter owns the meter-read contract: it decodes and validates the
// JSON body of one meter read and renders it back in a single normalised form.
//
// # The contract
//
// A read is a JSON object of at most [MaxSize] bytes with a meter_id, an
// RFC 3339 read_at with an explicit offset, a decimal quantity (a JSON
// string or number, held as a [Decimal], never as a float), a [Unit] and an
// optional idempotency_key, derived from meter_id and read_at when absent.
// The rules, one by one with the reason [Decode] gives for each, the
// normalised form [Read.AppendJSON] writes and the decisions taken on
// ambiguous points are in one place, docs/CONTRACT.md; contract_test.go
// checks that table against the decoder.
//
// # Why not encoding/json
//
// The body is scanned by hand (scan.go, object.go, jsonstring.go,
// timestamp.go) because encoding/json takes bodies the contract refuses,
// each a read billed on a guess: a field given twice (it keeps the last),
// a field name in another case (it matches names case-insensitively),
// bytes that are not UTF-8 (it replaces them) and a tenth digit of a
// second (time.Time drops it); DisallowUnknownFields would instead refuse
// the unknown fields the contract admits (TestEncodingJSONAcceptsWhatThe-
// ContractRefuses holds each case). It also costs more: the same read
// through encoding/json and this package's decimal parser takes 2.1-3.2us
// and 16 allocations against Decode's 0.43-0.55us and 1 (6 runs each of
// BenchmarkDecodeWithEncodingJSON and BenchmarkDecode, given key), without
// the field checks Decode makes besides.
//
// # Errors
//
// [Decode] returns a *classify.Error of class Permanent for every rejected
// body: cause payload_too_large for a body over [MaxSize] bytes (checked
// before any parsing) and invalid_payload for everything else. Both wrap a
// *[FieldError] naming the offending field ("body" for problems with the body
// as a whole) and both match [ErrInvalid] with errors.Is. [ParseDecimal]
// returns errors matching [ErrInvalidDecimal].
//
// # Concurrency
//
// Decode and ParseDecimal keep no shared state and are safe for concurrent
// use. [Read] and [Decimal] are immutable values.
package meter
