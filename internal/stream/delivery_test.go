package stream

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The delivery is its message's one owner: no other file of the package
// acks, NAKs, terminates or keeps a message alive (docs/SETTLEMENT.md).
func TestOnlyTheDeliverySettlesAMessage(t *testing.T) {
	t.Parallel()
	settles := map[string]bool{"Ack": true, "DoubleAck": true, "Nak": true, "NakWithDelay": true, "Term": true, "TermWithReason": true, "InProgress": true}
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	owner := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || !settles[sel.Sel.Name] {
				return true
			}
			if name == "delivery.go" {
				owner++
				return true
			}
			assert.Failf(t, "a message settled outside its delivery", "%s calls %s", fset.Position(call.Pos()), sel.Sel.Name)
			return true
		})
	}
	assert.Equal(t, 5, owner, "delivery.go's ack, nak, nakAfter, term and inProgress")
}
