package version

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestResolve(t *testing.T) {
	vcs := func(rev, modified string) *debug.BuildInfo {
		return &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified},
		}}
	}
	tests := []struct {
		name                   string
		giveVersion, giveRev   string
		give                   *debug.BuildInfo
		wantVersion, wantRev   string
		wantGoVersionFromBuild bool
	}{
		{"stamped wins", "v1.4.0", "abc123", vcs("def456", "false"), "v1.4.0", "abc123", true},
		{"vcs revision", "", "", vcs("def456", "false"), DevVersion, "def456", true},
		{"modified tree", "", "", vcs("def456", "true"), DevVersion, "def456-dirty", true},
		{"module version (go install)", "", "", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.3.2"}}, "v1.3.2", UnknownRevision, true},
		{"stamped version, vcs revision", "v1.4.0", "", vcs("def456", "false"), "v1.4.0", "def456", true},
		{"nothing known", "", "", nil, DevVersion, UnknownRevision, false},
		{"-buildvcs=false", "", "", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}, DevVersion, UnknownRevision, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := resolve(tt.giveVersion, tt.giveRev, tt.give)
			assert.Equal(t, tt.wantVersion, got.Version)
			assert.Equal(t, tt.wantRev, got.Revision)
			if tt.wantGoVersionFromBuild {
				assert.Equal(t, "go1.26.8", got.GoVersion)
			} else {
				assert.NotEmpty(t, got.GoVersion, "runtime.Version()")
			}
		})
	}
}
