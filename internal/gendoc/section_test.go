package gendoc_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/gendoc"
)

// A section is replaced between its markers, the rest of the doc kept; a
// doc without the markers is an error that says what to add.
func TestReplace(t *testing.T) {
	doc := "# Doc\n\nprose\n\n" + gendoc.Begin + "\n\nold\n\n" + gendoc.End + "\n\nmore prose\n"
	out, err := gendoc.Replace([]byte(doc), "new table\n")
	require.NoError(t, err)
	assert.Equal(t, "# Doc\n\nprose\n\n"+gendoc.Begin+"\n\nnew table\n\n"+gendoc.End+"\n\nmore prose\n", string(out))
	got, err := gendoc.Section(out)
	require.NoError(t, err)
	assert.Equal(t, "new table", got)

	_, err = gendoc.Replace([]byte("# Doc\n"), "x")
	require.ErrorIs(t, err, gendoc.ErrNoSection)
	assert.ErrorContains(t, err, gendoc.Begin)
}

// Check refuses what Render would not write.
func TestCheck(t *testing.T) {
	header := []string{"scenario", "ours", "met"}
	good := gendoc.Render(time.Date(2026, 12, 2, 20, 0, 0, 0, time.UTC), ".", header, [][]string{{"a|b", "1/s", "yes"}, {"c", "2/s", ""}})
	require.NoError(t, gendoc.Check(good, header, true))
	for name, bad := range map[string]string{
		"no run line":    strings.SplitN(good, "\n", 3)[2],
		"a cell missing": strings.Replace(good, "| 1/s |", "|", 1),
		"met not yes/no": strings.Replace(good, "| yes |", "| maybe |", 1),
		"another header": strings.Replace(good, "| ours |", "| theirs |", 1),
	} {
		assert.Error(t, gendoc.Check(bad, header, true), name)
	}
	assert.NoError(t, gendoc.Check(strings.Replace(good, "| yes |", "| maybe |", 1), header, false), "without a met column")
}

func ExampleRender() {
	fmt.Print(gendoc.Render(time.Date(2026, 12, 2, 20, 0, 0, 0, time.UTC), ": 1 scenario.",
		[]string{"scenario", "ours"}, [][]string{{"outage", "0 lost"}}))
	// Output:
	// Run on 2026-12-02 20:00 UTC: 1 scenario.
	//
	// | scenario | ours |
	// | --- | --- |
	// | outage | 0 lost |
}
