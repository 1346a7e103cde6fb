// Package meter owns the meter-read contract: it decodes and validates the
// JSON body of one meter read and renders it back in a single normalised form.
//
// # The contract
//
// A read is a JSON object of at most [MaxSize] bytes with these fields:
//
//   - meter_id (required): 1 to 64 characters of A-Z a-z 0-9 . _ : -
//   - read_at (required): an RFC 3339 timestamp with an explicit offset
//     (Z or ±hh:mm). It is normalised to UTC.
//   - quantity (required): a decimal, as a JSON string or a JSON number. It is
//     held as a [Decimal], never as a float, and keeps its exact digits and scale.
//   - unit (required): one of the [Unit] constants, case-sensitive.
//   - idempotency_key (optional): 1 to 128 printable ASCII characters. When
//     absent (or null) it is derived as meter_id + "@" + read_at in UTC
//     formatted with [time.RFC3339Nano], so a read always posts under the same
//     key however its timestamp was written.
//
// Unknown fields are ignored but must be valid JSON.
//
// # Decisions on ambiguous points
//
//   - Field names match exactly: "METER_ID" is an unknown field, not meter_id
//     (encoding/json would match it case-insensitively). Escaped names such as
//     "meter\u005fid" are unescaped first and do match.
//   - Duplicate names are invalid in every object, at any depth, compared
//     after unescaping.
//   - read_at accepts the lower-case "t" and "z" that RFC 3339 section 5.6
//     allows; it rejects a space in place of "T", a missing offset (the zone is
//     never guessed), leap second 60 (time.Time cannot hold it), more than nine
//     fractional digits (they would be silently dropped) and instants outside
//     years 0000-9999 once in UTC. An offset of -00:00 is read as UTC.
//   - quantity accepts exponents within ±[MaxExponent] only; larger exponents
//     are rejected before any digits are built. String and number forms follow
//     the same JSON number grammar; a string may use JSON escapes.
//   - idempotency_key may not start or end with a space: it travels in an HTTP
//     header, whose value is trimmed, so such a key would not survive the trip.
//   - Nesting deeper than 10000 levels is rejected, as encoding/json does.
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
