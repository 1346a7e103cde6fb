package meter_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/meter"
)

// contractDoc holds the one table of the meter-read contract.
const contractDoc = "../../docs/CONTRACT.md"

// contractHeader is the header row of the table of rules.
const contractHeader = "| field | type | rule | cause | reason |"

// contractRow is one rule of the table: the field an error of a read that
// breaks it names, its cause, and its reason with placeholders.
type contractRow struct {
	line                            int
	field, typ, rule, cause, reason string
}

func (r contractRow) String() string {
	return contractDoc + ":" + strconv.Itoa(r.line) + ": " + r.field + ": " + r.reason
}

// placeholders are what the reasons of the table stand for, as
// docs/CONTRACT.md explains them.
var placeholders = map[string]string{
	"<value>": `"(?:[^"\\]|\\.)*"(?:\.\.\.)?`,
	"<name>":  `"(?:[^"\\]|\\.)*"(?:\.\.\.)?`,
	"<kind>":  `(?:string|number|boolean|null|object|array)`,
	"<char>":  `'(?:[^'\\]|\\[^']+)'`,
	"<n>":     `[0-9]+`,
}

// pattern matches the whole text of the error of a read that breaks r.
func (r contractRow) pattern(t *testing.T) *regexp.Regexp {
	t.Helper()
	re := regexp.QuoteMeta(r.cause + ": invalid meter read: " + r.field + ": " + r.reason)
	for p, sub := range placeholders {
		re = strings.ReplaceAll(re, regexp.QuoteMeta(p), sub)
	}
	require.NotRegexp(t, `<[a-z]+>`, re, "%s: a placeholder docs/CONTRACT.md does not explain", r)
	return regexp.MustCompile("^" + re + "$")
}

// contractRows returns the rows of the table of rules of docs/CONTRACT.md.
func contractRows(t *testing.T) []contractRow {
	t.Helper()
	data, err := os.ReadFile(contractDoc)
	require.NoError(t, err)
	lines := strings.Split(string(data), "\n")
	start := -1
	for i, l := range lines {
		if strings.TrimSpace(l) == contractHeader {
			require.Equal(t, -1, start, "%s: more than one table of rules", contractDoc)
			start = i
		}
	}
	require.GreaterOrEqual(t, start, 0, "%s: no table with the header %s", contractDoc, contractHeader)
	var rows []contractRow
	for i := start + 2; i < len(lines) && strings.HasPrefix(lines[i], "|"); i++ {
		cells := tableCells(lines[i])
		require.Len(t, cells, 5, "%s:%d: want 5 cells", contractDoc, i+1)
		r := contractRow{line: i + 1, typ: cells[1], rule: cells[2]}
		for _, c := range []struct {
			dst  *string
			cell string
		}{{&r.field, cells[0]}, {&r.cause, cells[3]}, {&r.reason, cells[4]}} {
			*c.dst = codeSpan(c.cell)
			require.NotEmpty(t, *c.dst, "%s:%d: want a `code span` alone in %q", contractDoc, i+1, c.cell)
		}
		require.NotEmpty(t, r.rule, "%s:%d: no rule", contractDoc, i+1)
		rows = append(rows, r)
	}
	return rows
}

// tableCells splits a markdown table row into its trimmed cells; "\|" is a
// "|" within a cell.
func tableCells(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimSuffix(strings.TrimPrefix(line, "|"), "|")
	var cells []string
	var cur strings.Builder
	for i := 0; i < len(line); i++ {
		switch {
		case line[i] == '\\' && i+1 < len(line) && line[i+1] == '|':
			cur.WriteByte('|')
			i++
		case line[i] == '|':
			cells = append(cells, strings.TrimSpace(cur.String()))
			cur.Reset()
		default:
			cur.WriteByte(line[i])
		}
	}
	return append(cells, strings.TrimSpace(cur.String()))
}

// codeSpan returns the content of a cell that is one code span, or "".
func codeSpan(cell string) string {
	if len(cell) < 2 || cell[0] != '`' || cell[len(cell)-1] != '`' || strings.Contains(cell[1:len(cell)-1], "`") {
		return ""
	}
	return cell[1 : len(cell)-1]
}

// contractCase is a read that breaks the rule of the row with this field
// and reason.
type contractCase struct {
	field, reason string
	give          string
}

// contractCases are, for every row of the table, one or more reads that
// break its rule and nothing else.
func contractCases() []contractCase {
	digits38 := "12345678901234567890123456789012345678"
	dateTime := func(s string) string { return give("read_at", `"`+s+`"`) }
	return []contractCase{
		{"body", "<n> bytes is over the 65536-byte limit", padTo(meter.MaxSize + 1)},
		{"body", "invalid UTF-8", give("note", "\"caf\xc3\"")},
		{"body", "invalid UTF-8", give("meter_id", "\"MTR-\xff\"")},
		{"body", "is empty", ``},
		{"body", "is empty", " \n\t"},
		{"body", "is a JSON <kind>, want an object", `[` + give() + `]`},
		{"body", "is a JSON <kind>, want an object", `"MTR-1"`},
		{"body", "is a JSON <kind>, want an object", `42`},
		{"body", "is a JSON <kind>, want an object", `true`},
		{"body", "is a JSON <kind>, want an object", `null`},
		{"body", "invalid JSON: unexpected <char> at offset <n>", give("quantity", `NaN`)},
		{"body", "invalid JSON: unexpected <char> at offset <n>", `{meter_id:"MTR-1"}`},
		{"body", "invalid JSON: unexpected <char> at offset <n>", give("note", `[1,]`)},
		{"body", "invalid JSON: unexpected <char> at offset <n>", `MTR-1`},
		{"body", "invalid JSON: unexpected end of input at offset <n>", strings.TrimSuffix(give(), "}")},
		{"body", "invalid JSON: unexpected end of input at offset <n>", strings.TrimSuffix(give("note", `true`), "e}")},
		{"body", "invalid JSON: unexpected end of input at offset <n>", strings.TrimSuffix(give("note", `1.5e3`), "3}")},
		{"body", "invalid JSON: unexpected end of input at offset <n>", strings.TrimSuffix(give("note", `"\u1234"`), `34"}`)},
		{"body", "invalid JSON: unexpected end of input at offset <n>", `{"meter_id":"MTR-1","read_at":"2026-11-30T07:00:00Z","quantity":1.5e`},
		{"body", "invalid JSON: unexpected <char> at offset <n>", give("quantity", `-Infinity`)},
		{"body", "invalid JSON: trailing data after the object at offset <n>", give() + `x`},
		{"body", "invalid JSON: trailing data after the object at offset <n>", give() + `{}`},
		{"body", "invalid JSON: nesting too deep at offset <n>", give("deep", strings.Repeat("[", 10000)+strings.Repeat("]", 10000))},
		{"body", "invalid JSON: control character in string at offset <n>", give("note", "\"a\x01b\"")},
		{"body", "invalid JSON: invalid escape in string at offset <n>", give("note", `"\x"`)},
		{"body", "invalid JSON: invalid escape in string at offset <n>", give("note", `"\u12g4"`)},
		{"body", "invalid JSON: invalid number at offset <n>", give("note", `-`)},
		{"body", "invalid JSON: invalid number at offset <n>", give("note", `01`)},
		{"body", "duplicate key <name>", appendMembers(give(), `"meter_id":"MTR-1"`)},
		{"body", "duplicate key <name>", give(`meter\u005fid`, `"MTR-2"`)},
		{"body", "duplicate key <name>", give("extra", `[{"a":1,"b":{"c":1,"c":2}}]`)},

		{"meter_id", "is required", give("meter_id", omit)},
		{"meter_id", "is required", `{}`},
		{"meter_id", "must be a string, got <kind>", give("meter_id", `42`)},
		{"meter_id", "must be a string, got <kind>", give("meter_id", `null`)},
		{"meter_id", "<value> must be 1 to 64 characters", give("meter_id", `""`)},
		{"meter_id", "<value> must be 1 to 64 characters", give("meter_id", `"`+strings.Repeat("M", 65)+`"`)},
		{"meter_id", "<value> may hold only A-Z a-z 0-9 . _ : -", give("meter_id", `"MTR 1"`)},
		{"meter_id", "<value> may hold only A-Z a-z 0-9 . _ : -", give("meter_id", `"MTR/1"`)},
		{"meter_id", "<value> may hold only A-Z a-z 0-9 . _ : -", give("meter_id", `"`+strings.Repeat("é", 40)+`"`)},

		{"read_at", "is required", give("read_at", omit)},
		{"read_at", "must be a string, got <kind>", give("read_at", `1764486000`)},
		{"read_at", "<value> is not an RFC 3339 timestamp (want 2006-01-02T15:04:05Z or ±hh:mm offset)", dateTime("2026-11-30 07:00:00Z")},
		{"read_at", "<value> is not an RFC 3339 timestamp (want 2006-01-02T15:04:05Z or ±hh:mm offset)", dateTime("2026-11-30")},
		{"read_at", "<value> is not an RFC 3339 timestamp (want 2006-01-02T15:04:05Z or ±hh:mm offset)", dateTime("2026-11-30T07:00:00+0530")},
		{"read_at", "<value> is not an RFC 3339 timestamp (want 2006-01-02T15:04:05Z or ±hh:mm offset)", dateTime("2026-11-30T07:00:00.Z")},
		{"read_at", "<value> is not an RFC 3339 timestamp (want 2006-01-02T15:04:05Z or ±hh:mm offset)", dateTime("")},
		{"read_at", "<value> has no UTC offset (want Z or ±hh:mm)", dateTime("2026-11-30T07:00:00")},
		{"read_at", "<value> has no UTC offset (want Z or ±hh:mm)", dateTime("2026-11-30T07:00:00.5")},
		{"read_at", "<value> has more than 9 fractional second digits", dateTime("2026-11-30T07:00:00.1234567891Z")},
		{"read_at", "<value> is not a valid date", dateTime("2026-13-01T07:00:00Z")},
		{"read_at", "<value> is not a valid date", dateTime("2026-02-29T07:00:00Z")},
		{"read_at", "<value> is a leap second, which is not supported", dateTime("2026-12-31T23:59:60Z")},
		{"read_at", "<value> is not a valid time of day", dateTime("2026-11-30T24:00:00Z")},
		{"read_at", "<value> is not a valid time of day", dateTime("2026-11-30T07:60:00Z")},
		{"read_at", "<value> has an offset out of range", dateTime("2026-11-30T07:00:00+24:00")},
		{"read_at", "<value> is outside years 0000-9999 in UTC", dateTime("0000-01-01T00:00:00+01:00")},
		{"read_at", "<value> is outside years 0000-9999 in UTC", dateTime("9999-12-31T23:00:00-01:00")},

		{"quantity", "is required", give("quantity", omit)},
		{"quantity", "must be a decimal string or number, got <kind>", give("quantity", `true`)},
		{"quantity", "must be a decimal string or number, got <kind>", give("quantity", `null`)},
		{"quantity", "must be a decimal string or number, got <kind>", give("quantity", `{"v":1}`)},
		{"quantity", "<value> is not a decimal number", give("quantity", `"NaN"`)},
		{"quantity", "<value> is not a decimal number", give("quantity", `"+1"`)},
		{"quantity", "<value> is not a decimal number", give("quantity", `""`)},
		{"quantity", "<value> is not a decimal number", give("quantity", `" 1"`)},
		{"quantity", "<value> is not a decimal number", give("quantity", `01`)},
		{"quantity", "<value> is not a decimal number", give("quantity", `"1,5"`)},
		{"quantity", "<value> exponent out of range", give("quantity", `"1e999"`)},
		{"quantity", "<value> exponent out of range", give("quantity", `1e101`)},
		{"quantity", "<value> has more than 38 significant digits", give("quantity", `"1`+digits38+`"`)},
		{"quantity", "<value> has more than 38 significant digits", give("quantity", `1e38`)},
		{"quantity", "<value> has more than 38 digits after the decimal point", give("quantity", `"0.1e-38"`)},

		{"unit", "is required", give("unit", omit)},
		{"unit", "must be a string, got <kind>", give("unit", `1`)},
		{"unit", "<value> is not one of Wh kWh MWh varh kvarh m3 L gal ft3 ccf therm", give("unit", `"kwh"`)},
		{"unit", "<value> is not one of Wh kWh MWh varh kvarh m3 L gal ft3 ccf therm", give("unit", `""`)},

		{"idempotency_key", "must be a string, got <kind>", give("idempotency_key", `7`)},
		{"idempotency_key", "must be a string, got <kind>", give("idempotency_key", `["k"]`)},
		{"idempotency_key", "<value> must be 1 to 128 characters", give("idempotency_key", `""`)},
		{"idempotency_key", "<value> must be 1 to 128 characters", give("idempotency_key", `"`+strings.Repeat("k", 129)+`"`)},
		{"idempotency_key", "<value> may hold only printable ASCII", give("idempotency_key", `"a\tb"`)},
		{"idempotency_key", "<value> may hold only printable ASCII", give("idempotency_key", `"clé"`)},
		{"idempotency_key", "<value> may hold only printable ASCII", give("idempotency_key", `"`+strings.Repeat("é", 65)+`"`)},
		{"idempotency_key", "<value> may not start or end with a space", give("idempotency_key", `" abc"`)},
		{"idempotency_key", "<value> may not start or end with a space", give("idempotency_key", `"abc "`)},
	}
}

// matching returns the rows whose pattern the error text matches.
func matching(t *testing.T, rows []contractRow, text string) []contractRow {
	t.Helper()
	var out []contractRow
	for _, r := range rows {
		if r.pattern(t).MatchString(text) {
			out = append(out, r)
		}
	}
	return out
}

// TestContractTableMatchesDecoder: for every row of the table of
// docs/CONTRACT.md, reads that break its rule are rejected with the row's
// field, cause and reason, and with no other row's; and every read below
// belongs to a row of the table.
func TestContractTableMatchesDecoder(t *testing.T) {
	rows := contractRows(t)
	require.GreaterOrEqual(t, len(rows), 30, "the table of rules")
	type key struct{ field, reason string }
	byKey := map[key]contractRow{}
	for _, r := range rows {
		k := key{r.field, r.reason}
		require.NotContains(t, byKey, k, "%s: the same field and reason twice (also line %d)", r, byKey[k].line)
		byKey[k] = r
	}
	cases := map[key][]string{}
	for _, c := range contractCases() {
		k := key{c.field, c.reason}
		_, ok := byKey[k]
		assert.True(t, ok, "contractCases: %s: %q is not a row of %s", c.field, c.reason, contractDoc)
		cases[k] = append(cases[k], c.give)
	}

	for _, r := range rows {
		t.Run(r.field+": "+r.reason, func(t *testing.T) {
			gives := cases[key{r.field, r.reason}]
			require.NotEmpty(t, gives, "%s: no read breaking this rule in contractCases: add one", r)
			for _, give := range gives {
				_, err := meter.Decode([]byte(give))
				require.Error(t, err, "%s: accepted %.200q", r, give)
				assert.Regexp(t, r.pattern(t), err.Error(), "%s: the decoder's error for %.200q", r, give)
				assert.Len(t, matching(t, rows, err.Error()), 1, "%s: %q matches other rows too", r, err.Error())
			}
		})
	}
}

// TestContractTableHasEveryReason: every reason the decoder's code can
// emit is in the table of docs/CONTRACT.md. The reasons are found in the
// package's source: the reason* constants, and the string literals given to
// bodyError, syntaxError and wrongType and as the Reason of a FieldError;
// each (its format verbs standing for anything) must be within a reason of
// the table. Every invalid read of TestDecode is rejected as a row says,
// too.
func TestContractTableHasEveryReason(t *testing.T) {
	rows := contractRows(t)
	var reasons []string
	for _, r := range rows {
		reasons = append(reasons, r.reason)
	}

	literals := reasonLiterals(t)
	require.GreaterOrEqual(t, len(literals), 20, "the reasons in the source")
	verb := regexp.MustCompile(`%[-+# 0-9.]*[a-zA-Z]`)
	for _, lit := range literals {
		var re strings.Builder
		for i, part := range verb.Split(lit.text, -1) {
			if i > 0 {
				re.WriteString(".*")
			}
			re.WriteString(regexp.QuoteMeta(part))
		}
		pat := regexp.MustCompile(re.String())
		found := false
		for _, reason := range reasons {
			found = found || pat.MatchString(reason)
		}
		assert.True(t, found, "%s: the reason %q is not in the table of %s", lit.pos, lit.text, contractDoc)
	}

	for _, tt := range decodeTests() {
		if tt.want != "" {
			continue
		}
		_, err := meter.Decode([]byte(tt.give))
		require.Error(t, err, tt.name)
		assert.Len(t, matching(t, rows, err.Error()), 1, "TestDecode %q: %q is not exactly one row of %s", tt.name, err.Error(), contractDoc)
	}
}

type reasonLiteral struct {
	pos  token.Position
	text string
}

// reasonLiterals returns the string literals of the package's source that
// make up the reason of a FieldError.
func reasonLiterals(t *testing.T) []reasonLiteral {
	t.Helper()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	var out []reasonLiteral
	collect := func(n ast.Node) {
		ast.Inspect(n, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				s, err := strconv.Unquote(lit.Value)
				require.NoError(t, err)
				out = append(out, reasonLiteral{fset.Position(lit.Pos()), s})
			}
			return true
		})
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ValueSpec:
				for i, id := range n.Names {
					if strings.HasPrefix(id.Name, "reason") && i < len(n.Values) {
						collect(n.Values[i])
					}
				}
			case *ast.CallExpr:
				name := ""
				switch fn := n.Fun.(type) {
				case *ast.Ident:
					name = fn.Name
				case *ast.SelectorExpr:
					name = fn.Sel.Name
				}
				switch name {
				case "bodyError", "syntaxError":
					for _, a := range n.Args {
						collect(a)
					}
				case "wrongType": // (field, want)
					for _, a := range n.Args[1:] {
						collect(a)
					}
				}
			case *ast.CompositeLit:
				if id, ok := n.Type.(*ast.Ident); ok && id.Name == "FieldError" {
					for _, e := range n.Elts {
						if kv, ok := e.(*ast.KeyValueExpr); ok {
							if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Reason" {
								collect(kv.Value)
							}
						}
					}
				}
			}
			return true
		})
	}
	return out
}

// TestContractNormalisedForm: the example of docs/CONTRACT.md's normalised
// form is what Decode and MarshalJSON make of its read, and the form's
// outline names the fields in the order MarshalJSON writes them.
func TestContractNormalisedForm(t *testing.T) {
	data, err := os.ReadFile(contractDoc)
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(data), "\n## The normalised form\n")
	require.True(t, ok, "%s: no section The normalised form", contractDoc)
	section, _, _ = strings.Cut(section, "\n## ")
	blocks := fenced(section, "json")
	require.Len(t, blocks, 2, "%s: the normalised form: want a read and what it is delivered as", contractDoc)
	r, err := meter.Decode([]byte(blocks[0]))
	require.NoError(t, err)
	got, err := r.MarshalJSON()
	require.NoError(t, err)
	assert.Equal(t, blocks[1], string(got))
	again, err := meter.Decode(got)
	require.NoError(t, err)
	assert.Equal(t, r, again, "the normalised form decodes to the same read")

	outline := fenced(section, "text")
	require.Len(t, outline, 1, "%s: the outline of the normalised form", contractDoc)
	names := regexp.MustCompile(`"([a-z_]+)":`)
	var want, gotNames []string
	for _, m := range names.FindAllStringSubmatch(outline[0], -1) {
		want = append(want, m[1])
	}
	for _, m := range names.FindAllStringSubmatch(string(got), -1) {
		gotNames = append(gotNames, m[1])
	}
	assert.Equal(t, want, gotNames)
}

// fenced returns the bodies of the fenced code blocks of markdown text
// whose info string is lang, without their last newline.
func fenced(text, lang string) []string {
	var blocks []string
	var cur *strings.Builder
	for line := range strings.SplitSeq(text, "\n") {
		switch {
		case cur == nil && strings.TrimSpace(line) == "```"+lang:
			cur = &strings.Builder{}
		case cur != nil && strings.TrimSpace(line) == "```":
			blocks = append(blocks, strings.TrimSuffix(cur.String(), "\n"))
			cur = nil
		case cur != nil:
			cur.WriteString(line + "\n")
		}
	}
	return blocks
}

// TestContractIsStatedOnce: no other document restates the rules in a table
// of its own; they link to docs/CONTRACT.md.
func TestContractIsStatedOnce(t *testing.T) {
	docs, err := filepath.Glob("../../docs/*.md")
	require.NoError(t, err)
	docs = append(docs, "../../README.md")
	row := regexp.MustCompile("(?m)^\\| `(meter_id|read_at|quantity|unit|idempotency_key)` \\|")
	for _, path := range docs {
		if filepath.Clean(path) == filepath.Clean(contractDoc) {
			continue
		}
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.NotRegexp(t, row, string(data), "%s restates a rule of the contract: link to docs/CONTRACT.md instead", path)
	}
}

// A syntax error names the character and the offset where the body broke,
// not where the value that broke began; a body that ends inside a value is
// cut short, whatever the value.
func TestSyntaxErrorsSayWhereTheBodyBroke(t *testing.T) {
	for _, tc := range []struct{ give, want string }{
		{`{"note":nulL}`, `invalid JSON: unexpected 'L' at offset 11`},
		{`{"note":tru`, `invalid JSON: unexpected end of input at offset 11`},
		{`{"quantity":-Infinity}`, `invalid JSON: unexpected 'I' at offset 13`},
		{`{"note":1.5e`, `invalid JSON: unexpected end of input at offset 12`},
		{`{"note":"\u12`, `invalid JSON: unexpected end of input at offset 13`},
		{`{"note":12abc}`, `invalid JSON: unexpected 'a' at offset 10`},
	} {
		_, err := meter.Decode([]byte(tc.give))
		require.Error(t, err, tc.give)
		assert.Contains(t, err.Error(), "body: "+tc.want, tc.give)
	}
}
